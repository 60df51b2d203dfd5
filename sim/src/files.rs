//! Files fencesim writes: always atomically (a temporary file in the same folder, renamed into
//! place), so a reader never sees half a file and an interrupted write leaves nothing behind. A
//! target that is a directory or a symbolic link is refused whatever the caller says (a rename
//! would replace the link, not write where it points, and an operator who pointed it somewhere
//! meant something else); an existing file is refused unless the caller was told `--force`.
//! An output file gets the mode a plain write would give it (`0666 & !umask`, what a shell's `>`
//! makes), not a temporary file's private `0600`: the rename is an implementation detail.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Why a file could not be written: one line naming it.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct WriteError {
    pub path: String,
    pub message: String,
}

/// A file a flag names as output, and whether `--force` lets it replace an existing file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub path: std::path::PathBuf,
    pub overwrite: bool,
}

/// The mode an output file is created with, the umask applied by the kernel at creation: a
/// plain write's (`0666 & !umask`).
pub const OUTPUT_MODE: u32 = 0o666;

/// A temporary file in the folder `path` will be renamed into, created with [`OUTPUT_MODE`]
/// under the process's umask, so that once renamed it has the mode a plain write of `path`
/// would have given it (a temporary file is otherwise `0600` whatever the umask).
pub fn temporary_beside(path: &Path, prefix: &str) -> std::io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt as _;
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(OUTPUT_MODE))
        .tempfile_in(parent(path))
}

/// Write `bytes` to `path` atomically, with a plain write's mode ([`temporary_beside`]). Without
/// `overwrite`, an existing file is refused (checked again at the rename, which never replaces
/// one). The temporary file is a [`Temporary`]: a signal that ends the process meanwhile removes
/// it.
pub fn write_atomic(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), WriteError> {
    let fail = |message: String| WriteError { path: path.display().to_string(), message };
    check_place(path, overwrite)?;
    let mut tmp = Temporary::create(|| temporary_beside(path, ".fencesim-"))
        .map_err(|e| fail(format!("cannot create a temporary file beside it: {e}")))?;
    let file = tmp.as_file_mut();
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| fail(format!("cannot write: {e}")))?;
    hold_for_a_test(tmp.path());
    tmp.persist(path, overwrite).map_err(|e| fail(format!("cannot rename into place: {e}")))
}

/// The temporary files of this process not yet renamed into place or removed ([`Temporary`]).
static TEMPORARIES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn temporaries() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A temporary file beside an output, registered while it exists: renamed into place by
/// [`Temporary::persist`], removed when dropped (an error, a panic), and removed by
/// [`remove_temporaries`] when a signal ends the process, which runs no drop. It is created,
/// renamed and removed under the registry's lock, so a signal never finds one half made.
pub struct Temporary(Option<tempfile::NamedTempFile>);

impl Temporary {
    /// Make the temporary file with `make` and register it.
    pub fn create(make: impl FnOnce() -> std::io::Result<tempfile::NamedTempFile>) -> std::io::Result<Self> {
        let mut live = temporaries();
        let file = make()?;
        live.push(file.path().to_owned());
        Ok(Self(Some(file)))
    }

    fn file(&self) -> &tempfile::NamedTempFile {
        self.0.as_ref().expect("a temporary file is there until persisted or dropped")
    }

    pub fn path(&self) -> &Path {
        self.file().path()
    }

    pub fn as_file(&self) -> &std::fs::File {
        self.file().as_file()
    }

    pub fn as_file_mut(&mut self) -> &mut std::fs::File {
        self.0.as_mut().expect("a temporary file is there until persisted or dropped").as_file_mut()
    }

    /// Rename it to `path` (replacing a file there only with `overwrite`); on failure it stays
    /// registered and is removed when dropped.
    pub fn persist(mut self, path: &Path, overwrite: bool) -> std::io::Result<()> {
        let mut live = temporaries();
        let file = self.0.take().expect("a temporary file is there until persisted or dropped");
        let from = file.path().to_owned();
        let renamed = if overwrite { file.persist(path) } else { file.persist_noclobber(path) };
        match renamed {
            Ok(_) => {
                live.retain(|p| *p != from);
                Ok(())
            }
            Err(e) => {
                self.0 = Some(e.file);
                Err(e.error)
            }
        }
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if let Some(file) = self.0.take() {
            let mut live = temporaries();
            let path = file.path().to_owned();
            drop(file);
            live.retain(|p| *p != path);
        }
    }
}

