//! Hand-written decoders for the two records a store reads back on every call: [`JournalEntry`]
//! and [`RunMeta`]. serde's derived decoder for a struct with a `flatten`ed field buffers the
//! whole object into an intermediate tree first; these read each key once, straight into the
//! typed field or into `extra`. They accept exactly what the derived decoders accepted: a typed
//! key twice is an error, a required key missing is an error, `null` for an optional key is
//! absent, and every other key lands in `extra` (the last of a repeated one wins). The encoders
//! stay derived; `tests` checks both directions against the derived pair kept there.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use crate::types::{JournalEntry, RunId, RunMeta, RunStatus, Seq};

/// One key of an encoded record: a typed field's index in `names`, or an `extra` key.
enum Key {
    Typed(usize),
    Extra(String),
}

struct KeyVisitor(&'static [&'static str]);

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
        Ok(match self.0.iter().position(|name| *name == key) {
            Some(i) => Key::Typed(i),
            None => Key::Extra(key.to_owned()),
        })
    }
}

/// Reads one key against `names` (a `DeserializeSeed`, since the names are the record's own).
struct KeySeed(&'static [&'static str]);

impl<'de> de::DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(KeyVisitor(self.0))
    }
}

/// A typed field's slot: filled once, a second fill is serde's `duplicate_field` error.
fn fill<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    slot: &mut Option<T>,
    name: &'static str,
    map: &mut A,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// An optional typed field (`null` is absent, as for a derived `Option` field): a second
/// appearance is a duplicate even when the first was `null`.
fn fill_opt<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    slot: &mut Option<Option<T>>,
    name: &'static str,
    map: &mut A,
) -> Result<(), A::Error> {
    fill(slot, name, map)
}

fn required<T, E: de::Error>(slot: Option<T>, name: &'static str) -> Result<T, E> {
    slot.ok_or_else(|| de::Error::missing_field(name))
}

/// A visitor of one record type, named for serde's error messages.
struct RecordVisitor<T>(&'static str, PhantomData<T>);

impl<'de> Visitor<'de> for RecordVisitor<JournalEntry> {
    type Value = JournalEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JournalEntry, A::Error> {
        let names = &JournalEntry::TYPED_FIELDS;
        let (mut seq, mut ref_seq, mut kind, mut status) = (None::<Seq>, None::<Option<Seq>>, None, None);
        let mut extra = BTreeMap::new();
        while let Some(key) = map.next_key_seed(KeySeed(names.as_slice()))? {
            match key {
                Key::Typed(0) => fill(&mut seq, names[0], &mut map)?,
                Key::Typed(1) => fill_opt(&mut ref_seq, names[1], &mut map)?,
                Key::Typed(2) => fill(&mut kind, names[2], &mut map)?,
                Key::Typed(_) => fill(&mut status, names[3], &mut map)?,
                Key::Extra(key) => {
                    extra.insert(key, map.next_value::<Value>()?);
                }
            }
        }
        Ok(JournalEntry {
            seq: required(seq, names[0])?,
            ref_seq: ref_seq.flatten(),
            kind: required(kind, names[2])?,
            status: required(status, names[3])?,
            extra,
        })
    }
}

impl<'de> Visitor<'de> for RecordVisitor<RunMeta> {
    type Value = RunMeta;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RunMeta, A::Error> {
        let names = &RunMeta::TYPED_FIELDS;
        let mut run_id = None::<RunId>;
        let mut status = None::<RunStatus>;
        let mut segments = None::<u32>;
        let mut name = None::<Option<String>>;
        let mut tags = None::<Vec<String>>;
        let mut genesis = None::<Option<String>>;
        let mut updated_at_ms = None::<Option<i64>>;
        let mut extra = BTreeMap::new();
        while let Some(key) = map.next_key_seed(KeySeed(names.as_slice()))? {
            match key {
                Key::Typed(0) => fill(&mut run_id, names[0], &mut map)?,
                Key::Typed(1) => fill(&mut status, names[1], &mut map)?,
                Key::Typed(2) => fill(&mut segments, names[2], &mut map)?,
                Key::Typed(3) => fill_opt(&mut name, names[3], &mut map)?,
                Key::Typed(4) => fill(&mut tags, names[4], &mut map)?,
                Key::Typed(5) => fill_opt(&mut genesis, names[5], &mut map)?,
                Key::Typed(_) => fill_opt(&mut updated_at_ms, names[6], &mut map)?,
                Key::Extra(key) => {
                    extra.insert(key, map.next_value::<Value>()?);
                }
            }
        }
        Ok(RunMeta {
            run_id: required(run_id, names[0])?,
            status: required(status, names[1])?,
            segments: segments.unwrap_or_default(),
            name: name.flatten(),
            tags: tags.unwrap_or_default(),
            genesis: genesis.flatten(),
            updated_at_ms: updated_at_ms.flatten(),
            extra,
        })
    }
}

impl<'de> Deserialize<'de> for JournalEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RecordVisitor::<JournalEntry>("a journal entry object", PhantomData))
    }
}

impl<'de> Deserialize<'de> for RunMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RecordVisitor::<RunMeta>("a run meta object", PhantomData))
    }
}

