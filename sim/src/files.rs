//! Files fencesim writes: always atomically (a temporary file in the same folder, renamed into
//! place), so a reader never sees half a file and an interrupted write leaves nothing behind. A
//! target that is a directory or a symbolic link is refused whatever the caller says (a rename
//! would replace the link, not write where it points, and an operator who pointed it somewhere
//! meant something else); an existing file is refused unless the caller was told `--force`.

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

/// Write `bytes` to `path` atomically. Without `overwrite`, an existing file is refused (checked
/// again at the rename, which never replaces one).
pub fn write_atomic(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), WriteError> {
    let fail = |message: String| WriteError { path: path.display().to_string(), message };
    check_target(path, overwrite)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".fencesim-")
        .tempfile_in(parent(path))
        .map_err(|e| fail(format!("cannot create a temporary file beside it: {e}")))?;
    tmp.write_all(bytes).and_then(|()| tmp.as_file().sync_all()).map_err(|e| fail(format!("cannot write: {e}")))?;
    if overwrite {
        tmp.persist(path).map_err(|e| fail(format!("cannot rename into place: {}", e.error)))?;
    } else {
        tmp.persist_noclobber(path).map_err(|e| fail(format!("cannot rename into place: {}", e.error)))?;
    }
    Ok(())
}

/// The folder a file of `path` is renamed into (`.` for a bare name).
pub fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Whether `path` may be written: into a folder that exists, never over a directory or a
/// symbolic link (dangling or not), and over an existing file only with `overwrite`. Checked
/// before any work so a refusal costs nothing.
pub fn check_target(path: &Path, overwrite: bool) -> Result<(), WriteError> {
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
    fn refuses_a_file_in_a_folder_that_does_not_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = check_target(&dir.path().join("missing/a.txt"), true).expect_err("no folder");
        assert!(e.to_string().contains("its folder does not exist"), "{e}");
        check_target(&dir.path().join("a.txt"), false).expect("a new file in a folder that exists");
    }
}
