//! The store-level soak: real OS processes (re-executed `fencesim soak-writer`s) storm one SQLite
//! WAL file under lease fencing while a referee (the parent process) injects real faults
//! (`SIGKILL`, `SIGSTOP`/`SIGCONT`, per-writer clock skew); the writers' JSON-line logs are then
//! merged into one history in serialization order and judged by the simulator's oracle plus the
//! soak's own checks, gated by an activity quorum.
//!
//! Files: `wall` (the only real-time code: wall clock, monotonic stamps, sleeps), `log` (the
//! line format, the one-`write(2)`-per-line appender and the tolerant reader), `writer` (the
//! stamp clock, the recording store and the writer protocol), `quorum` (activity counters and
//! gates), `judge` (logs to rows, the oracle and the soak checks), `referee` (the storm: spawn,
//! faults, stop, reap, measure), `report` (soak.json and junit.xml, written atomically), `seal`
//! (every log a hash chain, and the manifest that makes a kept folder tamper-evident), `engine`
//! (the engine level).
//!
//! The binary's side: `sim/cli/src/cli/soak.rs` holds the flags and the hidden `soak-writer`
//! child and writes `soak.json` and `junit.xml` atomically (the JUnit built by
//! `sim/cli/src/report.rs`); the engine level's children (`soak-engine-worker`,
//! `soak-engine-client`) are in `sim/cli/src/cli/soak_engine_children.rs`. Both levels keep their
//! temporary folder in the binary's process root ([`crate::proc::janitor`]), whose janitor removes
//! it when the referee dies, from a process group of its own.
//!
//! The OS scheduler is not deterministic: one seed fixes every writer's choices and the referee's
//! fault draws, not the interleaving (nor, so, when and whom a drawn fault hits).

use std::path::PathBuf;

pub mod engine;
pub mod judge;
pub mod log;
pub mod quorum;
pub mod referee;
pub mod report;
pub mod seal;
pub mod wall;
pub mod writer;

/// What a soak of either level concluded. A violation fails it whatever the quorum did; without
/// one, a storm that ended below a floor proved too little to pass and is inconclusive (exit 3),
/// which a release manager re-runs longer or on a quieter machine, never counts as a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SoakVerdict {
    Pass,
    Fail,
    Inconclusive,
}

impl SoakVerdict {
    pub fn of(violations: usize, short: &[(String, u64, u64)]) -> Self {
        match (violations, short.is_empty()) {
            (0, true) => Self::Pass,
            (0, false) => Self::Inconclusive,
            _ => Self::Fail,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Inconclusive => "inconclusive",
        }
    }
}

/// `epochs 480 of 500 (20 short)`: the floors a storm fell short of, and by how much.
pub fn shortfall(short: &[(String, u64, u64)]) -> String {
    // `Quorum::short` lists only counters below their floor: what is missing is positive.
    assert!(short.iter().all(|(_, have, need)| have < need), "a shortfall of a floor that was met");
    let parts: Vec<String> =
        short.iter().map(|(k, have, need)| format!("{k} {have} of {need} ({} short)", need - have)).collect();
    parts.join(", ")
}

/// The run every writer contends for.
pub const RUN: &str = "soak-run";
/// The side run a live cross-run probe targets; it must stay untouched.
pub const OTHER: &str = "soak-other";
/// The blob a cross-run probe writes.
pub const OTHER_BLOB: &str = "soak-other/blob";
/// Inside a soak folder: the database, the stop file, the referee's record.
pub const DB_FILE: &str = "soak.db";
pub const STOP_FILE: &str = "soak-stop";
/// Inside a soak folder: a store adapter's location, instead of the database.
pub const ADAPTER_DIR: &str = "adapter-store";
pub const META_FILE: &str = "soak-meta.json";
/// The most writer processes (queue workers at the engine level) a soak starts: each is a real
/// process contending for one write lock, and the first generation boots staggered by 20 ms each.
pub const MAX_WRITERS: usize = 64;
/// The widest clock skew a writer may get (`--skew-ms`): one hour, far past any lease ttl a
/// storm uses, and far from the wrap-around of a skewed wall clock.
pub const MAX_SKEW_MS: i64 = 3_600_000;

