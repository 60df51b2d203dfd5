//! The protocol's JSON Schema, `reports/protocol.schema.json`, generated from the types fencesim
//! writes and reads ([`Request`], [`Reply`], [`HelloLine`], [`AdapterLine`]) with `schemars`, so
//! that the file cannot drift from the wire: a test compares the two and fails on a difference
//! (`FENCESIM_WRITE_SCHEMA=1` rewrites the file instead).
//!
//! Every shape is strict (`deny_unknown_fields`: no other field; a nullable field is required and
//! may be `null`), except an entry's and a meta's, whose other fields are kept verbatim. A store
//! call's line flattens its `op` and arguments into `id`, `conn` and `faults`; schemars says "no
//! other field" there with `unevaluatedProperties: false`, which sees through the `oneOf` of the
//! calls. The whole is an `anyOf` of the shapes: the handshake's answer is also an `ok` answer.

use schemars::{JsonSchema, Schema};

use crate::request::{Reply, Request};
use crate::wire::{AdapterLine, HelloLine};

/// One line between fencesim and a store adapter (docs/protocol.md): a request or a reply from
/// fencesim, an answer, an ask for the time or a fault point from the adapter.
#[derive(JsonSchema)]
#[serde(untagged)]
#[schemars(title = "fencesim store protocol, version 1")]
#[allow(dead_code, reason = "a schema: every line of the protocol")]
enum Line {
    Request(Request),
    Reply(Reply),
    Handshake(HelloLine),
    Answer(AdapterLine),
}

/// The protocol's schema (JSON Schema 2020-12).
pub fn protocol_schema() -> Schema {
    schemars::schema_for!(Line)
}

