//! No test passes without running (docs/tests.md, "What a test needs"). A test that needs
//! something from outside the Rust toolchain fails without it (`cli::need`); one whose need a
//! developer's machine may lack is marked `#[cfg_attr(not(fencesim_ci), ignore = "...")]`, one
//! that takes minutes `#[cfg_attr(not(fencesim_slow), ignore = "...")]`, so that outside CI (or,
//! for a slow one, without `FENCESIM_SLOW_TESTS`) it is reported as ignored with its reason, and
//! under CI (`sim/cli/build.rs`) it runs. This test holds every test source of the workspace to
//! that: no skip notice (a test that prints that it skipped and returns passed in 0.00 s), and no
//! `ignore` but under one of those two switches (a plain `#[ignore]` CI never runs).

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, but the build output and dependencies.
fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !["target", "node_modules", ".git", "benches"].contains(&name.as_str()) {
                sources(&path, found);
            }
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

/// The lines of `text` (a source file's) that skip a test silently, as `N: line`: a skip notice,
/// a plain `#[ignore]`, or an `ignore = "..."` under neither switch.
fn offenders(text: &str) -> Vec<String> {
    // Spelled in pieces, so this file does not find itself.
    let (print, skip, ignore) = (["print", "ln!("].concat(), ["sk", "ip"].concat(), ["ignore", " = \""].concat());
    let (plain, ci, slow) =
        (["#[", "ignore"].concat(), ["not(", "fencesim_ci)"].concat(), ["not(", "fencesim_slow)"].concat());
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let lower = code.to_lowercase();
        let notice = lower.contains(&print) && lower.contains(&skip);
        // A conditional ignore: `not(fencesim_ci)` or `not(fencesim_slow)` on its line or the
        // few before (rustfmt splits a long attribute).
        let unconditional = code.contains(&ignore)
            && !lines[i.saturating_sub(3)..=i].iter().any(|l| l.contains(&ci) || l.contains(&slow));
        if notice || code.starts_with(&plain) || unconditional {
            found.push(format!("{}: {code}", i + 1));
        }
    }
    found
}

#[test]
fn no_test_passes_without_running() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 50, "the workspace's sources were not found under {}", root.display());
    let mut found = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let at = path.strip_prefix(&root).unwrap_or(path).display().to_string();
        found.extend(offenders(&text).into_iter().map(|line| format!("{at}:{line}")));
    }
    assert!(
        found.is_empty(),
        "a test fails without what it needs, and is ignored, with its reason, only outside CI \
         (#[cfg_attr(not(fencesim_ci), ignore = \"needs ...\")], or not(fencesim_slow) for a slow one):\n{}",
        found.join("\n")
    );
}

/// The scanner can fail: each way of skipping silently is found, and the two switches' ignores
/// are not.
#[test]
fn the_scanner_finds_every_silent_skip() {
    let (hash, ignore) = ("#", "ignore");
    let planted = [
        format!("{hash}[test]\n{hash}[{ignore}]\nfn a() {{}}"),
        format!("#[cfg_attr(any(), {ignore} = \"slow\")]\nfn b() {{}}"),
        format!("fn c() {{ {}(\"{}ping: no chromium\"); }}", ["print", "ln!"].concat(), ["sk", "ip"].concat()),
    ];
    for text in &planted {
        assert_eq!(offenders(text).len(), 1, "not found in: {text}");
    }
    for switch in ["fencesim_ci", "fencesim_slow"] {
        let allowed = format!("#[cfg_attr(\n    not({switch}),\n    {ignore} = \"needs it\"\n)]\nfn d() {{}}");
        assert_eq!(offenders(&allowed), Vec::<String>::new(), "{switch}");
    }
}
