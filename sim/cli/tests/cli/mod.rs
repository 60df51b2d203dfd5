//! Running the real `fencesim` binary from integration tests, and reading what it printed.

#![allow(dead_code, reason = "each test binary uses its own subset")]

use std::ffi::OsStr;
use std::process::{Command, Output};

/// Run `fencesim` with `args`, capturing everything.
pub fn fencesim<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().expect("run fencesim")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The exit code is `code`, and nothing panicked.
pub fn assert_exit(out: &Output, code: i32) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "stdout: {}\nstderr: {err}", stdout(out));
    assert!(!err.contains("panic"), "{err}");
}

/// The state letter of `/proc/PID/stat` (`R`, `S`, `T`, `Z`, ...), if the process exists.
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().next()?.chars().next()
}

/// Deliver `signal` to `child` while it is provably still running, so the test never races the
/// command it signals: stop it (`SIGSTOP`), wait until the kernel reports it stopped, check it has
/// not exited, send `signal`, and continue it. The signal is then handled by the running program
/// whatever the machine's load. `false` when the program had already ended before the stop (the
/// caller's readiness point came too late to test anything).
#[allow(clippy::disallowed_methods, reason = "the test watches a real process in wall time")]
pub fn signal_while_running(child: &mut std::process::Child, signal: nix::sys::signal::Signal) -> bool {
    use nix::sys::signal::{Signal, kill};
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
    kill(pid, Signal::SIGSTOP).expect("stop the process");
    let start = std::time::Instant::now();
    while !matches!(proc_state(child.id()), Some('T' | 't' | 'Z') | None) {
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "the process never stopped");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    if child.try_wait().expect("poll the process").is_some() {
        return false;
    }
    // Stopped and not reaped: the pid is still this process's, and it runs no code until the
    // SIGCONT, by which time `signal` is pending.
    kill(pid, signal).expect("signal the process");
    kill(pid, Signal::SIGCONT).expect("continue the process");
    true
}
