//! The protocol's values on the wire (docs/protocol.md), as serde types: leases, blobs as hex
//! (the one hex codec); every line an adapter may write ([`AdapterLine`]: an answer, an error, an
//! ask for the time, a fault point), its handshake and its `open` answer, which accept exactly the
//! shapes of `reports/protocol.schema.json` (no other field, no missing one: a nullable field is
//! sent as `null`); and the typed errors of contracts 1.5 ([`ErrorObject`]), mapped one to one
//! onto [`StoreError`] in both directions. What fencesim writes is in [`crate::request`]; the
//! schema is generated from both ([`crate::schema`]).

use std::borrow::Cow;
use std::marker::PhantomData;

use fencesim_store::{Epoch, Lease, LeaseRejection, Op, RunId, Seq, StoreError};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{Deserializer, Error as _, IgnoredAny};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// The protocol version this build speaks; an adapter that answers `hello` with another is refused.
pub const PROTOCOL_VERSION: u32 = 1;

/// Every operation a request may name, as the SPI method is named.
pub const OPS: [Op; 13] = [
    Op::Acquire,
    Op::Renew,
    Op::Release,
    Op::Append,
    Op::Load,
    Op::PutMeta,
    Op::GetMeta,
    Op::ListRuns,
    Op::Delete,
    Op::PutBlob,
    Op::GetBlob,
    Op::ListBlobs,
    Op::DeleteBlob,
];

pub fn op_named(name: &str) -> Option<Op> {
    OPS.into_iter().chain([Op::Boot]).find(|op| op.as_str() == name)
}

/// Blob bytes travel as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let text = bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    });
    // Two digits a byte: `unhex` refuses anything of odd length.
    assert_eq!(text.len(), 2 * bytes.len(), "a hex encoding of the wrong length");
    text
}

pub fn unhex(text: &str) -> Option<Vec<u8>> {
    fn nibble(digit: u8) -> Option<u8> {
        match digit {
            b'0'..=b'9' => Some(digit - b'0'),
            b'a'..=b'f' => Some(digit - b'a' + 10),
            b'A'..=b'F' => Some(digit - b'A' + 10),
            _ => None,
        }
    }
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits.chunks_exact(2).map(|pair| Some((nibble(pair[0])? << 4) | nibble(pair[1])?)).collect()
}

/// One line an adapter writes while a call is in flight: exactly one of these shapes, with no
/// other field (an error object that also carries `"ok"` is none of them).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum AdapterLine {
    Ok(OkLine),
    Error(ErrorLine),
    Time(TimeLine),
    Fault(FaultLine),
}

/// `{"id":N,"ok":...}`: the call's result, its shape per op (decoded by the caller; see
/// docs/protocol.md).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OkLine {
    pub id: u64,
    pub ok: Value,
}

/// `{"id":N,"error":{...}}`: the call's typed error (an [`ErrorObject`], decoded by the caller so
/// that an unknown one is named as such).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorLine {
    pub id: u64,
    #[schemars(with = "ErrorObject")]
    pub error: Value,
}

/// `{"id":N,"time":true}`: the call with this id asks for the time (its request said `now_ms:
/// null`), in-lock; it waits for `now_ms`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimeLine {
    pub id: u64,
    pub time: True,
}

/// `{"id":N,"fault":POINT,"op":OP,"run":RUN}`: the call with this id stopped at a fault point
/// inside it; it waits for `resume`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultLine {
    pub id: u64,
    pub fault: FaultName,
    pub op: String,
    pub run: String,
}

/// The fault points of protocol version 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FaultName {
    FenceChecked,
    AcquireChecked,
}

/// The JSON value `true`, and nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct True;

impl Serialize for True {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bool(true)
    }
}

impl JsonSchema for True {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "true".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({ "const": true })
    }
}

impl<'de> Deserialize<'de> for True {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if bool::deserialize(deserializer)? { Ok(True) } else { Err(D::Error::custom("expected `true`")) }
    }
}

impl AdapterLine {
    /// A line as the protocol's shapes read it; why not, for an error naming the line.
    pub fn parse(line: &str) -> Result<AdapterLine, String> {
        serde_json::from_str(line).map_err(|_| match serde_json::from_str::<IgnoredAny>(line) {
            Err(e) => format!("not JSON: {e}"),
            Ok(_) => "not exactly one of the protocol's answers: {id, ok}, {id, error}, {id, time: true} or \
                      {id, fault, op, run}, with no other field"
                .to_owned(),
        })
    }

