//! Flag definitions and dispatch for every subcommand, and the one place errors become exit codes.

mod boot;
mod conformance;
mod diff;
mod killpoints;
mod killpoints_real;
mod known;
mod merge;
mod mutants;
pub(crate) mod out;
mod par;
mod plan;
mod promote;
mod replay;
mod run;
mod runs;
mod shrink;
mod soak;
mod soak_engine_children;
mod sweep;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use fencesim_store::StoreDefect;
use out::errln;

/// Deterministic simulation testing for lease-fenced durable-run stores.
#[derive(Debug, Parser)]
#[command(name = "fencesim", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// A `fencesim` that runs a whole command for this one (`mutants --soak`, `shrink`): it dies with
/// this process, a `SIGKILL` included ([`fencesim_real::proc::child::command`]).
fn child_fencesim(exe: &std::path::Path) -> std::process::Command {
    fencesim_real::proc::child::command(exe)
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the store conformance kit: one line per contract check.
    ///
    /// Exit 0 when every applicable check passes, 1 when any fails, 2 on bad input.
    Conformance(conformance::Args),
    /// Open (creating if needed) a SqliteStore database file, then exit.
    ///
    /// The concurrent-boot check (B2) re-executes this binary with it. Bad input exits 2 and
    /// writes nothing.
    Boot(boot::Args),
    /// Operator tooling over an existing SqliteStore database: audit (and repair) or list runs.
    ///
    /// `runs audit` exits 0 when nothing remains divergent, 1 otherwise, 2 on bad input; `runs
    /// list` exits 1 on a damaged file; neither ever creates a database.
    Runs(runs::Args),
    /// The kill-point suite: crash a run at each durable write, resume it, check the recovery.
    ///
    /// Exit 0 when every point recovers as documented, 1 when any fails, 2 on bad input.
    Killpoints(killpoints::Args),
    /// Run one simulated world from its seed and judge it with the oracle.
    ///
    /// Exit 0 when the oracle finds nothing, 1 on a violation (with a repro command), 2 on bad
    /// input. The same seed and build print byte-identical output.
    Run(run::Args),
    /// The differential: run each seed's world against two stores (A, then B) and report the
    /// first store call whose answers differ, with both full answers, or "identical".
    ///
    /// Only a seed's first divergence is meaningful (the worlds part there). Exit 0 when no world
    /// fails its oracle, identical or not; 1 when one does, or on any divergence with
    /// `--fail-on-divergence`; 2 on bad input or a world that could not run.
    Diff(diff::Args),
    /// Print what a seed draws (workload, faults, skews, timed events) as a plan file.
    ///
    /// `fencesim run --plan FILE` runs the same world from it. Exit 0, or 2 on bad input.
    Plan(plan::Args),
    /// Shrink a failing world to a smaller plan that fails the same checker.
    ///
    /// Exit 0 when a plan was shrunk, 1 when `--kill-matrix` misses its goals, 2 on bad input
    /// (or a world that passes).
    Shrink(shrink::Args),
    /// Keep a minimal plan as a regression under `seeds/regressions/`.
    Promote(promote::Args),
    /// Run many seeds of one scenario in parallel; a summary and every failing seed's repro.
    ///
    /// Exit 0 when every seed passes, 1 when any fails, 2 on bad input.
    Sweep(sweep::Args),
    /// The kill matrix: hunt every planted defect until the oracle catches it, and check the
    /// same seeds stay clean without one.
    ///
    /// Exit 0 only when every defect is caught and the baseline is clean, 1 otherwise, 2 on bad
    /// input.
    Mutants(mutants::Args),
    /// Replay a seed corpus (`scenario seed` per line): every entry twice, in parallel, which
    /// must agree; writes replay.json and junit.xml to the report folder.
    ///
    /// Exit 0 when every entry passes deterministically, 1 when any fails or is
    /// nondeterministic, 2 on bad input (a malformed corpus line is named by FILE:LINE).
    Replay(replay::Args),
    /// Merge the shard reports of one sharded sweep or replay into one report and its JUnit.
    ///
    /// Exit 0 when every shard passed, 1 when any had a failure, 2 on overlapping or missing
    /// shards, reports of different runs, or bad input.
    Merge(merge::Args),
    /// One real kill point's child process (started by `killpoints --real`).
    #[command(hide = true)]
    KillpointChild(killpoints_real::ChildArgs),
    /// One real kill point's resume process (started by `killpoints --real`).
    #[command(hide = true)]
    KillpointResume(killpoints_real::ResumeArgs),
    /// One queue worker of the engine-level soak (started by `fencesim_real::soak::engine`).
    #[command(hide = true)]
    SoakEngineWorker(soak_engine_children::WorkerArgs),
    /// The client of the engine-level soak (started by `fencesim_real::soak::engine`).
    #[command(hide = true)]
    SoakEngineClient(soak_engine_children::ClientArgs),
    /// The real multi-process soak: writer processes storm one SQLite WAL file under SIGKILL,
    /// SIGSTOP and clock skew; the oracle judges the merged history; a quorum gates the verdict.
    ///
    /// One seed fixes every writer's choices and the fault schedule; the OS scheduler is not
    /// deterministic, so two runs of a seed interleave differently. Exit 0 only with the quorum
    /// met, no violation and every writer accounted for; 1 on a violation, whatever the quorum
    /// did; 3 (inconclusive) when the storm ended below a floor with no violation; 2 on bad
    /// input or a harness error.
    Soak(soak::Args),
    /// Re-judge a soak folder kept with `fencesim soak --keep DIR` (either level): exit 0, 1 or 2.
    SoakCheck(soak::CheckArgs),
    /// One writer process of the soak (started by `fencesim soak`).
    #[command(hide = true)]
    SoakWriter(soak::WriterArgs),
    /// Removes a temporary folder once its parent is gone (started by `soak` and
    /// `killpoints --real`; `fencesim_real::proc::janitor`).
    #[command(hide = true)]
    Janitor(JanitorArgs),
}

