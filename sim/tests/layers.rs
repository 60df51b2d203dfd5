//! The three layers of `sim/` (issue 26) hold by construction: the simulator crate
//! (`fencesim-sim`) depends on neither the real-process crate nor the command line and names no
//! process, signal or wall clock; the real-process crate (`fencesim-real`) does not depend on the
//! command line. A world that could spawn a process or read the wall clock would not be a function
//! of its seed.

use std::fs;
use std::path::{Path, PathBuf};

fn sim_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `[dependencies]` names of a manifest.
fn dependencies(manifest: &Path) -> Vec<String> {
    let text = fs::read_to_string(manifest).expect("a manifest is readable");
    let doc: toml::Table = toml::from_str(&text).expect("a manifest parses");
    ["dependencies", "dev-dependencies"]
        .iter()
        .filter_map(|k| doc.get(*k).and_then(|d| d.as_table()))
        .flat_map(|t| t.keys().cloned())
        .collect()
}

/// What the simulator's code may not name, and why.
const FORBIDDEN_IN_WORLDS: [(&str, &str); 6] = [
    ("std::process", "spawns or ends a process"),
    ("Command::new", "spawns a process"),
    ("nix::", "signals and process control"),
    ("signal_hook", "signal handling"),
    ("Instant::now", "reads the wall clock"),
    ("SystemTime::now", "reads the wall clock"),
];

/// Every forbidden name in the code (not the comments) of the `.rs` files under `dir`.
fn forbidden_names(dir: &Path, found: &mut Vec<String>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir).expect("readable").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            forbidden_names(&path, found);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable");
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for (name, why) in FORBIDDEN_IN_WORLDS {
                if names(code, name) {
                    found.push(format!("{}:{}: `{name}` ({why})", path.display(), i + 1));
                }
            }
        }
    }
}

/// Whether `code` names `name` as a path of its own (`unix::fs` does not name `nix::`).
fn names(code: &str, name: &str) -> bool {
    code.match_indices(name).any(|(at, _)| !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
}

#[test]
fn the_simulator_depends_on_no_layer_above_it_and_on_no_process_crate() {
    let deps = dependencies(&sim_dir().join("Cargo.toml"));
    for banned in ["fencesim", "fencesim-real", "nix", "signal-hook", "libc-signal"] {
        assert!(!deps.iter().any(|d| d == banned), "sim/Cargo.toml depends on {banned}: {deps:?}");
    }
    let real = dependencies(&sim_dir().join("real/Cargo.toml"));
    assert!(!real.iter().any(|d| d == "fencesim"), "sim/real/Cargo.toml depends on the command line: {real:?}");
    assert!(real.iter().any(|d| d == "fencesim-sim"), "the real crate builds on the simulator: {real:?}");
}

#[test]
fn the_simulators_code_names_no_process_signal_or_wall_clock() {
    let mut found = Vec::new();
    forbidden_names(&sim_dir().join("src"), &mut found);
    assert!(found.is_empty(), "the simulator crate must know no real process:\n{}", found.join("\n"));
}

#[test]
fn a_planted_process_call_is_named() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    fs::write(
        dir.path().join("a.rs"),
        "//! std::process in a comment is fine\nfn f() { std::process::exit(1) }\nuse std::os::unix::fs;\n",
    )
    .unwrap();
    let mut found = Vec::new();
    forbidden_names(dir.path(), &mut found);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].ends_with("a.rs:2: `std::process` (spawns or ends a process)"), "{found:?}");
}
