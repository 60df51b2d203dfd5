//! A fast 64-bit hasher for values that need only agree within one build: a simulated world's
//! fingerprint (fed by derived `Hash` impls, which a new compiler may change) and the store's
//! decode memo (`sqlite/memo.rs`).

/// A fast 64-bit hasher for digests that need only agree within one build, such as a world's
/// fingerprint fed by derived `Hash` impls (which a new compiler may change): it mixes whole
/// 64-bit words, where FNV spends a multiply on every byte. Anything persisted or compared
/// across builds uses the oracle's `digest` or `digest_json` instead.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mix(u64);

impl Mix {
    fn word(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(26) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl std::hash::Hasher for Mix {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.word(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            // The count of trailing bytes marks the word, so "a\0" and "a" differ.
            self.word(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 61));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.word(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.word(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.word(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.word(n as u64);
    }

    fn write_i64(&mut self, n: i64) {
        self.word(n as u64);
    }

    /// The murmur3 finaliser, so that every input bit reaches every output bit.
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}
