//! Everything ambient the engine needs, taken from outside: the time in milliseconds, sleeping,
//! and an async fault point before and after every durable write and around every paid call.
//! The simulator's `Env` runs on virtual time and can stall, crash or fail a call at any point;
//! [`RealEnv`] uses the system clock and tokio.

use std::fmt;
use std::future::Future;

use fencesim_store::{Epoch, JournalEntry, RunId, RunMeta, Seq, StoreError};

/// What the engine is about to do (or just did) at a fault point.
#[derive(Clone, Copy, Debug)]
pub struct Point<'a> {
    pub run: &'a RunId,
    /// The lease epoch the segment holds, if it holds one.
    pub epoch: Option<Epoch>,
    pub site: Site<'a>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Before,
    After,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Before => "before",
            Phase::After => "after",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Site<'a> {
    /// A durable write; `index` counts the writes of this segment (or cascade) from 0.
    Write { index: u32, phase: Phase, write: Write<'a> },
    /// A segment is about to take its lease (or to run unleased). With the `read-before-own`
    /// defect, the journal and meta have already been read.
    Acquiring,
    /// The lease is held (or the segment runs unleased); the reads come next (correct order).
    Owned,
    /// A paid model call of the dispatch at `running`, turn `turn` (from 1).
    Call { running: Seq, turn: u32 },
    /// A tool execution of the dispatch at `running`; `n` counts its executed tools from 1.
    Tool { running: Seq, n: u32 },
}

/// A durable write.
#[derive(Clone, Copy, Debug)]
pub enum Write<'a> {
    Append(&'a JournalEntry),
    PutMeta(&'a RunMeta),
    PutBlob { blob_ref: &'a str, bytes: &'a [u8] },
    DeleteBlob(&'a str),
    DeleteRun,
}

impl Write<'_> {
    pub fn surface(&self) -> &'static str {
        match self {
            Write::Append(_) => "append",
            Write::PutMeta(_) => "put_meta",
            Write::PutBlob { .. } => "put_blob",
            Write::DeleteBlob(_) => "delete_blob",
            Write::DeleteRun => "delete",
        }
    }
}

impl fmt::Display for Write<'_> {
    /// One stable line: what the write is, for traces and the kill-point table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Write::Append(e) => {
                write!(f, "append seq={} {}/{}", e.seq, e.kind, e.status)?;
                if let Some(r) = e.ref_seq {
                    write!(f, " ref={r}")?;
                }
                if let Some(key) = crate::entries::key_of(e) {
                    write!(f, " key={key}")?;
                }
                if let Some(settle) = crate::entries::as_settle(e) {
                    write!(f, " run_settle={}", settle.run_status)?;
                }
                Ok(())
            }
            Write::PutMeta(m) => write!(f, "put_meta status={} segments={}", m.status, m.segments),
            Write::PutBlob { blob_ref, bytes } => write!(f, "put_blob {blob_ref} bytes={}", bytes.len()),
            Write::DeleteBlob(r) => write!(f, "delete_blob {r}"),
            Write::DeleteRun => f.write_str("delete run"),
        }
    }
}

/// What a fault point tells the engine to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    Continue,
    /// The process dies here: the segment stops at once, writing nothing more (no settle, no
    /// release). The engine returns [`crate::EngineError::Crashed`].
    Crash,
    /// At a write's `Before` point: the store call fails with this error instead of running. At
    /// its `After` point: the call committed but the caller sees this error (an ambiguous commit).
    Fail(StoreError),
}

/// The engine's window on time, sleeping and faults.
pub trait Env {
    /// Milliseconds on this node's clock.
    fn now_ms(&self) -> i64;
    /// Sleep for `ms` milliseconds of this environment's time.
    fn sleep(&self, ms: u64) -> impl Future<Output = ()>;
    /// A fault point. May stall (sleep) before answering.
    fn fault(&self, point: &Point<'_>) -> impl Future<Output = Fault>;
    /// The paid effect at `point` (a call turn or a tool) goes ahead now: after its fault point
    /// let it, and after the segment checked it was not cancelled in the meantime (a stall at
    /// the fault point can outlive the lease). A recorder counts effects here, not at the point.
    fn paid(&self, _point: &Point<'_>) {}
    /// The engine took the branch `probe` names (`crate::probe`): a simulator counts it.
    fn probe(&self, _probe: crate::Probe) {}
}

/// Real time: the system clock and tokio's timer. For real processes only (the soak, a host).
#[derive(Clone, Copy, Debug, Default)]
pub struct RealEnv;

impl Env for RealEnv {
    fn now_ms(&self) -> i64 {
        fencesim_store::real_time::unix_ms()
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        tokio::time::sleep(std::time::Duration::from_millis(ms))
    }

    fn fault(&self, _point: &Point<'_>) -> impl Future<Output = Fault> {
        std::future::ready(Fault::Continue)
    }
}
