//! Every temporary root fencesim makes goes when it ends, whatever a store adapter put in its
//! location: a read-only folder (`locked/inner`, made by `adapters/read_only_folder.py`) is
//! opened up and removed, where it used to leave the whole root behind without a word; and what
//! cannot be removed at all is named on stderr.
//!
//! File permissions do not bind root: run as root, fencesim runs without the capabilities that
//! override them (`cli::bound_by_permissions`), as any other user would.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::cli;

use cli::{bound_by_permissions, stderr};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `fencesim run` of one swarm world through the read-only-folder adapter, with TMPDIR `tmp`.
fn run_in(tmp: &Path, adapter_args: &str) -> Output {
    let script = repo().join("sim/cli/tests/adapters/read_only_folder.py");
    let store = format!("cmd:{} {} {adapter_args}", crate::cli::python(), script.display());
    bound_by_permissions(Path::new(env!("CARGO_BIN_EXE_fencesim")))
        .args(["run", "--scenario", "swarm", "--seed", "1", "--store", &store])
        .env("TMPDIR", tmp)
        .output()
        .expect("run fencesim")
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn a_read_only_folder_in_an_adapter_location_goes_with_the_temporary_root() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(tmp.path(), "");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    assert_eq!(entries(tmp.path()), Vec::<String>::new(), "the temporary root was left behind");
}

#[test]
fn what_cannot_be_removed_is_named_on_stderr() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(tmp.path(), "lock-tmpdir");
    let err = stderr(&out);
    // The adapter made TMPDIR read-only: the root itself cannot go, but everything in it did.
    let left = entries(tmp.path());
    let inside: Vec<Vec<String>> = left.iter().map(|root| entries(&tmp.path().join(root))).collect();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(out.status.code(), Some(0), "{err}");
    let [root] = left.as_slice() else { panic!("one root left: {left:?}") };
    let named = format!(
        "fencesim: warning: a temporary file or folder could not be removed: {}: ",
        tmp.path().join(root).display()
    );
    assert!(err.lines().any(|l| l.starts_with(&named)), "{named:?} not in: {err}");
    assert!(err.contains("Permission denied"), "{err}");
    assert_eq!(inside, [Vec::<String>::new()], "everything inside the root was removed");
}
