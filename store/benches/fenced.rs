//! Fenced write throughput against a plain insert on the same connection.
//!
//! For memdb and for a WAL file, measures transactions per second of a fenced append, a fenced
//! put_meta and a fenced blob put (each `BEGIN IMMEDIATE`, lease check, mutation, `COMMIT`),
//! and of the baseline: a plain single-INSERT transaction of the same payload on the same
//! connection. Rounds alternate between the four so machine noise hits all alike; the report
//! is the median rate of each and its ratio to the baseline's median.
//!
//!     cargo bench -p fencesim-store --bench fenced [-- --rounds 9 --ops 2000]
//!
//! Goal (issue 2): fenced append at least 0.5x the plain insert on memdb.

// A benchmark measures wall-clock time; the store's determinism bans do not apply here.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Instant;

use fencesim_store::{
    JournalEntry, JournalStore, LeasableStore, ManualClock, RunId, RunMeta, RunStatus, SqliteOptions, SqliteStore,
    TranscriptStore,
};
use serde_json::json;

struct Bench {
    store: SqliteStore,
    run: RunId,
    lease: fencesim_store::Lease,
    payload: String,
    next_seq: i64,
}

impl Bench {
    fn new(options: SqliteOptions) -> Self {
        let store = SqliteStore::open(options).expect("open");
        store
            .raw_connection()
            .execute_batch(
                "CREATE TABLE bench_plain (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, seq INTEGER NOT NULL, payload TEXT NOT NULL);
                 CREATE INDEX bench_plain_run_seq ON bench_plain (run_id, seq);",
            )
            .expect("baseline table");
        let run = RunId::from("bench-run");
        let lease = store.acquire(&run, "bench").expect("acquire");
        let payload = serde_json::to_string(&entry(0)).expect("encode");
        Self { store, run, lease, payload, next_seq: 1 }
    }

    /// What an unfenced journal store does: encode the entry, insert it in its own transaction
    /// into a table of the same shape as `entries`.
    fn plain_insert(&mut self) {
        let payload = serde_json::to_string(&entry(self.next_seq)).expect("encode");
        let conn = self.store.raw_connection();
        conn.prepare_cached("BEGIN IMMEDIATE").unwrap().execute([]).unwrap();
        conn.prepare_cached("INSERT INTO bench_plain (run_id, seq, payload) VALUES (?1, ?2, ?3)")
            .unwrap()
            .execute(rusqlite::params![self.run.as_str(), self.next_seq, payload])
            .unwrap();
        conn.prepare_cached("COMMIT").unwrap().execute([]).unwrap();
        self.next_seq += 1;
    }

    fn fenced_append(&mut self) {
        self.store.append(&self.run, &entry(self.next_seq), Some(&self.lease)).expect("append");
        self.next_seq += 1;
    }

    fn fenced_put_meta(&mut self) {
        let meta = RunMeta::new(self.run.clone(), RunStatus::Running).with_segments((self.next_seq % 7) as u32);
        self.store.put_meta(&meta, Some(&self.lease)).expect("put_meta");
        self.next_seq += 1;
    }

    fn fenced_blob_put(&mut self) {
        // Overwrite in place with new bytes each time: SQLite skips rewriting an identical cell.
        let blob_ref = format!("bench-run/ckpt/{}", self.next_seq % 16);
        let mut bytes = self.payload.clone().into_bytes();
        bytes.extend_from_slice(&self.next_seq.to_le_bytes());
        self.store.put_blob(&blob_ref, &bytes, Some(&self.lease)).expect("blob put");
        self.next_seq += 1;
    }
}

fn entry(seq: i64) -> JournalEntry {
    JournalEntry::new(seq, "agent", "ok")
        .with("scope", json!("root"))
        .with("key", json!("k-0123456789abcdef"))
        .with("value", json!({"text": "a reply of a typical turn, a few dozen bytes long", "tokens": 321}))
}

const KINDS: [&str; 4] = ["plain insert", "fenced append", "fenced put_meta", "fenced blob put"];

fn rate(bench: &mut Bench, kind: usize, ops: u32) -> f64 {
    let start = Instant::now();
    for _ in 0..ops {
        match kind {
            0 => bench.plain_insert(),
            1 => bench.fenced_append(),
            2 => bench.fenced_put_meta(),
            _ => bench.fenced_blob_put(),
        }
    }
    f64::from(ops) / start.elapsed().as_secs_f64()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn measure(label: &str, options: SqliteOptions, rounds: u32, ops: u32) {
    let mut bench = Bench::new(options);
    for kind in 0..KINDS.len() {
        rate(&mut bench, kind, ops / 10 + 1); // warm the statement cache and the page cache
    }
    let mut rates = vec![Vec::new(); KINDS.len()];
    for round in 0..rounds {
        for i in 0..KINDS.len() {
            let kind = (i + round as usize) % KINDS.len();
            rates[kind].push(rate(&mut bench, kind, ops));
        }
    }
    let medians: Vec<f64> = rates.into_iter().map(median).collect();
    println!("{label} ({rounds} rounds x {ops} transactions, medians)");
    for (kind, m) in KINDS.iter().zip(&medians) {
        println!("  {kind:<16} {m:>10.0} tx/s  {:>5.2}x plain", m / medians[0]);
    }
}

fn arg(name: &str, default: u32) -> u32 {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let rounds = arg("--rounds", 9);
    let ops = arg("--ops", 2000);
    let clock = Arc::new(ManualClock::new(1_000_000));
    measure("memdb", SqliteOptions::memdb(format!("bench-{}", std::process::id()), clock.clone()), rounds, ops);
    let dir = tempfile::tempdir().expect("temporary folder");
    measure("wal file", SqliteOptions::file(dir.path().join("bench.db"), clock), rounds, ops / 10);
}
