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

/// Every workspace member's folder.
fn members() -> Vec<PathBuf> {
    let root = crate::workspace::root();
    crate::workspace::members(&root).into_iter().map(|m| root.join(m)).collect()
}

/// Whether a `.rs` file under one of `dirs` (recursively) names `ident` as a path of its own
/// (`ident::`, `use ident`, `ident as`, `extern crate ident`) outside `//` comments.
fn named_in(dirs: &[PathBuf], ident: &str) -> bool {
    let mut stack: Vec<PathBuf> = dirs.iter().filter(|d| d.exists()).cloned().collect();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(fs::read_dir(&path).expect("readable").map(|e| e.expect("an entry").path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable");
        let uses = |code: &str| {
            [format!("{ident}::"), format!("use {ident}"), format!("crate {ident}")].iter().any(|n| names(code, n))
        };
        if text.lines().map(str::trim_start).filter(|l| !l.starts_with("//")).any(uses) {
            return true;
        }
    }
    false
}

/// The dependencies of the member at `dir` (its manifest `text`) that no code allowed to use them
/// names: `[dependencies]` in `src/`, `[build-dependencies]` in `build.rs`, `[dev-dependencies]`
/// in `src/`, `tests/`, `benches/` and `build.rs`. Each as `section name`.
fn unused_dependencies(dir: &Path, text: &str) -> Vec<String> {
    let doc: toml::Table = toml::from_str(text).expect("a manifest parses");
    let src = vec![dir.join("src")];
    let build = vec![dir.join("build.rs")];
    let dev = vec![dir.join("src"), dir.join("tests"), dir.join("benches"), dir.join("build.rs")];
    let mut unused = Vec::new();
    for (section, dirs) in [("dependencies", &src), ("build-dependencies", &build), ("dev-dependencies", &dev)] {
        for name in doc.get(section).and_then(|d| d.as_table()).into_iter().flat_map(|t| t.keys()) {
            if !named_in(dirs, &name.replace('-', "_")) {
                unused.push(format!("{section} {name}"));
            }
        }
    }
    unused
}

/// No member depends on a crate its code never names (issue 39: seven were unused); a normal
/// dependency only tests or benches use belongs in `[dev-dependencies]`.
#[test]
fn no_member_has_an_unused_dependency() {
    let mut found = Vec::new();
    for dir in members() {
        let text = fs::read_to_string(dir.join("Cargo.toml")).expect("a member manifest");
        found.extend(unused_dependencies(&dir, &text).into_iter().map(|d| format!("{}: {d}", dir.display())));
    }
    assert!(found.is_empty(), "unused dependencies:\n{}", found.join("\n"));
}

#[test]
fn a_planted_unused_dependency_is_named() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    fs::create_dir_all(dir.path().join("src")).unwrap();
    fs::create_dir_all(dir.path().join("tests")).unwrap();
    fs::write(dir.path().join("src/lib.rs"), "//! toml::from_str in a comment names nothing\nuse serde::Serialize;\n")
        .unwrap();
    fs::write(dir.path().join("tests/t.rs"), "fn f() { tempfile::tempdir(); }\n").unwrap();
    let manifest =
        "[dependencies]\nserde = \"1\"\ntoml = \"0.9\"\ntempfile = \"3\"\n[dev-dependencies]\nserde_json = \"1\"\n";
    let found = unused_dependencies(dir.path(), manifest);
    assert_eq!(found, ["dependencies tempfile", "dependencies toml", "dev-dependencies serde_json"], "{found:?}");
}

/// The clippy configuration clippy reads for the member at `dir`: the nearest `clippy.toml` in it
/// or a folder above it, up to the workspace root.
fn clippy_config(dir: &Path, root: &Path) -> Option<PathBuf> {
    dir.ancestors().take_while(|d| d.starts_with(root)).map(|d| d.join("clippy.toml")).find(|f| f.is_file())
}

/// One deterministic lint configuration (the root's) for the deterministic crates, one lenient
/// configuration for the real-process and binary crates (issue 39): a crate cannot drift to a
/// configuration of its own, nor the binary to the deterministic one it used to inherit.
#[test]
fn each_member_lints_with_its_layers_configuration() {
    let root = sim_dir().parent().expect("sim/ has a parent").to_path_buf();
    let deterministic = root.join("clippy.toml");
    for dir in members() {
        let config = clippy_config(&dir, &root).expect("every member has a configuration");
        let lenient = ["sim/real", "sim/cli"].iter().any(|m| dir == root.join(m));
        if lenient {
            assert_eq!(config, dir.join("clippy.toml"), "{}: the lenient configuration beside it", dir.display());
            let text = fs::read_to_string(&config).expect("readable");
            assert!(!text.contains("Instant::now"), "{}: real processes run in wall time", config.display());
            assert_eq!(
                fs::read_to_string(&config).ok(),
                fs::read_to_string(root.join("sim/cli/clippy.toml")).ok(),
                "one lenient configuration"
            );
        } else {
            assert_eq!(config, deterministic, "{}: the root's deterministic configuration", dir.display());
        }
    }
    let text = fs::read_to_string(&deterministic).expect("the root's configuration");
    for banned in ["std::time::Instant::now", "std::thread::spawn", "std::collections::HashMap"] {
        assert!(text.contains(&format!("\"{banned}\"")), "the deterministic configuration bans {banned}");
    }
    // The lookup can fail: a member folder with a file of its own is found first.
    let planted = tempfile::tempdir().expect("a temporary folder");
    fs::create_dir_all(planted.path().join("a/b")).unwrap();
    fs::write(planted.path().join("clippy.toml"), "").unwrap();
    fs::write(planted.path().join("a/clippy.toml"), "").unwrap();
    assert_eq!(clippy_config(&planted.path().join("a/b"), planted.path()), Some(planted.path().join("a/clippy.toml")));
}
