//! The integrity scan an operator tool runs before it trusts a database's rows: SQLite's own
//! `PRAGMA quick_check`, a schema object missing, then what SQLite cannot know is wrong in
//! fencesim's tables: a journal
//! whose seqs repeat, skip or do not start at 1; an entry whose payload disagrees with its row;
//! entries of a run that has no meta row; an undecodable payload; an epoch or lease that is not
//! positive; an epoch high-water below an epoch the file records for the run (a lease row's, its
//! meta's genesis); a value of another type than its column's (text in a seq). Rows moved between
//! runs (a meta row holding another run's meta, a journal without a meta row that does not start
//! at seq 1) damage the whole file. It reads only, so it runs over a read-only store.

use std::collections::BTreeMap;
use std::fmt;

use rusqlite::Connection;

use crate::error::{Op, StoreResult};
use crate::types::{JournalEntry, RunId, RunMeta};

use super::{schema, sql_error};

/// Findings of `quick_check` reported at most (SQLite lists every damaged page).
const MAX_QUICK_CHECK: usize = 10;

/// The storage class (`typeof`) each column must hold, table by table. SQLite keeps any value in
/// any column, so a row written by another tool can hold text where fencesim reads a number.
const TYPES: [(&str, &[(&str, &str)]); 5] = [
    ("entries", &[("run_id", "text"), ("seq", "integer"), ("payload", "text")]),
    ("meta", &[("run_id", "text"), ("status", "text"), ("payload", "text")]),
    ("leases", &[("run_id", "text"), ("owner", "text"), ("epoch", "integer"), ("expires_at", "integer")]),
    ("epochs", &[("run_id", "text"), ("epoch", "integer")]),
    ("blobs", &[("run_id", "text"), ("ref", "text"), ("data", "blob")]),
];

/// One thing wrong with a database's rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntegrityFinding {
    /// The run whose rows cannot be trusted; `None` for damage to the file itself.
    pub run: Option<RunId>,
    /// One line: what is wrong, naming seqs and rows.
    pub reason: String,
}

impl fmt::Display for IntegrityFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.run {
            Some(run) => write!(f, "{run} corrupt: {}", self.reason),
            None => write!(f, "database corrupt: {}", self.reason),
        }
    }
}

impl IntegrityFinding {
    fn run(run: &str, reason: String) -> Self {
        Self { run: Some(RunId::new(run)), reason }
    }
}

/// Scan the database behind `conn`. Findings come file-level first, then by run id; at most one
/// journal finding per run (the first divergence), so a report stays readable.
pub(super) fn scan(conn: &Connection) -> StoreResult<Vec<IntegrityFinding>> {
    if let Some(file_level) = file_level(conn)? {
        // Rows read from a damaged file, or of a schema not fencesim's, prove nothing more.
        return Ok(file_level);
    }
    let (journals, firsts) = journals(conn)?;
    let mut per_run: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (run, why) in journals {
        per_run.entry(run).or_default().extend(why);
    }
    // Rows moved between runs make every run's rows suspect, the run they came from first (it
    // looks whole, short of what was moved): the file is damaged, not one run.
    let mut damaged = Vec::new();
    let orphans = strings(conn, "SELECT DISTINCT run_id FROM entries WHERE run_id NOT IN (SELECT run_id FROM meta)")?;
    for run in orphans {
        // A journal without a meta row is a crash before the first meta write (contracts 4.2,
        // R2) only when it starts at seq 1; a fragment starting later came from another run.
        if let Some((seq, id)) = firsts.get(&run).filter(|(seq, _)| *seq != 1) {
            damaged.push(format!(
                "entries of run '{run}', which has no meta row, start at seq {seq} (entry row {id}): a piece of \
                 another run's journal; no run's rows can be trusted"
            ));
        }
        per_run.entry(run).or_default().push("journal entries without a meta row".to_owned());
    }
    let genesis = metas(conn, &mut per_run, &mut damaged)?;
    for (run, why) in epochs_behind(conn, &genesis)? {
        per_run.entry(run).or_default().push(why);
    }
    for (run, why) in epochs_not_positive(conn)? {
        per_run.entry(run).or_default().push(why);
    }
    let mut found: Vec<IntegrityFinding> =
        damaged.into_iter().map(|reason| IntegrityFinding { run: None, reason }).collect();
    for (run, reasons) in per_run {
        if !reasons.is_empty() {
            found.push(IntegrityFinding::run(&run, reasons.join("; ")));
        }
    }
    Ok(found)
}