    /// The request it belongs to.
    pub fn id(&self) -> u64 {
        match self {
            AdapterLine::Ok(line) => line.id,
            AdapterLine::Error(line) => line.id,
            AdapterLine::Time(line) => line.id,
            AdapterLine::Fault(line) => line.id,
        }
    }
}

/// The one field of a handshake's answer every protocol version has, read before the rest.
#[derive(Debug, Deserialize)]
pub struct HelloVersion {
    pub protocol: Value,
}

/// The handshake's answer, `{"id":0,"ok":{...}}` (read as an [`OkLine`], then its [`HelloOk`]).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HelloLine {
    #[schemars(extend("const" = 0))]
    pub id: u64,
    pub ok: HelloOk,
}

/// The handshake's `ok` of protocol version 1.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HelloOk {
    #[schemars(extend("const" = 1))]
    pub protocol: u32,
    #[schemars(length(min = 1))]
    pub name: String,
    pub capabilities: Capabilities,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    pub leases: bool,
    pub fenced_writes: bool,
    pub fault_points: bool,
    /// Optional, default true: it keeps every integer of a payload exactly.
    #[serde(default = "yes")]
    pub exact_integers: bool,
}

fn yes() -> bool {
    true
}

/// `open`'s `ok`: the new connection and the ttl it keeps.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Opened {
    pub conn: u64,
    pub ttl_ms: u64,
}

/// A lease on the wire (an `acquire`'s answer, an error's `lease`, a fenced call's argument).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "lease")]
#[serde(deny_unknown_fields)]
pub struct WireLease {
    pub run: String,
    pub owner: String,
    pub epoch: i64,
}

impl From<&Lease> for WireLease {
    fn from(lease: &Lease) -> Self {
        WireLease { run: lease.run.as_str().to_owned(), owner: lease.owner.clone(), epoch: lease.epoch.0 }
    }
}

impl From<WireLease> for Lease {
    fn from(lease: WireLease) -> Self {
        Lease { run: RunId::new(lease.run), owner: lease.owner, epoch: Epoch(lease.epoch) }
    }
}

/// An operation's name on the wire (`append`, ...; `boot` for what `open` does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireOp(pub Op);

impl Serialize for WireOp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.as_str())
    }
}

impl JsonSchema for WireOp {
    fn schema_name() -> Cow<'static, str> {
        "op".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = OPS.iter().chain(&[Op::Boot]).map(|op| op.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

impl<'de> Deserialize<'de> for WireOp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        op_named(&name).map(WireOp).ok_or_else(|| D::Error::custom(format!("unknown op `{name}`")))
    }
}

/// A field that must be present and may be `null` (serde would take a missing `Option` for
/// `null`; the protocol does not).
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(deserializer)
}

/// The error object of a failed call: one of the classes of contracts 1.5, by `code`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "code", rename_all = "snake_case", deny_unknown_fields)]
pub enum ErrorObject {
    /// Not (or no longer) the owner; nothing became visible.
    LeaseHeld { op: WireOp, lease: WireLease, rejection: Rejection },
    /// The seq is not above the stored tail.
    JournalOrderViolation {
        run: String,
        seq: i64,
        #[serde(deserialize_with = "nullable")]
        #[schemars(with = "Nullable<i64>")]
        tail: Option<i64>,
    },
    /// A payload the store cannot keep faithfully.
    InvalidPayload { op: WireOp, run: String, reason: String },
    /// Nothing happened; retry later.
    Busy {
        op: WireOp,
        #[serde(deserialize_with = "nullable")]
        #[schemars(with = "Nullable<String>")]
        run: Option<String>,
    },
    /// Bad options, detected before anything was touched.
    Config { message: String },
    /// The store failed; not retryable.
    Storage { op: WireOp, message: String },
    /// A counter the fencing rests on would wrap.
    Overflow { op: WireOp, run: String, what: String },
}

/// Why a lease did not guard a call, by `kind`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Rejection {
    HeldBy {
        owner: String,
        epoch: i64,
    },
    Stale {
        #[serde(deserialize_with = "nullable")]
        #[schemars(with = "Nullable<Holder>")]
        live: Option<Holder>,
    },
    RunMismatch {
        target: String,
    },
}

