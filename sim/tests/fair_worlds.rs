//! Worlds judged fairly: scenarios drawn at random from the extremes every bound accepts (long
//! calls and tools, long ttls, long stalls, restarts and busy holds, large skews, slow polls, few
//! workers for many runs), each run with no planted defect. A scenario the parser accepts must be
//! one the harness can judge: it passes (its liveness bound follows from its settings), or it is
//! refused up front. Any violation here is a false verdict. `FAIR_WORLDS=N` runs N scenarios
//! instead of the default, `FAIR_WORLDS_VERBOSE=1` prints each world's verdict.
//!
//! Ignored for now, because it does not pass yet: before the judgeable-world check, 58 of 100
//! accepted scenarios failed liveness with no defect (slow runs, long stalls and holds, few
//! workers for many runs). Refusing worlds whose one run cannot fit the liveness bound removes the
//! plainest (`call_ms = 10000`); the rest need a liveness window computed from a world's settings
//! (throughput, stalls, restarts, skews), which a first attempt showed can make worlds run for
//! minutes. Run it with `cargo test -p fencesim --test fair_worlds -- --ignored`.

use fencesim::scenario::Scenario;
use fencesim::stores::DbKind;
use fencesim::world::{self, WorldConfig};

/// A small deterministic generator (splitmix64): the same scenarios on every run.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next() % items.len() as u64) as usize]
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// One scenario at the extremes: every value inside its bound, most at or near it.
fn extreme(g: &mut Gen) -> String {
    let ttl = g.pick(&[3u32, 30, 1_000, 10_000, 60_000]);
    let fault_ms = g.pick(&[0u32, 1_000, 10_000, 30_000]);
    let liveness = g.pick(&[1_000u32, 5_000, 30_000, 120_000]);
    let poll_lo = g.pick(&[50u32, 800, 5_000, 20_000]).min(liveness - 1);
    let poll_hi = g.pick(&[poll_lo, poll_lo * 2]).min(liveness - 1);
    let workers = g.pick(&[1u32, 2, 5, 8]);
    let runs = g.pick(&[1u32, 5, 20, 40]);
    let start = g.pick(&[0u32, fault_ms, fault_ms + liveness / 2]);
    let mut text = format!(
        "description = \"extreme\"\n[world]\nttl_ms = {ttl}\nfault_ms = {fault_ms}\nliveness_ms = {liveness}\n\
         poll_ms = [{poll_lo}, {poll_hi}]\nworkers = [1, {workers}]\nconcurrency = [1, {}]\nruns = [1, {runs}]\n\
         start_ms = {start}\ncall_ms = {}\ntool_ms = {}\nretention_ms = {}\noperator_ms = {}\nresolve = {}\n\
         recreate = {}\ncancel = {}\n",
        g.pick(&[1u32, 3, 64]),
        g.pick(&[0u32, 20, 1_000, 10_000, 60_000]),
        g.pick(&[0u32, 5, 10_000, 60_000]),
        g.pick(&[0u32, 1, 8_000, 600_000]),
        g.pick(&[0u32, 1, 8_000, 600_000]),
        g.pick(&[0.0, 0.5, 1.0]),
        g.pick(&[0.0, 0.5, 1.0]),
        g.pick(&[0.0, 0.5, 1.0]),
    );
    let span = |g: &mut Gen| g.pick(&[(0u32, 0u32), (1, 100), (60_000, 60_000), (0, 60_000)]);
    for kind in ["stall", "takeover", "crash", "busy", "error"] {
        if g.chance(0.5) {
            let rate = g.pick(&[0.001, 0.05, 0.5, 1.0]);
            text.push_str(&format!("[faults.{kind}]\non = 1.0\nrate = {rate:?}\n"));
            match kind {
                "stall" => {
                    let (lo, hi) = g.pick(&[(1.1, 3.0), (50.0, 100.0), (100.0, 100.0)]);
                    text.push_str(&format!("factor = [{lo:?}, {hi:?}]\n"));
                }
                "crash" => {
                    let (lo, hi) = span(g);
                    text.push_str(&format!("restart_ms = [{lo}, {hi}]\n"));
                }
                "busy" => {
                    let (lo, hi) = span(g);
                    text.push_str(&format!("hold_ms = [{lo}, {hi}]\n"));
                }
                _ => {}
            }
        }
    }
    let seconds = f64::from(fault_ms.max(1)) / 1000.0;
    if g.chance(0.5) {
        let max_ms = g.pick(&[1u32, 300, 60_000]);
        text.push_str(&format!(
            "[faults.clock]\non = 1.0\nrate = {:?}\nmax_ms = {max_ms}\n",
            (2.0 / seconds).min(50.0)
        ));
    }
    if g.chance(0.5) {
        text.push_str(&format!("[faults.zombie]\non = 1.0\nrate = {:?}\n", (20.0 / seconds).min(50.0)));
    }
    if g.chance(0.5) {
        let (lo, hi) = span(g);
        text.push_str(&format!(
            "[faults.restart]\non = 1.0\nrate = {:?}\nrestart_ms = [{lo}, {hi}]\n",
            (3.0 / seconds).min(50.0)
        ));
    }
    text
}

#[test]
#[ignore = "finds false liveness failures still open (see the module doc)"]
fn extreme_but_accepted_scenarios_pass_without_a_defect() {
    let n: u64 = std::env::var("FAIR_WORLDS").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
    let mut g = Gen(25);
    let (mut accepted, mut false_verdicts) = (0, Vec::new());
    for i in 0..n {
        let text = extreme(&mut g);
        let Ok(scenario) = Scenario::parse(std::path::Path::new(&format!("extreme-{i}.toml")), &text) else {
            continue;
        };
        accepted += 1;
        let cfg = WorldConfig {
            scenario,
            seed: i + 1,
            db: DbKind::Memdb,
            store_defects: Default::default(),
            engine_defects: Default::default(),
            keep_db: None,
        };
        let report = world::run(&cfg).unwrap_or_else(|e| panic!("scenario {i} could not run: {e}\n{text}"));
        if std::env::var_os("FAIR_WORLDS_VERBOSE").is_some() {
            eprintln!(
                "scenario {i}: {} virtual ms, {}",
                report.counters.virtual_ms,
                report.violations.first().map_or("pass".to_owned(), |v| format!("{}: {}", v.checker, v.explanation))
            );
        }
        if let Some(v) = report.violations.first() {
            false_verdicts.push(format!("scenario {i}: {}: {}\n{text}", v.checker, v.explanation));
        }
    }
    assert!(accepted * 2 >= n, "only {accepted} of {n} generated scenarios were accepted: the generator drifted");
    assert!(
        false_verdicts.is_empty(),
        "{} of {accepted} accepted scenarios failed with no defect:\n{}",
        false_verdicts.len(),
        false_verdicts.join("\n")
    );
}
