//! The data model of contracts section 1: run ids, leases and their epochs, run metadata, journal
//! entries and run filters. Stores treat payloads as opaque: every field they do not index travels
//! in `extra` and round-trips unchanged (J4, J6); `extra` may not reuse a typed field's key, and
//! the stores refuse a record that does.

/// The largest ttl or timer, in ms: `2^31 - 1`, the reference's timer range (contracts 7). Every
/// bound on a lease ttl, a renew cadence or a timer, in every crate, is this one.
pub const TIMER_MS_MAX: u32 = 2_147_483_647;

/// The lease ttl when none is given: the reference's default (contracts 7).
pub const LEASE_TTL_MS_DEFAULT: u32 = 60_000;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The id of one durable run. Blob refs belong to the run named by their leading path segment.
/// Shared, not copied, when cloned: a history keys dozens of maps by run id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(Arc<str>);

impl RunId {
    pub fn new(id: impl Into<String>) -> Self {
        Self(Arc::from(id.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The run a transcript ref belongs to: the text before its first `/` (contracts 1.4). A
    /// slash-less ref is its own run but is never listed under any run.
    pub fn of_ref(blob_ref: &str) -> RunId {
        RunId::new(blob_ref.split('/').next().unwrap_or(blob_ref))
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for RunId {
    fn from(id: &str) -> Self {
        Self::new(id)
    }
}

/// A fencing token: per run, strictly increasing on every successful acquire, never reused for
/// the store's lifetime, across release, expiry, delete and recreate (L3, L4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Epoch(pub i64);

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A journal sequence number. Stored seqs strictly increase per run; gaps are legal (J5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seq(pub i64);

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The client's copy of a lease. The store's truth is the lease row plus the epoch high-water
/// mark; a lease value proves nothing until the store compares it with that row.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lease {
    /// The one run this lease fences (run-match rule, W3).
    pub run: RunId,
    /// Opaque holder identity, compared for equality.
    pub owner: String,
    pub epoch: Epoch,
}

impl fmt::Display for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run={} owner={} epoch={}", self.run, self.owner, self.epoch)
    }
}

/// The status a run's meta record carries (contracts 1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Suspended,
    Ok,
    Error,
    Cancelled,
    Exhausted,
}

impl RunStatus {
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Running,
        RunStatus::Suspended,
        RunStatus::Ok,
        RunStatus::Error,
        RunStatus::Cancelled,
        RunStatus::Exhausted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Suspended => "suspended",
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Exhausted => "exhausted",
        }
    }

    pub fn parse(text: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Terminal for the reconciler: ok, error, cancelled, exhausted (not running or suspended).
    pub fn is_terminal(self) -> bool {
        !matches!(self, RunStatus::Running | RunStatus::Suspended)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One record per run, written whole by its owner and never merged by the store (J6). Decoded by
/// hand (`decode.rs`): a derived decoder buffers a `flatten`ed record whole first.
#[derive(Clone, Debug, PartialEq, Hash, Serialize)]
pub struct RunMeta {
    pub run_id: RunId,
    pub status: RunStatus,
    /// Execution segments started (E1); every meta write of a segment carries the same number.
    #[serde(default)]
    pub segments: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Minted at a fresh start; tells a recreated run from the deleted one of the same id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub genesis: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at_ms: Option<i64>,
    /// Every other field, carried verbatim.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl RunMeta {
    pub fn new(run_id: impl Into<RunId>, status: RunStatus) -> Self {
        Self {
            run_id: run_id.into(),
            status,
            segments: 0,
            name: None,
            tags: Vec::new(),
            genesis: None,
            updated_at_ms: None,
            extra: BTreeMap::new(),
        }
    }

    pub fn with_segments(mut self, segments: u32) -> Self {
        self.segments = segments;
        self
    }
}

impl RunMeta {
    /// Keys the typed fields take in the encoded record; `extra` may not use them.
    pub const TYPED_FIELDS: [&'static str; 7] =
        ["run_id", "status", "segments", "name", "tags", "genesis", "updated_at_ms"];
}

impl From<String> for RunId {
    fn from(id: String) -> Self {
        Self::new(id)
    }
}

/// One journal entry. The store reads `seq` (the A5 guard) and nothing else; `ref`, `kind` and
/// `status` are typed for the engine's convenience, everything else is opaque (J4). Decoded by
/// hand (`decode.rs`), as [`RunMeta`] is.
#[derive(Clone, Debug, PartialEq, Hash, Serialize)]
pub struct JournalEntry {
    pub seq: Seq,
    /// A terminal entry's running entry.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub ref_seq: Option<Seq>,
    pub kind: String,
    pub status: String,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl JournalEntry {
    pub fn new(seq: i64, kind: impl Into<String>, status: impl Into<String>) -> Self {
        Self { seq: Seq(seq), ref_seq: None, kind: kind.into(), status: status.into(), extra: BTreeMap::new() }
    }

    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// Keys the typed fields take in the encoded entry; `extra` may not use them.
    pub const TYPED_FIELDS: [&'static str; 4] = ["seq", "ref", "kind", "status"];
}

/// A `list_runs` filter (contracts 1.2). `status` and `statuses` combine as "either matches";
/// `statuses: Some(vec![])` alone matches nothing; tags must all be present.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub status: Option<RunStatus>,
    pub statuses: Option<Vec<RunStatus>>,
    pub tags: Vec<String>,
    pub name: Option<String>,
}

impl RunFilter {
    pub fn all() -> Self {
        Self::default()
    }

    pub fn statuses(statuses: &[RunStatus]) -> Self {
        Self { statuses: Some(statuses.to_vec()), ..Self::default() }
    }

    /// The statuses this filter admits, or `None` when it does not filter by status.
    pub fn status_set(&self) -> Option<Vec<RunStatus>> {
        if self.status.is_none() && self.statuses.is_none() {
            return None;
        }
        let mut set: Vec<RunStatus> = self.status.into_iter().collect();
        set.extend(self.statuses.iter().flatten().copied());
        set.sort();
        set.dedup();
        Some(set)
    }

    pub fn matches(&self, meta: &RunMeta) -> bool {
        let filters_status = self.status.is_some() || self.statuses.is_some();
        let status_ok = !filters_status
            || self.status == Some(meta.status)
            || self.statuses.as_ref().is_some_and(|set| set.contains(&meta.status));
        let name_ok = self.name.as_ref().is_none_or(|n| meta.name.as_ref() == Some(n));
        let tags_ok = self.tags.iter().all(|t| meta.tags.contains(t));
        status_ok && name_ok && tags_ok
    }
}
