//! Sealed soak folders: what a storm leaves behind (`--keep DIR`) is tamper-evident, and
//! `fencesim soak-check DIR` judges only a folder that verifies.
//!
//! Two layers. Every line a soak process logs (a store writer's or an engine process's call log,
//! an engine process's effects log) carries, as its last field `"h"`, the SHA-256 of the previous
//! line's hash and of the line itself without that field: each log is a hash chain, which
//! starts from the log's own file name (a log renamed, or a line moved from another log, breaks
//! it at once). When the storm is over the referee writes `soak-manifest.json`: every file of the
//! folder with its size and SHA-256, and for each log its number of lines and the hash of its
//! last (its chain head). [`verify`] holds a folder to its manifest before anything else reads
//! it: a line edited or reordered, removed or inserted breaks the chain at that line; a log cut
//! short or grown ends at another line than the manifest records; any other file whose bytes
//! changed, a file added or removed, a symbolic link, a FIFO or a device is refused. Each refusal
//! is one line naming the file (and the line).
//!
//! The hashes are not keyed: they catch a kept folder edited, damaged, cut or mixed with another
//! storm's, not a forger who recomputes every hash after the edit (only a signature under a key
//! the reader trusts would). The judge is the second line: a forged line that verifies still has
//! to tell a story the oracle accepts.
//!
//! Every file is opened once, without following a symbolic link and without blocking, and judged
//! by the opened file's own metadata (`fstat`), never by a look at the path before the open.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The manifest of a sealed soak folder.
pub const MANIFEST_FILE: &str = "soak-manifest.json";
pub const MANIFEST_SCHEMA: &str = "fencesim.soak-manifest/1";
/// What the first line of a log chains from, with the log's file name.
const GENESIS_TAG: &[u8] = b"fencesim.soak-log/1\0";
/// A sealed line ends `,"h":"<64 hex digits>"}`.
const HASH_KEY: &[u8] = b",\"h\":\"";
const HEX_DIGITS: usize = 64;
const SUFFIX: usize = HASH_KEY.len() + HEX_DIGITS + 2;
/// Folders nest at most this deep in a kept soak (a store adapter's own folders included).
const MAX_DEPTH: usize = 8;
/// The most bytes a kept soak's file other than a log may hold (its database above all).
const MAX_FILE_BYTES: u64 = 16 << 30;

/// A kept soak folder, or a file or line of it, that does not verify: one line naming it.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("{path}:{line}: {message}")]
    Line { path: String, line: u64, message: String },
}

pub type SealResult<T> = Result<T, SealError>;

fn refused(path: &Path, message: impl Into<String>) -> SealError {
    SealError::File { path: path.display().to_string(), message: message.into() }
}

/// Whether a file of a soak folder is a chained log: a call log (`writer-*.jsonl`) or an engine
/// process's effects log (`*.effects`), at the folder's top.
pub fn chained(name: &str) -> bool {
    !name.contains('/') && ((name.starts_with("writer-") && name.ends_with(".jsonl")) || name.ends_with(".effects"))
}

fn hex(bytes: &[u8]) -> String {
    fencesim_protocol::wire::hex(bytes)
}

/// One log's hash chain: what its next line links to.
#[derive(Clone, Debug)]
pub struct Chain {
    prev: [u8; 32],
    lines: u64,
}

impl Chain {
    /// The chain of the log named `file_name` (its name in the folder), before its first line.
    pub fn new(file_name: &str) -> Self {
        let prev = Sha256::new().chain_update(GENESIS_TAG).chain_update(file_name.as_bytes()).finalize().into();
        Self { prev, lines: 0 }
    }

    fn link(&self, open: &[u8]) -> [u8; 32] {
        Sha256::new().chain_update(self.prev).chain_update(open).finalize().into()
    }

