//! A signal while an output is being written (a report, a page, a kept database) ends the process
//! with 128 + the signal and leaves nothing beside the output: the temporary file it was being
//! written into goes too, though no drop runs at that exit.
//!
//! The readiness point is the test hook `FENCESIM_TEST_HOLD_WRITE=1` (`fencesim_sim::files::
//! hold_for_a_test`): the first write holds once its temporary file is written and says
//! `holding PATH` on stderr; the test signals the process only after reading that line.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::sys::signal::Signal;

use crate::cli;

/// Run `args` in `dir`, signal it once it holds inside its first write, and return its exit code
/// and the temporary file it held.
fn interrupt(dir: &Path, args: &[&str], signal: Signal) -> (Option<i32>, std::path::PathBuf) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .current_dir(dir)
        .args(args)
        .env("FENCESIM_TEST_HOLD_WRITE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run fencesim");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut said = String::new();
    let held = loop {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).expect("read stderr");
        assert!(n > 0, "{args:?}: ended without holding a write: {said}");
        said.push_str(&line);
        if let Some(path) = line.trim_end().strip_prefix("holding ") {
            break dir.join(path);
        }
    };
    assert!(held.is_file(), "{args:?}: the held temporary file {} is not there", held.display());
    let name = held.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    assert!(name.starts_with(".fencesim-"), "{args:?}: held {name}");
    assert!(cli::signal_while_running(&mut child, signal), "{args:?}: ended before the signal");
    let status = child.wait().expect("wait");
    (status.code(), held)
}

/// Every entry of `dir` and the folders under it, as paths relative to it.
fn everything(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(at) = todo.pop() {
        for entry in std::fs::read_dir(&at).expect("list") {
            let path = entry.expect("an entry").path();
            found.push(path.strip_prefix(dir).expect("inside").display().to_string());
            if path.is_dir() {
                todo.push(path);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn a_signal_while_a_page_is_written_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["run", "--scenario", "swarm", "--seed", "1", "--html", "t.html"];
    let (code, held) = interrupt(dir.path(), &args, Signal::SIGTERM);
    assert_eq!(code, Some(143));
    assert!(!held.exists(), "{} left behind", held.display());
    assert_eq!(everything(dir.path()), Vec::<String>::new(), "nothing may be left: no page, no temporary file");
}

#[test]
fn a_signal_while_a_database_is_kept_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["run", "--scenario", "swarm", "--seed", "1", "--db", "file", "--keep-db", "kept.db"];
    let (code, held) = interrupt(dir.path(), &args, Signal::SIGINT);
    assert_eq!(code, Some(130));
    assert!(!held.exists(), "{} left behind", held.display());
    assert_eq!(everything(dir.path()), Vec::<String>::new(), "nothing may be left: no database, no temporary file");
}

#[test]
fn a_signal_while_a_report_is_written_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["sweep", "--scenario", "swarm", "--seeds", "2", "--jobs", "1", "--report", "reports"];
    let (code, held) = interrupt(dir.path(), &args, Signal::SIGHUP);
    assert_eq!(code, Some(129));
    assert!(!held.exists(), "{} left behind", held.display());
    // The report folder was made before the worlds ran; nothing is in it.
    assert_eq!(everything(dir.path()), ["reports"], "only the report folder, empty");
}
