//! The fencesim binary's integration tests, one test binary (issue 39: one binary links the whole
//! workspace once, where one per file linked it twenty-seven times). Each module is what its own
//! binary was; `cli` is their shared set-up (running the binary, reading its output). Run one
//! file's tests with `cargo test -p fencesim --test it MODULE::`.

mod cli;

mod adapter_cli;
mod boot_cli;
mod bundle_cli;
mod closed_stdout;
mod conformance_cli;
mod diff_cli;
mod interrupted_writes;
mod killpoints_cli;
mod killpoints_real;
mod linear_inputs;
mod merge_identity;
mod output_files;
mod output_modes;
mod plan_cli;
mod replay_cli;
mod report_schema;
mod repro_lines;
mod run_cli;
mod runs_cli;
mod soak_cli;
mod soak_engine;
mod sweep_cli;
mod temp_roots;
mod test_needs;
mod timeline_browser;
mod workflow;
