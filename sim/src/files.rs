//! Files fencesim writes: always atomically (a temporary file in the same folder, renamed into
//! place), so a reader never sees half a file and an interrupted write leaves nothing behind.

use std::io::Write as _;
use std::path::Path;

/// Why a file could not be written: one line naming it.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct WriteError {
    pub path: String,
    pub message: String,
}

/// Write `bytes` to `path` atomically. Without `overwrite`, an existing file is refused (checked
/// again at the rename, which never replaces one).
pub fn write_atomic(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), WriteError> {
    let fail = |message: String| WriteError { path: path.display().to_string(), message };
    if !overwrite && path.exists() {
        return Err(fail("the file exists; refusing to overwrite it (--force replaces it)".into()));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".fencesim-")
        .tempfile_in(dir)
        .map_err(|e| fail(format!("cannot create a temporary file beside it: {e}")))?;
    tmp.write_all(bytes).and_then(|()| tmp.as_file().sync_all()).map_err(|e| fail(format!("cannot write: {e}")))?;
    if overwrite {
        tmp.persist(path).map_err(|e| fail(format!("cannot rename into place: {}", e.error)))?;
    } else {
        tmp.persist_noclobber(path).map_err(|e| fail(format!("cannot rename into place: {}", e.error)))?;
    }
    Ok(())
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
}
