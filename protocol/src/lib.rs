//! The store protocol (docs/protocol.md): fencesim and a store adapter written in any language,
//! one JSON object per line over the adapter's stdin and stdout. This crate is fencesim's side of
//! it: [`Spec`] (`--store cmd:COMMAND`), [`Adapter`] (one process after its handshake), its
//! connections as [`CmdStore`]s that implement the store SPI, and [`CmdTarget`] for the
//! conformance kit. An adapter's own failures (it does not start, dies, answers garbage or too
//! late) are [`AdapterError`]s: harness errors, never verdicts about the store.

mod client;
mod error;
mod process;
mod spec;
mod target;
pub mod wire;

pub use client::{Adapter, CmdStore, Hello};
pub use error::{AdapterError, Failure};
pub use spec::{Spec, SpecError, TIMEOUT_MS_DEFAULT};
pub use target::CmdTarget;
