//! The store protocol (docs/protocol.md): fencesim and a store adapter written in any language,
//! one JSON object per line over the adapter's stdin and stdout. This crate is fencesim's side of
//! it: [`Spec`] (`--store cmd:COMMAND`), [`Adapter`] (one process after its handshake), its
//! connections as [`CmdStore`]s that implement the store SPI, and [`CmdTarget`] for the
//! conformance kit. An adapter's own failures (it does not start, dies, answers garbage or too
//! late) are [`AdapterError`]s: harness errors, never verdicts about the store. The adapter's OS
//! process (`child`, `process`) runs in a process group of its own under deadlines on every read,
//! write and exit, its output kept in bounded memory (`tail`). Every line is typed: [`request`]
//! what fencesim writes, [`wire`] what an adapter answers; the protocol's JSON Schema is generated
//! from them ([`schema`]).

mod child;
mod client;
mod error;
mod process;
pub mod request;
pub mod schema;
mod spec;
mod tail;
mod target;
pub mod wire;

pub use child::{Ended, ProcessGroup, die_with_parent, kill_every_group};
pub use client::{Adapter, CmdStore, Hello};
pub use error::{AdapterError, Ending, Failure, Waiting};
pub use process::{EXIT_GRACE_MS, MAX_ANSWER_BYTES};
pub use spec::{Spec, SpecError, TIMEOUT_MS_DEFAULT};
pub use tail::TAIL_BYTES;
pub use target::CmdTarget;
