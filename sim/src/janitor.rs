//! The janitor: a child process that removes a temporary folder once the process that made it
//! is gone, however it went, a `SIGKILL` included (which no `Drop` and no signal handler sees).
//! The soak (both levels) and `killpoints --real` start one beside their temporary folder.
//!
//! It waits for EOF on a pipe only its parent holds (close-on-exec, so no other child inherits
//! the write end): the parent's exit, normal or not, closes it. It runs in a process group of
//! its own, so a `SIGKILL` of the parent's whole group (a CI runner's timeout, `kill -9 -PGID`)
//! leaves it standing to clean up. On a normal exit the parent has removed the folder already
//! and the janitor finds nothing to do.

#![allow(clippy::disallowed_methods, reason = "the janitor waits in real time, outside any world")]

use std::io::PipeWriter;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The hidden subcommand a janitor runs as.
pub const SUBCOMMAND: &str = "janitor";

/// How long the janitor gives its parent's other children to die of their parent-death signal
/// (and stop writing into the folder) before it removes the folder.
const GRACE_MS: u64 = 300;

/// A running janitor for one folder. Dropping it closes the pipe and reaps the janitor once it
/// has cleaned up, so drop it after the folder's own `TempDir`.
pub struct Janitor {
    child: Child,
    pipe: Option<PipeWriter>,
}

impl Janitor {
    /// Start `exe` (this binary) as the janitor of `dir`.
    pub fn start(exe: &Path, dir: &Path) -> std::io::Result<Self> {
        let (reader, pipe) = std::io::pipe()?;
        let child = Command::new(exe)
            .arg(SUBCOMMAND)
            .arg(dir)
            .process_group(0)
            .stdin(Stdio::from(reader))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Self { child, pipe: Some(pipe) })
    }
}

impl Drop for Janitor {
    fn drop(&mut self) {
        drop(self.pipe.take());
        let _ = self.child.wait();
    }
}

/// The janitor's own body: wait for EOF on stdin (the parent finished or died), give the
/// parent's other children a moment to die, then remove `dir`.
pub fn clean_up_after_parent(dir: &Path) {
    let mut sink = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    std::thread::sleep(Duration::from_millis(GRACE_MS));
    let _ = std::fs::remove_dir_all(dir);
}
