//! Temporary folders that outlive no `fencesim` process, however it ends, a `SIGKILL` included
//! (which no `Drop` and no signal handler sees; a CI runner's timeout sends it to the whole
//! process group).
//!
//! The binary gives itself a process root ([`enable_process_root`]): the first temporary folder
//! one of its commands asks for ([`temp_dir`]: a file world's, the conformance kit's, the
//! mutants' boot race, a soak's, the real kill points') creates a `fencesim-XXXXXX` folder with a
//! janitor, every such folder goes inside it, and the binary removes it before it exits
//! ([`release_process_root`]). Library users (tests, benchmarks) that never enable a root get
//! plain temporary folders.
//!
//! The janitor is a child process (this binary, hidden subcommand `janitor`) that makes the root
//! itself and says where (its path and a NUL on its stdout), then waits for EOF on a pipe only its
//! parent holds (close-on-exec, so no other child inherits the write end): the parent's exit,
//! normal or not, closes it. It then gives the parent's other children a moment to die of their
//! parent-death signal and removes the root. The root never exists without its janitor: a parent
//! that made the folder and then started the janitor left the folder behind when a `SIGKILL` fell
//! between the two (a flake hunt caught it, `an_adapter_dies_with_a_sigkilled_fencesim_...`). It
//! runs in a process group of its own, so a `SIGKILL` of the parent's whole group leaves it
//! standing to clean up. A parent that removed the root itself dismisses it first, and it exits at
//! once.

#![allow(clippy::disallowed_methods, reason = "the janitor waits in real time, outside any world")]

use std::io::{BufRead as _, BufReader, PipeWriter, Read as _, Write as _};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tempfile::TempDir;

/// The hidden subcommand a janitor runs as.
const SUBCOMMAND: &str = "janitor";

/// How long the janitor gives its parent's other children to die of their parent-death signal
/// (and stop writing into the folder) before it removes the folder.
const GRACE_MS: u64 = 300;

/// How often the binary tries to remove its process root, 10 ms apart, before it leaves the
/// folder to the janitor.
const REMOVE_ATTEMPTS: usize = 200;

/// The longest path a janitor may say (Linux's `PATH_MAX`).
const MAX_PATH_BYTES: u64 = 4096;

/// What a parent writes to the pipe when it removed the folder itself.
const DISMISSED: &[u8] = b"dismissed";

/// A running janitor for one folder. Dropping it closes the pipe and reaps the janitor once it
/// has cleaned up; [`Janitor::dismiss`] it once the folder is gone.
struct Janitor {
    child: Child,
    pipe: Option<PipeWriter>,
}

impl Janitor {
    /// Start `exe` (this binary) as a janitor that makes a `fencesim-XXXXXX` folder inside
    /// `parent`; the janitor and the folder's path, once it exists.
    fn start(exe: &Path, parent: &Path) -> std::io::Result<(Self, PathBuf)> {
        let (reader, pipe) = std::io::pipe()?;
        let mut child = Command::new(exe)
            .arg(SUBCOMMAND)
            .arg(parent)
            .process_group(0)
            .stdin(Stdio::from(reader))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut said = Vec::new();
        let read = match child.stdout.take() {
            Some(stdout) => BufReader::new(stdout).take(MAX_PATH_BYTES).read_until(0, &mut said),
            None => Ok(0),
        };
        let made = said.pop() == Some(0);
        let dir = PathBuf::from(std::ffi::OsString::from_vec(said));
        let janitor = Self { child, pipe: Some(pipe) };
        read?;
        if !made || !dir.is_dir() {
            // Closing the pipe (the drop) ends it; nothing was made, or it removes what it made.
            drop(janitor);
            return Err(std::io::Error::other(format!(
                "the janitor made no folder in {} (it said {:?})",
                parent.display(),
                dir.display()
            )));
        }
        Ok((janitor, dir))
    }

    /// The folder is gone already: the janitor exits without waiting, and is reaped.
    fn dismiss(mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = pipe.write_all(DISMISSED);
        }
    }
}

