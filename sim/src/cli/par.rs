//! Many worlds at once, at the CLI edge: each world runs on an OS thread of its own with its own
//! madsim runtime, so worlds never share a scheduler and each stays deterministic. Also the wall
//! clock for throughput figures and the progress line, shown only on a terminal.

#![allow(clippy::disallowed_methods, reason = "the CLI edge measures wall time and runs worlds on OS threads")]

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use fencesim::history::lock;

/// `f` over every item on `jobs` threads; results in item order.
pub fn map<T: Sync, R: Send>(items: &[T], jobs: usize, progress: &Progress, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(item) = items.get(i) else { break };
                    let result = f(item);
                    lock(&results)[i] = Some(result);
                    progress.tick();
                }
            });
        }
    });
    progress.finish();
    results.into_inner().unwrap_or_else(|p| p.into_inner()).into_iter().flatten().collect()
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
            eprint!("\r{} [{}{}] {done}/{}", self.label, "#".repeat(filled), ".".repeat(width - filled), self.total);
            let _ = std::io::stderr().flush();
        }
    }

    fn finish(&self) {
        if self.shown {
            eprint!("\r{}\r", " ".repeat(self.label.len() + 50));
        }
    }
}

/// Wall-clock seconds since creation.
pub struct Stopwatch(Instant);

impl Stopwatch {
    pub fn start() -> Self {
        Self(Instant::now())
    }

    pub fn seconds(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

/// The default job count: the machine's cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