    /// The line to append for `body`, one serialized JSON object: the object with its chain hash
    /// as its last field, and the newline.
    pub fn seal(&mut self, mut body: Vec<u8>) -> std::io::Result<Vec<u8>> {
        if body.first() != Some(&b'{') || body.pop() != Some(b'}') {
            return Err(std::io::Error::other("a log line must be one JSON object"));
        }
        let (open, hash) = (body.len(), self.link(&body));
        body.extend_from_slice(HASH_KEY);
        body.extend_from_slice(hex(&hash).as_bytes());
        body.extend_from_slice(b"\"}\n");
        // Exactly the ending `unsealed_open` cuts off (and the newline): the judge reads it back.
        assert_eq!(body.len(), open + SUFFIX + 1, "a sealed line of another shape");
        self.prev = hash;
        self.lines += 1;
        Ok(body)
    }

    /// Check the next complete line (`raw`, no newline) against the chain, and take it.
    pub fn check(&mut self, raw: &[u8]) -> Result<(), &'static str> {
        let open = unsealed_open(raw).ok_or("not a sealed log line (it ends without its chain hash)")?;
        let hash = self.link(open);
        if raw[open.len() + HASH_KEY.len()..raw.len() - 2] != *hex(&hash).as_bytes() {
            return Err(
                "breaks its log's hash chain: this line was edited, or lines were reordered, removed or inserted here",
            );
        }
        self.prev = hash;
        self.lines += 1;
        Ok(())
    }

    /// Lines taken so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// The hash of the last line taken (of the file name before any).
    pub fn head(&self) -> String {
        hex(&self.prev)
    }
}

/// A sealed line without its `,"h":"..."}` ending: the object's fields, open.
fn unsealed_open(raw: &[u8]) -> Option<&[u8]> {
    if raw.len() < SUFFIX + 1 || raw[0] != b'{' || !raw.ends_with(b"\"}") {
        return None;
    }
    let open = &raw[..raw.len() - SUFFIX];
    raw[open.len()..].starts_with(HASH_KEY).then_some(open)
}

/// The JSON object a sealed line holds, its chain hash taken out (`None`: not a sealed line).
pub fn unsealed(raw: &[u8]) -> Option<Vec<u8>> {
    let mut body = unsealed_open(raw)?.to_vec();
    body.push(b'}');
    Some(body)
}

/// Which soak left a folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Store,
    Engine,
}

/// One file of a sealed folder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSeal {
    /// Its path inside the folder, `/`-separated.
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
    /// A chained log: its complete lines and the hash of its last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
}

/// `soak-manifest.json`: the folders and files a storm left, as it left them. Only [`seal`] and
/// [`verify`] make one, so holding one means the folder verified.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    schema: String,
    level: Level,
    folders: Vec<String>,
    files: Vec<FileSeal>,
}

impl Manifest {
    pub fn level(&self) -> Level {
        self.level
    }

    pub fn files(&self) -> &[FileSeal] {
        &self.files
    }

    pub fn file(&self, name: &str) -> Option<&FileSeal> {
        self.files.iter().find(|f| f.name == name)
    }

    /// The chained logs at the folder's top whose names `keep` accepts, by name.
    pub fn logs(&self, keep: impl Fn(&str) -> bool) -> Vec<&FileSeal> {
        self.files.iter().filter(|f| chained(&f.name) && keep(&f.name)).collect()
    }
}

/// Open `path` to read it, refusing (one open, then the opened file's metadata) a symbolic link,
/// a folder, a FIFO, a socket or a device, and a file over `max_bytes`. The open never blocks
/// and never follows a link. Returns the file and its size.
pub fn open_regular(path: &Path, max_bytes: u64) -> SealResult<(File, u64)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => refused(path, "is a symbolic link; a kept soak holds only what its storm wrote"),
            _ => refused(path, format!("cannot open it: {e}")),
        })?;
    let meta = file.metadata().map_err(|e| refused(path, format!("cannot inspect it: {e}")))?;
    if meta.is_dir() {
        return Err(refused(path, "is a folder, not a file"));
    }
    if !meta.is_file() {
        return Err(refused(path, "is not a regular file (a FIFO, a socket or a device); refusing to read it"));
    }
    if meta.len() > max_bytes {
        return Err(refused(
            path,
            format!("is {} bytes, more than the {max_bytes} a kept soak's file may hold", meta.len()),
        ));
    }
    Ok((file, meta.len()))
}