#[derive(Debug, clap::Args)]
struct JanitorArgs {
    /// The folder to make the process root in (and to remove it from when the parent is gone).
    parent: std::path::PathBuf,
}

/// How long a store adapter may take, on every subcommand that takes `--store cmd:COMMAND`.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct AdapterArgs {
    /// How long a store adapter (--store cmd:COMMAND) may take to read one request, and to
    /// answer it, in ms; past it the adapter is killed and the run ends as a harness error
    /// (exit 2). Refused without a store adapter [default: 10000]
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(1..=600_000))]
    pub adapter_timeout_ms: Option<u32>,
}

impl AdapterArgs {
    pub fn apply(&self, spec: fencesim_protocol::Spec) -> fencesim_protocol::Spec {
        spec.timeout_ms(self.adapter_timeout_ms.unwrap_or(fencesim_protocol::TIMEOUT_MS_DEFAULT))
    }

    /// Refuse `--adapter-timeout-ms` where no store adapter runs: it would be accepted and change
    /// nothing.
    pub fn check(&self, adapter: bool) -> anyhow::Result<()> {
        anyhow::ensure!(
            adapter || self.adapter_timeout_ms.is_none(),
            "--adapter-timeout-ms applies only to a store adapter (--store cmd:COMMAND)"
        );
        Ok(())
    }
}

/// `--store cmd:COMMAND` for the subcommands that run worlds: a store adapter in place of
/// fencesim's own store.
#[derive(Clone, Debug, clap::Args)]
pub struct WorldStoreArgs {
    /// Run the worlds against a store adapter process speaking the store protocol
    /// (docs/protocol.md) instead of fencesim's own store: cmd:COMMAND, split as a shell would.
    #[arg(long = "store", value_name = "cmd:COMMAND", value_parser = parse_adapter, conflicts_with = "db")]
    pub adapter: Option<fencesim_protocol::Spec>,
    #[command(flatten)]
    pub timeout: AdapterArgs,
}

impl WorldStoreArgs {
    /// The adapter to run, with its timeout.
    pub fn spec(&self) -> Option<fencesim_protocol::Spec> {
        self.adapter.clone().map(|spec| self.timeout.apply(spec))
    }

    /// What a summary line calls the worlds' store: `memdb`, `file`, or the adapter's `cmd:...`.
    pub fn describe(&self, db: fencesim_sim::stores::DbKind) -> String {
        self.adapter.as_ref().map_or_else(|| db.as_str().to_owned(), ToString::to_string)
    }

    /// Store defects are planted in fencesim's own store, never in an adapter (which plants its
    /// own): refused together.
    pub fn check(&self, store_defects: fencesim_store::StoreDefects) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.adapter.is_none() || store_defects == fencesim_store::StoreDefects::NONE,
            "store defects are planted in fencesim's own store, not in a store adapter (the reference adapter plants its own: FENCESIM_ADAPTER_DEFECT)"
        );
        Ok(())
    }

    /// The adapter's handshake, once, before any world: an adapter that does not start is one
    /// error line, not one per world, and one without fault points is named with what its worlds
    /// therefore cannot exercise. Without an adapter, `--adapter-timeout-ms` is refused.
    pub fn handshake(&self) -> anyhow::Result<()> {
        self.timeout.check(self.adapter.is_some())?;
        let Some(spec) = self.spec() else { return Ok(()) };
        // On a thread of its own: an adapter pins the thread that starts it to one core, and the
        // worker threads this one starts next would inherit that.
        let hello = std::thread::scope(|s| {
            s.spawn(|| fencesim_protocol::Adapter::start(&spec).map(|a| a.hello().clone())).join()
        })
        .map_err(|_| anyhow::anyhow!("the adapter's handshake panicked"))??;
        if !hello.fault_points {
            errln!(
                "note: adapter {} declares no fault points: no takeover lands between its fence check and its write (takeover-mid-* never fires)",
                hello.name
            );
        }
        Ok(())
    }
}

pub(super) fn parse_adapter(text: &str) -> Result<fencesim_protocol::Spec, String> {
    fencesim_protocol::Spec::parse(text).map_err(|e| e.to_string())
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
}

