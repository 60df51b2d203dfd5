//! The workspace as the house tests read it: the repository root and its members, from the
//! workspace manifest's `members` (never a hand-kept list: one once left a crate out).

use std::fs;
use std::path::{Path, PathBuf};

/// The repository root (`sim/`'s parent).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("sim/ has a parent").to_path_buf()
}

/// Every member's folder, relative to the root (`store`, `sim/cli`, ...), in manifest order.
pub fn members(root: &Path) -> Vec<String> {
    let text = fs::read_to_string(root.join("Cargo.toml")).expect("the workspace manifest");
    let doc: toml::Table = toml::from_str(&text).expect("parses");
    let members = doc["workspace"]["members"].as_array().expect("members");
    let members: Vec<String> = members.iter().map(|m| m.as_str().expect("a path").to_owned()).collect();
    assert!(members.iter().any(|m| m == "protocol"), "the members were read: {members:?}");
    members
}
