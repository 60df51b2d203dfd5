//! `fencesim boot`: construct a SqliteStore over a database file and exit. It is the child of the
//! concurrent-boot check (B2: many processes booting one fresh file at once), and a
//! way to create or validate a database by hand. Bad input (an invalid ttl, a missing folder, a
//! file that is not a SQLite database, someone else's database) exits 2 and writes nothing.
//! Started by `conformance`, it dies with its parent (`fencesim_protocol::die_with_parent`: the
//! kernel's parent-death signal, set before `exec`, and an exit if the parent is already gone).
//!
//! With `--store cmd:COMMAND --location DIR` it is the child of B2 against a store adapter: it
//! starts an adapter process of its own and shakes hands first, then waits (for `--start-at-ms`, or
//! with `--start-on-ready` for the kit's barrier: `ready` on stdout, then the end of stdin), opens
//! a connection over the location and lists its runs through it (a store that bootstraps its
//! schema lazily does it there), as a second process of an application would start its store.
//! The open must succeed (a `busy` open is the race's failure: B2 has the store serialize its own
//! boot); a `busy` answer to the read is retried, as any caller retries it at run time. As the
//! kit's racer (`--start-on-ready`) a store's failure exits 1 naming it, and anything else
//! (the adapter's own failure included) exits 2, so the kit never takes one for the other; by
//! hand every failure exits 2.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use fencesim_store::real_time::{sleep_ms, unix_ms};
use fencesim_store::sqlite::TABLES;
use fencesim_store::{
    JournalStore, LEASE_TTL_MS_DEFAULT, RunFilter, SqliteOptions, SqliteStore, StoreDefect, StoreDefects, SystemClock,
};

use super::out::{errln, outln};
use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The database file; its folder must exist.
    #[arg(long, required_unless_present = "adapter", conflicts_with = "adapter")]
    db: Option<PathBuf>,
    /// Open the location through this store adapter (cmd:COMMAND) instead: a process of its own.
    #[arg(long = "store", value_name = "cmd:COMMAND", value_parser = super::parse_adapter, requires = "location")]
    adapter: Option<fencesim_protocol::Spec>,
    /// The adapter's location (a folder that exists), with --store.
    #[arg(long, requires = "adapter")]
    location: Option<PathBuf>,
    #[command(flatten)]
    timeout: super::AdapterArgs,
    /// Lease ttl in milliseconds, 1..=2147483647.
    #[arg(long, default_value_t = i64::from(LEASE_TTL_MS_DEFAULT), allow_hyphen_values = true)]
    ttl_ms: i64,
    /// Wait until this wall-clock instant (Unix milliseconds, at most a minute ahead) before
    /// opening, so that many processes open at once.
    #[arg(long)]
    start_at_ms: Option<i64>,
    /// Say `ready` on stdout once set up (with --store: the adapter started and shaken hands
    /// with), then open at the end of stdin: the kit's boot race (B2) releases every process at
    /// once from this readiness barrier.
    #[arg(long, conflicts_with = "start_at_ms")]
    start_on_ready: bool,
    /// Plant a store defect (repeatable); only `no-boot-retry` acts at boot.
    #[arg(long = "defect", value_name = "NAME", value_parser = super::parse_defect)]
    defects: Vec<StoreDefect>,
}

/// The longest `--start-at-ms` may make a boot wait.
const MAX_WAIT_MS: i64 = 60_000;

/// How long an adapter's first read after its open may keep answering `busy` before the boot
/// fails: the bound fencesim's own store gives its boot retry, doubled.
const ADAPTER_BUSY_MS: i64 = 10_000;

