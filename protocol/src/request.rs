//! Every line fencesim writes to an adapter (docs/protocol.md), as serde types: a [`Request`]
//! (`hello`, `open`, `close`, or a store [`Call`] on a connection, with its `id` and `conn`), or a
//! [`Reply`] to an adapter's ask (`resume` after a fault point, the time it asked for). The same
//! [`Call`] is what a simulated world records for the differential (`fencesim_sim::history`).
//!
//! A line is written as serde_json's `Value` prints it ([`line()`]): keys sorted at every level,
//! the entry's and meta's fields included, numbers as serde_json prints them, a nullable field
//! as `null`. That is the order the wire has had since its first line; adapters may not depend
//! on it, but replays compare it byte for byte.

use std::borrow::Cow;

use fencesim_store::{JournalEntry, Lease, Op, RunFilter, RunMeta, RunStatus};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde_json::Value;

use crate::wire::{Nullable, PROTOCOL_VERSION, True, WireLease};

/// The time a timed call carries: the caller's clock (ms), or `None` (`null` on the wire): the
/// adapter asks for it in-lock with a `time` line.
pub type NowMs = Option<i64>;

/// A request: the handshake, a connection opened or closed, or a store call on a connection.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The handshake, always id 0.
    Hello {
        #[schemars(extend("const" = 0))]
        id: u64,
        #[schemars(extend("const" = 1))]
        protocol: u32,
    },
    /// A new connection over a location (a folder fencesim made); the adapter validates ttl_ms
    /// (B1).
    Open { id: u64, location: String, ttl_ms: i64 },
    /// Close a connection.
    Close {
        id: u64,
        #[schemars(range(min = 1))]
        conn: u64,
    },
    /// A store call on a connection.
    #[serde(untagged)]
    Call(CallLine),
}

/// A store call on a connection: `id`, `conn`, `faults` and the call's `op` and arguments.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallLine {
    pub id: u64,
    #[schemars(range(min = 1))]
    pub conn: u64,
    /// Stop at the fault points of this call (see fault).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub faults: bool,
    #[serde(flatten)]
    pub call: Call,
}

/// One store call: its `op` and its arguments, as the protocol names them. A timed call carries
/// `now_ms` (the lease calls always, a write when it is fenced); a `None` `Option<NowMs>` leaves
/// the field out.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Call {
    /// Append one entry (J5: seq strictly above the stored tail).
    Append {
        run: String,
        #[schemars(with = "EntryShape")]
        entry: JournalEntry,
        #[schemars(with = "Nullable<WireLease>")]
        lease: Option<WireLease>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "NowMs", description = "The caller's clock; null: ask for it in-lock (time).")]
        now_ms: Option<NowMs>,
    },
    /// Every entry of the run in append order.
    Load { run: String },
    /// Upsert the run's meta whole.
    PutMeta {
        #[schemars(with = "MetaShape")]
        meta: RunMeta,
        #[schemars(with = "Nullable<WireLease>")]
        lease: Option<WireLease>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "NowMs", description = "The caller's clock; null: ask for it in-lock (time).")]
        now_ms: Option<NowMs>,
    },
    /// The run's meta, or null.
    GetMeta { run: String },
    /// Metas matching the filter, ordered by run id.
    ListRuns { filter: WireFilter },
    /// Remove journal, meta and lease row; never the epoch high-water mark (L4) or blobs (T6).
    Delete {
        run: String,
        #[schemars(with = "Nullable<WireLease>")]
        lease: Option<WireLease>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "NowMs", description = "The caller's clock; null: ask for it in-lock (time).")]
        now_ms: Option<NowMs>,
    },
    /// Take the run's lease if no live lease exists; epoch = high-water mark + 1.
    Acquire {
        run: String,
        owner: String,
        #[schemars(with = "Nullable<i64>", description = "The caller's clock; null: ask for it in-lock (time).")]
        now_ms: NowMs,
    },
    /// Extend the live holder's lease to now_ms + ttl_ms.
    Renew {
        lease: WireLease,
        #[schemars(with = "Nullable<i64>", description = "The caller's clock; null: ask for it in-lock (time).")]
        now_ms: NowMs,
    },
    /// Drop the lease; a stale release is rejected and never touches the successor (L7).
    Release {
        lease: WireLease,
        #[schemars(with = "Nullable<i64>", description = "The caller's clock; null: ask for it in-lock (time).")]
        now_ms: NowMs,
    },
    /// Write or overwrite a blob; its bytes as lowercase hex.
    PutBlob {
        #[serde(rename = "ref")]
        blob_ref: String,
        hex: String,
        #[schemars(with = "Nullable<WireLease>")]
        lease: Option<WireLease>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "NowMs", description = "The caller's clock; null: ask for it in-lock (time).")]
        now_ms: Option<NowMs>,
    },
    /// The blob's bytes as hex, or null.
    GetBlob {
        #[serde(rename = "ref")]
        blob_ref: String,
    },
    /// Refs under run/, sorted.
    ListBlobs { run: String },
    /// Delete a blob; a missing ref is a no-op (T1).
    DeleteBlob {
        #[serde(rename = "ref")]
        blob_ref: String,
        #[schemars(with = "Nullable<WireLease>")]
        lease: Option<WireLease>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "NowMs", description = "The caller's clock; null: ask for it in-lock (time).")]
        now_ms: Option<NowMs>,
    },
}

