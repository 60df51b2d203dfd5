//! `fencesim soak`, `fencesim soak-check` and the soak's hidden child (`soak-writer`): flags,
//! the writer's parent check, and the verdict's exit code. The storm, the judge and the reports
//! live in the library (`fencesim_real::soak`).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::ValueEnum;
use fencesim::report::sh_quote;
use fencesim_real::soak::engine::{self as soak_engine, EngineSoakOptions};
use fencesim_real::soak::judge::{SoakMeta, judge_sealed};
use fencesim_real::soak::quorum::{Counters, ENGINE_COUNTERS, Quorum};
use fencesim_real::soak::referee::{self, SoakOptions};
use fencesim_real::soak::writer::{self, WriterConfig};
use fencesim_real::soak::{Layout, MAX_WRITERS, SoakError, SoakVerdict, report, seal, within};
use fencesim_sim::catalogue::Defect;
use fencesim_store::{StoreDefect, StoreDefects};

use super::out::{out, outln};
use super::{CmdResult, Verdict};

/// The storm's lease ttl unless `--ttl-ms` says otherwise.
const SOAK_TTL_MS_DEFAULT: i64 = 250;
/// The store-level release quorum's ttl: a stalled or stopped holder keeps the run until its lease
/// expires, so the ttl bounds the storm's tenure rate. Same binary, same seed, same (loaded)
/// machine, 150 s of release storm: 911 epochs and 6,920 stale rejects at 100 ms against 602 and
/// 4,456 at 250 ms.
const SOAK_RELEASE_TTL_MS_DEFAULT: i64 = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Level {
    /// Writers run the store protocol of contracts 5.3-5.5 against SqliteStore.
    Store,
    /// Queue-worker processes over the engine: a client submits runs of the built-in
    /// workflows, workers are SIGKILLed, restarted, SIGSTOPped and SIGCONTed.
    Engine,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// What the writers exercise.
    #[arg(long, value_enum, default_value = "store")]
    level: Level,
    /// Concurrent writer processes (queue workers at the engine level), 1..=64.
    #[arg(long, default_value_t = 3)]
    writers: usize,
    /// Engine level only: runs the client submits [default: 12].
    #[arg(long)]
    runs: Option<u32>,
    /// The storm's lease ttl in milliseconds (short = many takeovers), 1..=2147483647
    /// [default: 250; 100 for the store level's release quorum]
    #[arg(long, allow_hyphen_values = true)]
    ttl_ms: Option<i64>,
    /// Seeds every writer's choices and the referee's fault schedule (not the OS scheduler).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Hard wall-clock cap on the storm, in seconds.
    #[arg(long, default_value_t = 60)]
    cap_s: u64,
    /// Store level only: give each writer a seeded clock offset in [-MAX, MAX] ms (the store
    /// judges leases by the caller's clock), MAX in 0..=3600000 [default: 0].
    #[arg(long, value_name = "MAX", allow_hyphen_values = true)]
    skew_ms: Option<i64>,
    /// `default` (contracts 5.7 plus one SIGKILL, one SIGSTOP zombie and one landed mid-call
    /// stall), `release`, or k=v,...
    #[arg(long, default_value = "default")]
    quorum: String,
    /// Plant a defect in every process (repeatable): a store defect at either level, an engine
    /// defect at the engine level.
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
    /// Write soak.json and junit.xml here (soak-engine.json at the engine level).
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Keep the database and every writer's log here (must not exist or be empty).
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Store level only: shared deadline for every writer to exit after the stop, in seconds
    /// [default: 10].
    #[arg(long)]
    exit_deadline_s: Option<u64>,
    /// Store level only: storm a store adapter (cmd:COMMAND, docs/protocol.md) instead of
    /// fencesim's own store; every writer drives an adapter process of its own.
    #[arg(long = "store", value_name = "cmd:COMMAND", value_parser = super::parse_adapter)]
    adapter: Option<fencesim_protocol::Spec>,
    #[command(flatten)]
    timeout: super::AdapterArgs,
}

/// The store level's defaults of its own flags.
const DEFAULT_SKEW_MS: i64 = 0;
const DEFAULT_EXIT_DEADLINE_S: u64 = 10;
/// The engine level's default of its own flag.
const DEFAULT_RUNS: u32 = 12;