/// Every folder and file under `dir` (the manifest aside), by their `/`-separated names, sorted;
/// a symbolic link, a name that is not UTF-8 or folders nested too deep are refused.
fn walk(dir: &Path) -> SealResult<(Vec<String>, Vec<String>)> {
    fn visit(
        root: &Path,
        rel: &str,
        depth: usize,
        folders: &mut Vec<String>,
        files: &mut Vec<String>,
    ) -> SealResult<()> {
        let here = if rel.is_empty() { root.to_path_buf() } else { root.join(rel) };
        if depth > MAX_DEPTH {
            return Err(refused(&here, format!("folders nest deeper than the {MAX_DEPTH} a kept soak may hold")));
        }
        let entries = std::fs::read_dir(&here).map_err(|e| refused(&here, format!("cannot list it: {e}")))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| refused(&here, format!("cannot list it: {e}")))?;
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                return Err(refused(
                    &path,
                    "a file name that is not UTF-8; a kept soak holds only what its storm wrote",
                ));
            };
            let kind = entry.file_type().map_err(|e| refused(&path, format!("cannot inspect it: {e}")))?;
            names.push((name, kind, path));
        }
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind, path) in names {
            let name = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            if name == MANIFEST_FILE {
                continue;
            }
            if kind.is_symlink() {
                return Err(refused(&path, "is a symbolic link; a kept soak holds only what its storm wrote"));
            }
            if kind.is_dir() {
                folders.push(name.clone());
                visit(root, &name, depth + 1, folders, files)?;
            } else {
                // A FIFO, socket or device is refused when it is opened.
                files.push(name);
            }
        }
        Ok(())
    }
    let (mut folders, mut files) = (Vec::new(), Vec::new());
    visit(dir, "", 0, &mut folders, &mut files)?;
    Ok((folders, files))
}

/// Feeds bytes to a SHA-256 while counting them.
struct Hashing {
    sha: Sha256,
    bytes: u64,
}

impl std::io::Write for Hashing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.sha.update(buf);
        self.bytes += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A file's seal, read from the opened `file` (at most `limit` bytes): its size and SHA-256, and
/// for a chained log its chain, each line checked as it is read (a complete line that does not
/// verify is an error naming it; an unterminated last line, one a kill cut, is only hashed).
fn read_seal(path: &Path, name: &str, file: File, limit: u64) -> SealResult<FileSeal> {
    let mut hashing = Hashing { sha: Sha256::new(), bytes: 0 };
    let read_error = |e: std::io::Error| refused(path, format!("cannot read it: {e}"));
    let mut seal = FileSeal { name: name.to_owned(), bytes: 0, sha256: String::new(), lines: None, head: None };
    if chained(name) {
        let mut chain = Chain::new(name);
        let mut reader = BufReader::with_capacity(1 << 16, file.take(limit));
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).map_err(read_error)?;
            if n == 0 {
                break;
            }
            std::io::Write::write_all(&mut hashing, &line).map_err(read_error)?;
            if let Some(raw) = line.strip_suffix(b"\n") {
                chain.check(raw).map_err(|message| SealError::Line {
                    path: path.display().to_string(),
                    line: chain.lines() + 1,
                    message: message.to_owned(),
                })?;
            }
        }
        (seal.lines, seal.head) = (Some(chain.lines()), Some(chain.head()));
    } else {
        std::io::copy(&mut file.take(limit), &mut hashing).map_err(read_error)?;
    }
    seal.bytes = hashing.bytes;
    seal.sha256 = hex(&hashing.sha.finalize());
    Ok(seal)
}