/// Remove every temporary file still registered, for a process a signal is ending (no drop will
/// run). The registry stays locked for good: a file being made or renamed now finishes first,
/// and no other is made before the exit.
pub fn remove_temporaries() {
    let live = temporaries();
    for path in live.iter() {
        let _ = std::fs::remove_file(path);
    }
    std::mem::forget(live);
}

/// The test hook of `sim/cli/tests/it/interrupted_writes.rs`: with `FENCESIM_TEST_HOLD_WRITE=1`,
/// the first atomic write (or `--keep-db` copy) says `holding PATH` (its temporary file) on
/// stderr once the file is written, then waits for good, so a test signals the process at
/// exactly that point. Unset, nothing.
pub fn hold_for_a_test(tmp: &Path) {
    static HELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if std::env::var_os("FENCESIM_TEST_HOLD_WRITE").is_none_or(|v| v != "1")
        || HELD.swap(true, std::sync::atomic::Ordering::SeqCst)
    {
        return;
    }
    let _ = writeln!(std::io::stderr(), "holding {}", tmp.display());
    loop {
        std::thread::park();
    }
}

/// The folder a file of `path` is renamed into (`.` for a bare name).
pub fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Whether `path` may be written: into a folder that exists and takes new files (a probe file is
/// created there and removed), never over a directory or a symbolic link (dangling or not), and
/// over an existing file only with `overwrite`. Checked before any work so a refusal costs
/// nothing.
pub fn check_target(path: &Path, overwrite: bool) -> Result<(), WriteError> {
    check_place(path, overwrite)?;
    probe(parent(path)).map_err(|e| WriteError {
        path: path.display().to_string(),
        message: format!("its folder {} is not writable: {e}", parent(path).display()),
    })
}

/// Create and remove a file in `dir`: whether this process can write there now (permissions,
/// a read-only mount, a folder that is not one).
fn probe(dir: &Path) -> std::io::Result<()> {
    drop(Temporary::create(|| tempfile::Builder::new().prefix(".fencesim-probe-").tempfile_in(dir))?);
    Ok(())
}

/// Make a report folder (with its parents) if needed and check that it takes new files, before
/// any work, so a run never ends unable to write its verdict.
pub fn prepare_folder(dir: &Path) -> Result<(), WriteError> {
    let fail = |message: String| WriteError { path: dir.display().to_string(), message };
    std::fs::create_dir_all(dir).map_err(|e| fail(format!("cannot create the folder: {e}")))?;
    probe(dir).map_err(|e| fail(format!("the folder is not writable: {e}")))
}

/// Whether a folder that may not exist yet can be made and written: the folder itself when it
/// exists, else its nearest existing ancestor, must be a folder that takes new files. A symbolic
/// link to nothing is named as such (making the folder would fail with "File exists").
pub fn check_future_folder(dir: &Path) -> Result<(), WriteError> {
    let fail = |message: String| Err(WriteError { path: dir.display().to_string(), message });
    let mut at = dir;
    loop {
        match (std::fs::symlink_metadata(at), std::fs::metadata(at)) {
            (Ok(link), Err(e)) if link.file_type().is_symlink() && e.kind() == std::io::ErrorKind::NotFound => {
                return fail(format!(
                    "{} is a symbolic link to nothing (a dangling link); remove it or name a folder",
                    at.display()
                ));
            }
            (_, Ok(m)) if m.is_dir() => {
                return probe(at).or_else(|e| fail(format!("{} is not writable: {e}", at.display())));
            }
            (_, Ok(_)) => return fail(format!("{} is not a folder", at.display())),
            (_, Err(e)) if e.kind() == std::io::ErrorKind::NotFound && parent(at) != at => at = parent(at),
            (_, Err(e)) => return fail(format!("cannot inspect {}: {e}", at.display())),
        }
    }
}

/// [`check_target`] without the probe: what a write checks again at the moment it writes.
fn check_place(path: &Path, overwrite: bool) -> Result<(), WriteError> {
    let fail = |message: &str| Err(WriteError { path: path.display().to_string(), message: message.to_owned() });
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !parent(path).is_dir() => {
            fail("its folder does not exist")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WriteError { path: path.display().to_string(), message: format!("cannot inspect it: {e}") }),
        Ok(m) if m.file_type().is_symlink() => fail("is a symbolic link; refusing to write through it"),
        Ok(m) if m.is_dir() => fail("is a directory; refusing to write over it"),
        Ok(m) if !m.is_file() => fail("is not a regular file; refusing to write over it"),
        Ok(_) if !overwrite => fail("the file exists; refusing to overwrite it (--force replaces it)"),
        Ok(_) => Ok(()),
    }
}