/// fencesim's answer to an adapter's ask while a call is in flight.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Reply {
    /// Go on after a fault point.
    Resume(Resume),
    /// The time the adapter asked for, read now.
    Time(TimeGiven),
}

/// `{"id":N,"resume":true}`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resume {
    pub id: u64,
    pub resume: True,
}

/// `{"id":N,"now_ms":T}`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimeGiven {
    pub id: u64,
    pub now_ms: i64,
}

/// A `list_runs` filter: `status` and `statuses` match as "either", `statuses: []` alone matches
/// nothing, every tag must be present.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireFilter {
    #[schemars(with = "Nullable<StatusShape>")]
    pub status: Option<RunStatus>,
    #[schemars(with = "Nullable<Vec<StatusShape>>")]
    pub statuses: Option<Vec<RunStatus>>,
    pub tags: Vec<String>,
    #[schemars(with = "Nullable<String>")]
    pub name: Option<String>,
}

impl From<&RunFilter> for WireFilter {
    fn from(filter: &RunFilter) -> Self {
        WireFilter {
            status: filter.status,
            statuses: filter.statuses.clone(),
            tags: filter.tags.clone(),
            name: filter.name.clone(),
        }
    }
}

impl Request {
    /// The request's `op` on the wire (`hello`, `open`, `close`, `append`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "hello",
            Request::Open { .. } => "open",
            Request::Close { .. } => "close",
            Request::Call(line) => line.call.op().as_str(),
        }
    }

    /// The SPI operation it serves: the call's, or `boot` for the handshake and connections.
    pub fn op(&self) -> Op {
        match self {
            Request::Call(line) => line.call.op(),
            _ => Op::Boot,
        }
    }

    /// The handshake of this build.
    pub fn hello() -> Request {
        Request::Hello { id: 0, protocol: PROTOCOL_VERSION }
    }

    /// Number the request (`hello` is always 0).
    pub fn set_id(&mut self, to: u64) {
        match self {
            Request::Hello { .. } => {}
            Request::Open { id, .. } | Request::Close { id, .. } | Request::Call(CallLine { id, .. }) => *id = to,
        }
    }

    /// Whether the request carries the time, or has none to carry: an adapter that asks for it
    /// (a `time` line) breaks the protocol. Only a timed call sent with `now_ms: null` may ask.
    pub fn gives_time(&self) -> bool {
        !matches!(self, Request::Call(line) if line.call.now_ms() == Some(None))
    }
}