#[cfg(test)]
mod tests {
    //! The decoders against serde's derived ones (the decoders these replaced), field for field
    //! and error for error, over records that exercise every rule.

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, PartialEq, Deserialize)]
    struct DerivedEntry {
        seq: Seq,
        #[serde(rename = "ref", default)]
        ref_seq: Option<Seq>,
        kind: String,
        status: String,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct DerivedMeta {
        run_id: RunId,
        status: RunStatus,
        #[serde(default)]
        segments: u32,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        tags: Vec<String>,
        #[serde(default)]
        genesis: Option<String>,
        #[serde(default)]
        updated_at_ms: Option<i64>,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    }

    const ENTRIES: &[&str] = &[
        r#"{"seq":1,"kind":"step","status":"ok"}"#,
        r#"{"seq":2,"ref":1,"kind":"agent","status":"ok","output":{"a":[1,2.5,null]},"note":"x"}"#,
        r#"{"note":"first","status":"running","kind":"tool","seq":7,"ref":null}"#,
        r#"{"seq":3,"kind":"k","status":"s","x":1,"x":2}"#,
        r#"{"seq":3,"kind":"k","status":"s","seq":4}"#,
        r#"{"seq":3,"ref":null,"ref":2,"kind":"k","status":"s"}"#,
        r#"{"seq":3,"kind":"k"}"#,
        r#"{"kind":"k","status":"s"}"#,
        r#"{"seq":"3","kind":"k","status":"s"}"#,
        r#"{"seq":3,"kind":1,"status":"s"}"#,
        r#"[3,"k","s"]"#,
        r#"{"seq":3,"kind":"k","status":"s""#,
        r#"null"#,
    ];

    const METAS: &[&str] = &[
        r#"{"run_id":"r1","status":"running"}"#,
        r#"{"run_id":"r1","status":"suspended","segments":3,"name":"n","tags":["a","b"],"genesis":"g","updated_at_ms":-5,"workflow":"w","x":{"y":[true]}}"#,
        r#"{"workflow":"w","name":null,"genesis":null,"status":"ok","run_id":"r2","updated_at_ms":null}"#,
        r#"{"run_id":"r1","status":"running","run_id":"r2"}"#,
        r#"{"run_id":"r1","status":"running","name":null,"name":"n"}"#,
        r#"{"run_id":"r1","status":"bogus"}"#,
        r#"{"run_id":"r1","status":"running","segments":-1}"#,
        r#"{"run_id":"r1","status":"running","tags":null}"#,
        r#"{"status":"running"}"#,
        r#"{"run_id":"r1"}"#,
        r#"{"run_id":"r1","status":"running","w":1,"w":2}"#,
        r#"[]"#,
    ];

    fn entry_of(d: DerivedEntry) -> JournalEntry {
        JournalEntry { seq: d.seq, ref_seq: d.ref_seq, kind: d.kind, status: d.status, extra: d.extra }
    }

    fn meta_of(d: DerivedMeta) -> RunMeta {
        RunMeta {
            run_id: d.run_id,
            status: d.status,
            segments: d.segments,
            name: d.name,
            tags: d.tags,
            genesis: d.genesis,
            updated_at_ms: d.updated_at_ms,
            extra: d.extra,
        }
    }

    /// Same value, or both refused (the messages differ only in wording serde chose).
    #[test]
    fn entries_decode_as_the_derived_decoder_did() {
        for text in ENTRIES {
            let ours = serde_json::from_str::<JournalEntry>(text).ok();
            let derived = serde_json::from_str::<DerivedEntry>(text).ok().map(entry_of);
            assert_eq!(ours, derived, "{text}");
        }
    }

    #[test]
    fn metas_decode_as_the_derived_decoder_did() {
        for text in METAS {
            let ours = serde_json::from_str::<RunMeta>(text).ok();
            let derived = serde_json::from_str::<DerivedMeta>(text).ok().map(meta_of);
            assert_eq!(ours, derived, "{text}");
        }
    }

    /// Both outcomes occur in the tables, so neither test passes by refusing (or accepting) all.
    #[test]
    fn the_tables_hold_records_of_both_outcomes() {
        let accepted = ENTRIES.iter().filter(|t| serde_json::from_str::<JournalEntry>(t).is_ok()).count();
        assert!(accepted >= 4 && accepted < ENTRIES.len(), "{accepted}");
        let accepted = METAS.iter().filter(|t| serde_json::from_str::<RunMeta>(t).is_ok()).count();
        assert!(accepted >= 3 && accepted < METAS.len(), "{accepted}");
    }

    /// What the encoder writes, the decoder reads back whole.
    #[test]
    fn encoded_records_read_back_unchanged() {
        for text in ENTRIES {
            if let Ok(entry) = serde_json::from_str::<JournalEntry>(text) {
                let again = serde_json::to_string(&entry).expect("encodes");
                assert_eq!(serde_json::from_str::<JournalEntry>(&again).expect("decodes"), entry);
            }
        }
        for text in METAS {
            if let Ok(meta) = serde_json::from_str::<RunMeta>(text) {
                let again = serde_json::to_string(&meta).expect("encodes");
                assert_eq!(serde_json::from_str::<RunMeta>(&again).expect("decodes"), meta);
            }
        }
    }

    /// A refusal names what was expected: a corrupt row's report quotes it.
    #[test]
    fn a_refusal_names_what_was_expected() {
        let e = serde_json::from_str::<JournalEntry>("[1]").expect_err("an array is no entry");
        assert!(e.to_string().contains("a journal entry object"), "{e}");
        let e = serde_json::from_str::<RunMeta>(r#"{"status":"ok"}"#).expect_err("no run_id");
        assert!(e.to_string().contains("missing field `run_id`"), "{e}");
    }
}
