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
