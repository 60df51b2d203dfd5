//! The durable-run engine of fencesim over the store SPI (contracts sections 3 and 4): scripted
//! workflows of paid agent turns, segments, ownership under a fencing lease, checkpoints, settle,
//! resume, the queue worker with retention, delete and prune cascades, and audit / reconcile.
//!
//! The engine never knows whether it is simulated: time, sleeping and fault points come from an
//! [`Env`], stores from the caller. Nothing here reads the wall clock, draws randomness or spawns.

pub mod audit;
pub mod checkpoint;
mod core;
pub mod defects;
mod engine;
pub mod entries;
pub mod env;
pub mod error;
pub mod ledger;
mod options;
pub mod probe;
pub mod race;
mod segment;
pub mod worker;
pub mod workflow;

pub use core::Core;
pub use defects::{EngineDefect, EngineDefects};
pub use engine::Engine;
pub use env::{Env, Fault, Phase, Point, RealEnv, Site, Write};
pub use error::{EngineError, EngineResult, SettleStage};
pub use ledger::{Ledger, Paid};
pub use options::{
    BUSY_RETRIES, CancelToken, EngineOptions, Outcome, Ownership, RunOptions, renew_cadence, validate_timer,
};
pub use probe::Probe;
pub use worker::{Retention, Skip, SweepReport, Worker, WorkerOptions};
pub use workflow::{Agent, Step, SuspendKind, Workflow};
