//! The protocol's values on the wire (docs/protocol.md): leases, filters and blobs as JSON, and
//! the typed errors of contracts 1.5, mapped one to one onto [`StoreError`] in both directions.

use fencesim_store::{Epoch, Lease, LeaseRejection, Op, RunFilter, RunId, Seq, StoreError};
use serde_json::{Map, Value, json};

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

pub fn lease(lease: &Lease) -> Value {
    json!({ "run": lease.run.as_str(), "owner": lease.owner, "epoch": lease.epoch.0 })
}

pub fn lease_or_null(lease: Option<&Lease>) -> Value {
    lease.map_or(Value::Null, self::lease)
}

pub fn parse_lease(value: &Value) -> Option<Lease> {
    Some(Lease {
        run: RunId::new(value.get("run")?.as_str()?),
        owner: value.get("owner")?.as_str()?.to_owned(),
        epoch: Epoch(value.get("epoch")?.as_i64()?),
    })
}

pub fn filter(filter: &RunFilter) -> Value {
    json!({
        "status": filter.status.map(|s| s.as_str()),
        "statuses": filter.statuses.as_ref().map(|set| set.iter().map(|s| s.as_str()).collect::<Vec<_>>()),
        "tags": filter.tags,
        "name": filter.name,
    })
}

/// Blob bytes travel as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| text.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok())).collect()
}

/// A [`StoreError`] as the error object an adapter answers with.
pub fn error(error: &StoreError) -> Value {
    let mut out = Map::new();
    out.insert("code".into(), error.code().into());
    match error {
        StoreError::LeaseHeld(held) => {
            out.insert("op".into(), held.op.as_str().into());
            out.insert("lease".into(), lease(&held.lease));
            let rejection = match &held.rejection {
                LeaseRejection::HeldBy { owner, epoch } => {
                    json!({ "kind": "held_by", "owner": owner, "epoch": epoch.0 })
                }
                LeaseRejection::Stale { live } => json!({
                    "kind": "stale",
                    "live": live.as_ref().map(|(owner, epoch)| json!({ "owner": owner, "epoch": epoch.0 })),
                }),
                LeaseRejection::RunMismatch { target } => json!({ "kind": "run_mismatch", "target": target.as_str() }),
            };
            out.insert("rejection".into(), rejection);
        }
        StoreError::JournalOrder { run, seq, tail } => {
            out.extend([("run".into(), run.as_str().into()), ("seq".into(), seq.0.into())]);
            out.insert("tail".into(), tail.map_or(Value::Null, |t| t.0.into()));
        }
        StoreError::InvalidPayload { op, run, reason } => {
            out.extend([("op".into(), op.as_str().into()), ("run".into(), run.as_str().into())]);
            out.insert("reason".into(), reason.as_str().into());
        }
        StoreError::Busy { op, run } => {
            out.insert("op".into(), op.as_str().into());
            out.insert("run".into(), run.as_ref().map_or(Value::Null, |r| r.as_str().into()));
        }
        StoreError::Config(message) => {
            out.insert("message".into(), message.as_str().into());
        }
        StoreError::Storage { op, message } => {
            out.extend([("op".into(), op.as_str().into()), ("message".into(), message.as_str().into())]);
        }
        StoreError::Overflow { op, run, what } => {
            out.extend([("op".into(), op.as_str().into()), ("run".into(), run.as_str().into())]);
            out.insert("what".into(), what.as_str().into());
        }
    }
    Value::Object(out)
}

/// An adapter's error object as the [`StoreError`] it names; `None` when it is not one (a
/// missing field, an unknown code): the caller reports the line as garbage.
pub fn parse_error(value: &Value) -> Option<StoreError> {
    let text = |key: &str| value.get(key).and_then(Value::as_str);
    let op = || text("op").and_then(op_named);
    let run = || text("run").map(RunId::new);
    Some(match text("code")? {
        "lease_held" => {
            let rejection = value.get("rejection")?;
            let kind = rejection.get("kind")?.as_str()?;
            let rejection = match kind {
                "held_by" => LeaseRejection::HeldBy {
                    owner: rejection.get("owner")?.as_str()?.to_owned(),
                    epoch: Epoch(rejection.get("epoch")?.as_i64()?),
                },
                "stale" => LeaseRejection::Stale {
                    live: match rejection.get("live") {
                        None | Some(Value::Null) => None,
                        Some(live) => {
                            Some((live.get("owner")?.as_str()?.to_owned(), Epoch(live.get("epoch")?.as_i64()?)))
                        }
                    },
                },
                "run_mismatch" => {
                    LeaseRejection::RunMismatch { target: RunId::new(rejection.get("target")?.as_str()?) }
                }
                _ => return None,
            };
            StoreError::lease_held(op()?, parse_lease(value.get("lease")?)?, rejection)
        }
        "journal_order_violation" => StoreError::JournalOrder {
            run: run()?,
            seq: Seq(value.get("seq")?.as_i64()?),
            tail: match value.get("tail") {
                None | Some(Value::Null) => None,
                Some(tail) => Some(Seq(tail.as_i64()?)),
            },
        },
        "invalid_payload" => StoreError::InvalidPayload { op: op()?, run: run()?, reason: text("reason")?.to_owned() },
        "busy" => StoreError::Busy { op: op()?, run: run() },
        "config" => StoreError::Config(text("message")?.to_owned()),
        "storage" => StoreError::storage(op()?, text("message")?),
        "overflow" => StoreError::Overflow { op: op()?, run: run()?, what: text("what")?.to_owned() },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
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
            assert_eq!(parse_error(&error(&e)).as_ref(), Some(&e), "{e}");
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
        ] {
            assert_eq!(parse_error(&bad), None, "{bad}");
        }
    }

    #[test]
    fn hex_round_trips_and_refuses_odd_or_foreign_text() {
        let bytes = [0u8, 1, 0x7f, 0x80, 0xff];
        assert_eq!(unhex(&hex(&bytes)).as_deref(), Some(&bytes[..]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }
}
