//! What the zombie knows of the leases granted so far, read from the history once each
//! (`History::grants_since`) and kept indexed, so that a probe costs no scan of every grant: the
//! superseded grants it probes with (a grant of a run granted a higher epoch since), the workload
//! runs of every grant (repeats kept) and the distinct workload runs, sorted. A world's timed
//! events are up to 10,000 zombie probes, and each used to copy and sort every grant so far: the
//! probes' cost grew with the square of the schedule (measured, release build: 2,500 probes 1.8 s,
//! 10,000 probes 28.9 s). Each pick is the one the old scans made, for the same draw.

use std::collections::BTreeMap;

use fencesim_store::{Epoch, Lease, RunId};

use crate::rng::Stream;

/// Which grants a zombie never probes with, and which runs it calls its own.
pub(super) struct Exclusions {
    /// A run of the zombie's own (its scratch runs and victims): never a workload run.
    pub scratch: fn(&RunId) -> bool,
    /// A lease owner whose grants are never probed with (the usurper's).
    pub owner: fn(&str) -> bool,
}

/// The grants read so far, indexed.
pub(super) struct Granted {
    exclusions: Exclusions,
    /// Every grant read, in grant order.
    leases: Vec<Lease>,
    /// Per workload run: the highest epoch granted, and the probe-able grants (by index in
    /// `leases`) no higher epoch has superseded yet.
    tops: BTreeMap<RunId, (Epoch, Vec<usize>)>,
    /// Which grants are superseded and probe-able, by index in `leases`.
    superseded: Counts,
    /// The workload run of every grant, in grant order, repeats kept.
    workload: Vec<RunId>,
    /// The distinct workload runs granted, sorted.
    distinct: Vec<RunId>,
}

impl Granted {
    pub(super) fn new(exclusions: Exclusions) -> Self {
        Self {
            exclusions,
            leases: Vec::new(),
            tops: BTreeMap::new(),
            superseded: Counts::default(),
            workload: Vec::new(),
            distinct: Vec::new(),
        }
    }

    /// How many grants were read: where the next read starts.
    pub(super) fn known(&self) -> usize {
        self.leases.len()
    }

    /// Index the grants that followed those already read, in grant order.
    pub(super) fn extend(&mut self, grants: Vec<Lease>) {
        for lease in grants {
            self.add(lease);
        }
    }

    fn add(&mut self, lease: Lease) {
        let index = self.leases.len();
        self.superseded.push(0);
        if !(self.exclusions.scratch)(&lease.run) {
            self.workload.push(lease.run.clone());
            if let Err(at) = self.distinct.binary_search(&lease.run) {
                self.distinct.insert(at, lease.run.clone());
            }
            let (top, live) = self.tops.entry(lease.run.clone()).or_insert((lease.epoch, Vec::new()));
            if lease.epoch > *top {
                // Every grant still live held at most the old top: all of them are superseded now.
                for i in live.drain(..) {
                    self.superseded.add(i);
                }
                *top = lease.epoch;
            }
            if !(self.exclusions.owner)(&lease.owner) {
                if lease.epoch < *top {
                    self.superseded.add(index);
                } else {
                    live.push(index);
                }
            }
        }
        self.leases.push(lease);
        // The counts are indexed by grant: one slot per grant read.
        assert_eq!(self.superseded.tree.len(), self.leases.len(), "a grant without its slot in the counts");
    }

    /// A superseded grant (not the usurper's, not of a scratch run), picked as `rng.pick` picks
    /// from them listed in grant order.
    pub(super) fn pick_superseded(&self, rng: &mut Stream) -> Option<&Lease> {
        let k = rng.pick_index(self.superseded.total())?;
        let picked = self.leases.get(self.superseded.select(k));
        // A counted grant exists, and its run was granted a higher epoch since: the zombie probes
        // only with a lease the store must refuse, whatever the store granted.
        assert!(picked.is_some(), "grant {k} of {} superseded is not one read", self.superseded.total());
        assert!(
            picked.is_some_and(|l| self.tops.get(&l.run).is_some_and(|(top, _)| l.epoch < *top)),
            "a probe picked a grant no higher epoch superseded"
        );
        picked
    }

    /// The workload run of a grant, picked as `rng.pick` picks from every grant's run (repeats
    /// kept) in grant order.
    pub(super) fn pick_workload_grant(&self, rng: &mut Stream) -> Option<&RunId> {
        rng.pick(&self.workload)
    }

    /// The distinct workload runs granted, sorted.
    pub(super) fn distinct_runs(&self) -> &[RunId] {
        &self.distinct
    }
}

/// A growable Fenwick tree of counts: add one at an index, and find the `k`-th counted index in
/// order, each in logarithmic time.
#[derive(Default)]
struct Counts {
    /// `tree[i - 1]` sums the counts of the indices `(i - lowbit(i), i]` (one-based).
    tree: Vec<usize>,
    total: usize,
}

