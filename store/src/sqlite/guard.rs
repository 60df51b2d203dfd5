//! Writes an operator's tool makes to a user's file, and what proves they lost nothing: a write
//! transaction that holds the schema to exactly fencesim's under the write lock before anything
//! is written, in which the store's own calls nest (each still all or nothing, by a savepoint),
//! and a digest of every journal row (count and hash) to compare before and after.

use std::fmt;
use std::hash::{DefaultHasher, Hasher as _};

use rusqlite::types::ValueRef;

use super::{SqliteStore, Txn, schema, sql_error};
use crate::error::{Op, StoreError, StoreResult};
use crate::types::RunId;

/// Every row of the journal (`entries`, all runs), counted and hashed in row id order: id, run,
/// seq and payload, each with its storage class and length, so any row added, dropped, moved or
/// rewritten changes it. The hash is two lanes of the standard library's SipHash-1-3 with fixed
/// keys (`DefaultHasher::new`, compiled optimised even into a debug build): a digest is compared
/// only with another taken by the same process, so the algorithm may change between Rust
/// releases without harm. A check against accidents and bugs, not against an adversary who can
/// write the file anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JournalDigest {
    pub rows: u64,
    pub hash: u128,
}

impl fmt::Display for JournalDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rows hash {:032x}", self.rows, self.hash)
    }
}

/// Two independent lanes (each keyed by a distinct first byte) of one encoding.
struct Lanes([DefaultHasher; 2]);

impl Lanes {
    fn new() -> Self {
        let mut lanes = [DefaultHasher::new(), DefaultHasher::new()];
        for (i, lane) in lanes.iter_mut().enumerate() {
            lane.write_u8(u8::try_from(i).unwrap_or(u8::MAX));
        }
        Lanes(lanes)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for lane in &mut self.0 {
            lane.write(bytes);
        }
    }

    /// One column: its storage class, then its length and bytes (a number's 8 bytes).
    fn value(&mut self, value: ValueRef<'_>) {
        let (class, number, bytes): (u8, [u8; 8], &[u8]) = match value {
            ValueRef::Null => (0, [0; 8], &[]),
            ValueRef::Integer(i) => (1, i.to_le_bytes(), &[]),
            ValueRef::Real(r) => (2, r.to_bits().to_le_bytes(), &[]),
            ValueRef::Text(t) => (3, [0; 8], t),
            ValueRef::Blob(b) => (4, [0; 8], b),
        };
        self.bytes(&[class]);
        self.bytes(&number);
        self.bytes(&(bytes.len() as u64).to_le_bytes());
        self.bytes(bytes);
    }

    fn finish(&self) -> u128 {
        (u128::from(self.0[0].finish()) << 64) | u128::from(self.0[1].finish())
    }
}

impl SqliteStore {
    /// The digest of every journal row, read on this store's connection (inside the caller's
    /// transaction, if one is open, so it sees what that transaction wrote).
    pub fn journal_digest(&self) -> StoreResult<JournalDigest> {
        let sql = |e| sql_error(Op::Load, None, e);
        let mut statement =
            self.conn.prepare_cached("SELECT id, run_id, seq, payload FROM entries ORDER BY id").map_err(sql)?;
        let mut rows = statement.query([]).map_err(sql)?;
        let mut lanes = Lanes::new();
        let mut count: u64 = 0;
        while let Some(row) = rows.next().map_err(sql)? {
            count += 1;
            for i in 0..4 {
                lanes.value(row.get_ref(i).map_err(sql)?);
            }
        }
        Ok(JournalDigest { rows: count, hash: lanes.finish() })
    }

    /// Whether this database's schema is exactly fencesim's now ([`schema::judge`]: every row of
    /// `sqlite_schema` by type, name, table and definition, none missing). A storage error of
    /// `op` naming the difference otherwise.
    pub fn verify_schema(&self, op: Op) -> StoreResult<()> {
        let (app_id, version, rows) = schema::catalog(&self.conn).map_err(|e| sql_error(op, None, e))?;
        let refused = |why: String| Err(StoreError::storage(op, format!("{why} location={}", self.location)));
        match schema::judge(app_id, version, &rows) {
            Ok(schema::Standing::Whole) => Ok(()),
            Ok(schema::Standing::Blank) => refused("not a fencesim database: it has no fencesim schema".to_owned()),
            Ok(schema::Standing::Partial { present, total }) => {
                refused(schema::Mismatch::Half { present, total }.to_string())
            }
            Err(mismatch) => refused(mismatch.to_string()),
        }
    }

