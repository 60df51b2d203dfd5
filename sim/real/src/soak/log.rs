//! A writer's log: one JSON object per line, appended with one `write(2)` each to a file opened
//! `O_APPEND` (so a `SIGKILL` loses at most the line being written, and a torn last line is the
//! only damage a reader ever meets). A store call is two lines: `begin` before it (call id, node,
//! surface, target, lease, the whole payload) and `end` after it (outcome, the granted lease of an
//! acquire, the clock the store compared against, the in-lock monotonic stamp). Protocol events
//! (`grant`, `accept`, `stale-reject`, `stall`, `victim`, `done`, ...) are lines of their own.
//!
//! Every line carries, as its last field `"h"`, its place in the log's hash chain ([`super::seal`]):
//! the SHA-256 of the previous line's hash and of the line without it. Readers ignore the field;
//! a kept folder is verified line by line before anything reads it.
//!
//! [`Tail`] reads a log incrementally, keeping an unterminated last line (one being written) for
//! its next read; [`read_all`] reads a finished log, where only that last line may be torn.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use fencesim_oracle::history::Surface;
use fencesim_store::{JournalEntry, Lease, RunId, RunMeta};
use serde::{Deserialize, Serialize};

use super::seal::Chain;
use super::{SoakError, SoakResult};

/// One line of a writer's log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case")]
pub enum Line {
    Begin(Begin),
    End(End),
    Ev(Ev),
}

/// Written just before a store call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Begin {
    pub id: u64,
    pub node: String,
    pub surface: Surface,
    pub run: RunId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob_ref: Option<String>,
    /// The lease the call carried (none for acquire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// For acquire: who asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub payload: LogPayload,
    /// The writer's (skewed) clock when the call began.
    pub clock_ms: i64,
    pub mono_ns: u64,
}

/// Written just after a store call returned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct End {
    pub id: u64,
    pub node: String,
    pub outcome: LogOutcome,
    /// For a granted acquire: the lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<Lease>,
    /// The clock reading the store judged the call by (its last reading during the call), or the
    /// begin reading for a call that never read the clock.
    pub clock_ms: i64,
    /// The monotonic stamp of the store's last clock reading (inside the write transaction, under
    /// SQLite's write lock), or the time the call returned when it read no clock.
    pub mono_ns: u64,
    /// Whether `mono_ns` was taken inside the call (at the store's clock reading).
    pub stamped: bool,
}

/// A call's payload, whole (blob bytes as hex).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogPayload {
    None,
    Entry(JournalEntry),
    Meta(RunMeta),
    Blob(String),
}

/// How a call ended, by class.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "kebab-case")]
pub enum LogOutcome {
    Ok,
    HeldBy { owner: String, epoch: i64 },
    Stale,
    RunMismatch,
    JournalOrder,
    Busy,
    Error { code: String },
}

/// What a protocol event says happened. A line naming any other kind does not parse: a misspelt
/// kind is a malformed log, never an event silently dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvKind {
    /// The writer process started (its pid in `detail`).
    #[default]
    Start,
    /// It opened the store at the concurrent boot.
    Booted,
    /// It could not go on (`probe` says where; `detail` why).
    Fatal,
    /// It saw the stop file and ended cleanly.
    Done,
    /// One busy answer, retried.
    Busy,
    /// A store call returned that an armed mid-call stall held past the ttl inside the fence.
    MidCallLanded,
    /// A mid-call stall was armed for the next fenced call.
    MidCallStall,
    /// An answer the protocol does not expect (`detail`).
    Error,
    /// An acquire granted `epoch` of `target`.
    Grant,
    /// A write under a live lease was accepted.
    Accept,
    /// A write under the writer's own lease was refused: a successor fenced it out.
    FenceKick,
    Renewed,
    /// The seq guard refused an append at the stored tail.
    OrderReject,
    /// The seq guard accepted an append at the stored tail (a violation the judge finds).
    SeqProbeAccepted,
    /// A live lease's write to another run's blob was refused.
    LiveCrossReject,
    /// A write with a dead, forged or foreign lease was accepted.
    StaleAccept,
    /// A write with a dead or forged lease was refused.
    StaleReject,
    /// The holder stalls past its ttl before it sweeps.
    Stall,
    Released,
    /// A victim cycle stopped short (`surface` and `detail` say where and why).
    VictimAbandoned,
    /// A victim cycle (acquire, append, meta, blob put and delete, fenced delete) completed.
    Victim,
    /// The deleted victim's id was acquired again: `epoch` the deleted one, `other_epoch` the new.
    Tombstone,
}

