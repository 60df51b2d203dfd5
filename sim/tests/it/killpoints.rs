//! The kill-point suite (contracts 5.13) in process: the reference's ten rows with their
//! documented counts, every durable write of the `happy` and `limit` workflows crashed before and
//! after, on memdb and on a WAL file, and the planted defects the suite must catch.

use fencesim_engine::{EngineDefect, EngineDefects, Workflow};
use fencesim_oracle::{Checker, Violation};
use fencesim_sim::killpoints::{self, Config, PointReport};
use fencesim_sim::stores::DbKind;

fn run_all(points: &[killpoints::KillPoint], config: &Config) -> Vec<PointReport> {
    killpoints::run_points(points, config).expect("the harness runs")
}

fn failures(reports: &[PointReport]) -> Vec<String> {
    let lines = |r: &PointReport| r.violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    reports.iter().filter(|r| !r.passed()).map(|r| format!("{}: {}", r.id, lines(r))).collect()
}

#[test]
fn the_reference_table_holds_with_its_documented_counts() {
    for db in [DbKind::Memdb, DbKind::File] {
        let reports = run_all(&killpoints::table(), &Config { db, ..Config::default() });
        assert_eq!(reports.len(), 10);
        assert_eq!(failures(&reports), Vec::<String>::new(), "on {db:?}");
    }
}

#[test]
fn every_write_of_both_workflows_survives_a_crash_before_and_after_it() {
    let config = Config::default();
    for workflow in [Workflow::happy(), Workflow::limit()] {
        let points = killpoints::enumerate(&workflow, &config).expect("the clean run enumerates");
        assert!(points.len() >= 12, "{} has only {} points", workflow.name, points.len());
        let reports = run_all(&points, &config);
        assert_eq!(failures(&reports), Vec::<String>::new(), "workflow {}", workflow.name);
    }
}

/// The settle order reversed (meta before the `run_settle` append) leaves a terminal meta over a
/// journal without a settle when the crash falls between them: the residue check catches it.
#[test]
fn meta_before_settle_is_caught_by_the_residue_check() {
    let config = Config { engine_defects: EngineDefects::of(&[EngineDefect::MetaBeforeSettle]), ..Config::default() };
    let reports = run_all(&killpoints::table(), &config);
    let caught: Vec<&PointReport> = reports.iter().filter(|r| !r.passed()).collect();
    assert!(!caught.is_empty(), "no kill point caught meta-before-settle");
    assert!(
        caught.iter().any(|r| r.violations.iter().any(|v| v.explanation.contains("meta ahead of the journal"))),
        "caught, but not by the residue check: {:?}",
        caught.iter().map(|r| &r.violations).collect::<Vec<_>>()
    );
}

/// The re-pay bound can fail: a kill-point workflow's counts are checked against the table, so
/// a row run against the wrong documented counts fails.
#[test]
fn a_wrong_documented_count_fails_its_row() {
    let mut row = killpoints::table().remove(2);
    let expected = row.expected.as_mut().expect("table rows carry counts");
    expected.resume = (0, 0);
    let report = run_all(&[row], &Config::default()).remove(0);
    let documented =
        |v: &Violation| v.checker == Checker::DocumentedCounts && v.explanation.contains("differ from the documented");
    assert!(report.violations.iter().any(documented), "{:?}", report.violations);
}

/// A point the child never reaches tests nothing: a write index past the workflow's last write
/// lets the child run to completion, and the point fails `kill-point-reached` instead of passing.
#[test]
fn a_point_past_the_last_write_fails_kill_point_reached() {
    let mut point = killpoints::table().remove(0);
    point.id = "past-the-end".into();
    point.target = killpoints::Target::Index(999);
    point.expected = None;
    let report = run_all(&[point], &Config::default()).remove(0);
    assert!(
        report.violations.iter().any(|v| v.to_string().starts_with("kill-point-reached: the child ran to completion")),
        "{:?}",
        report.violations
    );
}