/// What a subcommand concluded.
pub enum Verdict {
    Pass,
    /// A violation was found (exit 1).
    Fail,
    /// No violation, but not enough evidence for a pass (exit 3): e.g. a sweep whose
    /// `--require-coverage` found an aimed-at event that never happened.
    Inconclusive,
}

/// A harness or input error: exit 2 with one line.
pub type CmdResult = anyhow::Result<Verdict>;

pub fn main() -> ExitCode {
    // First, before any thread or child exists: the termination signals' one policy.
    if let Err(e) = fencesim_real::proc::signals::install() {
        errln!("fencesim: error: cannot install the signal policy: {e}");
        return ExitCode::from(2);
    }
    fencesim_sim::stores::keep_temp_folders(std::env::var_os("FENCESIM_KEEP_TEMP").is_some_and(|v| v == "1"));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    // Temporary folders go under one root a janitor removes if this process is killed.
    if let Ok(exe) = std::env::current_exe() {
        fencesim_real::proc::janitor::enable_process_root(exe);
        fencesim_sim::stores::set_temp_dirs(fencesim_real::proc::janitor::temp_dir);
    }
    let result = dispatch(cli.command);
    // The command wrote its files whatever became of its output (`cli::out`): now the output's
    // first failure, if any (a reader that went away, a full disk).
    let result = result.and_then(|verdict| {
        out::finish().map_err(|e| anyhow::Error::new(e).context("cannot write the output"))?;
        Ok(verdict)
    });
    fencesim_real::proc::janitor::release_process_root();
    match result {
        Ok(Verdict::Pass) => ExitCode::SUCCESS,
        Ok(Verdict::Fail) => ExitCode::from(1),
        Ok(Verdict::Inconclusive) => ExitCode::from(3),
        // A reader that went away (`fencesim runs list | head`): quiet, with SIGPIPE's status.
        Err(e) if is_broken_pipe(&e) => ExitCode::from(141),
        Err(e) => {
            errln!("fencesim: error: {}", one_line(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

fn dispatch(command: Command) -> CmdResult {
    match command {
        Command::Conformance(args) => conformance::run(&args),
        Command::Boot(args) => boot::run(&args),
        Command::Killpoints(args) => killpoints::run(&args),
        Command::Runs(args) => runs::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Shrink(args) => shrink::run(&args),
        Command::Promote(args) => promote::run(&args),
        Command::Sweep(args) => sweep::run(&args),
        Command::Mutants(args) => mutants::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Merge(args) => merge::run(&args),
        Command::KillpointChild(args) => killpoints_real::child(&args),
        Command::KillpointResume(args) => killpoints_real::resume(&args),
        Command::SoakEngineWorker(args) => soak_engine_children::worker(&args),
        Command::SoakEngineClient(args) => soak_engine_children::client(&args),
        Command::Soak(args) => soak::run(&args),
        Command::SoakCheck(args) => soak::check(&args),
        Command::SoakWriter(args) => soak::writer(&args),
        Command::Janitor(args) => {
            fencesim_real::proc::janitor::make_root_and_clean_up(&args.parent);
            Ok(Verdict::Pass)
        }
    }
}

/// clap's own errors, shortened to their first line; help and version print in full and pass.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    // clap's message, without its usage and help footers, folded onto one line.
    let text = e.to_string();
    let message = text.split("\n\n").next().unwrap_or("invalid arguments");
    let message = one_line(message.strip_prefix("error: ").unwrap_or(message));
    errln!("fencesim: error: {message} (see fencesim --help)");
    ExitCode::from(2)
}

/// Whether the error is, at any depth, a write to a closed pipe.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// An error for a terminal: one line, and any control character left (an escape sequence from a
/// file's contents) written out as a Rust escape.
fn one_line(text: &str) -> String {
    fencesim_sim::files::printable(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The file a `--scenario` names, as an input of the command (a built-in name reads no file).
pub fn scenario_file(name: Option<&str>) -> Option<fencesim_sim::files::Named> {
    name.filter(|n| n.ends_with(".toml")).map(|n| fencesim_sim::files::Named::new("the --scenario file", n))
}

/// A report folder's outputs: the folder itself (no other output may be it) and each file the
/// command writes into it.
pub fn folder_outputs(flag: &str, dir: &std::path::Path, files: &[&str]) -> Vec<fencesim_sim::files::Named> {
    use fencesim_sim::files::Named;
    std::iter::once(Named::new(flag, dir)).chain(files.iter().map(|f| Named::new(flag, dir.join(f)))).collect()
}

/// `--defect NAME`: a store defect, or a one-line error listing the valid names.
pub fn parse_defect(name: &str) -> Result<StoreDefect, String> {
    StoreDefect::parse(name).ok_or_else(|| format!("unknown defect '{name}' (valid: {})", defect_names()))
}

pub fn defect_names() -> String {
    StoreDefect::ALL.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

/// `--db memdb|file`.
pub fn parse_db(name: &str) -> Result<fencesim_sim::stores::DbKind, String> {
    use fencesim_sim::stores::DbKind;
    [DbKind::Memdb, DbKind::File]
        .into_iter()
        .find(|k| k.as_str() == name)
        .ok_or_else(|| format!("unknown db '{name}' (valid: memdb, file)"))
}