impl Args {
    /// Refuse a flag of the other level: it would be accepted and change nothing.
    fn check_level(&self) -> anyhow::Result<()> {
        let (other, foreign): (&str, &[(&str, bool)]) = match self.level {
            Level::Store => ("engine", &[("--runs", self.runs.is_some())]),
            Level::Engine => (
                "store",
                &[
                    ("--skew-ms", self.skew_ms.is_some()),
                    ("--exit-deadline-s", self.exit_deadline_s.is_some()),
                    ("--store", self.adapter.is_some()),
                ],
            ),
        };
        match foreign.iter().find(|(_, given)| *given) {
            Some((flag, _)) => bail!("{flag} applies only at --level {other}"),
            None => Ok(()),
        }
    }

    fn skew_ms(&self) -> i64 {
        self.skew_ms.unwrap_or(DEFAULT_SKEW_MS)
    }

    fn exit_deadline_s(&self) -> u64 {
        self.exit_deadline_s.unwrap_or(DEFAULT_EXIT_DEADLINE_S)
    }

    fn runs(&self) -> u32 {
        self.runs.unwrap_or(DEFAULT_RUNS)
    }
}

pub fn run(args: &Args) -> CmdResult {
    args.check_level()?;
    args.timeout.check(args.adapter.is_some())?;
    let mut outputs: Vec<fencesim_sim::files::Named> =
        args.keep.iter().map(|d| fencesim_sim::files::Named::new("--keep", d)).collect();
    if let Some(dir) = &args.report {
        let files: &[&str] = match args.level {
            Level::Store => &["soak.json", "junit.xml"],
            Level::Engine => &["soak-engine.json", "junit.xml"],
        };
        outputs.extend(super::folder_outputs("--report", dir, files));
    }
    fencesim_sim::files::check_distinct(&outputs, &[])?;
    if args.level == Level::Engine {
        return run_engine(args);
    }
    let quorum = Quorum::parse(&args.quorum)?;
    let (opts, ttl_ms) = store_options(args, &quorum)?;
    // Every bound before anything is created or started.
    opts.validate()?;
    quorum.check_reachable(args.writers, None)?;
    prepare_outputs(args)?;
    if let Some(dir) = &args.report {
        fencesim_sim::files::remove_stale(&[&dir.join("soak.json"), &dir.join("junit.xml")])?;
    }
    let outcome = referee::run(opts)?;
    adapter_verdict(&outcome.meta, outcome.judgement.findings.is_empty())?;
    out!("{}", report::text(&outcome, &quorum));
    outln!("  repro: {} (the OS scheduler is not deterministic)", repro(args, ttl_ms));
    if let Some(dir) = &args.report {
        fencesim_real::soak::write_atomic(&dir.join("soak.json"), &report::json(&outcome, &quorum, args.skew_ms())?)?;
        fencesim_real::soak::write_atomic(&dir.join("junit.xml"), &fencesim::report::store_soak_junit(&outcome))?;
    }
    Ok(exit_verdict(report::verdict(&outcome)))
}

/// The store-level soak's options from the flags (store defects only; the quorum's default ttl;
/// a store adapter under its timeout), and the ttl they chose.
fn store_options(args: &Args, quorum: &Quorum) -> anyhow::Result<(SoakOptions, i64)> {
    let store_defects: Vec<StoreDefect> = args
        .defects
        .iter()
        .map(|d| match d {
            Defect::Store(s) => Ok(*s),
            Defect::Engine(e) => Err(anyhow::anyhow!("{} is an engine defect: use --level engine", e.name())),
        })
        .collect::<anyhow::Result<_>>()?;
    let ttl_ms =
        args.ttl_ms.unwrap_or(if quorum.name == "release" { SOAK_RELEASE_TTL_MS_DEFAULT } else { SOAK_TTL_MS_DEFAULT });
    let exe = std::env::current_exe().context("cannot locate the fencesim binary")?;
    let opts = SoakOptions {
        writers: args.writers,
        ttl_ms,
        seed: args.seed,
        cap_s: args.cap_s,
        skew_ms: args.skew_ms(),
        quorum: quorum.clone(),
        defects: store_defects,
        keep: args.keep.clone(),
        exit_deadline_ms: args.exit_deadline_s().saturating_mul(1000),
        exe,
        progress: true,
        adapter: args.adapter.clone().map(|spec| args.timeout.apply(spec)),
    };
    anyhow::ensure!(
        opts.adapter.is_none() || opts.defects.is_empty(),
        "store defects are planted in fencesim's own store, not in a store adapter (the reference adapter plants its own: FENCESIM_ADAPTER_DEFECT)"
    );
    Ok((opts, ttl_ms))
}