/// What the writer was exercising when it logged an event, beside the store surface it called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Probe {
    /// The concurrent boot of every writer.
    Boot,
    /// The first append of a tenure, its act as owner.
    Marker,
    /// The fenced call armed to stall between its fence check and its mutation.
    MidCall,
    /// An append at the stored tail under a live lease (the seq guard).
    SeqGuard,
    /// A live lease writing another run's blob.
    CrossRunLive,
    /// The end-of-tenure stall past the ttl.
    TenureStall,
    /// The sweep with the writer's own dead lease.
    DeadLease,
    /// The sweep with a forged lease at the next epoch under a foreign owner.
    ForgedLease,
    /// The victim cycle and its tombstone.
    Victim,
}

/// A protocol event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ev {
    pub node: String,
    pub w: usize,
    pub g: u32,
    pub kind: EvKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    /// The store surface the event is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<Surface>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A second epoch (the tombstone's re-granted epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_epoch: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub mono_ns: u64,
}

impl Probe {
    pub fn as_str(self) -> &'static str {
        match self {
            Probe::Boot => "boot",
            Probe::Marker => "marker",
            Probe::MidCall => "mid-call",
            Probe::SeqGuard => "seq-guard",
            Probe::CrossRunLive => "cross-run-live",
            Probe::TenureStall => "tenure-stall",
            Probe::DeadLease => "dead-lease",
            Probe::ForgedLease => "forged-lease",
            Probe::Victim => "victim",
        }
    }
}

impl Ev {
    /// What the event is about, for a finding: the surface, the probe, and a target other than
    /// the soak's run (`put_blob (dead-lease) of other/blob`).
    pub fn what(&self) -> String {
        let mut out = match (self.surface, self.probe) {
            (Some(surface), Some(probe)) => format!("{} ({})", surface.as_str(), probe.as_str()),
            (Some(surface), None) => surface.as_str().to_owned(),
            (None, Some(probe)) => probe.as_str().to_owned(),
            (None, None) => "the writer".to_owned(),
        };
        if let Some(target) = &self.target {
            out.push_str(&format!(" of {target}"));
        }
        out
    }
}

/// Blob bytes in a log, as lowercase hex: the protocol's one codec.
pub fn to_hex(bytes: &[u8]) -> String {
    fencesim_protocol::wire::hex(bytes)
}

/// A log's hex back to bytes (odd length or a non-hex digit: `None`).
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    fencesim_protocol::wire::unhex(text)
}

/// The append-only log file of one writer: every line is one `write(2)`, chained to the line
/// before it.
#[derive(Debug)]
pub struct LogFile {
    file: File,
    path: PathBuf,
    /// Held from a line's hash to its write, so the file's order is the chain's.
    chain: std::sync::Mutex<Chain>,
}

impl LogFile {
    /// Begin the log at `path` (created if absent; one with lines already is refused: a log has
    /// one writer, whose chain starts at its first line).
    pub fn open(path: &Path) -> SoakResult<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(SoakError::io(format!("cannot open log {}", path.display())))?;
        let size = file.metadata().map_err(SoakError::io(format!("cannot inspect log {}", path.display())))?.len();
        if size > 0 {
            return Err(SoakError::Protocol(format!("log {} is begun already", path.display())));
        }
        let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        Ok(Self { file, path: path.to_owned(), chain: std::sync::Mutex::new(Chain::new(&name)) })
    }

    /// Append one line with one `write_all` of the whole buffer on an unbuffered file (one
    /// `write(2)` for any line a regular file accepts whole).
    pub fn put(&self, line: &Line) -> SoakResult<()> {
        let body = serde_json::to_vec(line).map_err(SoakError::json("cannot encode a log line"))?;
        // One record, one line: the reader cuts the log at newlines, which compact JSON never has.
        assert!(!body.contains(&b'\n'), "a log record of {} spans lines", self.path.display());
        let mut chain = self.chain.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let text = chain.seal(body).map_err(SoakError::io("cannot seal a log line"))?;
        (&self.file).write_all(&text).map_err(SoakError::io(format!("cannot append to {}", self.path.display())))
    }
}

/// Reads a growing log from where it stopped; keeps an unterminated tail for the next read.
#[derive(Debug)]
pub struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    /// Complete lines read so far.
    lines: usize,
    /// The first complete line that did not parse: its number (from 1) and why. The referee's
    /// live view reads past it; [`read_all`] refuses the log.
    pub malformed: Option<(usize, serde_json::Error)>,
}

