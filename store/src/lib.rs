//! The store side of fencesim: the SPI a durable-run engine writes through (journal, leases,
//! transcripts), the fenced [`SqliteStore`], the single-writer [`MemoryStore`], and the public
//! [`conformance`] kit that tells a store author, contract by contract, whether a store keeps
//! the fencing promises of contracts section 2.
//!
//! Determinism: nothing here reads the wall clock or spawns a thread, except the module `wall`
//! (the boot retry's wall-clock bound, by contract B2) and the kit's boot race, which starts OS
//! processes on purpose.

pub mod clock;
pub mod conformance;
mod decode;
pub mod defects;
pub mod error;
pub mod fault;
mod fields;
pub mod memory;
mod mix;
pub mod spi;
pub mod sqlite;
pub mod types;
mod wall;

pub use clock::{Clock, ManualClock, SystemClock};
pub use defects::{Defect, DefectSet, StoreDefect, StoreDefects};
pub use error::{LeaseHeld, LeaseRejection, Op, StoreError, StoreResult};
pub use fault::{FaultAction, FaultHook, FaultPoint, FaultSite};
pub use memory::MemoryStore;
pub use mix::Mix;
pub use spi::{JournalStore, LeasableStore, Store, TranscriptStore};
pub use sqlite::{IntegrityFinding, Location, SqliteOptions, SqliteStore};
pub use types::{
    Epoch, JournalEntry, LEASE_TTL_MS_DEFAULT, Lease, RunFilter, RunId, RunMeta, RunStatus, Seq, TIMER_MS_MAX,
};

/// Wall-clock helpers for callers outside the deterministic core: the engine's real environment,
/// the CLI and the soak.
pub mod real_time {
    pub use crate::wall::{sleep_ms, unix_ms};
}
