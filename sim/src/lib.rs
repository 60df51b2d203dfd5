//! The fencesim simulator: seeded worlds of engine and store on madsim virtual time, the
//! databases they run on, scenarios and plans (what a seed draws), the coverage they reach, the
//! history the oracle judges, and the simulated kill-point suite.
//!
//! This crate knows no real process: no spawning, no signal, no wall clock (`nix` is not among
//! its dependencies; the real-process side is `fencesim-real`, the command line `fencesim`). A
//! world against a store adapter talks to the adapter's process through `fencesim-protocol`,
//! which starts it; the world's time still reaches the adapter only as each call's `now_ms`. The
//! temporary folders of file worlds come from a provider the binary installs ([`stores::set_temp_dirs`]),
//! so a folder still outlives no process without this crate knowing how.
//!
//! It exists only under `--cfg madsim` (set for the workspace in `.cargo/config.toml`).

#[cfg(not(madsim))]
compile_error!("fencesim must be built with --cfg madsim: a RUSTFLAGS variable overrode .cargo/config.toml; unset it");

pub mod adapters;
pub mod catalogue;
pub mod coverage;
pub mod defect;
pub mod diff;
pub mod env;
pub mod files;
pub mod history;
pub mod killpoints;
pub mod node;
pub mod probes;
pub mod removal;
pub mod rng;
pub mod scenario;
pub mod scripts;
pub mod site;
pub mod stores;
pub mod world;
