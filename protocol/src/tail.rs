//! The two byte streams an adapter writes, kept in bounded memory: [`Lines`] cuts its stdout into
//! answer lines in time linear in their length (each byte is scanned for the newline once) and
//! refuses a line over the protocol's maximum; [`Tail`] keeps the last [`TAIL_BYTES`] of its
//! stderr, whatever it writes, for the lines an error quotes.

use std::collections::VecDeque;

/// The most stderr an adapter's errors can quote from: its last 64 KiB.
pub const TAIL_BYTES: usize = 64 << 10;

/// The last bytes of a stream.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    bytes: VecDeque<u8>,
    /// Bytes dropped from the front so far.
    dropped: u64,
}

impl Tail {
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        let chunk = if chunk.len() > TAIL_BYTES {
            let cut = chunk.len() - TAIL_BYTES;
            self.dropped += (cut + self.bytes.len()) as u64;
            self.bytes.clear();
            &chunk[cut..]
        } else {
            chunk
        };
        self.bytes.extend(chunk);
        let over = self.bytes.len().saturating_sub(TAIL_BYTES);
        if over > 0 {
            self.bytes.drain(..over);
            self.dropped += over as u64;
        }
        // Bounded memory whatever an adapter writes to its stderr.
        assert!(self.bytes.len() <= TAIL_BYTES, "a stderr tail of {} bytes", self.bytes.len());
    }

    /// The last `n` non-blank lines, joined with ` | ` (a line the ring cut at its front is not
    /// one of them).
    pub(crate) fn last_lines(&self, n: usize) -> String {
        let bytes: Vec<u8> = self.bytes.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let mut lines: Vec<&str> = text.split('\n').collect();
        if self.dropped > 0 && !lines.is_empty() {
            lines.remove(0);
        }
        let lines: Vec<&str> = lines.into_iter().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(n)..].join(" | ")
    }
}

/// Why a stream is not cut into lines any more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooLong;

/// A byte stream cut into lines of at most `max` bytes (the newline not counted).
#[derive(Debug)]
pub(crate) struct Lines {
    buf: Vec<u8>,
    /// Where the next line starts in `buf`.
    start: usize,
    /// How far past `start` has been scanned for a newline (none found).
    scanned: usize,
    max: usize,
}

impl Lines {
    pub(crate) fn new(max: usize) -> Self {
        Lines { buf: Vec::new(), start: 0, scanned: 0, max }
    }

    /// Bytes received and not yet cut into a line.
    pub(crate) fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole line, if one has arrived; `Err` when the line being received (or the next
    /// whole one) is longer than the maximum. Each byte is scanned once however it was chunked.
    pub(crate) fn next_line(&mut self) -> Result<Option<Vec<u8>>, TooLong> {
        let from = self.start + self.scanned;
        let Some(at) = self.buf[from..].iter().position(|b| *b == b'\n') else {
            self.scanned = self.buf.len() - self.start;
            return if self.scanned > self.max { Err(TooLong) } else { Ok(None) };
        };
        let end = from + at;
        if end - self.start > self.max {
            return Err(TooLong);
        }
        let line = self.buf[self.start..end].to_vec();
        // No answer line past the protocol's maximum is ever handed on.
        assert!(line.len() <= self.max, "a line of {} bytes cut past the maximum of {}", line.len(), self.max);
        self.start = end + 1;
        self.scanned = 0;
        // Compact once the consumed front is at least half the buffer: each byte moves at most
        // once per halving, so the copies stay linear too.
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        // The next line starts inside what was received; nothing of it has been scanned yet.
        assert!(self.start <= self.buf.len() && self.scanned == 0, "lines cut past their buffer");
        Ok(Some(line))
    }

    /// What has arrived of the line being received (for an error's text).
    pub(crate) fn partial(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_last_bytes_and_drops_a_cut_line() {
        let mut tail = Tail::default();
        tail.push(b"first\nsecond\n");
        assert_eq!(tail.last_lines(5), "first | second");
        for _ in 0..(3 * TAIL_BYTES / 10) {
            tail.push(b"123456789\n");
        }
        tail.push(b"last words\n");
        assert!(tail.bytes.len() <= TAIL_BYTES);
        assert_eq!(tail.last_lines(2), "123456789 | last words");
        // One chunk larger than the ring: its end is kept, its cut first line is not quoted.
        tail.push(&[b'x'; 2 * TAIL_BYTES]);
        tail.push(b"\nafter\n");
        assert_eq!(tail.last_lines(5), "after");
    }

    /// The scan is linear: a line delivered a byte at a time is scanned once, not once a byte.
    #[test]
    fn lines_scan_each_byte_once_and_refuse_a_line_over_the_maximum() {
        let mut lines = Lines::new(1 << 20);
        let line = vec![b'a'; 100_000];
        for byte in &line {
            lines.push(std::slice::from_ref(byte));
            assert_eq!(lines.next_line(), Ok(None));
        }
        lines.push(b"\nb\nc");
        assert_eq!(lines.next_line(), Ok(Some(line)));
        assert_eq!(lines.next_line(), Ok(Some(b"b".to_vec())));
        assert_eq!(lines.next_line(), Ok(None));
        assert_eq!(lines.partial(), b"c");
        let mut small = Lines::new(4);
        small.push(b"1234\n12345");
        assert_eq!(small.next_line(), Ok(Some(b"1234".to_vec())));
        assert_eq!(small.next_line(), Err(TooLong));
        let mut whole = Lines::new(4);
        whole.push(b"12345\n");
        assert_eq!(whole.next_line(), Err(TooLong));
    }
}