/// `value` if it lies in `range`, else a message naming `what`, the range and the value.
pub fn within<T: PartialOrd + std::fmt::Display>(
    what: &str,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, String> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(format!("{what} must be in {}..={}, got {value}", range.start(), range.end()))
    }
}

/// The log file of writer `index`, generation `generation`.
pub fn log_name(index: usize, generation: u32) -> String {
    format!("writer-w{index}-g{generation}.jsonl")
}

/// The owner name of writer `index`, generation `generation` (a restart is a new owner).
pub fn owner_name(index: usize, generation: u32) -> String {
    format!("soak-w{index}-g{generation}")
}

/// A soak harness error: never a pass (exit 2). A variant's message leaves its cause to
/// [`std::error::Error::source`], so a printed chain names each cause once.
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error("io: {what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] fencesim_store::StoreError),
    /// The store adapter failed the protocol: the storm proves nothing about its store.
    #[error(transparent)]
    Adapter(#[from] fencesim_protocol::AdapterError),
    #[error("sqlite: {what}")]
    Sqlite {
        what: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("os: {what}")]
    Os {
        what: String,
        #[source]
        source: nix::Error,
    },
    #[error("json: {what}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("usage: {0}")]
    Usage(String),
    #[error("interrupted by {0}")]
    Interrupted(String),
    #[error("writer protocol: {0}")]
    Protocol(String),
    /// A complete log line that does not parse: only a log's unterminated last line (a writer
    /// killed mid-write) may be cut, so anything else is a damaged or tampered log.
    #[error("{path}:{line}: not a log line")]
    Malformed {
        path: String,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    /// A kept soak whose record (`soak-meta.json`) or files do not describe a storm the referee
    /// could have left.
    #[error("invalid soak record: {0}")]
    Record(String),
    /// A kept soak folder that does not verify against its manifest (`seal`): one line naming
    /// the file, and the line of a log.
    #[error(transparent)]
    Seal(#[from] seal::SealError),
}

impl SoakError {
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SoakError {
        let what = what.into();
        move |source| SoakError::Io { what, source }
    }

    pub fn os(what: impl Into<String>) -> impl FnOnce(nix::Error) -> SoakError {
        let what = what.into();
        move |source| SoakError::Os { what, source }
    }

    pub fn sqlite(what: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> SoakError {
        let what = what.into();
        move |source| SoakError::Sqlite { what, source }
    }

    pub fn json(what: impl Into<String>) -> impl FnOnce(serde_json::Error) -> SoakError {
        let what = what.into();
        move |source| SoakError::Json { what, source }
    }
}

pub type SoakResult<T> = Result<T, SoakError>;

/// Paths inside one soak folder.
#[derive(Clone, Debug)]
pub struct Layout {
    pub dir: PathBuf,
}

impl Layout {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn db(&self) -> PathBuf {
        self.dir.join(DB_FILE)
    }

    /// A store adapter's location (`--store cmd:...`): a folder its writers share.
    pub fn adapter_dir(&self) -> PathBuf {
        self.dir.join(ADAPTER_DIR)
    }

    pub fn wal(&self) -> PathBuf {
        self.dir.join(format!("{DB_FILE}-wal"))
    }

    pub fn stop(&self) -> PathBuf {
        self.dir.join(STOP_FILE)
    }

    pub fn meta(&self) -> PathBuf {
        self.dir.join(META_FILE)
    }

    pub fn log(&self, index: usize, generation: u32) -> PathBuf {
        self.dir.join(log_name(index, generation))
    }

    pub fn stderr(&self, index: usize, generation: u32) -> PathBuf {
        self.dir.join(format!("writer-w{index}-g{generation}.stderr"))
    }
}

/// Write `bytes` to `path` atomically.
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> SoakResult<()> {
    fencesim_sim::files::write_atomic(path, bytes, true).map_err(|e| SoakError::Io {
        what: format!("cannot write {}", path.display()),
        source: std::io::Error::other(e.message),
    })?;
    if let Ok(d) = std::fs::File::open(fencesim_sim::files::parent(path)) {
        let _ = d.sync_all();
    }
    Ok(())
}
