//! The binary's one policy for the termination signals (`SIGINT`, `SIGTERM`, `SIGHUP`).
//!
//! [`install`] runs first in the binary's `main`, before any thread or child starts: it blocks
//! the three signals in the main thread (so every thread started later inherits the block; a child
//! started by `std::process` gets an empty mask) and starts one thread that waits for them. A
//! signal can therefore never land on a thread that is not ready for it, whenever it comes.
//!
//! What the waiting thread does with a signal:
//! - while some code holds a [`Deferral`] (a storm, the real kill points: they stop their own
//!   processes and report first), it remembers the signal; the deferring code sees it in
//!   [`Deferral::pending`], unwinds (its processes are killed and its folders removed by their
//!   drops), and the deferral's drop ends the process;
//! - otherwise it ends the process at once.
//!
//! Ending the process ([`terminate`]) kills every store adapter's process group, removes the
//! janitor's process root (every temporary folder of this process lives inside it), then exits
//! with 128 + the signal, as a shell reports a process killed by it. Children die of their
//! parent-death signal when this process is gone.
//!
//! Before all that, it removes the temporary file of any output being written
//! (`fencesim_sim::files::Temporary`, beside a report or a kept database): no drop runs at an exit.
//!
//! Library users (tests, benchmarks) never install the policy: a [`Deferral`] then defers nothing,
//! and a signal takes its default course.

#![allow(clippy::disallowed_methods, reason = "the signal thread is a real thread of the binary, outside any world")]

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

use nix::sys::signal::{SigSet, Signal};

/// The signals the policy covers.
pub const TERMINATION: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// Whether [`install`] ran in this process.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// How many [`Deferral`]s are alive.
static DEFERRING: AtomicUsize = AtomicUsize::new(0);
/// The first signal caught (0: none).
static CAUGHT: AtomicI32 = AtomicI32::new(0);
/// Held by whoever ends the process, for good: a second caller waits for the exit.
static ENDING: Mutex<()> = Mutex::new(());

fn termination_set() -> SigSet {
    let mut set = SigSet::empty();
    TERMINATION.into_iter().for_each(|s| set.add(s));
    set
}

/// Block the termination signals in this thread and start the thread that waits for them. Call
/// it once, from `main`, before any other thread or child exists.
pub fn install() -> Result<(), nix::Error> {
    let set = termination_set();
    set.thread_block()?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while let Ok(signal) = set.wait() {
                let _ = CAUGHT.compare_exchange(0, signal as i32, Ordering::SeqCst, Ordering::SeqCst);
                if DEFERRING.load(Ordering::SeqCst) == 0 {
                    terminate(caught().unwrap_or(signal));
                }
            }
        })
        .map_err(|_| nix::Error::EAGAIN)?;
    INSTALLED.store(true, Ordering::SeqCst);
    Ok(())
}

/// The first termination signal this process received, if any.
pub fn caught() -> Option<Signal> {
    Signal::try_from(CAUGHT.load(Ordering::SeqCst)).ok()
}

/// Remove the process root and exit with 128 + `signal`. Never returns; a second caller waits
/// for the first one's exit.
pub fn terminate(signal: Signal) -> ! {
    let guard = ENDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // A report or kept database being written: its temporary file beside the output goes.
    fencesim_sim::files::remove_temporaries();
    // The parent-death signal reaches a store adapter, never what it started: its group goes.
    fencesim_protocol::kill_every_group();
    crate::proc::janitor::release_process_root();
    std::mem::forget(guard);
    std::process::exit(128 + signal as i32)
}

/// Holds the termination signals back while it lives: a signal is remembered for
/// [`Deferral::pending`] instead of ending the process, and ends it when the deferral drops
/// (after the drops of everything made after it: its processes and folders). Without the policy
/// installed it defers nothing.
pub struct Deferral(());

impl Deferral {
    pub fn start() -> Self {
        DEFERRING.fetch_add(1, Ordering::SeqCst);
        Deferral(())
    }

    /// A termination signal that arrived, if any.
    pub fn pending(&self) -> Option<Signal> {
        if INSTALLED.load(Ordering::SeqCst) { caught() } else { None }
    }
}

impl Drop for Deferral {
    fn drop(&mut self) {
        DEFERRING.fetch_sub(1, Ordering::SeqCst);
        if let Some(signal) = self.pending() {
            terminate(signal);
        }
    }
}