/// A storm in which a writer's store adapter failed (it died, hung, answered garbage, or lacks
/// what a soak needs) proves nothing about the store from then on: a harness error (exit 2)
/// naming the writer and the adapter, unless what the store did answer, judged alone, shows a
/// violation (exit 1, the failure noted).
fn adapter_verdict(meta: &SoakMeta, no_findings: bool) -> anyhow::Result<()> {
    let failures = meta.adapter_failures();
    let Some(first) = failures.first() else { return Ok(()) };
    let more = match failures.len() {
        1 => String::new(),
        n => format!(" (and {} more writers' adapters)", n - 1),
    };
    anyhow::ensure!(!no_findings, "the soak's store adapter failed, so the storm proves nothing: {first}{more}");
    outln!("note: the soak's store adapter failed (only what the store answered was judged): {first}{more}");
    Ok(())
}

fn exit_verdict(verdict: SoakVerdict) -> Verdict {
    match verdict {
        SoakVerdict::Pass => Verdict::Pass,
        SoakVerdict::Fail => Verdict::Fail,
        SoakVerdict::Inconclusive => Verdict::Inconclusive,
    }
}

/// The engine soak's quorum and options from the flags, each checked.
fn engine_options(args: &Args) -> anyhow::Result<(Quorum, EngineSoakOptions)> {
    let quorum = Quorum::parse_engine(&args.quorum)?;
    quorum.check_reachable(args.writers, Some(args.runs()))?;
    let ttl_ms = args.ttl_ms.unwrap_or(SOAK_TTL_MS_DEFAULT);
    let max = i64::from(fencesim_store::TIMER_MS_MAX);
    let ttl_ms = u32::try_from(ttl_ms)
        .ok()
        .filter(|t| *t >= 30 && i64::from(*t) <= max)
        .with_context(|| format!("--ttl-ms must be in 30..={max} at the engine level, got {ttl_ms}"))?;
    let workers = within("--writers", args.writers, 1..=MAX_WRITERS).map_err(anyhow::Error::msg)?;
    let workers = u32::try_from(workers).context("--writers is too large")?;
    let runs = within("--runs", args.runs(), 1..=10_000).map_err(anyhow::Error::msg)?;
    let (engine_defects, store_defects) = Defect::split(&args.defects);
    anyhow::ensure!(args.cap_s >= 1, "--cap-s must be at least 1, got 0");
    let cap_ms = args.cap_s.checked_mul(1000).context("--cap-s is too large")?;
    let base = EngineSoakOptions::tiny(args.seed);
    // Faults for as long as the runs take to submit, the base window at least, half the cap at
    // most (a cap under twice the base window shortens the window: no `clamp` panic on it).
    let fault_ms = (base.fault_ms * u64::from(runs) / 8).max(base.fault_ms).min(cap_ms / 2);
    let opts = EngineSoakOptions {
        workers,
        runs,
        ttl_ms,
        fault_ms,
        cap_ms,
        engine_defects,
        store_defects,
        keep: args.keep.clone(),
        ..base
    };
    Ok((quorum, opts))
}

