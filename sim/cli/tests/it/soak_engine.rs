//! The engine-level soak (`fencesim_real::soak::engine`) with a tiny configuration: real worker and
//! client processes over one WAL file, real SIGKILL and SIGSTOP. An honest soak passes with
//! faults actually injected and nothing left in TMPDIR; a planted engine defect fails it.

use std::path::Path;

use fencesim_engine::{EngineDefect, EngineDefects};
use fencesim_real::soak::engine::{EngineSoakOptions, run_engine_soak_with};

/// The test binary is not `fencesim`, so the soak is told which binary its processes run.
fn soak(opts: &EngineSoakOptions) -> fencesim_real::soak::engine::EngineSoakReport {
    run_engine_soak_with(Path::new(env!("CARGO_BIN_EXE_fencesim")), opts).expect("the soak runs")
}

#[test]
fn a_tiny_honest_soak_passes_with_faults_injected() {
    let report = soak(&EngineSoakOptions::tiny(7));
    assert!(report.passed(), "{report:#?}");
    assert_eq!(report.runs_settled + report.waiting, 8, "{report:#?}");
    assert!(report.crashes + report.zombies > 0, "no fault was injected: {report:#?}");
    assert!(report.paid_calls > 0, "{report:#?}");
}

/// Without faults the re-pay allowance is zero: the same soak passes clean, and a fresh run that
/// holds no lease (D9) is adopted live by a worker while the client drives it, paying twice.
#[test]
fn a_fresh_run_without_a_lease_fails_the_soak() {
    let quiet = EngineSoakOptions { fault_ms: 0, ..EngineSoakOptions::tiny(7) };
    let clean = soak(&quiet);
    assert!(clean.passed(), "{clean:#?}");
    let opts = EngineSoakOptions { engine_defects: EngineDefects::of(&[EngineDefect::FreshRunUnleased]), ..quiet };
    let report = soak(&opts);
    assert!(!report.passed(), "fresh-run-unleased went unnoticed: {report:#?}");
}