/// The schema as `reports/protocol.schema.json` holds it: pretty-printed, one newline at the end.
pub fn protocol_schema_text() -> String {
    let text = serde_json::to_string_pretty(&protocol_schema()).expect("a schema is JSON");
    text + "\n"
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use fencesim_store::{JournalEntry, Lease, RunFilter, RunId, RunMeta, RunStatus};
    use serde_json::{Value, json};

    use super::*;
    use crate::request::{Call, CallLine, Resume, TimeGiven, lease_arg};
    use crate::wire::{True, WireLease};

    fn schema_file() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../reports/protocol.schema.json")
    }

    /// The schema file is what the types generate; `FENCESIM_WRITE_SCHEMA=1` writes it instead.
    #[test]
    fn the_schema_file_is_what_the_protocol_types_generate() {
        let generated = protocol_schema_text();
        if std::env::var_os("FENCESIM_WRITE_SCHEMA").is_some_and(|v| v == "1") {
            std::fs::write(schema_file(), &generated).expect("write the schema");
            return;
        }
        let on_disk = std::fs::read_to_string(schema_file()).expect("reports/protocol.schema.json");
        assert!(
            on_disk == generated,
            "reports/protocol.schema.json is not what the protocol's types (protocol/src/request.rs, \
             protocol/src/wire.rs) generate: regenerate it with \
             `FENCESIM_WRITE_SCHEMA=1 cargo test -p fencesim-protocol --lib schema::` and commit it"
        );
    }

    fn validator() -> jsonschema::Validator {
        jsonschema::validator_for(&protocol_schema().to_value()).expect("a valid schema")
    }

    /// One line of each request, written by the types themselves, is valid.
    fn every_request() -> Vec<Value> {
        let lease =
            WireLease::from(&Lease { run: RunId::new("r1"), owner: "w1".into(), epoch: fencesim_store::Epoch(3) });
        let entry = JournalEntry::new(2, "agent", "running").with("note", json!({ "x": [1, 2] }));
        let mut meta = RunMeta::new("r1", RunStatus::Running);
        meta.extra.insert("workflow".into(), json!("w"));
        let filter = RunFilter { statuses: Some(vec![RunStatus::Ok]), ..RunFilter::default() };
        let calls = [
            Call::Append { run: "r1".into(), entry, lease: Some(lease.clone()), now_ms: Some(Some(5)) },
            Call::Load { run: "r1".into() },
            Call::PutMeta { meta, lease: None, now_ms: None },
            Call::GetMeta { run: "r1".into() },
            Call::ListRuns { filter: (&filter).into() },
            Call::Delete { run: "r1".into(), lease: lease_arg(None), now_ms: None },
            Call::Acquire { run: "r1".into(), owner: "w1".into(), now_ms: None },
            Call::Renew { lease: lease.clone(), now_ms: Some(7) },
            Call::Release { lease: lease.clone(), now_ms: Some(7) },
            Call::PutBlob { blob_ref: "r1/a".into(), hex: "00ff".into(), lease: Some(lease), now_ms: Some(None) },
            Call::GetBlob { blob_ref: "r1/a".into() },
            Call::ListBlobs { run: "r1".into() },
            Call::DeleteBlob { blob_ref: "r1/a".into(), lease: None, now_ms: None },
        ];
        let mut lines: Vec<Value> = calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| {
                serde_json::to_value(Request::Call(CallLine { id: i as u64 + 1, conn: 1, faults: i % 2 == 0, call }))
            })
            .collect::<Result<_, _>>()
            .expect("JSON");
        let others = [
            serde_json::to_value(Request::hello()),
            serde_json::to_value(Request::Open { id: 1, location: "/tmp/x".into(), ttl_ms: 1000 }),
            serde_json::to_value(Request::Close { id: 2, conn: 1 }),
            serde_json::to_value(Reply::Resume(Resume { id: 3, resume: True })),
            serde_json::to_value(Reply::Time(TimeGiven { id: 3, now_ms: 1_733_300_000_123 })),
        ];
        lines.extend(others.into_iter().map(|line| line.expect("JSON")));
        lines
    }

    #[test]
    fn every_line_the_types_write_is_valid() {
        let validator = validator();
        let lines = every_request();
        for line in &lines {
            let errors: Vec<String> =
                validator.iter_errors(line).map(|e| format!("{}: {e}", e.instance_path())).collect();
            assert!(errors.is_empty(), "{line}\n{errors:#?}");
        }
        assert_eq!(lines.len(), crate::wire::OPS.len() + 5, "a line of each request and reply");
    }

    /// What the hand-written schema refused (checked against it when this schema replaced it),
    /// the generated one refuses: a field no shape has, a nullable field left out, a constant
    /// changed, a value of another type; and it takes what it took.
    #[test]
    fn the_schema_refuses_what_the_protocol_refuses() {
        let validator = validator();
        let lease = json!({ "run": "r", "owner": "w", "epoch": 1 });
        let filter = json!({ "status": null, "statuses": null, "tags": [], "name": null });
        for bad in [
            json!({ "id": 1, "op": "vacuum", "conn": 1, "now_ms": 0 }),
            json!({ "id": 1, "error": { "code": "oops" } }),
            json!({ "id": 1, "op": "hello", "protocol": 1 }),
            json!({ "id": 0, "op": "hello", "protocol": 2 }),
            json!({ "id": 0, "op": "hello", "protocol": 1, "x": 1 }),
            json!({ "id": 1, "op": "open", "location": "/x" }),
            // (conn 0: tighter than the hand-written schema was; connections are numbered from 1.)
            json!({ "id": 1, "op": "close", "conn": 0 }),
            json!({ "id": 1, "op": "load", "conn": 1, "run": "r", "extra": 1 }),
            json!({ "id": 1, "op": "load", "conn": 1, "run": "r", "owner": "w" }),
            json!({ "id": 1, "op": "load", "run": "r" }),
            json!({ "id": -1, "op": "load", "conn": 1, "run": "r" }),
            json!({ "id": 1, "op": "append", "conn": 1, "run": "r", "entry": { "seq": 1, "kind": "k", "status": "s" } }),
            json!({ "id": 1, "op": "append", "conn": 1, "run": "r", "entry": { "seq": "1", "kind": "k", "status": "s" }, "lease": null }),
            json!({ "id": 1, "op": "append", "conn": 1, "run": "r", "entry": { "kind": "k", "status": "s" }, "lease": null }),
            json!({ "id": 1, "op": "put_meta", "conn": 1, "meta": { "run_id": "r", "status": "done" }, "lease": null }),
            json!({ "id": 1, "op": "put_meta", "conn": 1, "meta": { "run_id": "r", "status": "ok", "name": null }, "lease": null }),
            json!({ "id": 1, "op": "acquire", "conn": 1, "run": "r", "owner": "w" }),
            json!({ "id": 1, "op": "renew", "conn": 1, "now_ms": 1, "lease": null }),
            json!({ "id": 1, "op": "renew", "conn": 1, "now_ms": 1, "lease": { "run": "r", "owner": "w" } }),
            json!({ "id": 1, "op": "renew", "conn": 1, "now_ms": 1.5, "lease": lease }),
            json!({ "id": 1, "op": "list_runs", "conn": 1, "filter": { "status": null, "statuses": null, "tags": [] } }),
            json!({ "id": 1, "op": "list_runs", "conn": 1, "filter": { "status": "done", "statuses": null, "tags": [], "name": null } }),
            json!({ "id": 1, "op": "list_runs", "conn": 1, "filter": filter, "faults": 1 }),
            json!({ "id": 1, "op": "put_blob", "conn": 1, "ref": "r/a", "lease": null }),
            json!({ "id": 1, "resume": false }),
            json!({ "id": 1, "now_ms": null }),
            json!({ "id": 3, "error": { "code": "busy", "op": "load", "run": null }, "ok": null }),
            json!({ "id": 3, "error": { "code": "busy", "op": "load" } }),
            json!({ "id": 3, "error": { "code": "lease_held", "op": "renew", "lease": lease, "rejection": { "kind": "stale" } } }),
            json!({ "id": 3, "time": false }),
            json!({ "id": 3, "fault": "somewhere", "op": "append", "run": "r" }),
            json!({ "id": 3, "fault": "fence_checked", "op": "append" }),
            json!({ "ok": null }),
            json!([3]),
        ] {
            assert!(!validator.is_valid(&bad), "the schema takes {bad}");
        }
        for good in [
            json!({ "id": 3, "ok": null }),
            json!({ "id": 0, "ok": { "protocol": 1, "name": "x",
                    "capabilities": { "leases": true, "fenced_writes": true, "fault_points": false } } }),
            json!({ "id": 3, "error": { "code": "journal_order_violation", "run": "r", "seq": 2, "tail": null } }),
            json!({ "id": 3, "error": { "code": "lease_held", "op": "renew", "lease": lease,
                    "rejection": { "kind": "stale", "live": { "owner": "v", "epoch": 2 } } } }),
            json!({ "id": 3, "time": true }),
            json!({ "id": 3, "fault": "acquire_checked", "op": "acquire", "run": "r" }),
        ] {
            assert!(validator.is_valid(&good), "the schema refuses {good}");
        }
    }
}