    /// Run `body` as one write transaction: `BEGIN IMMEDIATE` (the write lock, before anything is
    /// read), then the schema held to exactly fencesim's ([`Self::verify_schema`]: nothing can
    /// have added a trigger since the open, and nothing can until the commit), then `body`, whose
    /// calls of this store nest, each still all or nothing (a savepoint). It commits only when
    /// `body` returns `Ok`; an error, or a panic, rolls back everything `body` did. For an
    /// operator's tool: it is not a fenced call, and the store's calls inside it keep their fences.
    pub fn write_transaction<T, E: From<StoreError>>(
        &self,
        op: Op,
        run: &RunId,
        body: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        if self.outer.get() || !self.conn.is_autocommit() {
            return Err(StoreError::storage(op, format!("a write transaction is already open run={run}")).into());
        }
        self.exec(op, run, "BEGIN IMMEDIATE", [])?;
        // The calls of `body` nest as savepoints of this transaction, which holds the write lock.
        assert!(!self.conn.is_autocommit(), "{op:?} of {run}: the write transaction did not begin");
        let _txn = Txn::top(&self.conn);
        self.outer.set(true);
        // Declared after the transaction's guard, so dropped before it: the flag is down before
        // a rollback, whatever ends the body.
        let _nested = Nesting(&self.outer);
        self.verify_schema(op)?;
        let value = body()?;
        self.outer.set(false);
        self.exec(op, run, "COMMIT", [])?;
        // Committed whole: the connection is back outside any transaction, its calls unnested.
        assert!(
            self.conn.is_autocommit() && !self.outer.get(),
            "{op:?} of {run}: the write transaction is still open after its COMMIT"
        );
        Ok(value)
    }
}

/// Lowers the store's "inside a write transaction" flag when dropped.
struct Nesting<'a>(&'a std::cell::Cell<bool>);