/// Remove the reports an earlier run left in a report folder before this run writes its own, so
/// a run that ends in a harness error never leaves an older verdict looking current. A symbolic
/// link is removed itself (never what it points to); a directory under a report's name is
/// refused.
pub fn remove_stale(paths: &[&Path]) -> Result<(), WriteError> {
    for path in paths {
        let fail = |message: String| WriteError { path: path.display().to_string(), message };
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(format!("cannot inspect it: {e}"))),
            Ok(m) if m.is_dir() => return Err(fail("is a directory; refusing to write over it".into())),
            Ok(_) => std::fs::remove_file(path).map_err(|e| fail(format!("cannot remove the stale report: {e}")))?,
        }
    }
    Ok(())
}

/// The most bytes a text input may hold: a scenario, a plan, a corpus, a shard report, a kept
/// soak's record. 64 MiB is far above anything fencesim writes (a 10,000-run plan is about
/// 1 MB) and small enough to read whole.
pub const MAX_TEXT_BYTES: u64 = 64 * 1024 * 1024;

/// The most bytes one writer log of a soak may hold (`soak-check` reads a kept folder's logs
/// whole): 1 GiB, about a hundred times what a writer logs in a ten-minute storm (0.17 MB in
/// ten seconds, measured).
pub const MAX_LOG_BYTES: u64 = 1024 * 1024 * 1024;

/// A file fencesim was given to read that it will not read: one line naming it.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct InputError {
    pub path: String,
    pub message: String,
}

/// Open a file fencesim reads, refusing anything but a regular file of at most `max_bytes`: a
/// FIFO would block the read forever (the open never blocks: it is non-blocking, and the checks
/// are made on the opened file, so a path swapped after a look cannot slip one in), a folder or
/// a device is no input, an enormous file would be read whole.
pub fn open_input(path: &Path, max_bytes: u64) -> Result<std::fs::File, InputError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let fail = |message: String| InputError { path: path.display().to_string(), message };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| fail(format!("cannot open it: {e}")))?;
    let meta = file.metadata().map_err(|e| fail(format!("cannot inspect it: {e}")))?;
    if meta.is_dir() {
        return Err(fail("is a folder, not a file".to_owned()));
    }
    if !meta.is_file() {
        return Err(fail("is not a regular file (a FIFO, a socket or a device); refusing to read it".to_owned()));
    }
    if meta.len() > max_bytes {
        return Err(fail(format!("is {} bytes, more than the {max_bytes} an input may hold", meta.len())));
    }
    Ok(file)
}

/// Read a file fencesim was given, whole: [`open_input`]'s refusals, a file that grew past
/// `max_bytes` while it was read, and bytes that are not UTF-8 text.
pub fn read_input(path: &Path, max_bytes: u64) -> Result<String, InputError> {
    use std::io::Read as _;
    let fail = |message: String| InputError { path: path.display().to_string(), message };
    let file = open_input(path, max_bytes)?;
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| fail(format!("cannot read it: {e}")))?;
    if bytes.len() as u64 > max_bytes {
        return Err(fail(format!("grew past the {max_bytes} bytes an input may hold while it was read")));
    }
    String::from_utf8(bytes).map_err(|e| fail(format!("is not UTF-8 text (byte {})", e.utf8_error().valid_up_to())))
}

/// A path a command names (by a flag, or as an argument), for [`check_distinct`]: what names it
/// (`--keep-db`, `the --plan file`) and the path as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    pub what: String,
    pub path: PathBuf,
}

impl Named {
    pub fn new(what: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        Self { what: what.into(), path: path.into() }
    }
}

/// Two paths a command names resolve to one file: an output over another output, or over an
/// input the command reads. One line naming both.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Clash(pub String);

/// Where a path leads: its folder resolved (symbolic links, `..`) plus its own name, and the
/// file's device and inode when it exists (so a hard link, or a symbolic link to the file, is
/// the same file too).
#[derive(Debug)]
struct Identity {
    resolved: PathBuf,
    inode: Option<(u64, u64)>,
}

impl Identity {
    fn of(path: &Path) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let resolved = match (absolute.file_name(), std::fs::canonicalize(parent(&absolute))) {
            (Some(name), Ok(dir)) => dir.join(name),
            _ => std::fs::canonicalize(&absolute).unwrap_or(absolute),
        };
        let inode = std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        Self { resolved, inode }
    }

    fn same(&self, other: &Identity) -> bool {
        self.resolved == other.resolved || (self.inode.is_some() && self.inode == other.inode)
    }
}

