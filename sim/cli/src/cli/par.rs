//! Many worlds at once, at the CLI edge: each world runs on an OS thread of its own with its own
//! madsim runtime, so worlds never share a scheduler and each stays deterministic. Also the wall
//! clock for throughput figures and the progress line, shown only on a terminal.

#![allow(clippy::disallowed_methods, reason = "the CLI edge measures wall time and runs worlds on OS threads")]

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

pub use fencesim_real::soak::wall::Stopwatch;
use fencesim_sim::history::lock;
use fencesim_sim::stores::FileReuse;

use super::out::err;

/// The most worlds one command may run at once: more threads than this only thrash.
pub const MAX_JOBS: usize = 256;

/// `--jobs`, checked: at least 1 and at most [`MAX_JOBS`]; the machine's cores when not given.
pub fn jobs(requested: Option<usize>) -> anyhow::Result<usize> {
    match requested {
        Some(0) => anyhow::bail!("--jobs must be at least 1"),
        Some(j) if j > MAX_JOBS => anyhow::bail!("--jobs {j} is more than the limit of {MAX_JOBS}"),
        Some(j) => Ok(j),
        None => Ok(default_jobs().min(MAX_JOBS)),
    }
}

/// `f` over every item on `jobs` threads; results in item order.
pub fn map<T: Sync, R: Send>(items: &[T], jobs: usize, progress: &Progress, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let mut results = Vec::with_capacity(items.len());
    stream(
        items.len() as u64,
        jobs,
        progress,
        |i| f(&items[i as usize]),
        |_, r| {
            results.push(r);
            true
        },
    );
    // A sink that never stops sees every index: a result per item, in item order.
    assert_eq!(results.len(), items.len(), "par::map lost results");
    results
}

/// `f` over the indexes `0..count` on at most `jobs` threads (never more threads than items),
/// handing each result to `sink` in index order as soon as every earlier one has been handed on.
/// Memory stays constant in `count`: a thread takes index `i` only once `sink` has seen every
/// index below `i - window`, so at most `window` results wait for a slow earlier one. Returns
/// early (the indexes not yet taken are never run) when `sink` returns `false`. File worlds on a
/// thread reuse its last file world's folder and connections ([`FileReuse`]) until the thread is
/// done, and the folder goes before `stream` returns.
pub fn stream<R: Send>(
    count: u64,
    jobs: usize,
    progress: &Progress,
    f: impl Fn(u64) -> R + Sync,
    mut sink: impl FnMut(u64, R) -> bool + Send,
) {
    let threads = (jobs.max(1) as u64).min(count.max(1)) as usize;
    let window = (threads as u64) * 4;
    let state = Mutex::new(State { next: 0, emitted: 0, stopped: false, pending: BTreeMap::new() });
    let room = Condvar::new();
    let sink = Mutex::new(&mut sink);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let _reuse = FileReuse::on_this_thread();
                while let Some(i) = State::take(&state, &room, count, window) {
                    let result = f(i);
                    progress.tick();
                    // Hand on every result that is now in order; the sink runs under its own lock
                    // so results reach it one at a time and in index order.
                    let mut sink = lock(&sink);
                    let ready = lock(&state).in_order(i, result, window);
                    let mut go_on = true;
                    for (index, r) in ready {
                        go_on = go_on && sink(index, r);
                    }
                    drop(sink);
                    let mut s = lock(&state);
                    if !go_on {
                        s.stopped = true;
                    }
                    drop(s);
                    room.notify_all();
                }
            });
        }
    });
    progress.finish();
}

/// What [`stream`]'s threads share: the next index to take, how many results were handed on, whether
/// the sink stopped, and the results waiting for an earlier one.
struct State<R> {
    next: u64,
    emitted: u64,
    stopped: bool,
    pending: BTreeMap<u64, R>,
}

impl<R> State<R> {
    /// The next index of `0..count` for a thread to run, taken once it is within `window` of what
    /// was handed on (waiting on `room` till then); none once the sink stopped or every index is
    /// taken.
    fn take(state: &Mutex<State<R>>, room: &Condvar, count: u64, window: u64) -> Option<u64> {
        let mut s = lock(state);
        while !s.stopped && s.next < count && s.next >= s.emitted + window {
            s = room.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.stopped || s.next >= count {
            return None;
        }
        s.next += 1;
        // Taken only within the window past what was handed on.
        assert!(s.next <= s.emitted + window, "index {} taken past the window", s.next - 1);
        Some(s.next - 1)
    }

    /// Queue result `i`, and take every result now in index order, to hand on.
    fn in_order(&mut self, i: u64, result: R, window: u64) -> Vec<(u64, R)> {
        self.pending.insert(i, result);
        // The memory bound: at most `window` results wait for an earlier one.
        assert!(self.pending.len() as u64 <= window, "{} results wait, past {window}", self.pending.len());
        let mut ready = Vec::new();
        loop {
            let at = self.emitted;
            let Some(r) = self.pending.remove(&at) else { break };
            ready.push((at, r));
            self.emitted += 1;
        }
        ready
    }
}

/// A progress line on stderr, drawn only when stderr is a terminal (never in CI logs).
pub struct Progress {
    label: String,
    total: usize,
    done: AtomicUsize,
    shown: bool,
}

impl Progress {
    pub fn new(label: impl Into<String>, total: usize) -> Self {
        Self { label: label.into(), total, done: AtomicUsize::new(0), shown: std::io::stderr().is_terminal() }
    }

    fn tick(&self) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if self.shown {
            let width = 30;
            let filled = done * width / self.total.max(1);
            err!("\r{} [{}{}] {done}/{}", self.label, "#".repeat(filled), ".".repeat(width - filled), self.total);
        }
    }

    fn finish(&self) {
        if self.shown {
            err!("\r{}\r", " ".repeat(self.label.len() + 50));
        }
    }
}

/// The default job count: the machine's cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
