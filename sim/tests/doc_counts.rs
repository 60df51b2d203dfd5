//! The guides cannot fall behind the code (issue 26): every count README.md and ARCHITECTURE.md
//! state in bold (`**16 engine defects**`, `**20 checkers**`, ...) equals the count in the code,
//! and every repository path they or the pages of `docs/` name in backticks, and every relative
//! link of theirs, exists. A stale
//! count or a moved file fails here, naming the page and the line; both scanners are shown able
//! to fail on planted text.

use std::fs;
use std::path::{Path, PathBuf};

use fencesim_engine::EngineDefect;
use fencesim_oracle::Checker;
use fencesim_store::StoreDefect;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("sim/ has a parent").to_path_buf()
}

/// What each bold count names, and its value in the code.
fn truth() -> Vec<(&'static str, usize)> {
    vec![
        ("engine defects", EngineDefect::ALL.len()),
        ("store defects", StoreDefect::ALL.len()),
        ("planted defects", EngineDefect::ALL.len() + StoreDefect::ALL.len()),
        ("checkers", Checker::ORACLE.len()),
        ("judge checks", Checker::JUDGES.len()),
    ]
}

/// Every `**N thing**` of `text` whose thing is one of `truth()`'s and whose N differs, as
/// `line N: says X, the code has Y`.
fn wrong_counts(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for bold in line.split("**").skip(1).step_by(2) {
            let Some((number, thing)) = bold.split_once(' ') else { continue };
            let Ok(n) = number.parse::<usize>() else { continue };
            if let Some((_, real)) = truth().into_iter().find(|(name, _)| *name == thing)
                && n != real
            {
                found.push(format!("line {}: says {n} {thing}, the code has {real}", i + 1));
            }
        }
    }
    found
}

/// Every backticked `dir/file.ext` of `text` (a path with a folder and an extension) that does not
/// exist under `root`. Placeholders (`DIR/...`) and report folders a command writes
/// (`reports/<folder>/...`) are not files of the repository and are skipped.
fn missing_paths(text: &str, root: &Path) -> Vec<String> {
    const EXTENSIONS: [&str; 8] = [".rs", ".md", ".toml", ".json", ".sh", ".yml", ".txt", ".html"];
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for quoted in line.split('`').skip(1).step_by(2) {
            let is_path = quoted.contains('/')
                && EXTENSIONS.iter().any(|e| quoted.ends_with(e))
                && quoted.chars().all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c));
            let placeholder =
                quoted.split('/').next().is_some_and(|first| first.chars().all(|c| c.is_ascii_uppercase()));
            let written = quoted.starts_with("reports/") && quoted.matches('/').count() > 1;
            if is_path && !placeholder && !written && !root.join(quoted).exists() {
                found.push(format!("line {}: {quoted}", i + 1));
            }
        }
    }
    found
}

/// Every relative Markdown link target of `text` (`](path)` or `](path#anchor)`) that does not
/// exist beside `page`.
fn broken_links(text: &str, page: &Path) -> Vec<String> {
    let folder = page.parent().expect("a page has a folder");
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for part in line.split("](").skip(1) {
            let Some(end) = part.find(')') else { continue };
            let target = part[..end].split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.contains(' ') {
                continue;
            }
            if !folder.join(target).exists() {
                found.push(format!("line {}: {target}", i + 1));
            }
        }
    }
    found
}

fn pages() -> Vec<PathBuf> {
    let root = repo_root();
    let mut pages = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("a docs entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

#[test]
fn every_bold_count_in_the_guides_matches_the_code() {
    let root = repo_root();
    for page in ["README.md", "ARCHITECTURE.md"] {
        let text = fs::read_to_string(root.join(page)).expect("the page is readable");
        let wrong = wrong_counts(&text);
        assert!(wrong.is_empty(), "{page}: {}", wrong.join("; "));
    }
}

#[test]
fn every_path_the_guides_name_exists() {
    let root = repo_root();
    for page in pages() {
        let text = fs::read_to_string(&page).expect("the page is readable");
        let mut missing = missing_paths(&text, &root);
        missing.extend(broken_links(&text, &page));
        assert!(missing.is_empty(), "{}: {}", page.display(), missing.join("; "));
    }
}

#[test]
fn the_scanners_can_fail() {
    let real = EngineDefect::ALL.len();
    assert_eq!(wrong_counts(&format!("the **{real} engine defects**")), Vec::<String>::new());
    assert_eq!(
        wrong_counts(&format!("intro\nthe **{} engine defects**, **7 widgets**", real + 1)),
        [format!("line 2: says {} engine defects, the code has {real}", real + 1)]
    );
    let root = repo_root();
    assert_eq!(missing_paths("`sim/src/world/mod.rs` and `DIR/sweep.json`", &root), Vec::<String>::new());
    assert_eq!(missing_paths("see `sim/src/pace.rs`", &root), ["line 1: sim/src/pace.rs"]);
    let page = root.join("docs/cli.md");
    assert_eq!(broken_links("[c](contracts.md#b4) [w](https://x.y/z)", &page), Vec::<String>::new());
    assert_eq!(broken_links("a [t](../triage.md) link", &page), ["line 1: ../triage.md"]);
}