impl Call {
    /// The SPI operation, which names the call on the wire.
    pub fn op(&self) -> Op {
        match self {
            Call::Append { .. } => Op::Append,
            Call::Load { .. } => Op::Load,
            Call::PutMeta { .. } => Op::PutMeta,
            Call::GetMeta { .. } => Op::GetMeta,
            Call::ListRuns { .. } => Op::ListRuns,
            Call::Delete { .. } => Op::Delete,
            Call::Acquire { .. } => Op::Acquire,
            Call::Renew { .. } => Op::Renew,
            Call::Release { .. } => Op::Release,
            Call::PutBlob { .. } => Op::PutBlob,
            Call::GetBlob { .. } => Op::GetBlob,
            Call::ListBlobs { .. } => Op::ListBlobs,
            Call::DeleteBlob { .. } => Op::DeleteBlob,
        }
    }

    /// The time the call carries: `None` for an untimed call, `Some(None)` when the adapter is
    /// to ask for it in-lock.
    pub fn now_ms(&self) -> Option<NowMs> {
        match self {
            Call::Append { now_ms, .. }
            | Call::PutMeta { now_ms, .. }
            | Call::Delete { now_ms, .. }
            | Call::PutBlob { now_ms, .. }
            | Call::DeleteBlob { now_ms, .. } => *now_ms,
            Call::Acquire { now_ms, .. } | Call::Renew { now_ms, .. } | Call::Release { now_ms, .. } => Some(*now_ms),
            Call::Load { .. } | Call::GetMeta { .. } | Call::ListRuns { .. } | Call::GetBlob { .. } => None,
            Call::ListBlobs { .. } => None,
        }
    }

    /// The call as a JSON object (keys sorted), as the differential records it.
    pub fn to_value(&self) -> Value {
        value(self)
    }
}

/// A lease argument: the lease, or `null` for an unfenced write.
pub fn lease_arg(lease: Option<&Lease>) -> Option<WireLease> {
    lease.map(WireLease::from)
}

/// A message as the line fencesim writes (without its newline).
pub fn line<T: Serialize>(message: &T) -> String {
    let line = value(message).to_string();
    // One message, one line: an adapter cuts its stdin at newlines, which compact JSON never has.
    assert!(!line.contains('\n'), "a protocol message that spans lines");
    line
}

/// Through `Value`, whose maps keep their keys sorted: the wire's key order at every level.
fn value<T: Serialize>(message: &T) -> Value {
    // Every message is an object of string keys and serde values: serde_json cannot refuse it.
    serde_json::to_value(message).expect("a protocol message is a JSON object with string keys")
}

// Schema-only types: the shapes of the store's own types (which carry no schema), and a field
// that must be present and may be `null`.

/// A run's status (contracts 1.2), as `RunStatus` serializes it.
pub(crate) struct StatusShape;

impl JsonSchema for StatusShape {
    fn schema_name() -> Cow<'static, str> {
        "status".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

/// A journal entry: these fields typed, any other kept verbatim (contracts J4).
#[derive(JsonSchema)]
#[schemars(rename = "entry")]
#[allow(dead_code, reason = "a schema: JournalEntry's typed fields")]
pub(crate) struct EntryShape {
    seq: i64,
    #[serde(rename = "ref", default)]
    ref_seq: i64,
    kind: String,
    status: String,
}

/// A run's meta record: these fields typed, any other kept verbatim (contracts J6).
#[derive(JsonSchema)]
#[schemars(rename = "meta")]
#[allow(dead_code, reason = "a schema: RunMeta's typed fields")]
pub(crate) struct MetaShape {
    run_id: String,
    status: StatusShape,
    #[serde(default)]
    segments: u32,
    #[serde(default)]
    name: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    genesis: String,
    #[serde(default)]
    updated_at_ms: i64,
}
