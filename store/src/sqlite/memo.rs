//! Decoded records memoised by their stored text, per connection. A world's actors read the same
//! journals and run metas again and again (every worker's poll lists the metas, every segment
//! loads its journal, the world's settled check reads them every half virtual second), and
//! decoding their JSON was a tenth of a simulated world. Decoding is a pure function of the text,
//! so a row whose stored text equals one decoded before decodes to that record again: the memo
//! changes no result, and a row whose text changed (a corrupted payload among them) is decoded,
//! and refused, afresh. Only records that decoded are kept. Bounded at 4096 records a memo: when
//! full, it starts over. Records are found by a hash of their text, then the text itself is
//! compared: one string compare a lookup, where a map keyed by the text compared it against
//! several.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hash::Hasher;

use crate::Mix;

/// At most this many records per memo: a few worlds' worth, a few MB at worst.
const CAPACITY: usize = 4096;

#[derive(Debug)]
pub(super) struct Memo<T> {
    /// hash of the text -> the text and its record (the last text seen of that hash).
    decoded: RefCell<BTreeMap<u64, (Box<str>, T)>>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Self { decoded: RefCell::new(BTreeMap::new()) }
    }
}

impl<T: Clone> Memo<T> {
    /// The record `text` decodes to: remembered, or `decode(text)` (remembered if it succeeds).
    pub fn decode<E>(&self, text: &str, decode: impl FnOnce(&str) -> Result<T, E>) -> Result<T, E> {
        let key = hash(text);
        if let Some((known, value)) = self.decoded.borrow().get(&key)
            && **known == *text
        {
            return Ok(value.clone());
        }
        let value = decode(text)?;
        let mut decoded = self.decoded.borrow_mut();
        if decoded.len() >= CAPACITY {
            decoded.clear();
        }
        decoded.insert(key, (text.into(), value.clone()));
        // The bound the memory promise rests on: a full memo starts over before it grows.
        assert!(decoded.len() <= CAPACITY, "a decode memo grew to {} records, past {CAPACITY}", decoded.len());
        Ok(value)
    }

    /// How many records it holds (for tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.decoded.borrow().len()
    }
}

/// The memo's key: texts that collide are told apart by comparing them, so it need only spread
/// typical records well.
fn hash(text: &str) -> u64 {
    let mut h = Mix::default();
    h.write(text.as_bytes());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_decoded_once_and_a_failure_is_not_remembered() {
        let memo: Memo<u32> = Memo::default();
        let mut calls = 0;
        let mut parse = |t: &str| {
            calls += 1;
            t.parse::<u32>().map_err(|_| "not a number")
        };
        assert_eq!(memo.decode("7", &mut parse), Ok(7));
        assert_eq!(memo.decode("7", &mut parse), Ok(7));
        assert_eq!(memo.decode("x", &mut parse), Err("not a number"));
        assert_eq!(memo.decode("x", &mut parse), Err("not a number"));
        assert_eq!(memo.decode("8", &mut parse), Ok(8));
        assert_eq!(calls, 4, "7 once, x twice, 8 once");
        assert_eq!(memo.len(), 2);
    }

    /// Two texts of one hash: each lookup compares the text, so neither is taken for the other.
    #[test]
    fn texts_of_one_hash_are_told_apart() {
        let memo: Memo<String> = Memo::default();
        let (a, b) = ("first", "second");
        let (key_a, known) = (hash(a), memo.decode(a, |t| Ok::<_, ()>(t.to_owned())));
        assert_eq!(known, Ok(a.to_owned()));
        // Plant `b`'s record under `a`'s hash, as a collision would.
        memo.decoded.borrow_mut().insert(key_a, (b.into(), b.to_owned()));
        let mut decoded = 0;
        let again = memo.decode(a, |t| {
            decoded += 1;
            Ok::<_, ()>(t.to_owned())
        });
        assert_eq!(
            (again, decoded),
            (Ok(a.to_owned()), 1),
            "a's text differs from what its hash holds: decoded afresh"
        );
    }

    #[test]
    fn a_full_memo_starts_over() {
        let memo: Memo<usize> = Memo::default();
        for i in 0..CAPACITY + 1 {
            let text = i.to_string();
            assert_eq!(memo.decode(&text, |t| t.parse::<usize>().map_err(drop)), Ok(i));
        }
        assert_eq!(memo.len(), 1);
    }
}