/// The live holder a stale lease met.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Holder {
    pub owner: String,
    pub epoch: i64,
}

impl From<&StoreError> for ErrorObject {
    fn from(error: &StoreError) -> Self {
        match error {
            StoreError::LeaseHeld(held) => ErrorObject::LeaseHeld {
                op: WireOp(held.op),
                lease: WireLease::from(&held.lease),
                rejection: match &held.rejection {
                    LeaseRejection::HeldBy { owner, epoch } => {
                        Rejection::HeldBy { owner: owner.clone(), epoch: epoch.0 }
                    }
                    LeaseRejection::Stale { live } => Rejection::Stale {
                        live: live.as_ref().map(|(owner, epoch)| Holder { owner: owner.clone(), epoch: epoch.0 }),
                    },
                    LeaseRejection::RunMismatch { target } => {
                        Rejection::RunMismatch { target: target.as_str().to_owned() }
                    }
                },
            },
            StoreError::JournalOrder { run, seq, tail } => {
                ErrorObject::JournalOrderViolation { run: run.as_str().to_owned(), seq: seq.0, tail: tail.map(|t| t.0) }
            }
            StoreError::InvalidPayload { op, run, reason } => {
                ErrorObject::InvalidPayload { op: WireOp(*op), run: run.as_str().to_owned(), reason: reason.clone() }
            }
            StoreError::Busy { op, run } => {
                ErrorObject::Busy { op: WireOp(*op), run: run.as_ref().map(|r| r.as_str().to_owned()) }
            }
            StoreError::Config(message) => ErrorObject::Config { message: message.clone() },
            StoreError::Storage { op, message } => ErrorObject::Storage { op: WireOp(*op), message: message.clone() },
            StoreError::Overflow { op, run, what } => {
                ErrorObject::Overflow { op: WireOp(*op), run: run.as_str().to_owned(), what: what.clone() }
            }
        }
    }
}

impl From<ErrorObject> for StoreError {
    fn from(error: ErrorObject) -> Self {
        match error {
            ErrorObject::LeaseHeld { op, lease, rejection } => {
                let rejection = match rejection {
                    Rejection::HeldBy { owner, epoch } => LeaseRejection::HeldBy { owner, epoch: Epoch(epoch) },
                    Rejection::Stale { live } => {
                        LeaseRejection::Stale { live: live.map(|h| (h.owner, Epoch(h.epoch))) }
                    }
                    Rejection::RunMismatch { target } => LeaseRejection::RunMismatch { target: RunId::new(target) },
                };
                StoreError::lease_held(op.0, lease.into(), rejection)
            }
            ErrorObject::JournalOrderViolation { run, seq, tail } => {
                StoreError::JournalOrder { run: RunId::new(run), seq: Seq(seq), tail: tail.map(Seq) }
            }
            ErrorObject::InvalidPayload { op, run, reason } => {
                StoreError::InvalidPayload { op: op.0, run: RunId::new(run), reason }
            }
            ErrorObject::Busy { op, run } => StoreError::Busy { op: op.0, run: run.map(RunId::new) },
            ErrorObject::Config { message } => StoreError::Config(message),
            ErrorObject::Storage { op, message } => StoreError::storage(op.0, message),
            ErrorObject::Overflow { op, run, what } => StoreError::Overflow { op: op.0, run: RunId::new(run), what },
        }
    }
}

/// An adapter's error object as the [`StoreError`] it names; why not (a missing or foreign
/// field, an unknown code) for an error naming the line.
pub fn parse_error(value: &Value) -> Result<StoreError, String> {
    ErrorObject::deserialize(value).map(StoreError::from).map_err(|e| e.to_string())
}

/// A field that must be present and may be `null` (schemars takes an `Option` field for one that
/// may be left out, which the protocol does not allow).
pub(crate) struct Nullable<T>(PhantomData<T>);

