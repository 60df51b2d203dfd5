//! The child processes of the real-process commands (the soaks' writers, workers and client, the
//! kill points' children, the audit of a soak's copy): each started dying with fencesim
//! ([`fencesim_protocol::die_with_parent`]), each signalled through one type that knows whether
//! it leads a process group (a writer with a store adapter does: a signal must reach both), and
//! each killed and reaped when its owner lets go of it, on every exit path, a panic's included.

use std::ffi::OsString;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A child could not be started: what was being done, and the OS's answer.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what}: {error}")]
pub struct SpawnError {
    pub what: String,
    pub error: std::io::Error,
}

/// `exe` as a command that dies with this process (SIGKILL included).
pub fn command(exe: &Path) -> Command {
    let mut command = Command::new(exe);
    fencesim_protocol::die_with_parent(&mut command);
    command
}

/// A started process that is killed and reaped when dropped: its whole process group when it
/// leads one, whether or not the leader already ended (its adapter may outlive it by a moment);
/// the leader alone only while it runs (a reaped pid may be another process's).
#[derive(Debug)]
pub struct Reaped {
    child: Child,
    group: bool,
}

impl Reaped {
    /// `child`, which leads a process group of its own when `group` (it was started with
    /// `process_group(0)`).
    pub fn new(child: Child, group: bool) -> Self {
        Self { child, group }
    }

    /// Start `command` (already given its arguments and stdio).
    pub fn spawn(command: &mut Command, group: bool, what: &str) -> Result<Self, SpawnError> {
        let child = command.spawn().map_err(|error| SpawnError { what: what.to_owned(), error })?;
        Ok(Self::new(child, group))
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX))
    }

    /// Send `sig` to the process, or to its group when it leads one; whether it was delivered.
    pub fn signal(&self, sig: Signal) -> bool {
        let pid = self.pid();
        let target = if self.group { Pid::from_raw(-pid.as_raw()) } else { pid };
        kill(target, sig).is_ok()
    }

    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait()
    }

    /// SIGKILL it (its group when it leads one) and reap it.
    pub fn kill(&mut self) -> std::io::Result<ExitStatus> {
        self.signal(Signal::SIGKILL);
        self.child.wait()
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if self.group {
            self.signal(Signal::SIGKILL);
        } else if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Start `argv` as `exe` in no process group of its own, stdin closed, stdout and stderr to
/// `<name>.out` and `<name>.err` in `dir`.
pub fn spawn_logged(exe: &Path, argv: &[OsString], dir: &Path, name: &str) -> Result<Reaped, SpawnError> {
    let create = |file: String| {
        File::create(dir.join(&file)).map_err(|error| SpawnError { what: format!("create {file}"), error })
    };
    let stdout = create(format!("{name}.out"))?;
    let stderr = create(format!("{name}.err"))?;
    Reaped::spawn(
        command(exe).args(argv).stdin(Stdio::null()).stdout(stdout).stderr(stderr),
        false,
        &format!("start the {name} process"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    /// A shell that prints its pid and its child's once both run, then waits: the readiness point.
    fn family(group: bool) -> (Reaped, i32) {
        let mut cmd = command(Path::new("sh"));
        cmd.args(["-c", "sleep 600 & echo $!; wait"]).stdin(Stdio::null()).stdout(Stdio::piped());
        if group {
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        }
        let mut reaped = Reaped::spawn(&mut cmd, group, "start a shell").expect("sh starts");
        let mut line = String::new();
        BufReader::new(reaped.child.stdout.take().expect("stdout")).read_line(&mut line).expect("a line");
        (reaped, line.trim().parse().expect("the sleeper's pid"))
    }

    fn gone(pid: i32) -> bool {
        // Dead, or a zombie of a parent that has not reaped it yet (init reaps it soon).
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |stat| stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
    }

    fn wait_gone(pid: i32) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if gone(pid) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn dropping_a_group_leader_kills_its_whole_group() {
        let (reaped, sleeper) = family(true);
        let leader = reaped.id();
        assert!(!gone(sleeper), "the sleeper runs before the drop");
        drop(reaped);
        assert!(wait_gone(sleeper), "the group's other process outlived the drop");
        assert!(gone(i32::try_from(leader).expect("pid")), "the leader was reaped");
    }

    #[test]
    fn dropping_a_lone_child_kills_and_reaps_it_only() {
        let (reaped, sleeper) = family(false);
        let leader = i32::try_from(reaped.id()).expect("pid");
        drop(reaped);
        assert!(gone(leader), "the child was killed and reaped");
        // Not in a group of its own: the sleeper is the shell's, and lives on (killed here).
        assert!(!gone(sleeper), "a lone child's drop reached beyond it");
        let _ = kill(Pid::from_raw(sleeper), Signal::SIGKILL);
    }

    #[test]
    fn a_signal_reaches_the_group_and_kill_reaps() {
        let (mut reaped, sleeper) = family(true);
        assert!(reaped.signal(Signal::SIGKILL), "delivered");
        assert!(wait_gone(sleeper), "the group's signal missed the sleeper");
        let status = reaped.wait().expect("reaped");
        assert!(!status.success(), "killed, not exited: {status}");
        let spawned = spawn_logged(Path::new("/nonexistent/fencesim"), &[], Path::new("/nonexistent"), "x");
        assert!(spawned.is_err_and(|e| e.to_string().starts_with("cannot create x.out")), "a missing folder is named");
    }
}
