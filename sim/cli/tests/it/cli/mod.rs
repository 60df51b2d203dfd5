//! Running the real `fencesim` binary from integration tests, and reading what it printed.

#![allow(dead_code, reason = "not every helper is used by every test")]

use std::ffi::OsStr;
use std::process::{Command, Output};

/// The Python interpreter itself (its `sys.executable`), asked of `python3` once. On a machine
/// whose `python3` is a version manager's shim (a shell script that runs a dozen processes before
/// the interpreter), each adapter start costs a dozen extra processes, and the kit starts one
/// per check (the kit on the reference adapter: 8.9 s through the shim, 4.8 s without). Only the interpreter is resolved: a test that needs the PATH lookup itself (the
/// kept soak's `soak-check` under an empty PATH) names `python3`.
pub fn python() -> &'static str {
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .unwrap_or_else(|e| panic!("this test needs python3, which this machine lacks ({e}); it cannot run"));
        let path = String::from_utf8(out.stdout).expect("a UTF-8 path").trim().to_owned();
        assert!(out.status.success() && !path.is_empty(), "python3 did not name its interpreter");
        path
    })
}

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

/// What a test needs from outside the Rust toolchain (a program, a browser), found, or a failure
/// naming it and how to get it: a test that cannot run never passes. A test whose need a
/// developer's machine may well lack (Chromium) is also marked
/// `#[cfg_attr(not(fencesim_ci), ignore = "needs ...")]`: without `CI` set it is reported as
/// ignored with that reason (run it with `cargo test -- --ignored`); with `CI` set
/// (`sim/cli/build.rs`) it runs, and fails here when the need is missing (docs/tests.md, "What a
/// test needs").
pub fn need<T>(found: Option<T>, what: &str) -> T {
    found.unwrap_or_else(|| panic!("this test needs {what}, which this machine lacks; it cannot run"))
}

/// A program on the PATH (or in /usr/bin), by any of `names`.
pub fn program(names: &[&str]) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .chain([std::path::PathBuf::from("/usr/bin")])
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// A command running `program` bound by file permissions: as root, whom they do not bind, through
/// `setpriv` (util-linux) without the capabilities that override them (`CAP_DAC_OVERRIDE`,
/// `CAP_DAC_READ_SEARCH`, `CAP_FOWNER`), for it and everything it starts; as anyone else, as it is.
pub fn bound_by_permissions(program_path: &std::path::Path) -> Command {
    if !is_root() {
        return Command::new(program_path);
    }
    let setpriv = need(program(&["setpriv"]), "setpriv (util-linux), to run as root bound by file permissions");
    let caps = "-dac_override,-dac_read_search,-fowner";
    let mut command = Command::new(setpriv);
    command.args(["--inh-caps", caps, "--bounding-set", caps, "--"]).arg(program_path);
    command
}

/// Whether this process runs as root (its effective user id, from `/proc/self/status`).
pub fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|ids| ids.split_whitespace().nth(1)) == Some("0")
}