/// The engine-level soak: real queue workers and a client over one WAL file, judged at the end
/// (liveness, one settle per segment, meta never ahead, audit after repair, the re-pay bound)
/// and gated on the engine quorum.
fn run_engine(args: &Args) -> CmdResult {
    let (quorum, opts) = engine_options(args)?;
    let (workers, runs, ttl_ms) = (opts.workers, opts.runs, opts.ttl_ms);
    prepare_outputs(args)?;
    if let Some(dir) = &args.report {
        fencesim_sim::files::remove_stale(&[&dir.join("soak-engine.json"), &dir.join("junit.xml")])?;
    }
    let report = soak_engine::run_engine_soak(&opts)?;
    let short = quorum.short(&report);
    let verdict = SoakVerdict::of(report.violations.len(), &short);
    let counters: Vec<String> = ENGINE_COUNTERS.iter().map(|k| format!("{k}={}", report.get(k))).collect();
    outln!(
        "soak engine seed {} workers {workers} runs {runs}: {} ({} ms)",
        args.seed,
        verdict.name().to_uppercase(),
        report.wall_ms
    );
    outln!("  {} (quorum {quorum})", counters.join(" "));
    outln!(
        "  history: {} store calls from every process, {} indeterminate, judged by the oracle",
        report.calls,
        report.indeterminate
    );
    if !short.is_empty() {
        outln!("  QUORUM MISSED: {}", fencesim_real::soak::shortfall(&short));
    }
    for v in &report.violations {
        outln!("  VIOLATION {v}");
    }
    outln!("  repro: {} (the OS scheduler is not deterministic)", repro(args, i64::from(ttl_ms)));
    if let Some(dir) = &args.report {
        let doc = serde_json::json!({
            "schema": "fencesim.soak-engine/1",
            "level": "engine",
            "seed": args.seed,
            "workers": workers,
            "runs": runs,
            "ttl_ms": ttl_ms,
            "quorum": quorum,
            "quorum_short": short,
            "report": report,
            "verdict": verdict,
        });
        fencesim_real::soak::write_atomic(&dir.join("soak-engine.json"), format!("{doc}\n").as_bytes())?;
        let suite = format!("fencesim soak engine seed {}", args.seed);
        let violations: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        let junit = fencesim::report::soak_junit(&suite, report.wall_ms as f64 / 1000.0, &short, &violations);
        fencesim_real::soak::write_atomic(&dir.join("junit.xml"), &junit)?;
    }
    Ok(exit_verdict(verdict))
}

/// The kept folder (empty or new) and the report folder, made and checked writable before the
/// storm starts, so a soak never ends unable to write its verdict.
fn prepare_outputs(args: &Args) -> anyhow::Result<()> {
    if let Some(dir) = &args.keep {
        referee::prepare_keep(dir)?;
        fencesim_sim::files::prepare_folder(dir).map_err(|e| anyhow::anyhow!("--keep {e}"))?;
    }
    if let Some(dir) = &args.report {
        fencesim_sim::files::prepare_folder(dir).map_err(|e| anyhow::anyhow!("--report {e}"))?;
    }
    Ok(())
}

/// The command that runs the same soak again: every flag that changes a run at `args.level`,
/// with the ttl in force (a quorum's default made explicit) and the store adapter the writers
/// stormed (`--store`, its `--adapter-timeout-ms` if given); the report and keep folders only say
/// where results go.
fn repro(args: &Args, ttl_ms: i64) -> String {
    let (level, only) = match args.level {
        Level::Store => ("store", format!("--skew-ms {} --exit-deadline-s {}", args.skew_ms(), args.exit_deadline_s())),
        Level::Engine => ("engine", format!("--runs {}", args.runs())),
    };
    let mut command = format!(
        "fencesim soak --level {level} --seed {} --writers {} --ttl-ms {ttl_ms} {only} --cap-s {} --quorum {}",
        args.seed,
        args.writers,
        args.cap_s,
        sh_quote(&args.quorum)
    );
    // The store the writers stormed: without it the repro stormed fencesim's own store instead.
    if let Some(spec) = &args.adapter {
        command.push_str(&format!(" --store {}", sh_quote(&spec.to_string())));
        if let Some(ms) = args.timeout.adapter_timeout_ms {
            command.push_str(&format!(" --adapter-timeout-ms {ms}"));
        }
    }
    for d in &args.defects {
        command.push_str(&format!(" --defect {}", d.name()));
    }
    command
}