impl Drop for Janitor {
    fn drop(&mut self) {
        drop(self.pipe.take());
        let _ = self.child.wait();
    }
}

/// The janitor's own body: make the root inside `parent` and write its path and a NUL to stdout,
/// then [`clean_up_after_parent`]. A parent gone before it read the path is seen the same way (a
/// failed write changes nothing: the janitor waits for EOF and removes what it made).
pub fn make_root_and_clean_up(parent: &Path) {
    let Ok(dir) = tempfile::Builder::new().prefix("fencesim-").disable_cleanup(true).tempdir_in(parent) else {
        return;
    };
    let dir = dir.keep();
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(dir.as_os_str().as_bytes())
        .and_then(|()| stdout.write_all(&[0]))
        .and_then(|()| stdout.flush());
    drop(stdout);
    clean_up_after_parent(&dir);
}

/// Wait for EOF on stdin (the parent finished or died); unless the parent dismissed it, give the
/// parent's other children a moment to die, then remove `dir`.
fn clean_up_after_parent(dir: &Path) {
    let mut said = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut said);
    if said == DISMISSED {
        return;
    }
    std::thread::sleep(Duration::from_millis(GRACE_MS));
    // Read-only folders a store adapter made in its location included (no stderr to warn on).
    let _ = fencesim_sim::removal::remove_tree(dir);
}

/// The process root: off (library use), enabled (the binary, none made yet) or made.
enum Root {
    Off,
    Enabled(PathBuf),
    Made { dir: PathBuf, janitor: Janitor },
}

static ROOT: Mutex<Root> = Mutex::new(Root::Off);

fn root() -> std::sync::MutexGuard<'static, Root> {
    ROOT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Make later [`temp_dir`]s inside one folder that a janitor started from `exe` (this binary)
/// removes if the process dies before [`release_process_root`].
pub fn enable_process_root(exe: PathBuf) {
    let mut root = root();
    if matches!(*root, Root::Off) {
        *root = Root::Enabled(exe);
    }
}

/// Remove the process root, if one was made, and dismiss its janitor. Call it once, on the way
/// out: later [`temp_dir`]s are plain temporary folders again.
pub fn release_process_root() {
    let made = std::mem::replace(&mut *root(), Root::Off);
    if let Root::Made { dir: path, janitor } = made {
        // Children ending with this process (a boot race, a storm's writers) may still be
        // creating files in it: a removal that raced one (a file appearing between the listing
        // and the rmdir) is tried again. Left standing, the janitor removes it after the exit.
        // Folders made read-only inside it (by a store adapter, in its location) are opened up
        // and removed; what still cannot be removed is named on stderr, never left silently.
        let mut left = Vec::new();
        for _ in 0..REMOVE_ATTEMPTS {
            left = fencesim_sim::removal::remove_tree(&path);
            if left.is_empty() || !path.exists() {
                janitor.dismiss();
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut stderr = std::io::stderr().lock();
        for line in fencesim_sim::removal::warnings(&left, 10) {
            let _ = writeln!(stderr, "{line}");
        }
    }
}

/// A new temporary folder named `<prefix>XXXXXX`, inside the process root when the binary
/// enabled one (made, with its janitor, on first use). A folder to `keep` outlives the process,
/// so it is made beside the root, never inside it.
pub fn temp_dir(prefix: &str, keep: bool) -> std::io::Result<TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix).disable_cleanup(keep);
    if keep {
        return builder.tempdir();
    }
    let mut root = root();
    if let Root::Enabled(exe) = &*root {
        let (janitor, dir) = Janitor::start(exe, &std::env::temp_dir())?;
        *root = Root::Made { dir, janitor };
    }
    match &*root {
        Root::Made { dir, .. } => builder.tempdir_in(dir),
        _ => builder.tempdir(),
    }
}

/// Whether `dir` is inside the process root, so a janitor removes it if the process dies.
pub fn watched(dir: &Path) -> bool {
    matches!(&*root(), Root::Made { dir: made, .. } if dir.starts_with(made))
}