impl Tail {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), offset: 0, partial: Vec::new(), lines: 0, malformed: None }
    }

    /// The complete lines appended since the last call, parsed. A missing file reads as empty.
    pub fn read_new(&mut self) -> SoakResult<Vec<Line>> {
        match std::fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            _ => {}
        }
        // A kept folder's log may be anything (`soak-check`): never a FIFO's endless wait.
        let mut file =
            fencesim_sim::files::open_input(&self.path, fencesim_sim::files::MAX_LOG_BYTES).map_err(|e| {
                SoakError::Io {
                    what: format!("cannot read {}", self.path.display()),
                    source: std::io::Error::other(e.message),
                }
            })?;
        file.seek(SeekFrom::Start(self.offset)).map_err(SoakError::io("cannot seek a log"))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(SoakError::io(format!("cannot read {}", self.path.display())))?;
        self.offset += bytes.len() as u64;
        self.partial.extend_from_slice(&bytes);
        let Some(last_newline) = self.partial.iter().rposition(|b| *b == b'\n') else { return Ok(Vec::new()) };
        let rest = self.partial.split_off(last_newline + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        let mut lines = Vec::new();
        for raw in complete[..last_newline].split(|b| *b == b'\n') {
            self.lines += 1;
            match serde_json::from_slice::<Line>(raw) {
                Ok(line) => lines.push(line),
                Err(e) => {
                    self.malformed.get_or_insert((self.lines, e));
                }
            }
        }
        Ok(lines)
    }

    /// Whether an unterminated (torn) last line remains.
    pub fn torn(&self) -> bool {
        !self.partial.is_empty()
    }
}

/// Every line of a finished log, and whether its last line is torn (unterminated: its writer was
/// killed mid-write) and so ignored. Any complete line that does not parse is an error naming
/// the file and line: a kill cuts only the line being written, the last.
pub fn read_all(path: &Path) -> SoakResult<(Vec<Line>, bool)> {
    let mut tail = Tail::new(path);
    let lines = tail.read_new()?;
    match tail.malformed {
        Some((line, source)) => Err(SoakError::Malformed { path: path.display().to_string(), line, source }),
        None => Ok((lines, tail.torn())),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn events_carry_the_oracle_surface_and_a_misspelt_kind_does_not_parse() {
        use fencesim_oracle::history::Surface;
        let ev = Ev {
            kind: EvKind::StaleAccept,
            surface: Some(Surface::PutBlob),
            probe: Some(Probe::ForgedLease),
            ..Ev::default()
        };
        let text = serde_json::to_string(&Line::Ev(ev.clone())).unwrap();
        assert!(text.contains(r#""kind":"stale-accept""#) && text.contains(r#""surface":"put_blob""#), "{text}");
        assert!(text.contains(r#""probe":"forged-lease""#), "{text}");
        assert_eq!(serde_json::from_str::<Line>(&text).unwrap(), Line::Ev(ev.clone()));
        assert_eq!(ev.what(), "put_blob (forged-lease)");
        let misspelt = text.replace("stale-accept", "stale-acept");
        assert!(serde_json::from_str::<Line>(&misspelt).is_err(), "a kind the enum does not name is refused");
        let old_name = text.replace("put_blob", "blob-put");
        assert!(serde_json::from_str::<Line>(&old_name).is_err(), "a surface the oracle does not name is refused");
    }

    use super::*;

    #[test]
    fn a_torn_line_waits_and_garbage_is_noted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.jsonl");
        let log = LogFile::open(&path).unwrap();
        let ev = Line::Ev(Ev { node: "n".into(), kind: EvKind::Grant, epoch: Some(3), ..Ev::default() });
        log.put(&ev).unwrap();
        let mut tail = Tail::new(&path);
        assert_eq!(tail.read_new().unwrap(), vec![ev.clone()]);
        (&std::fs::OpenOptions::new().append(true).open(&path).unwrap()).write_all(b"{\"t\":\"ev\",\"no").unwrap();
        assert!(tail.read_new().unwrap().is_empty());
        assert!(tail.torn());
        (&std::fs::OpenOptions::new().append(true).open(&path).unwrap()).write_all(b"pe\n").unwrap();
        log.put(&ev).unwrap();
        assert_eq!(tail.read_new().unwrap(), vec![ev]);
        assert_eq!(tail.malformed.as_ref().map(|(line, _)| *line), Some(2));
        assert_eq!(from_hex(&to_hex(b"\x00\xffab")).unwrap(), b"\x00\xffab");
    }

    /// Only an unterminated last line is forgiven: a bad complete line anywhere, the last one
    /// included, is refused naming the file and line.
    #[test]
    fn a_finished_log_forgives_only_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.jsonl");
        let ev =
            serde_json::to_string(&Line::Ev(Ev { node: "n".into(), kind: EvKind::Grant, ..Ev::default() })).unwrap();
        std::fs::write(&path, format!("{ev}\n{ev}\n{{\"t\":\"ev\",\"no")).unwrap();
        assert_eq!(read_all(&path).unwrap().0.len(), 2);
        assert!(read_all(&path).unwrap().1, "the torn last line is reported");
        for (text, line) in
            [(format!("{ev}\nGARBAGE{{{{\n{ev}\n"), 2), (format!("{ev}\n\n{ev}\n"), 2), (format!("{ev}\nGARBAGE\n"), 2)]
        {
            std::fs::write(&path, text).unwrap();
            let err = read_all(&path).unwrap_err().to_string();
            assert_eq!(err, format!("{}:{line}: not a log line", path.display()));
        }
    }
}
