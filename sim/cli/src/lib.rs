//! The `fencesim` command line's library: fleets of worlds (sweep, replay, merge), their reports
//! and JUnit, and triage (shrink, bundles, the timeline page, the kill matrix). The binary
//! (`src/main.rs`, `src/cli/`) parses flags and turns errors into exit codes over it.

#[cfg(not(madsim))]
compile_error!("fencesim must be built with --cfg madsim: a RUSTFLAGS variable overrode .cargo/config.toml; unset it");

pub mod bundle;
pub mod fleet;
pub mod mutants;
pub mod report;
pub mod shrink;
pub mod timeline;
