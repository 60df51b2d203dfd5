//! Build script of the fencesim CLI.
//!
//! - `--cfg fencesim_ci` when the `CI` variable is set (to anything but empty, `0` or `false`), so
//!   that tests which must run in CI and only there can say so with
//!   `#[cfg_attr(not(fencesim_ci), ignore = "...")]`: in CI they run (and fail when what they need
//!   is missing), elsewhere they are listed as ignored with their reason.
//! - `--cfg fencesim_slow` when `CI` or `FENCESIM_SLOW_TESTS` is set (the same way), so that the
//!   slowest tests (each a minute or more, each a miniature of what CI runs in full: the workflow
//!   file's fencesim steps, `.ci/run`'s kit on each planted adapter defect) say `#[cfg_attr(not(fencesim_slow), ignore = "...")]`: the README's test command on a
//!   developer's machine lists them as ignored with their reason, CI runs them.
//! - `FENCESIM_BUILD_ID`, what built this binary (`report::BUILD_ID`, the `build` of every sweep
//!   and replay report, which `fencesim merge` holds every shard to): a SHA-256 over every source
//!   file the binary is compiled from (each crate's manifest and `src`, the compiled-in scenarios,
//!   this script, the workspace manifest, `Cargo.lock`, `.cargo/config.toml`), by path and
//!   content, and over the compiler's version, the target, the profile, the features and the
//!   compiler flags. Two machines building the same sources the same way agree on it; any edit,
//!   another toolchain or another profile gives another. No git is asked: a tarball, a dirty tree
//!   and a checkout all get the identity of what they hold.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// What the binary is compiled from, relative to the workspace root.
const SOURCES: [&str; 19] = [
    "Cargo.toml",
    "Cargo.lock",
    ".cargo/config.toml",
    "scenarios",
    "store/Cargo.toml",
    "store/src",
    "protocol/Cargo.toml",
    "protocol/src",
    "engine/Cargo.toml",
    "engine/src",
    "oracle/Cargo.toml",
    "oracle/src",
    "sim/Cargo.toml",
    "sim/src",
    "sim/real/Cargo.toml",
    "sim/real/src",
    "sim/cli/Cargo.toml",
    "sim/cli/src",
    "sim/cli/build.rs",
];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(fencesim_ci)");
    println!("cargo::rustc-check-cfg=cfg(fencesim_slow)");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=FENCESIM_SLOW_TESTS");
    let ci = switched_on("CI");
    if ci {
        println!("cargo::rustc-cfg=fencesim_ci");
    }
    if ci || switched_on("FENCESIM_SLOW_TESTS") {
        println!("cargo::rustc-cfg=fencesim_slow");
    }
    println!("cargo::rustc-env=FENCESIM_BUILD_ID={}", build_id());
}

/// Whether an environment switch is on: set, and not empty, `0` or `false`.
fn switched_on(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// The build's identity (see the module).
fn build_id() -> String {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let root = Path::new(&manifest).join("../..");
    let mut hash = Sha256::new();
    let mut files = Vec::new();
    for source in SOURCES {
        println!("cargo::rerun-if-changed={}", root.join(source).display());
        collect(&root.join(source), &mut files);
    }
    files.sort();
    files.dedup();
    for file in &files {
        let name = file.strip_prefix(&root).unwrap_or(file).to_string_lossy().replace('\\', "/");
        let bytes = std::fs::read(file).unwrap_or_default();
        hash.update(name.as_bytes());
        hash.update([0]);
        hash.update(bytes.len().to_string().as_bytes());
        hash.update([0]);
        hash.update(&bytes);
    }
    // How it is compiled: the compiler, the target, the profile, the features, the flags.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc).arg("-vV").output().map(|o| o.stdout).unwrap_or_default();
    hash.update(&version);
    let mut how: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            k.starts_with("CARGO_FEATURE_")
                || ["TARGET", "PROFILE", "OPT_LEVEL", "DEBUG", "CARGO_ENCODED_RUSTFLAGS"].contains(&k.as_str())
        })
        .collect();
    how.sort();
    for (key, value) in how {
        hash.update(format!("{key}={value}\0").as_bytes());
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Every file at or under `path` (a file, or a folder walked in full).
fn collect(path: &Path, files: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::metadata(path) else { return };
    if meta.is_file() {
        files.push(path.to_owned());
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else { return };
    for entry in entries.flatten() {
        collect(&entry.path(), files);
    }
}
