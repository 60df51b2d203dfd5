//! Removing a temporary folder whatever was put in it. A store adapter owns what it writes into
//! its location: a folder it made read-only (`chmod 0555`, or a database engine's own lock
//! folder) cannot be emptied, and `std::fs::remove_dir_all` (what a `TempDir`'s drop runs, its
//! error dropped) then gives up on the whole tree, silently. [`remove_tree`] gives every folder
//! of the tree back its owner's permissions first, and returns what it still could not remove,
//! each with why, for the caller to say so.

use std::path::{Path, PathBuf};

/// Something [`remove_tree`] could not remove, and why.
#[derive(Debug)]
pub struct Leftover {
    pub path: PathBuf,
    pub error: std::io::Error,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", crate::files::printable(&self.path.display().to_string()), self.error)
    }
}

/// Remove `dir` and everything under it, following no symbolic link. When a plain removal fails,
/// every folder of the tree is made `u+rwx` (a folder made read-only can then be emptied) and the
/// removal tried again; what is still there is returned, deepest first (a folder is named only
/// when it is itself what could not go, not because something in it stayed). A `dir` that does
/// not exist is removed already.
pub fn remove_tree(dir: &Path) -> Vec<Leftover> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => return Vec::new(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(_) => {}
    }
    open_up(dir);
    let mut left = Vec::new();
    remove(dir, &mut left);
    left
}

/// Give `path` (a folder, not through a link) and every folder under it its owner's `rwx`.
fn open_up(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(meta) = std::fs::symlink_metadata(path) else { return };
    if !meta.is_dir() {
        return;
    }
    let mode = meta.permissions().mode();
    if mode & 0o700 != 0o700 {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o700));
    }
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                open_up(&entry.path());
            }
        }
    }
}

/// Remove `path` and what is under it, depth first; whether it is gone. Each failure is kept in
/// `left`.
fn remove(path: &Path, left: &mut Vec<Leftover>) -> bool {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
        Err(error) => return kept(left, path, error),
    };
    let removed = if meta.is_dir() {
        let entries = match std::fs::read_dir(path) {
            Ok(entries) => entries,
            Err(error) => return kept(left, path, error),
        };
        let mut empty = true;
        for entry in entries {
            empty &= match entry {
                Ok(entry) => remove(&entry.path(), left),
                Err(error) => kept(left, path, error),
            };
        }
        if !empty {
            return false;
        }
        std::fs::remove_dir(path)
    } else {
        std::fs::remove_file(path)
    };
    match removed {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(error) => kept(left, path, error),
    }
}

/// Keep the failure `error` at `path` in `left`; `false`, as `path` is not gone.
fn kept(left: &mut Vec<Leftover>, path: &Path, error: std::io::Error) -> bool {
    left.push(Leftover { path: path.to_owned(), error });
    false
}

/// One warning line per leftover (at most `most`, then how many more), for stderr.
pub fn warnings(left: &[Leftover], most: usize) -> Vec<String> {
    let mut lines: Vec<String> = left
        .iter()
        .take(most)
        .map(|l| format!("fencesim: warning: a temporary file or folder could not be removed: {l}"))
        .collect();
    if left.len() > most {
        lines.push(format!("fencesim: warning: and {} more that could not be removed", left.len() - most));
    }
    lines
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// Folders made read-only at any depth (and a file in them) are removed whole; a symbolic
    /// link is removed, never followed: what it points to outside the tree stays, and so do its
    /// permissions.
    #[test]
    fn read_only_folders_are_removed_and_links_never_followed() {
        let outside = tempfile::tempdir().unwrap();
        let keep = outside.path().join("keep");
        std::fs::create_dir(&keep).unwrap();
        std::fs::write(keep.join("kept.txt"), "x").unwrap();
        std::fs::set_permissions(&keep, std::fs::Permissions::from_mode(0o555)).unwrap();
        let dir = tempfile::tempdir().unwrap().keep();
        let deep = dir.join("a/b/c");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("data"), "x").unwrap();
        std::os::unix::fs::symlink(&keep, dir.join("a/link")).unwrap();
        for (folder, mode) in [(&deep, 0o500), (&dir.join("a/b"), 0o555), (&dir.join("a"), 0o000)] {
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let left = remove_tree(&dir);
        assert!(left.is_empty(), "{left:?}");
        assert!(!dir.exists());
        assert!(keep.join("kept.txt").is_file(), "what a link points to stays");
        assert_eq!(std::fs::metadata(&keep).unwrap().permissions().mode() & 0o777, 0o555);
        std::fs::set_permissions(&keep, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(remove_tree(&outside.path().join("missing")).is_empty(), "nothing to remove is removed");
    }

    #[test]
    fn warnings_name_each_leftover_and_bound_the_list() {
        let left: Vec<Leftover> = (0..5)
            .map(|i| Leftover {
                path: PathBuf::from(format!("/tmp/x/{i}\u{1b}")),
                error: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            })
            .collect();
        let lines = warnings(&left, 3);
        assert_eq!(lines.len(), 4);
        assert!(
            lines[0]
                .starts_with("fencesim: warning: a temporary file or folder could not be removed: /tmp/x/0\\u{1b}: ")
        );
        assert_eq!(lines[3], "fencesim: warning: and 2 more that could not be removed");
    }
}