/// Seal the finished storm folder `dir`: write `soak-manifest.json` (atomically, never over one)
/// for every folder and file in it. A log whose own chain does not verify is a harness error.
pub fn seal(dir: &Path, level: Level) -> SealResult<Manifest> {
    let (folders, names) = walk(dir)?;
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let path = dir.join(&name);
        let (file, _) = open_regular(&path, u64::MAX)?;
        files.push(read_seal(&path, &name, file, u64::MAX)?);
    }
    let manifest = Manifest { schema: MANIFEST_SCHEMA.to_owned(), level, folders, files };
    let mut text = serde_json::to_vec_pretty(&manifest).map_err(|e| refused(dir, format!("cannot encode: {e}")))?;
    text.push(b'\n');
    let path = dir.join(MANIFEST_FILE);
    fencesim_sim::files::write_atomic(&path, &text, false).map_err(|e| refused(&path, e.message))?;
    Ok(manifest)
}

/// Read `dir`'s manifest and hold the folder to it; the manifest of a folder that verifies.
pub fn verify(dir: &Path) -> SealResult<Manifest> {
    let path = dir.join(MANIFEST_FILE);
    let (file, size) = match open_regular(&path, fencesim_sim::files::MAX_TEXT_BYTES) {
        Err(_) if !dir.join(MANIFEST_FILE).exists() && !is_link(&path) => {
            return Err(refused(
                dir,
                format!(
                    "no {MANIFEST_FILE}: not a folder kept by `fencesim soak --keep` (or kept before kept soaks were sealed)"
                ),
            ));
        }
        other => other?,
    };
    let mut text = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(fencesim_sim::files::MAX_TEXT_BYTES)
        .read_to_end(&mut text)
        .map_err(|e| refused(&path, format!("cannot read it: {e}")))?;
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(|e| refused(&path, format!("not a soak manifest: {e}")))?;
    if manifest.schema != MANIFEST_SCHEMA {
        return Err(refused(&path, format!("schema is '{}', expected {MANIFEST_SCHEMA}", manifest.schema)));
    }
    let (folders, names) = walk(dir)?;
    let listed: BTreeMap<&str, &FileSeal> = manifest.files.iter().map(|f| (f.name.as_str(), f)).collect();
    if listed.len() != manifest.files.len() {
        return Err(refused(&path, "lists a file twice"));
    }
    let listed_folders: BTreeSet<&str> = manifest.folders.iter().map(String::as_str).collect();
    if let Some(extra) = folders.iter().find(|f| !listed_folders.contains(f.as_str())) {
        return Err(refused(
            &dir.join(extra),
            format!("a folder {MANIFEST_FILE} does not list (added after the storm)"),
        ));
    }
    if let Some(extra) = names.iter().find(|n| !listed.contains_key(n.as_str())) {
        return Err(refused(&dir.join(extra), format!("a file {MANIFEST_FILE} does not list (added after the storm)")));
    }
    let found: BTreeSet<&str> = names.iter().map(String::as_str).chain(folders.iter().map(String::as_str)).collect();
    let mut missing = listed.keys().chain(listed_folders.iter()).filter(|n| !found.contains(**n));
    if let Some(name) = missing.next() {
        return Err(refused(&dir.join(name), format!("missing ({MANIFEST_FILE} lists it)")));
    }
    for name in &names {
        check_file(dir, name, listed[name.as_str()])?;
    }
    Ok(manifest)
}