/// Findings about the file as a whole, which end the scan: `quick_check`'s complaints, schema
/// objects missing, rows of the wrong types.
fn file_level(conn: &Connection) -> StoreResult<Option<Vec<IntegrityFinding>>> {
    let sql = |e| sql_error(Op::Load, None, e);
    let mut statement = conn.prepare("PRAGMA quick_check").map_err(sql)?;
    let lines: Vec<String> =
        statement.query_map([], |r| r.get(0)).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
    if lines != ["ok"] {
        let found = lines
            .into_iter()
            .take(MAX_QUICK_CHECK)
            .map(|line| IntegrityFinding { run: None, reason: format!("quick_check: {line}") })
            .collect();
        return Ok(Some(found));
    }
    let missing: Vec<&str> = schema::OBJECTS
        .into_iter()
        .filter(|name| {
            conn.query_row("SELECT count(*) FROM sqlite_master WHERE name = ?1", [name], |r| r.get::<_, i64>(0))
                .map_or(true, |n| n == 0)
        })
        .collect();
    if !missing.is_empty() {
        let reason = format!("schema objects missing (dropped?): {}", missing.join(", "));
        return Ok(Some(vec![IntegrityFinding { run: None, reason }]));
    }
    let mistyped = mistyped(conn)?;
    // A row of the wrong types cannot be read as fencesim's; the rows' own checks wait.
    Ok((!mistyped.is_empty()).then_some(mistyped))
}

/// Each run's journal: its first divergence (an undecodable payload, a seq its payload
/// contradicts, a start other than 1, a repeat, a step back or a gap), and its first entry's
/// seq and row id.
#[allow(clippy::type_complexity, reason = "two per-run maps read in one pass over the entries")]
fn journals(conn: &Connection) -> StoreResult<(BTreeMap<String, Option<String>>, BTreeMap<String, (i64, i64)>)> {
    let sql = |e| sql_error(Op::Load, None, e);
    let mut journals: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut firsts: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let mut statement =
        conn.prepare("SELECT run_id, seq, payload, id FROM entries ORDER BY run_id, id").map_err(sql)?;
    let mut rows = statement.query([]).map_err(sql)?;
    let mut last: Option<(String, i64)> = None;
    while let Some(row) = rows.next().map_err(sql)? {
        let (run, seq, payload, id): (String, i64, String, i64) =
            (row.get(0).map_err(sql)?, row.get(1).map_err(sql)?, row.get(2).map_err(sql)?, row.get(3).map_err(sql)?);
        let prev = match &last {
            Some((prev_run, prev)) if *prev_run == run => Some(*prev),
            _ => None,
        };
        last = Some((run.clone(), seq));
        firsts.entry(run.clone()).or_insert((seq, id));
        let slot = journals.entry(run).or_default();
        if slot.is_some() {
            continue;
        }
        *slot = match (serde_json::from_str::<JournalEntry>(&payload), prev) {
            (Err(e), _) => Some(format!("entry row {id} has an undecodable payload: {e}")),
            (Ok(entry), _) if entry.seq.0 != seq => {
                Some(format!("entry row {id} is stored at seq {seq} but its payload says seq {}", entry.seq))
            }
            (Ok(_), None) if seq == 1 => None,
            (Ok(_), None) => Some(format!("journal starts at seq {seq}, not 1 (entry row {id})")),
            (Ok(_), Some(prev)) if prev.checked_add(1) == Some(seq) => None,
            (Ok(_), Some(prev)) if seq <= prev => {
                Some(format!("seq {seq} after seq {prev}: a repeat or a step back (entry row {id})"))
            }
            (Ok(_), Some(prev)) => Some(format!("seq {seq} after seq {prev}: a gap (entry row {id})")),
        };
    }
    Ok((journals, firsts))
}

/// Each meta row: an undecodable payload (a run's finding), a row that holds another run's meta
/// (the file's); the genesis epoch of every run whose genesis names one
/// (`<run>@<ms>#e<epoch>`, minted under the run's lease).
fn metas(
    conn: &Connection,
    per_run: &mut BTreeMap<String, Vec<String>>,
    damaged: &mut Vec<String>,
) -> StoreResult<BTreeMap<String, i64>> {
    let sql = |e| sql_error(Op::Load, None, e);
    let mut genesis: BTreeMap<String, i64> = BTreeMap::new();
    let mut statement = conn.prepare("SELECT run_id, payload FROM meta ORDER BY run_id").map_err(sql)?;
    let metas: Vec<(String, String)> =
        statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
    for (run, payload) in metas {
        match serde_json::from_str::<RunMeta>(&payload) {
            Err(e) => per_run.entry(run).or_default().push(format!("meta has an undecodable payload: {e}")),
            Ok(meta) if meta.run_id.as_str() != run => damaged.push(format!(
                "the meta row of run '{run}' holds the meta of run '{}': a row moved between runs; no run's rows \
                 can be trusted",
                meta.run_id
            )),
            Ok(meta) => {
                if let Some(epoch) = meta.genesis.as_deref().and_then(genesis_epoch) {
                    genesis.insert(run, epoch);
                }
            }
        }
    }
    Ok(genesis)
}

