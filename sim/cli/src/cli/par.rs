//! Many worlds at once, at the CLI edge: each world runs on an OS thread of its own with its own
//! madsim runtime, so worlds never share a scheduler and each stays deterministic. Also the wall
//! clock for throughput figures and the progress line, shown only on a terminal.

#![allow(clippy::disallowed_methods, reason = "the CLI edge measures wall time and runs worlds on OS threads")]

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use fencesim_real::soak::wall::Stopwatch;
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

/// `f` over the indexes `0..count` on at most `jobs` threads, each result handed to `sink` in
/// index order ([`fencesim_real::par::stream`], which bounds the results waiting and stops when
/// `sink` returns `false`), ticking the progress line. File worlds on a thread reuse its last file
/// world's folder and connections ([`FileReuse`]) until the thread is done, and the folder goes
/// before `stream` returns.
pub fn stream<R: Send>(
    count: u64,
    jobs: usize,
    progress: &Progress,
    f: impl Fn(u64) -> R + Sync,
    sink: impl FnMut(u64, R) -> bool + Send,
) {
    fencesim_real::par::stream(count, jobs, FileReuse::on_this_thread, || progress.tick(), f, sink);
    progress.finish();
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
