//! The world's randomness: one ChaCha stream per seed, from which every component forks its own
//! stream by label. Forking by label (not by draw order) keeps a component's choices stable when
//! another component draws more or less: adding a fault kind does not reshuffle the workload.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use fencesim_oracle::history::digest;

/// A deterministic random stream.
#[derive(Clone, Debug)]
pub struct Stream {
    seed: u64,
    rng: ChaCha8Rng,
}

impl Stream {
    pub fn new(seed: u64) -> Self {
        Self { seed, rng: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// An independent stream for `label`, a pure function of this stream's seed and the label.
    pub fn fork(&self, label: &str) -> Stream {
        let mut bytes = self.seed.to_le_bytes().to_vec();
        bytes.extend_from_slice(label.as_bytes());
        Stream::new(digest(&bytes))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift; the bias for the small ranges used here is negligible.
        let drawn = ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64;
        // Every pick and index drawn from it relies on the draw staying below `n`.
        assert!(drawn < n, "a draw of {drawn} below {n}");
        drawn
    }

    /// Uniform in `lo..=hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        let drawn = if hi <= lo { lo } else { lo + self.below(hi - lo + 1) };
        // A plan's spans are inclusive and its settings are drawn inside them.
        assert!(drawn == lo || (lo..=hi).contains(&drawn), "a draw of {drawn} outside {lo}..={hi}");
        drawn
    }

    /// Uniform in `[lo, hi)`.
    pub fn unit_range(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        // 53 bits over 2^53: exact, and below one, so a chance of one always holds.
        assert!((0.0..1.0).contains(&unit), "a unit draw of {unit}");
        lo + (hi - lo) * unit
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit_range(0.0, 1.0) < p
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.pick_index(items.len())?)
    }

    /// The index [`Stream::pick`] picks from `len` items, drawn the same way; `None` when there
    /// are none (which draws nothing).
    pub fn pick_index(&mut self, len: usize) -> Option<usize> {
        let n = u64::try_from(len).ok()?;
        usize::try_from(self.below(n)).ok().filter(|i| *i < len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_forks_are_independent_of_draw_order() {
        let mut a = Stream::new(7);
        let mut b = Stream::new(7);
        assert_eq!((a.next_u64(), a.below(10)), (b.next_u64(), b.below(10)));
        let fork_late = a.fork("faults");
        let fork_early = Stream::new(7).fork("faults");
        assert_eq!(fork_late.clone().next_u64(), fork_early.clone().next_u64());
        assert_ne!(Stream::new(7).fork("faults").next_u64(), Stream::new(7).fork("workload").next_u64());
        assert_ne!(Stream::new(7).next_u64(), Stream::new(8).next_u64());
    }

    #[test]
    fn draws_stay_in_range() {
        let mut s = Stream::new(1);
        for _ in 0..1000 {
            assert!(s.below(3) < 3);
            assert!((5..=9).contains(&s.range(5, 9)));
            let x = s.unit_range(1.1, 3.0);
            assert!((1.1..3.0).contains(&x));
        }
        assert_eq!(s.range(4, 4), 4);
        assert!(!s.chance(0.0));
        assert!(s.chance(1.0));
    }
}
