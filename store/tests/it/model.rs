//! Model equivalence: any single-writer sequence of operations leaves SqliteStore in the same
//! observable state as MemoryStore, the single-writer reference (journals, metas, blobs, listing
//! and every call's outcome class). Half the operations go through SqliteStore's fenced paths
//! under a live lease the single writer holds, so fencing must be invisible to a lawful owner.
//! Shrunk failures are kept in `model.proptest-regressions` beside this file and replayed first.

use std::collections::BTreeMap;
use std::sync::Arc;

use fencesim_store::{
    JournalEntry, JournalStore, LeasableStore, Lease, ManualClock, MemoryStore, RunFilter, RunId, RunMeta, RunStatus,
    SqliteOptions, SqliteStore, StoreError, StoreResult, TranscriptStore,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::json;

const RUNS: [&str; 3] = ["r0", "r1", "r2"];

#[derive(Clone, Debug)]
enum Op {
    Append { run: usize, seq: i64, leased: bool },
    PutMeta { run: usize, status: usize, segments: u32, tag: bool, leased: bool },
    Delete { run: usize, leased: bool },
    PutBlob { run: usize, name: u8, bytes: Vec<u8>, leased: bool },
    DeleteBlob { run: usize, name: u8, leased: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let run = 0..RUNS.len();
    prop_oneof![
        4 => (run.clone(), 0i64..12, any::<bool>()).prop_map(|(run, seq, leased)| Op::Append { run, seq, leased }),
        2 => (run.clone(), 0..RunStatus::ALL.len(), 0u32..4, any::<bool>(), any::<bool>())
            .prop_map(|(run, status, segments, tag, leased)| Op::PutMeta { run, status, segments, tag, leased }),
        1 => (run.clone(), any::<bool>()).prop_map(|(run, leased)| Op::Delete { run, leased }),
        2 => (run.clone(), 0u8..3, proptest::collection::vec(any::<u8>(), 0..16), any::<bool>())
            .prop_map(|(run, name, bytes, leased)| Op::PutBlob { run, name, bytes, leased }),
        1 => (run, 0u8..3, any::<bool>()).prop_map(|(run, name, leased)| Op::DeleteBlob { run, name, leased }),
    ]
}

/// SqliteStore plus the leases its single writer holds.
struct Fenced {
    store: SqliteStore,
    held: BTreeMap<RunId, Lease>,
}

impl Fenced {
    fn lease(&mut self, run: &RunId, leased: bool) -> Option<Lease> {
        if !leased {
            return None;
        }
        if !self.held.contains_key(run) {
            let lease = self.store.acquire(run, "single-writer").expect("the single writer always gets its lease");
            self.held.insert(run.clone(), lease);
        }
        self.held.get(run).cloned()
    }
}

/// The outcome class of a call: what both stores must agree on.
fn class(result: StoreResult<()>) -> &'static str {
    match result {
        Ok(()) => "ok",
        Err(StoreError::JournalOrder { .. }) => "journal_order_violation",
        Err(e) => panic!("unexpected error in a single-writer sequence: {e}"),
    }
}

fn apply(op: &Op, sqlite: &mut Fenced, memory: &MemoryStore) -> (&'static str, &'static str) {
    match op {
        Op::Append { run, seq, leased } => {
            let run = RunId::from(RUNS[*run]);
            let entry = JournalEntry::new(*seq, "step", "ok").with("value", json!({"seq": seq, "text": "é"}));
            let lease = sqlite.lease(&run, *leased);
            (class(sqlite.store.append(&run, &entry, lease.as_ref())), class(memory.append(&run, &entry, None)))
        }
        Op::PutMeta { run, status, segments, tag, leased } => {
            let mut meta = RunMeta::new(RUNS[*run], RunStatus::ALL[*status]).with_segments(*segments);
            if *tag {
                meta.tags.push("nightly".to_owned());
            }
            meta.extra.insert("nonce".to_owned(), json!(segments));
            let lease = sqlite.lease(&meta.run_id, *leased);
            (class(sqlite.store.put_meta(&meta, lease.as_ref())), class(memory.put_meta(&meta, None)))
        }
        Op::Delete { run, leased } => {
            let run = RunId::from(RUNS[*run]);
            let lease = sqlite.lease(&run, *leased);
            let result = sqlite.store.delete(&run, lease.as_ref());
            // Delete removes the lease row: the writer must acquire again.
            sqlite.held.remove(&run);
            (class(result), class(memory.delete(&run, None)))
        }
        Op::PutBlob { run, name, bytes, leased } => {
            let blob_ref = format!("{}/ckpt/{name}", RUNS[*run]);
            let lease = sqlite.lease(&RunId::of_ref(&blob_ref), *leased);
            (
                class(sqlite.store.put_blob(&blob_ref, bytes, lease.as_ref())),
                class(memory.put_blob(&blob_ref, bytes, None)),
            )
        }
        Op::DeleteBlob { run, name, leased } => {
            let blob_ref = format!("{}/ckpt/{name}", RUNS[*run]);
            let lease = sqlite.lease(&RunId::of_ref(&blob_ref), *leased);
            (class(sqlite.store.delete_blob(&blob_ref, lease.as_ref())), class(memory.delete_blob(&blob_ref, None)))
        }
    }
}

/// Everything a reader can observe, in one comparable value.
fn observe(store: &(impl JournalStore + TranscriptStore)) -> String {
    let mut out = String::new();
    for run in RUNS.map(RunId::from) {
        out += &format!("{run} journal {:?}\n", store.load(&run).unwrap());
        out += &format!("{run} meta {:?}\n", store.get_meta(&run).unwrap());
        for blob_ref in store.list_blobs(&run).unwrap() {
            out += &format!("{run} blob {blob_ref} {:?}\n", store.get_blob(&blob_ref).unwrap());
        }
    }
    let filters = [
        RunFilter::all(),
        RunFilter::statuses(&[RunStatus::Running, RunStatus::Suspended]),
        RunFilter { tags: vec!["nightly".to_owned()], ..RunFilter::default() },
        RunFilter { status: Some(RunStatus::Ok), statuses: Some(vec![RunStatus::Error]), ..RunFilter::default() },
    ];
    for filter in filters {
        let ids: Vec<RunId> = store.list_runs(&filter).unwrap().into_iter().map(|m| m.run_id).collect();
        out += &format!("list {filter:?} {ids:?}\n");
    }
    out
}

fn fresh_sqlite(case: u64) -> Fenced {
    let options =
        SqliteOptions::memdb(format!("model-{}-{case}", std::process::id()), Arc::new(ManualClock::new(1_000_000)));
    Fenced { store: SqliteStore::open(options).unwrap(), held: BTreeMap::new() }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 200,
        // Shrunk failures land in `store/tests/it/model.proptest-regressions`: commit it with the fix.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn sqlite_matches_the_single_writer_reference(ops in proptest::collection::vec(op(), 1..60)) {
        static CASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut sqlite = fresh_sqlite(CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let memory = MemoryStore::new();
        for (i, op) in ops.iter().enumerate() {
            let (got, want) = apply(op, &mut sqlite, &memory);
            prop_assert_eq!(got, want, "step {} {:?}: outcome differs", i, op);
        }
        prop_assert_eq!(observe(&sqlite.store), observe(&memory));
    }
}

/// The comparison can fail: a store that drops one write is told apart from the reference.
#[test]
fn observation_tells_a_lost_write_apart() {
    let sqlite = fresh_sqlite(u64::MAX);
    let memory = MemoryStore::new();
    let run = RunId::from("r0");
    memory.append(&run, &JournalEntry::new(1, "step", "ok"), None).unwrap();
    assert_ne!(observe(&sqlite.store), observe(&memory));
}
