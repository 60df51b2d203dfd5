//! Checkpoint blobs (contracts 3.5): the state of a dispatch at a turn boundary, saved at
//! `<run>/ckpt/<running seq>` and overwritten in place. The encoding is a format byte `0x01` then
//! JSON. A blob that does not decode is refused whole: the dispatch reruns from the top.

use serde::{Deserialize, Serialize};

const FORMAT: u8 = 0x01;

/// A dispatch's progress: turns taken and tools executed so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub turns: u32,
    pub tool_calls_used: u32,
}

impl Checkpoint {
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![FORMAT];
        // Two integer fields cannot fail to serialize.
        bytes.extend(serde_json::to_vec(self).unwrap_or_default());
        bytes
    }

    /// The checkpoint, or `None` for anything undecodable: a wrong format byte, bad JSON, or
    /// counters that contradict each other or the dispatch's caps.
    pub fn decode(bytes: &[u8], max_turns: u32, max_tool_calls: u32) -> Option<Checkpoint> {
        let (&format, json) = bytes.split_first()?;
        if format != FORMAT {
            return None;
        }
        let ckpt: Checkpoint = serde_json::from_slice(json).ok()?;
        let sane =
            ckpt.turns <= max_turns && ckpt.tool_calls_used <= max_tool_calls && ckpt.tool_calls_used <= ckpt.turns;
        sane.then_some(ckpt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage_whole() {
        let ckpt = Checkpoint { turns: 2, tool_calls_used: 2 };
        assert_eq!(Checkpoint::decode(&ckpt.encode(), 4, 2), Some(ckpt));
        assert_eq!(Checkpoint::decode(b"", 4, 2), None);
        assert_eq!(Checkpoint::decode(b"\x02{}", 4, 2), None);
        assert_eq!(Checkpoint::decode(b"\x01{\"turns\":1", 4, 2), None);
        // Garbage counters: more tools than turns, or past the caps.
        assert_eq!(Checkpoint::decode(&Checkpoint { turns: 1, tool_calls_used: 2 }.encode(), 4, 2), None);
        assert_eq!(Checkpoint::decode(&Checkpoint { turns: 9, tool_calls_used: 0 }.encode(), 4, 2), None);
    }
}