impl Drop for Nesting<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;
    use crate::spi::{JournalStore as _, LeasableStore as _};
    use crate::types::{JournalEntry, RunMeta, RunStatus};
    use crate::{SqliteOptions, SqliteStore};

    fn store(name: &str) -> SqliteStore {
        SqliteStore::open(SqliteOptions::memdb(name, Arc::new(ManualClock::new(1_000)))).expect("opens")
    }

    fn seeded(name: &str) -> SqliteStore {
        let store = store(name);
        for run in ["a", "b"] {
            for seq in 1..=3 {
                store.append(&RunId::new(run), &JournalEntry::new(seq, "step", "ok"), None).expect("append");
            }
            store.put_meta(&RunMeta::new(run, RunStatus::Running), None).expect("meta");
        }
        store
    }

    /// Every table's rows, in order, as text: what a rolled-back transaction must leave as it was.
    fn dump(store: &SqliteStore) -> Vec<String> {
        let mut all = Vec::new();
        for table in crate::sqlite::TABLES {
            let mut statement = store.raw_connection().prepare(&format!("SELECT * FROM {table}")).expect("dump");
            let columns = statement.column_count();
            let mut rows = statement.query([]).expect("rows");
            while let Some(row) = rows.next().expect("row") {
                let values: Vec<String> =
                    (0..columns).map(|i| format!("{:?}", row.get_ref(i).expect("value"))).collect();
                all.push(format!("{table} {}", values.join(" ")));
            }
        }
        all.sort();
        all
    }

    /// The digest counts every row and changes with any change to one: dropped, rewritten in
    /// place (same count), a seq stored as text, a row id changed, moved to another run; a meta write leaves it.
    #[test]
    fn the_digest_sees_any_change_to_any_journal_row() {
        let store = seeded("digest");
        let base = store.journal_digest().expect("digest");
        assert_eq!(base.rows, 6);
        store.put_meta(&RunMeta::new("a", RunStatus::Ok), None).expect("meta");
        assert_eq!(store.journal_digest().expect("digest"), base, "a meta write is not a journal change");
        let changes = [
            "DELETE FROM entries WHERE id = 6",
            "UPDATE entries SET payload = payload || ' ' WHERE id = 2",
            "UPDATE entries SET seq = 'two' WHERE id = 2",
            "UPDATE entries SET run_id = 'b' WHERE id = 1",
            "UPDATE entries SET id = 60 WHERE id = 6",
        ];
        for sql in changes {
            let conn = store.raw_connection();
            conn.execute_batch("SAVEPOINT t").expect("savepoint");
            conn.execute_batch(sql).expect(sql);
            let changed = store.journal_digest().expect("digest");
            conn.execute_batch("ROLLBACK TO t; RELEASE t").expect("rollback");
            assert_ne!(changed, base, "{sql}");
            assert_eq!(store.journal_digest().expect("digest"), base, "{sql}: rolled back");
        }
    }

    /// A write transaction commits what its body did only on `Ok`: an error rolls back every
    /// call in it, an acquire's epoch bump included; a call that fails inside it is undone alone
    /// (its savepoint) and the transaction goes on; a second one cannot open inside it.
    #[test]
    fn a_write_transaction_commits_whole_or_not_at_all() {
        let store = seeded("write-transaction");
        let run = RunId::new("a");
        let before = dump(&store);
        let failed: Result<(), StoreError> = store.write_transaction(Op::PutMeta, &run, || {
            let lease = store.acquire(&run, "op")?;
            store.put_meta(&RunMeta::new("a", RunStatus::Ok), Some(&lease))?;
            Err(StoreError::storage(Op::PutMeta, "the body failed"))
        });
        assert!(failed.is_err());
        assert_eq!(dump(&store), before, "a failed body left something behind");
        assert!(store.raw_connection().is_autocommit());

        let done: Result<_, StoreError> = store.write_transaction(Op::PutMeta, &run, || {
            let lease = store.acquire(&run, "op")?;
            let refused = store.append(&run, &JournalEntry::new(2, "step", "again"), Some(&lease));
            assert!(refused.is_err_and(|e| e.is_journal_order()), "the seq guard holds inside");
            let held = store.acquire(&run, "other");
            assert!(held.is_err_and(|e| e.is_lease_held()), "the lease holds inside");
            let nested = store.write_transaction(Op::PutMeta, &run, || Ok::<_, StoreError>(()));
            assert!(nested.is_err(), "a write transaction inside one");
            store.put_meta(&RunMeta::new("a", RunStatus::Ok), Some(&lease))?;
            store.release(&lease)?;
            Ok(lease)
        });
        let lease = done.expect("committed");
        assert_eq!(store.get_meta(&run).expect("meta").expect("meta").status, RunStatus::Ok);
        assert_eq!(store.load(&run).expect("load").len(), 3);
        let epoch: i64 = store
            .raw_connection()
            .query_row("SELECT epoch FROM epochs WHERE run_id = 'a'", [], |r| r.get(0))
            .expect("epoch");
        assert_eq!(epoch, lease.epoch.0, "only the committed acquire bumped the epoch");
        // The store's calls still make their own transactions afterwards.
        store.append(&run, &JournalEntry::new(4, "step", "ok"), None).expect("append");
        assert!(store.raw_connection().is_autocommit());
    }

    /// The schema is judged again under the write lock: a trigger added after the open (here by
    /// another connection) stops the transaction before its body runs, and nothing is written.
    #[test]
    fn a_write_transaction_refuses_a_schema_changed_since_the_open() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("guard.db");
        let clock = Arc::new(ManualClock::new(1_000));
        let store = SqliteStore::open(SqliteOptions::file(&path, clock)).expect("opens");
        let run = RunId::new("a");
        store.append(&run, &JournalEntry::new(1, "step", "ok"), None).expect("append");
        store.put_meta(&RunMeta::new("a", RunStatus::Running), None).expect("meta");
        let other = rusqlite::Connection::open(&path).expect("other");
        other
            .execute_batch(
                "DROP INDEX meta_status; CREATE TRIGGER meta_status AFTER UPDATE ON meta BEGIN DELETE FROM entries; END;",
            )
            .expect("trigger");
        let before = dump(&store);
        let mut ran = false;
        let refused = store.write_transaction(Op::PutMeta, &run, || {
            ran = true;
            store.put_meta(&RunMeta::new("a", RunStatus::Ok), None)
        });
        let e = refused.expect_err("refused");
        assert!(
            e.to_string().contains("it has a trigger 'meta_status' where fencesim creates the index of that name"),
            "{e}"
        );
        assert!(!ran, "the body ran over a schema that is not fencesim's");
        assert_eq!(dump(&store), before);
        assert!(store.verify_schema(Op::PutMeta).is_err());
    }
}