impl<T: JsonSchema> JsonSchema for Nullable<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Option::<T>::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        Option::<T>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every error class crosses the wire and comes back equal: the mapping is one to one.
    #[test]
    fn every_store_error_round_trips() {
        let run = RunId::new("r");
        let lease = Lease { run: run.clone(), owner: "w".into(), epoch: Epoch(3) };
        let every = [
            StoreError::lease_held(
                Op::Acquire,
                lease.clone(),
                LeaseRejection::HeldBy { owner: "v".into(), epoch: Epoch(2) },
            ),
            StoreError::lease_held(
                Op::Append,
                lease.clone(),
                LeaseRejection::Stale { live: Some(("v".into(), Epoch(4))) },
            ),
            StoreError::lease_held(Op::Renew, lease.clone(), LeaseRejection::Stale { live: None }),
            StoreError::lease_held(Op::PutBlob, lease, LeaseRejection::RunMismatch { target: RunId::new("s") }),
            StoreError::JournalOrder { run: run.clone(), seq: Seq(2), tail: Some(Seq(5)) },
            StoreError::JournalOrder { run: run.clone(), seq: Seq(2), tail: None },
            StoreError::InvalidPayload { op: Op::PutMeta, run: run.clone(), reason: "x".into() },
            StoreError::Busy { op: Op::Load, run: Some(run.clone()) },
            StoreError::Busy { op: Op::ListRuns, run: None },
            StoreError::Config("ttl".into()),
            StoreError::storage(Op::Boot, "disk"),
            StoreError::Overflow { op: Op::Acquire, run, what: "epoch".into() },
        ];
        for e in every {
            let object = serde_json::to_value(ErrorObject::from(&e)).expect("an object");
            assert_eq!(parse_error(&object).as_ref(), Ok(&e), "{e}");
        }
        let codes: std::collections::BTreeSet<&str> = StoreError::CODES.iter().copied().collect();
        assert_eq!(codes.len(), 7, "a new error class needs a wire form here");
    }

    #[test]
    fn what_is_not_an_error_object_is_none() {
        for bad in [
            json!({}),
            json!({ "code": "nope" }),
            json!({ "code": "busy" }),
            json!({ "code": "lease_held", "op": "append" }),
            // A nullable field is sent as null, never left out; no field beyond the protocol's.
            json!({ "code": "busy", "op": "load" }),
            json!({ "code": "busy", "op": "load", "run": null, "extra": 1 }),
            json!({ "code": "journal_order_violation", "run": "r", "seq": 2 }),
            json!({ "code": "busy", "op": "vacuum", "run": null }),
            json!({ "code": "lease_held", "op": "renew", "lease": { "run": "r", "owner": "w", "epoch": 1 },
                    "rejection": { "kind": "stale" } }),
        ] {
            assert!(parse_error(&bad).is_err(), "{bad}");
        }
        assert!(parse_error(&json!({ "code": "busy", "op": "load", "run": null })).is_ok());
    }

    /// Exactly one of the protocol's shapes: an answer carrying both `ok` and `error` (read as ok
    /// before, turning a correct refusal into a stale acceptance) is none of them.
    #[test]
    fn a_line_is_exactly_one_of_the_protocols_shapes() {
        for good in [
            r#"{"id":3,"ok":null}"#,
            r#"{"id":3,"ok":{"conn":1}}"#,
            r#"{"id":3,"error":{"code":"config","message":"x"}}"#,
            r#"{"id":3,"time":true}"#,
            r#"{"id":3,"fault":"fence_checked","op":"append","run":"r"}"#,
        ] {
            let line = AdapterLine::parse(good).unwrap_or_else(|e| panic!("{good}: {e}"));
            assert_eq!(line.id(), 3, "{good}");
        }
        for bad in [
            r#"{"id":3,"error":{"code":"busy","op":"load","run":null},"ok":null}"#,
            r#"{"id":3,"ok":null,"time":true}"#,
            r#"{"id":3}"#,
            r#"{"ok":null}"#,
            r#"{"id":-1,"ok":null}"#,
            r#"{"id":3,"time":false}"#,
            r#"{"id":3,"fault":"somewhere","op":"append","run":"r"}"#,
            r#"{"id":3,"fault":"fence_checked","op":"append"}"#,
            r#"[3]"#,
            "not json",
        ] {
            assert!(AdapterLine::parse(bad).is_err(), "{bad}");
        }
        assert!(AdapterLine::parse("not json").unwrap_err().starts_with("not JSON"));
    }

    #[test]
    fn hex_round_trips_and_refuses_odd_or_foreign_text() {
        let bytes = [0u8, 1, 0x7f, 0x80, 0xff];
        assert_eq!(unhex(&hex(&bytes)).as_deref(), Some(&bytes[..]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }
}