pub fn run(args: &Args) -> CmdResult {
    args.timeout.check(args.adapter.is_some())?;
    if let (Some(spec), Some(location)) = (&args.adapter, &args.location) {
        return boot_adapter(args, &args.timeout.apply(spec.clone()), location);
    }
    let db = args.db.as_ref().context("--db is required")?;
    barrier(args.start_on_ready)?;
    wait_for(args.start_at_ms)?;
    let options = SqliteOptions::file(db, Arc::new(SystemClock))
        .lease_ttl_ms(args.ttl_ms)
        .defects(StoreDefects::of(&args.defects));
    let store = match SqliteStore::open(options) {
        Ok(store) => store,
        Err(e) => return store_failed(args.start_on_ready, format!("cannot open the store: {e}")),
    };
    let names = TABLES.map(|t| format!("'{t}'")).join(", ");
    let tables: i64 = store
        .raw_connection()
        .query_row(&format!("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ({names})"), [], |r| {
            r.get(0)
        })
        .context("cannot read the schema")?;
    if tables != TABLES.len() as i64 {
        let tables = format!("schema incomplete after boot: {tables} of {} tables", TABLES.len());
        return store_failed(args.start_on_ready, tables);
    }
    outln!("booted location={} tables={tables}", db.display());
    Ok(Verdict::Pass)
}

/// The store failed the boot: as one of the kit's racers (`--start-on-ready`), that is the store's
/// answer, exit 1 with the reason on stderr (a harness or adapter failure stays exit 2, which the
/// kit reports as such, never as the store's); by hand, an error (exit 2).
fn store_failed(racer: bool, message: String) -> CmdResult {
    if racer {
        errln!("fencesim: the store failed the concurrent boot: {message}");
        Ok(Verdict::Fail)
    } else {
        Err(anyhow::anyhow!(message))
    }
}

/// With `--start-on-ready`: say `ready`, then wait for the end of stdin (the kit closes every
/// racer's stdin at once when all have said it).
fn barrier(on: bool) -> anyhow::Result<()> {
    if on {
        outln!("ready");
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new())
            .context("cannot read the barrier on stdin")?;
    }
    Ok(())
}

/// Wait until the wall clock reaches `start_at` (Unix ms), at most a minute.
fn wait_for(start_at: Option<i64>) -> anyhow::Result<()> {
    if let Some(start_at) = start_at {
        let wait = start_at.saturating_sub(unix_ms());
        anyhow::ensure!(wait <= MAX_WAIT_MS, "--start-at-ms {start_at} is more than a minute ahead of now");
        if wait > 0 {
            sleep_ms(wait.unsigned_abs());
        }
    }
    Ok(())
}

/// B2 through a store adapter: start it, wait for the instant, open the location (which must
/// succeed: `busy` included, a failed open is the race's failure, as the store serializes its own
/// boot) and list its runs, retrying `busy` there (a store that bootstraps on first use may queue
/// behind another process's bootstrap; any other error is the race's failure).
fn boot_adapter(args: &Args, spec: &fencesim_protocol::Spec, location: &Path) -> CmdResult {
    anyhow::ensure!(location.is_dir(), "--location {} is not a folder", location.display());
    let adapter = fencesim_protocol::Adapter::start(spec)?;
    barrier(args.start_on_ready)?;
    wait_for(args.start_at_ms)?;
    let opened = adapter.open(location, args.ttl_ms, Arc::new(SystemClock));
    if let Some(broken) = adapter.broken() {
        return Err(broken.into());
    }
    let store = match opened {
        Ok(store) => store,
        Err(e) => {
            let racer = args.start_on_ready;
            return store_failed(racer, format!("the store failed to open at the concurrent boot: {} ({e})", e.code()));
        }
    };
    let deadline = unix_ms() + ADAPTER_BUSY_MS;
    let runs = loop {
        let listed = store.list_runs(&RunFilter::all());
        if let Some(broken) = adapter.broken() {
            return Err(broken.into());
        }
        match listed {
            Err(e) if e.is_busy() && unix_ms() < deadline => sleep_ms(2),
            Err(e) => {
                let failed = format!("the store failed its first call after the concurrent boot: {} ({e})", e.code());
                return store_failed(args.start_on_ready, failed);
            }
            Ok(runs) => break runs.len(),
        }
    };
    outln!("booted location={} adapter={} runs={runs}", location.display(), adapter.hello().name);
    Ok(Verdict::Pass)
}
