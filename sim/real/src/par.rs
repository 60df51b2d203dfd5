//! Many jobs at once, their results in order: the one ordered pool of OS threads, used by the
//! CLI's sweeps and mutants (worlds, each deterministic on a madsim runtime of its own) and by the
//! real kill points (points, each two real processes that mostly wait).

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};

use fencesim_sim::history::lock;

/// `f` over the indexes `0..count` on at most `jobs` threads (never more threads than items),
/// handing each result to `sink` in index order as soon as every earlier one has been handed on.
/// Memory stays constant in `count`: a thread takes index `i` only once `sink` has seen every
/// index below `i - window`, so at most `window` results wait for a slow earlier one. Returns
/// early (the indexes not yet taken are never run; those running finish) when `sink` returns
/// `false`. Each thread holds what `on_thread` returns while it runs, and calls `done` after each
/// index.
pub fn stream<G, R: Send>(
    count: u64,
    jobs: usize,
    on_thread: impl Fn() -> G + Sync,
    done: impl Fn() + Sync,
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
                let _held = on_thread();
                while let Some(i) = State::take(&state, &room, count, window) {
                    let result = f(i);
                    done();
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

/// `f` over every item on at most `jobs` threads, results in item order, stopping at the first
/// error in that order: once it is handed on, no item is started (those running finish), and it
/// is returned.
pub fn try_map<T: Sync, R: Send, E: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E> {
    let mut results = Vec::with_capacity(items.len());
    let mut failed = None;
    stream(
        items.len() as u64,
        jobs,
        || (),
        || {},
        |i| f(&items[i as usize]),
        |_, result| match result {
            Ok(r) => {
                results.push(r);
                true
            }
            Err(e) => {
                failed = Some(e);
                false
            }
        },
    );
    if let Some(e) = failed {
        return Err(e);
    }
    // A sink that stops only on an error sees every index: a result per item, in item order.
    assert_eq!(results.len(), items.len(), "par::try_map lost results");
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn results_come_back_in_order_and_the_first_error_wins() {
        let items: Vec<usize> = (0..50).collect();
        let squares: Result<Vec<usize>, String> = try_map(&items, 4, |&i| Ok(i * i));
        assert_eq!(squares, Ok(items.iter().map(|i| i * i).collect()));
        assert_eq!(try_map(&[] as &[usize], 4, |&i| Ok::<_, String>(i)), Ok(vec![]));
        let fail = |&i: &usize| if i == 3 || i == 5 { Err(format!("job {i}")) } else { Ok(i) };
        // Index 3 is always taken before index 5, and the sink sees errors in index order.
        assert_eq!(try_map(&items, 4, fail), Err("job 3".to_owned()));
        // One at a time, nothing starts after the error.
        let started = AtomicUsize::new(0);
        let one = try_map(&items, 1, |i| {
            started.fetch_add(1, Ordering::SeqCst);
            fail(i)
        });
        assert_eq!(one, Err("job 3".to_owned()));
        assert_eq!(started.load(Ordering::SeqCst), 4);
    }
}
