//! The adapter's OS process: started (by default) in a process group of its own, so that what a
//! wrapper script starts without `exec` goes with it; tied to fencesim's life by the kernel's
//! parent-death signal; watched through a pidfd, so that its exit is a `poll` readiness like its
//! pipes'; observed without being reaped (`waitid` with `WNOWAIT`: its pid, and so its group's
//! id, stay its own until fencesim has killed the group), then killed and reaped.
//!
//! Every group still alive is listed in [`GROUPS`], so that a binary ending on a termination
//! signal can kill them all ([`kill_every_group`]) before it exits: the parent-death signal
//! reaches the adapter, never its children.

use std::collections::BTreeSet;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::process::{Child, Command};
use std::sync::Mutex;

use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;

/// How an adapter process is grouped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProcessGroup {
    /// A group of its own, which fencesim kills whole (a wrapper's children included).
    #[default]
    Own,
    /// The caller's group: whoever signals the caller's group signals the adapter too (the soak's
    /// writers, whose referee stops and kills a writer and its adapter as one). fencesim then
    /// kills the adapter alone; the group's owner kills the rest.
    Caller,
}

/// How the process ended, from `waitid`/`waitpid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this status.
    Exited(i32),
    /// A signal ended it.
    Signaled(Signal),
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ended::Exited(code) => write!(f, "exited with status {code}"),
            Ended::Signaled(signal) => write!(f, "was killed by {}", signal.as_str()),
        }
    }
}

/// The process groups of the adapters alive in this process.
static GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// `SIGKILL` every adapter's process group still alive (a binary's last act on a termination
/// signal); the groups stay listed, so a second caller kills nothing new.
pub fn kill_every_group() {
    let groups = GROUPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for group in groups.iter() {
        let _ = killpg(Pid::from_raw(*group), Signal::SIGKILL);
    }
}

pub(crate) struct AdapterChild {
    child: Child,
    pid: Pid,
    group: ProcessGroup,
    /// Readable once the process has exited (`None` where the kernel has no pidfd).
    pidfd: Option<OwnedFd>,
    /// Killed and reaped: how it ended.
    reaped: Option<Ended>,
}

impl AdapterChild {
    /// Start `command` (its pipes already set) in `group`, dying with the thread that starts it.
    pub(crate) fn spawn(mut command: Command, group: ProcessGroup) -> std::io::Result<AdapterChild> {
        if group == ProcessGroup::Own {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        die_with_parent(&mut command);
        // Listed before it exists: a termination signal between the fork and the listing would
        // otherwise miss the group (a pid listed for a moment too long is never signalled: the
        // lock is held from here until the pid is known).
        let mut groups = GROUPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let child = command.spawn()?;
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        if group == ProcessGroup::Own {
            groups.insert(pid.as_raw());
        }
        drop(groups);
        Ok(AdapterChild { child, pid, group, pidfd: pidfd_open(pid), reaped: None })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid.as_raw().unsigned_abs()
    }

    pub(crate) fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Readable once the process exited, for `poll`.
    pub(crate) fn exit_fd(&self) -> Option<BorrowedFd<'_>> {
        if self.reaped.is_some() { None } else { self.pidfd.as_ref().map(AsFd::as_fd) }
    }

    /// Whether the kernel tells exits by readiness here (a pidfd).
    pub(crate) fn watchable(&self) -> bool {
        self.pidfd.is_some()
    }

    /// How it ended, if it has, without reaping it.
    pub(crate) fn ended(&self) -> Option<Ended> {
        if let Some(ended) = self.reaped {
            return Some(ended);
        }
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        loop {
            match waitid(Id::Pid(self.pid), flags) {
                Ok(WaitStatus::Exited(_, code)) => return Some(Ended::Exited(code)),
                Ok(WaitStatus::Signaled(_, signal, _)) => return Some(Ended::Signaled(signal)),
                Err(nix::errno::Errno::EINTR) => {}
                _ => return None,
            }
        }
    }

    /// Kill it (its whole group when it has its own) and reap it: how it ended, and whether it
    /// had already ended before this kill.
    pub(crate) fn kill(&mut self) -> (Ended, bool) {
        if let Some(ended) = self.reaped {
            return (ended, true);
        }
        let before = self.ended();
        match self.group {
            ProcessGroup::Own => {
                // The group is killed before the leader is reaped: until then its id is the
                // leader's pid, which no other process can take.
                let mut groups = GROUPS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let _ = killpg(self.pid, Signal::SIGKILL);
                groups.remove(&self.pid.as_raw());
            }
            ProcessGroup::Caller => {
                if before.is_none() {
                    let _ = kill(self.pid, Signal::SIGKILL);
                }
            }
        }
        let ended = match self.child.wait() {
            Ok(status) => ended_of(status),
            Err(_) => before.unwrap_or(Ended::Signaled(Signal::SIGKILL)),
        };
        self.reaped = Some(ended);
        (ended, before.is_some())
    }
}

impl Drop for AdapterChild {
    fn drop(&mut self) {
        self.kill();
    }
}

fn ended_of(status: std::process::ExitStatus) -> Ended {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal().and_then(|s| Signal::try_from(s).ok())) {
        (Some(code), _) => Ended::Exited(code),
        (None, Some(signal)) => Ended::Signaled(signal),
        (None, None) => Ended::Signaled(Signal::SIGKILL),
    }
}

/// A pidfd of `pid` (`pidfd_open(2)`, Linux 5.3), or `None` where there is none.
#[allow(unsafe_code)]
fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, touches no memory of ours, and returns a new
    // descriptor (close-on-exec) or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the descriptor was just returned to this process and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Have the kernel `SIGKILL` the child when the thread that starts it ends (the process killed
/// included), and have the child exit at once (status 2, before `exec`) if that already happened
/// before it asked: the one die-with-parent of every process fencesim starts (adapters, soak
/// writers and engine workers, kill-point children, boot racers, shrink's and mutants' runs). It
/// is race-free because it runs in the forked child before `exec`, against the parent's pid taken
/// before the fork; a child started from a thread that ends before it must outlive that thread
/// is not for this (none is).
#[allow(unsafe_code)]
pub fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and calls only async-signal-safe
    // functions: prctl(2), getppid(2) and _exit(2), with no allocation and no lock.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent.as_raw() {
                libc::_exit(2);
            }
            Ok(())
        });
    }
}
