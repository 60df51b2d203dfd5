//! fencesim-sim's integration tests, one test binary (issue 39: one binary per crate links once,
//! where one per file linked the simulator, rusqlite and madsim fourteen times). Each module is
//! what its own binary was; `common` is their shared set-up. Run one file's tests with
//! `cargo test -p fencesim-sim --test it MODULE::`.

mod common;
mod workspace;

mod branches;
mod build_mode;
mod contracts_doc;
mod cuts;
mod diff_recording;
mod doc_counts;
mod engine;
mod engine_defects;
mod fair_worlds;
mod import_circles;
mod killpoints;
mod layers;
mod worker;