/// Check, before any work, that a command's outputs are pairwise distinct files and that none
/// of them is one of its inputs (a plan, a scenario, a corpus, a shard report, a database it
/// reads): a page written over the kept database, or a database over the plan it was run from,
/// would destroy what the command was given or what it just made.
pub fn check_distinct(outputs: &[Named], inputs: &[Named]) -> Result<(), Clash> {
    let outs: Vec<Identity> = outputs.iter().map(|o| Identity::of(&o.path)).collect();
    for (i, (a, ida)) in outputs.iter().zip(&outs).enumerate() {
        if let Some(b) = outputs[..i].iter().zip(&outs).find(|(_, idb)| ida.same(idb)).map(|(b, _)| b) {
            return Err(Clash(format!(
                "{} and {} name the same path {}; every output needs a place of its own",
                b.what,
                a.what,
                a.path.display()
            )));
        }
        if let Some(input) = inputs.iter().find(|input| ida.same(&Identity::of(&input.path))) {
            return Err(Clash(format!(
                "{} {} would write over {} {}, which this command reads; refusing to write over an input",
                a.what,
                a.path.display(),
                input.what,
                input.path.display()
            )));
        }
    }
    Ok(())
}

/// The `*.toml` files of a folder, sorted: an entry that cannot be read fails the listing, so
/// a corpus or a scenario folder is never replayed with a file silently left out.
pub fn toml_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|x| x == "toml") {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

/// Text for a terminal: every control character (an escape sequence in a file's name or contents)
/// written out as a Rust escape, so nothing a file holds can drive the terminal.
pub fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_and_refuses_to_overwrite_unless_told() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.txt");
        write_atomic(&path, b"one", false).expect("first");
        let e = write_atomic(&path, b"two", false).expect_err("exists");
        assert!(e.to_string().contains("refusing to overwrite"), "{e}");
        write_atomic(&path, b"three", true).expect("forced");
        assert_eq!(std::fs::read(&path).expect("read"), b"three");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1, "no temporary file left");
    }

    #[test]
    fn refuses_directories_and_symlinks_even_when_forced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).expect("mkdir");
        let e = write_atomic(&sub, b"x", true).expect_err("a directory");
        assert!(e.to_string().contains("is a directory"), "{e}");
        let target = dir.path().join("target.txt");
        std::fs::write(&target, b"keep").expect("write");
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let e = write_atomic(&link, b"x", true).expect_err("a symlink");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).expect("read"), b"keep", "the link's target is untouched");
        remove_stale(&[&link]).expect("a stale link is removed");
        assert!(!link.exists() && target.exists(), "the link went, its target stayed");
    }

    #[test]
    fn outputs_must_differ_from_each_other_and_from_every_input() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        std::fs::write(p.join("plan.toml"), "x").expect("write");
        std::fs::create_dir(p.join("sub")).expect("mkdir");
        std::fs::hard_link(p.join("plan.toml"), p.join("hard.toml")).expect("hard link");
        std::os::unix::fs::symlink(p.join("plan.toml"), p.join("soft.toml")).expect("symlink");
        let plan = [Named::new("the --plan file", p.join("plan.toml"))];
        let out = |what: &str, path: PathBuf| Named::new(what, path);
        check_distinct(&[out("--keep-db", p.join("a.db")), out("--html", p.join("a.html"))], &plan).expect("distinct");
        let same = [out("--keep-db", p.join("a.db")), out("--html", p.join("sub/../a.db"))];
        let e = check_distinct(&same, &plan).expect_err("one file by two names");
        assert!(e.to_string().starts_with("--keep-db and --html name the same path"), "{e}");
        for name in ["plan.toml", "hard.toml", "soft.toml", "sub/../plan.toml"] {
            let e = check_distinct(&[out("--keep-db", p.join(name))], &plan).expect_err(name);
            assert!(e.to_string().contains("would write over the --plan file"), "{name}: {e}");
        }
        // A name in the current folder is the same file as its absolute path.
        let here = std::env::current_dir().expect("cwd").join("Cargo.toml");
        let e = check_distinct(&[out("--out", "Cargo.toml".into())], &[Named::new("the scenario", here)]);
        assert!(e.is_err(), "a relative and an absolute name of one file");
    }

    #[test]
    fn refuses_a_file_in_a_folder_that_does_not_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = check_target(&dir.path().join("missing/a.txt"), true).expect_err("no folder");
        assert!(e.to_string().contains("its folder does not exist"), "{e}");
        check_target(&dir.path().join("a.txt"), false).expect("a new file in a folder that exists");
    }
}
