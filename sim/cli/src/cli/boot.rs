//! `fencesim boot`: construct a SqliteStore over a database file and exit. It is the child of the
//! concurrent-boot check (B2: many processes booting one fresh file at the same instant), and a
//! way to create or validate a database by hand. Bad input (an invalid ttl, a missing folder, a
//! file that is not a SQLite database, someone else's database) exits 2 and writes nothing.
//! Started by `conformance` (its pid in [`PARENT_ENV`]), it dies with its parent: it asks for
//! `SIGKILL` when the parent goes (`PR_SET_PDEATHSIG`) and exits 2 if the parent is already gone.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use fencesim_store::LEASE_TTL_MS_DEFAULT;
use fencesim_store::real_time::{sleep_ms, unix_ms};
use fencesim_store::sqlite::TABLES;
use fencesim_store::{SqliteOptions, SqliteStore, StoreDefect, StoreDefects, SystemClock};

use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The database file; its folder must exist.
    #[arg(long)]
    db: PathBuf,
    /// Lease ttl in milliseconds, 1..=2147483647.
    #[arg(long, default_value_t = i64::from(LEASE_TTL_MS_DEFAULT), allow_hyphen_values = true)]
    ttl_ms: i64,
    /// Wait until this wall-clock instant (Unix milliseconds, at most a minute ahead) before
    /// opening, so that many processes open at once.
    #[arg(long)]
    start_at_ms: Option<i64>,
    /// Plant a store defect (repeatable); only `no-boot-retry` acts at boot.
    #[arg(long = "defect", value_name = "NAME", value_parser = super::parse_defect)]
    defects: Vec<StoreDefect>,
}

/// The longest `--start-at-ms` may make a boot wait.
const MAX_WAIT_MS: i64 = 60_000;

/// Set by `conformance` on its boot children: the parent's pid.
pub const PARENT_ENV: &str = "FENCESIM_BOOT_PARENT";

pub fn run(args: &Args) -> CmdResult {
    if let Ok(parent) = std::env::var(PARENT_ENV) {
        use nix::sys::signal::Signal;
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).context("cannot set the parent-death signal")?;
        // The parent may have died before the prctl: then our parent is no longer its pid.
        let actual = nix::unistd::getppid().as_raw();
        anyhow::ensure!(parent.parse::<i32>().ok() == Some(actual), "the conformance parent {parent} is gone");
    }
    if let Some(start_at) = args.start_at_ms {
        let wait = start_at.saturating_sub(unix_ms());
        anyhow::ensure!(wait <= MAX_WAIT_MS, "--start-at-ms {start_at} is more than a minute ahead of now");
        if wait > 0 {
            sleep_ms(wait.unsigned_abs());
        }
    }
    let options = SqliteOptions::file(&args.db, Arc::new(SystemClock))
        .lease_ttl_ms(args.ttl_ms)
        .defects(StoreDefects::of(&args.defects));
    let store = SqliteStore::open(options).context("cannot open the store")?;
    let names = TABLES.map(|t| format!("'{t}'")).join(", ");
    let tables: i64 = store
        .raw_connection()
        .query_row(&format!("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ({names})"), [], |r| {
            r.get(0)
        })
        .context("cannot read the schema")?;
    anyhow::ensure!(tables == TABLES.len() as i64, "schema incomplete after boot: {tables} of {} tables", TABLES.len());
    println!("booted location={} tables={tables}", args.db.display());
    Ok(Verdict::Pass)
}
