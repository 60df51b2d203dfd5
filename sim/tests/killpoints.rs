//! The kill-point suite (contracts 5.13) in process: the reference's ten rows with their
//! documented counts, every durable write of the `happy` and `limit` workflows crashed before and
//! after, on memdb and on a WAL file, and the planted defects the suite must catch.

use fencesim::killpoints::{self, Config, PointReport};
use fencesim::stores::DbKind;
use fencesim_engine::{EngineDefect, EngineDefects, Workflow};

fn run_all(points: &[killpoints::KillPoint], config: &Config) -> Vec<PointReport> {
    points.iter().map(|p| killpoints::run_point(p, config).expect("the harness runs")).collect()
}

fn failures(reports: &[PointReport]) -> Vec<String> {
    reports.iter().filter(|r| !r.passed()).map(|r| format!("{}: {}", r.id, r.violations.join("; "))).collect()
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
