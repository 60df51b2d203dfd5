//! The fencesim harness as a library: the simulator's environment on madsim virtual time, the
//! databases simulated worlds run on, and the kill-point suite. The `fencesim` binary is its
//! command-line edge.
//!
//! It exists only under `--cfg madsim` (set for the workspace in `.cargo/config.toml`).

#[cfg(not(madsim))]
compile_error!("fencesim must be built with --cfg madsim: a RUSTFLAGS variable overrode .cargo/config.toml; unset it");

pub mod bundle;
pub mod catalogue;
pub mod coverage;
pub mod env;
pub mod files;
pub mod fleet;
pub mod history;
pub mod janitor;
pub mod killpoints;
pub mod killpoints_real;
pub mod mutants;
pub mod node;
pub mod pace;
pub use fencesim_oracle as oracle;
pub mod planfile;
pub mod probes;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod scripts;
pub mod shrink;
pub mod signals;
pub mod soak;
pub mod stores;
pub mod timeline;
pub mod world;