/// Seal `dir` again as it is now, every log's chain recomputed line by line (an unsealed line is
/// sealed as it stands; a torn last line is kept as it is): what anyone holding a folder can do,
/// the hashes being unkeyed. Tests use it to show what the judge still catches in a folder that
/// was forged and sealed again.
#[doc(hidden)]
pub fn reseal(dir: &Path) -> SealResult<Manifest> {
    let manifest = dir.join(MANIFEST_FILE);
    let text = std::fs::read(&manifest).map_err(|e| refused(&manifest, format!("cannot read it: {e}")))?;
    let level = serde_json::from_slice::<Manifest>(&text).map_or(Level::Store, |m| m.level);
    let (_, names) = walk(dir)?;
    for name in names.iter().filter(|n| chained(n)) {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).map_err(|e| refused(&path, format!("cannot read it: {e}")))?;
        let (complete, torn) = match bytes.iter().rposition(|b| *b == b'\n') {
            Some(at) => bytes.split_at(at + 1),
            None => bytes.split_at(0),
        };
        let mut chain = Chain::new(name);
        let mut out = Vec::with_capacity(bytes.len());
        for raw in complete.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let body = unsealed(raw).unwrap_or_else(|| raw.to_vec());
            out.extend(chain.seal(body).map_err(|e| refused(&path, e.to_string()))?);
        }
        out.extend_from_slice(torn);
        std::fs::write(&path, out).map_err(|e| refused(&path, format!("cannot write it: {e}")))?;
    }
    std::fs::remove_file(&manifest).map_err(|e| refused(&manifest, format!("cannot remove it: {e}")))?;
    seal(dir, level)
}

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Hold one file to its seal: a log line by line, then every file by size and SHA-256.
fn check_file(dir: &Path, name: &str, expected: &FileSeal) -> SealResult<()> {
    let path: PathBuf = dir.join(name);
    let is_log = chained(name);
    let (limit, most) = if is_log {
        (fencesim_sim::files::MAX_LOG_BYTES, fencesim_sim::files::MAX_LOG_BYTES)
    } else {
        (expected.bytes, MAX_FILE_BYTES)
    };
    let (file, size) = open_regular(&path, most)?;
    if !is_log && size != expected.bytes {
        return Err(refused(&path, format!("{size} bytes, {MANIFEST_FILE} records {}", expected.bytes)));
    }
    let got = read_seal(&path, name, file, limit.saturating_add(1))?;
    if let (Some(lines), Some(want)) = (got.lines, expected.lines) {
        let shown = path.display().to_string();
        if lines < want {
            let message =
                format!("missing: the log ends after line {lines}, {MANIFEST_FILE} records {want} (cut short)");
            return Err(SealError::Line { path: shown, line: lines + 1, message });
        }
        if lines > want {
            let message = format!("a line past the {want} {MANIFEST_FILE} records (appended)");
            return Err(SealError::Line { path: shown, line: want + 1, message });
        }
        if got.head != expected.head {
            let message = format!("the log's chain ends at another hash than {MANIFEST_FILE} records");
            return Err(SealError::Line { path: shown, line: lines, message });
        }
    } else if is_log {
        return Err(refused(&path, format!("{MANIFEST_FILE} records no chain for this log")));
    }
    if got.bytes != expected.bytes {
        return Err(refused(&path, format!("{} bytes, {MANIFEST_FILE} records {}", got.bytes, expected.bytes)));
    }
    if got.sha256 != expected.sha256 {
        return Err(refused(&path, format!("its bytes are not those {MANIFEST_FILE} records (SHA-256 differs)")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed_log(name: &str, bodies: &[&str]) -> Vec<u8> {
        let mut chain = Chain::new(name);
        bodies.iter().flat_map(|b| chain.seal(b.as_bytes().to_vec()).unwrap()).collect()
    }

    /// A sealed line is the object with its hash last; it reads back whole, and the chain of a
    /// log checks line by line, naming the first line that breaks it.
    #[test]
    fn a_chain_seals_and_checks_line_by_line() {
        let bytes = sealed_log("writer-w0-g0.jsonl", &[r#"{"t":"ev","a":1}"#, r#"{"t":"ev","a":2}"#]);
        let text = String::from_utf8(bytes).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with(r#"{"t":"ev","a":1,"h":""#) && lines[0].ends_with("\"}"), "{}", lines[0]);
        assert_eq!(unsealed(lines[1].as_bytes()).unwrap(), br#"{"t":"ev","a":2}"#);
        let value: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(value["a"], 1);

        let mut chain = Chain::new("writer-w0-g0.jsonl");
        assert!(lines.iter().all(|l| chain.check(l.as_bytes()).is_ok()));
        // Reordered, edited, or under another name: the first line checked breaks.
        let mut swapped = Chain::new("writer-w0-g0.jsonl");
        assert!(swapped.check(lines[1].as_bytes()).is_err());
        let mut renamed = Chain::new("writer-w1-g0.jsonl");
        assert!(renamed.check(lines[0].as_bytes()).is_err());
        let mut edited = Chain::new("writer-w0-g0.jsonl");
        assert!(edited.check(lines[0].replace("\"a\":1", "\"a\":3").as_bytes()).is_err());
        assert!(Chain::new("x").check(br#"{"t":"ev"}"#).is_err(), "an unsealed line");
        assert!(Chain::new("x").seal(b"[1]".to_vec()).is_err(), "only objects are sealed");
    }

    /// A folder verifies as sealed; every change after the seal is refused naming the file.
    #[test]
    fn a_sealed_folder_verifies_and_any_change_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("writer-w0-g0.jsonl");
        std::fs::write(&log, sealed_log("writer-w0-g0.jsonl", &[r#"{"a":1}"#, r#"{"a":2}"#, r#"{"a":3}"#])).unwrap();
        std::fs::write(dir.path().join("soak.db"), b"data").unwrap();
        std::fs::create_dir(dir.path().join("adapter-store")).unwrap();
        std::fs::write(dir.path().join("adapter-store/x"), b"x").unwrap();
        let sealed = seal(dir.path(), Level::Store).unwrap();
        assert_eq!(verify(dir.path()).unwrap(), sealed);
        assert_eq!(sealed.file("writer-w0-g0.jsonl").unwrap().lines, Some(3));
        assert!(seal(dir.path(), Level::Store).is_err(), "a manifest is never replaced");

        let original = std::fs::read(&log).unwrap();
        let text = String::from_utf8(original.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let shown = log.display().to_string();
        let cases: Vec<(Vec<u8>, String)> = vec![
            (format!("{}\n{}\n{}\n", lines[1], lines[0], lines[2]).into_bytes(), format!("{shown}:1: breaks")),
            (format!("{}\n{}\n", lines[0], lines[2]).into_bytes(), format!("{shown}:2: breaks")),
            (format!("{}\n{}\n", lines[0], lines[1]).into_bytes(), format!("{shown}:3: missing")),
            (format!("{text}{{\"torn").into_bytes(), format!("{shown}: ")),
        ];
        for (bytes, expected) in cases {
            std::fs::write(&log, bytes).unwrap();
            let err = verify(dir.path()).unwrap_err().to_string();
            assert!(err.starts_with(&expected), "expected {expected:?}: {err}");
        }
        std::fs::write(&log, &original).unwrap();
        std::fs::write(dir.path().join("soak.db"), b"dat!").unwrap();
        assert!(verify(dir.path()).unwrap_err().to_string().contains("SHA-256 differs"));
        std::fs::write(dir.path().join("soak.db"), b"data").unwrap();
        std::fs::write(dir.path().join("adapter-store/y"), b"y").unwrap();
        assert!(verify(dir.path()).unwrap_err().to_string().contains("does not list"));
        std::fs::remove_file(dir.path().join("adapter-store/y")).unwrap();
        std::os::unix::fs::symlink(&log, dir.path().join("writer-w1-g0.jsonl")).unwrap();
        assert!(verify(dir.path()).unwrap_err().to_string().contains("symbolic link"));
        std::fs::remove_file(dir.path().join("writer-w1-g0.jsonl")).unwrap();
        assert_eq!(verify(dir.path()).unwrap(), sealed);
        std::fs::remove_file(dir.path().join(MANIFEST_FILE)).unwrap();
        assert!(verify(dir.path()).unwrap_err().to_string().contains("no soak-manifest.json"));
    }
}