impl Counts {
    /// Append an index counting `count`.
    fn push(&mut self, count: usize) {
        let i = self.tree.len() + 1;
        let low = i & i.wrapping_neg();
        let below = self.prefix(i - 1) - self.prefix(i - low);
        self.tree.push(count + below);
        self.total += count;
    }

    /// Count index `index` (zero-based) once more.
    fn add(&mut self, index: usize) {
        assert!(index < self.tree.len(), "count of index {index} past the {} pushed", self.tree.len());
        let mut i = index + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] += 1;
            i += i & i.wrapping_neg();
        }
        self.total += 1;
    }

    /// The sum of the counts of the first `n` indices.
    fn prefix(&self, mut n: usize) -> usize {
        let mut sum = 0;
        while n > 0 {
            sum += self.tree[n - 1];
            n -= n & n.wrapping_neg();
        }
        sum
    }

    fn total(&self) -> usize {
        self.total
    }

    /// The zero-based index holding the `k`-th count (from 0), for `k` below the total.
    fn select(&self, mut k: usize) -> usize {
        assert!(k < self.total, "the {k}-th of {} counts", self.total);
        let mut at = 0;
        let mut step = if self.tree.is_empty() { 0 } else { 1 << self.tree.len().ilog2() };
        while step > 0 {
            if at + step <= self.tree.len() && self.tree[at + step - 1] <= k {
                at += step;
                k -= self.tree[at - 1];
            }
            step >>= 1;
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(run: &RunId) -> bool {
        run.as_str().starts_with("zz-")
    }

    fn usurper(owner: &str) -> bool {
        owner == "usurper"
    }

    /// The scans the zombie made before, over every grant so far.
    fn superseded_by_scan(grants: &[Lease]) -> Vec<Lease> {
        let mut top: BTreeMap<&RunId, Epoch> = BTreeMap::new();
        for g in grants {
            let epoch = top.entry(&g.run).or_insert(g.epoch);
            *epoch = (*epoch).max(g.epoch);
        }
        grants.iter().filter(|g| !usurper(&g.owner) && top[&g.run] > g.epoch && !scratch(&g.run)).cloned().collect()
    }

    fn distinct_by_scan(grants: &[Lease]) -> Vec<RunId> {
        let mut runs: Vec<RunId> = grants.iter().map(|g| g.run.clone()).filter(|r| !scratch(r)).collect();
        runs.sort();
        runs.dedup();
        runs
    }

    /// Over grants in any order of epochs (a defective store repeats and lowers them), by any
    /// owner, of workload and scratch runs, every pick is the one the old scans made, for the
    /// same draws; and each grant is read once.
    #[test]
    fn every_pick_is_the_one_the_scans_made() {
        let mut draw = Stream::new(38);
        let mut granted = Granted::new(Exclusions { scratch, owner: usurper });
        let mut grants = Vec::new();
        for step in 0..3_000u64 {
            let run = match draw.below(10) {
                0 => RunId::new(format!("zz-zombie-{step}")),
                n => RunId::new(format!("r{:02}", draw.below(n * 4))),
            };
            let owner = ["w1", "w2", "usurper", "zombie"][usize::try_from(draw.below(4)).unwrap_or(0)];
            let lease =
                Lease { run, owner: owner.to_owned(), epoch: Epoch(i64::try_from(draw.below(40)).unwrap_or(0)) };
            grants.push(lease.clone());
            granted.extend(vec![lease]);
            assert_eq!(granted.known(), grants.len());
            let (mut a, mut b) = (Stream::new(step), Stream::new(step));
            let scanned = superseded_by_scan(&grants);
            assert_eq!(granted.pick_superseded(&mut a), b.pick(&scanned), "step {step}");
            assert_eq!(granted.distinct_runs(), distinct_by_scan(&grants).as_slice(), "step {step}");
            let workload: Vec<RunId> = grants.iter().map(|g| g.run.clone()).filter(|r| !scratch(r)).collect();
            assert_eq!(granted.pick_workload_grant(&mut a), b.pick(&workload), "step {step}");
            assert_eq!(a.next_u64(), b.next_u64(), "step {step}: the draws stay in step");
        }
    }

    #[test]
    fn counts_select_the_kth_counted_index() {
        let mut counts = Counts::default();
        let mut marked = Vec::new();
        let mut draw = Stream::new(7);
        for i in 0..500 {
            let now = draw.below(3) == 0;
            counts.push(usize::from(now));
            marked.push(now);
            if i > 0 && draw.below(2) == 0 {
                let j = usize::try_from(draw.below(i)).unwrap_or(0);
                if !marked[j] {
                    marked[j] = true;
                    counts.add(j);
                }
            }
            let expected: Vec<usize> = (0..marked.len()).filter(|j| marked[*j]).collect();
            assert_eq!(counts.total(), expected.len());
            for (k, want) in expected.iter().enumerate() {
                assert_eq!(counts.select(k), *want, "after {i}: select({k})");
            }
        }
    }
}