#[derive(Debug, clap::Args)]
pub struct WriterArgs {
    #[arg(long)]
    db: PathBuf,
    #[arg(long)]
    log: PathBuf,
    #[arg(long)]
    stop: PathBuf,
    #[arg(long)]
    index: usize,
    #[arg(long)]
    generation: u32,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    ttl_ms: i64,
    #[arg(long, allow_hyphen_values = true)]
    skew_ms: i64,
    #[arg(long)]
    start_at_ms: Option<i64>,
    #[arg(long)]
    owe_mid_call: bool,
    #[arg(long = "defect", value_name = "NAME", value_parser = super::parse_defect)]
    defects: Vec<StoreDefect>,
    /// Drive this store adapter over the folder `--db` names.
    #[arg(long = "store", value_parser = super::parse_adapter)]
    adapter: Option<fencesim_protocol::Spec>,
    #[command(flatten)]
    timeout: super::AdapterArgs,
}

/// A writer process of the soak (the referee started it dying with the referee:
/// `fencesim_protocol::die_with_parent`).
pub fn writer(args: &WriterArgs) -> CmdResult {
    let cfg = WriterConfig {
        db: args.db.clone(),
        log: args.log.clone(),
        stop: args.stop.clone(),
        index: args.index,
        generation: args.generation,
        seed: args.seed,
        ttl_ms: args.ttl_ms,
        skew_ms: args.skew_ms,
        defects: StoreDefects::of(&args.defects),
        start_at_ms: args.start_at_ms,
        owe_mid_call: args.owe_mid_call,
        checkpoint_every: 8,
        adapter: args.adapter.clone().map(|spec| args.timeout.apply(spec)),
    };
    match writer::run(cfg) {
        Ok(()) => Ok(Verdict::Pass),
        Err(e @ SoakError::Store(_)) => Err(anyhow::Error::new(e).context("writer failed")),
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// A folder kept by `fencesim soak --keep DIR`.
    dir: PathBuf,
}

/// Re-judge a kept soak: the same merge, oracle and soak checks as the referee's, once the folder
/// verifies against its manifest (a folder that does not is refused, naming the file and line).
pub fn check(args: &CheckArgs) -> CmdResult {
    let sealed = seal::verify(&args.dir)?;
    if sealed.level() == seal::Level::Engine {
        return check_engine(args, &sealed);
    }
    let layout = Layout::new(&args.dir);
    let text = fencesim_sim::files::read_input(&layout.meta(), fencesim_sim::files::MAX_TEXT_BYTES)?;
    let meta: SoakMeta = serde_json::from_str(&text).context("cannot read the soak's record")?;
    let (judgement, _) = judge_sealed(&layout, &sealed, &meta)?;
    adapter_verdict(&meta, judgement.findings.is_empty())?;
    outln!(
        "soak-check {}: {} rows, {} indeterminate, journal {} entries, integrity {}: {}",
        args.dir.display(),
        judgement.rows,
        judgement.indeterminate,
        judgement.journal_entries,
        judgement.integrity,
        if judgement.findings.is_empty() { "PASS" } else { "FAIL" }
    );
    for f in &judgement.findings {
        let row = f.row.map_or(String::new(), |r| format!(" (row {r})"));
        outln!("  VIOLATION {}: {}{row}", f.checker, f.explanation);
    }
    Ok(if judgement.findings.is_empty() { Verdict::Pass } else { Verdict::Fail })
}

/// Re-judge a kept engine-level soak: the oracle over every process's calls and payments, the
/// per-run checks, and the operator's repair on a copy of the file.
fn check_engine(args: &CheckArgs, sealed: &seal::Manifest) -> CmdResult {
    let exe = std::env::current_exe().context("cannot locate the fencesim binary")?;
    let report = soak_engine::rejudge_sealed(&exe, &args.dir, sealed)?;
    outln!(
        "soak-check {} (engine level, seed {}): {} store calls, {} indeterminate, {} paid calls: {}",
        args.dir.display(),
        report.seed,
        report.calls,
        report.indeterminate,
        report.paid_calls,
        if report.passed() { "PASS" } else { "FAIL" }
    );
    for v in &report.violations {
        outln!("  VIOLATION {v}");
    }
    Ok(if report.passed() { Verdict::Pass } else { Verdict::Fail })
}