/// Epoch and lease rows whose epoch is not positive (epochs start at 1).
fn epochs_not_positive(conn: &Connection) -> StoreResult<Vec<(String, String)>> {
    let sql = |e| sql_error(Op::Load, None, e);
    let mut found = Vec::new();
    for (table, sql_text) in [
        ("epochs", "SELECT run_id, epoch FROM epochs WHERE epoch < 1 ORDER BY run_id"),
        ("leases", "SELECT run_id, epoch FROM leases WHERE epoch < 1 ORDER BY run_id"),
    ] {
        let mut statement = conn.prepare(sql_text).map_err(sql)?;
        let bad: Vec<(String, i64)> = statement
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        found.extend(
            bad.into_iter().map(|(run, epoch)| (run, format!("{table} holds epoch {epoch}, which is not positive"))),
        );
    }
    Ok(found)
}

/// Rows holding a value of another storage class than their column's ([`TYPES`]), one finding
/// per run and table (the first such column). A run id that is not text names no run fencesim
/// could list: the file is damaged.
fn mistyped(conn: &Connection) -> StoreResult<Vec<IntegrityFinding>> {
    let sql = |e| sql_error(Op::Load, None, e);
    let mut found = Vec::new();
    let mut per_run: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (table, columns) in TYPES {
        for (column, class) in columns {
            // Names from the constant above, never from the file.
            let text = format!(
                "SELECT CAST(run_id AS TEXT), typeof(run_id), typeof({column}) FROM {table} \
                 WHERE typeof({column}) != '{class}' GROUP BY run_id ORDER BY run_id"
            );
            let mut statement = conn.prepare(&text).map_err(sql)?;
            let rows: Vec<(Option<String>, String, String)> = statement
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(sql)?
                .collect::<Result<_, _>>()
                .map_err(sql)?;
            for (run, run_class, got) in rows {
                let reason = format!("{table}.{column} holds a {got} value, not {class}");
                match run {
                    Some(run) if run_class == "text" => per_run.entry(run).or_default().push(reason),
                    _ => found.push(IntegrityFinding { run: None, reason }),
                }
            }
        }
    }
    found.extend(per_run.into_iter().map(|(run, reasons)| IntegrityFinding::run(&run, reasons.join("; "))));
    Ok(found)
}

/// The epoch a genesis was minted at: `<run>@<ms>#e<epoch>` (an unleased run's `#<n>` names none).
fn genesis_epoch(genesis: &str) -> Option<i64> {
    genesis.rsplit_once("#e").and_then(|(_, epoch)| epoch.parse().ok())
}

/// Runs whose epoch high-water (the `epochs` row an acquire adds one to) is below an epoch the
/// file records for them elsewhere: a lease row's, or the genesis of their meta. A repair's
/// acquire would grant that epoch, or one below it, again (contracts L4): such a run's rows are
/// not trusted.
fn epochs_behind(conn: &Connection, genesis: &BTreeMap<String, i64>) -> StoreResult<Vec<(String, String)>> {
    let sql = |e| sql_error(Op::Load, None, e);
    let mut statement = conn.prepare("SELECT run_id, epoch FROM epochs").map_err(sql)?;
    let high: BTreeMap<String, i64> =
        statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
    let mut statement = conn.prepare("SELECT run_id, epoch FROM leases ORDER BY run_id").map_err(sql)?;
    let leases: Vec<(String, i64)> =
        statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
    let recorded = leases
        .iter()
        .map(|(run, epoch)| (run, *epoch, "its lease row"))
        .chain(genesis.iter().map(|(run, epoch)| (run, *epoch, "its meta's genesis")));
    let mut found = Vec::new();
    for (run, epoch, source) in recorded {
        let water = high.get(run).copied();
        if water.is_none_or(|w| w < epoch) {
            let water = water.map_or("no epochs row".to_owned(), |w| format!("the epochs row's {w}"));
            found.push((
                run.clone(),
                format!("{source} records epoch {epoch}, above the run's epoch high-water ({water}): an acquire would grant a used epoch"),
            ));
        }
    }
    Ok(found)
}

fn strings(conn: &Connection, sql_text: &str) -> StoreResult<Vec<String>> {
    let sql = |e| sql_error(Op::Load, None, e);
    let mut statement = conn.prepare(sql_text).map_err(sql)?;
    let values = statement.query_map([], |r| r.get(0)).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
    Ok(values)
}
