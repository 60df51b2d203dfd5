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
    let root = crate::workspace::root();
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
    let root = crate::workspace::root();
    for page in ["README.md", "ARCHITECTURE.md"] {
        let text = fs::read_to_string(root.join(page)).expect("the page is readable");
        let wrong = wrong_counts(&text);
        assert!(wrong.is_empty(), "{page}: {}", wrong.join("; "));
    }
}

#[test]
fn every_path_the_guides_name_exists() {
    let root = crate::workspace::root();
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
    let root = crate::workspace::root();
    assert_eq!(missing_paths("`sim/src/world/mod.rs` and `DIR/sweep.json`", &root), Vec::<String>::new());
    assert_eq!(missing_paths("see `sim/src/pace.rs`", &root), ["line 1: sim/src/pace.rs"]);
    let page = root.join("docs/cli.md");
    assert_eq!(broken_links("[c](contracts.md#b4) [w](https://x.y/z)", &page), Vec::<String>::new());
    assert_eq!(broken_links("a [t](../triage.md) link", &page), ["line 1: ../triage.md"]);
}

/// The oracle checkers ARCHITECTURE.md's obligations table does not name in its "Held by" column,
/// and the names there that look like a checker (`kebab-case` in backticks, no spaces) but are
/// none: the docs' table is held to the one list of checkers (`fencesim_oracle::DESCRIPTORS`).
fn obligations_drift(text: &'static str) -> (Vec<&'static str>, Vec<String>) {
    // A name the cell introduces as a probe or a kit check (`probe \`x\``, `kit J7 \`x\``) is none.
    let named = |cell: &'static str| -> Vec<&'static str> {
        let parts: Vec<&str> = cell.split('`').collect();
        (1..parts.len())
            .step_by(2)
            .filter(|&i| {
                let before = parts[i - 1].trim_end();
                !before.ends_with("probe")
                    && !before
                        .split_whitespace()
                        .last()
                        .is_some_and(|w| w.len() == 2 && w.starts_with(char::is_uppercase))
            })
            .map(|i| parts[i])
            .collect()
    };
    let held: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("### Obligations"))
        .filter(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(3))
        .flat_map(named)
        .collect();
    let missing = fencesim_oracle::CHECKERS.iter().map(|c| c.name()).filter(|name| !held.contains(name)).collect();
    let mut unknown: Vec<String> = held
        .iter()
        .filter(|name| !name.contains(' ') && name.contains('-') && Checker::parse(name).is_none())
        .map(|name| (*name).to_owned())
        .collect();
    unknown.dedup();
    (missing, unknown)
}

#[test]
fn the_obligations_table_names_every_checker_and_no_other() {
    let text: &'static str =
        fs::read_to_string(crate::workspace::root().join("ARCHITECTURE.md")).expect("the page is readable").leak();
    let (missing, unknown) = obligations_drift(text);
    assert!(missing.is_empty(), "ARCHITECTURE.md's obligations table names no row held by {missing:?}");
    assert!(unknown.is_empty(), "ARCHITECTURE.md's obligations table names checkers that do not exist: {unknown:?}");
    // The scanner can fail: a table without the first checker, and with a misspelt one.
    let planted: &'static str = text.replace("`no-stale-acceptance`", "`no-stale-accept`").leak();
    let (missing, unknown) = obligations_drift(planted);
    assert_eq!((missing, unknown), (vec!["no-stale-acceptance"], vec!["no-stale-accept".to_owned()]));
}

/// The checkers docs/scenarios.md's checker table (the rows under `| checker | invariant |`)
/// names, in its order.
fn checker_table(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| !l.starts_with("| checker | invariant |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('`').nth(1))
        .collect()
}

/// docs/scenarios.md's checker table is the oracle's list: every checker once, in the order
/// `check` runs and reports them (`fencesim_oracle::DESCRIPTORS`), and no other. It is also what
/// pins that order: reports, traces and fingerprints list violations in it.
#[test]
fn the_checker_table_lists_the_oracle_in_its_order() {
    let text = fs::read_to_string(crate::workspace::root().join("docs/scenarios.md")).expect("docs/scenarios.md");
    let oracle: Vec<&str> = fencesim_oracle::CHECKERS.iter().map(|c| c.name()).collect();
    assert_eq!(checker_table(&text), oracle, "docs/scenarios.md's checker table against the oracle's DESCRIPTORS");
    // The scanner can fail: two rows swapped.
    let swapped = text.replacen("| `epochs-increasing` |", "| `one-live-lease-tmp` |", 1).replacen(
        "| `one-live-lease` |",
        "| `epochs-increasing` |",
        1,
    );
    let swapped = swapped.replacen("| `one-live-lease-tmp` |", "| `one-live-lease` |", 1);
    assert_eq!(&checker_table(&swapped)[1..3], ["one-live-lease", "epochs-increasing"]);
}

/// The integration-test files of every workspace member (`MEMBER/tests/*.rs` and
/// `MEMBER/tests/it/*.rs`, not the helper modules in their folders) that `text` does not name by
/// their path from the repository root.
fn unlisted_test_files(text: &str, root: &Path) -> Vec<String> {
    let mut unlisted = Vec::new();
    for member in &crate::workspace::members(root) {
        // A member's test files: `tests/*.rs` (one binary each) or `tests/it/*.rs` (the modules of
        // its one binary, whose `main.rs` only declares them).
        let mut files = Vec::new();
        for folder in ["tests", "tests/it"] {
            let Ok(entries) = fs::read_dir(root.join(member).join(folder)) else { continue };
            files.extend(
                entries
                    .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
                    .filter(|name| name.ends_with(".rs") && !(folder == "tests/it" && name == "main.rs"))
                    .map(|name| format!("{member}/{folder}/{name}")),
            );
        }
        files.sort();
        unlisted.extend(files.into_iter().filter(|path| !text.contains(&format!("`{path}`"))));
    }
    unlisted
}

/// docs/tests.md names every test file of the workspace (issue 39: a map that is checked).
#[test]
fn docs_tests_names_every_test_file() {
    let root = crate::workspace::root();
    let text = fs::read_to_string(root.join("docs/tests.md")).expect("docs/tests.md");
    let unlisted = unlisted_test_files(&text, &root);
    assert!(unlisted.is_empty(), "docs/tests.md does not name: {}", unlisted.join(", "));
    let planted = text.replace("`sim/tests/it/layers.rs`", "layers");
    assert_eq!(unlisted_test_files(&planted, &root), ["sim/tests/it/layers.rs"], "the scanner can fail");
}

/// The house's measures (issue 39), over every member's library and binary code (`src/`, without
/// `tests.rs` files, `src/**/tests/` folders and a file's trailing `#[cfg(test)]` part): code
/// lines (not blank, not a `//` comment), functions whose body has more than 40 and more than 70
/// code lines (a rustfmt'd `fn` from its signature's `{` to the `}` at its own indent), and
/// assertions (`assert!`, `assert_eq!`, `assert_ne!`; `debug_assert*` counted apart).
#[derive(Debug, Default, PartialEq, Eq)]
struct Measures {
    lines: usize,
    over_40: usize,
    over_70: usize,
    asserts: usize,
    debug_asserts: usize,
}

impl Measures {
    fn of_tree(root: &Path) -> Measures {
        let mut files = Vec::new();
        for member in crate::workspace::members(root) {
            let mut stack = vec![root.join(member).join("src")];
            while let Some(path) = stack.pop() {
                if path.is_dir() {
                    if path.file_name().is_some_and(|n| n == "tests") {
                        continue;
                    }
                    stack.extend(fs::read_dir(&path).expect("readable").map(|e| e.expect("an entry").path()));
                } else if path.extension().is_some_and(|e| e == "rs")
                    && path.file_name().is_some_and(|n| n != "tests.rs")
                {
                    files.push(path);
                }
            }
        }
        let mut m = Measures::default();
        for file in files {
            m.add(&fs::read_to_string(&file).expect("readable"));
        }
        m
    }

    /// Add one source file's measures.
    fn add(&mut self, text: &str) {
        let lines = without_tests(text);
        let code: Vec<&str> =
            lines.iter().copied().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//")).collect();
        self.lines += code.len();
        for line in &code {
            let debug = line.matches("debug_assert").count();
            self.debug_asserts += debug;
            self.asserts +=
                ["assert!(", "assert_eq!(", "assert_ne!("].iter().map(|a| line.matches(a).count()).sum::<usize>()
                    - debug;
        }
        for (i, line) in lines.iter().enumerate() {
            let body = function_body(&lines, i, line);
            self.over_40 += usize::from(body > 40);
            self.over_70 += usize::from(body > 70);
        }
    }
}

/// `text`'s lines without its test items: a `#[cfg(test)]` at column 0 and the item after it (a
/// `mod tests;` line, or a block up to its closing `}` at column 0).
fn without_tests(text: &str) -> Vec<&str> {
    let mut kept = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("#[cfg(test)]") {
            kept.push(line);
            continue;
        }
        // The item: one line ending in `;`, or a block up to its `}` at column 0.
        if lines.next().is_some_and(|first| !first.ends_with(';')) {
            for item in lines.by_ref() {
                if item == "}" {
                    break;
                }
            }
        }
    }
    kept
}

/// The code lines of the body of the function whose signature starts at `lines[i]`, or 0 when
/// `lines[i]` starts none (or one without a body, or all on one line).
fn function_body(lines: &[&str], i: usize, line: &str) -> usize {
    let trimmed = line.trim_start();
    let after_modifiers = ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe ", "extern \"C\" "]
        .iter()
        .fold(trimmed, |t, m| t.strip_prefix(m).unwrap_or(t));
    if !after_modifiers.starts_with("fn ") {
        return 0;
    }
    let indent = line.len() - trimmed.len();
    let Some(open) =
        (i..lines.len()).find(|&j| lines[j].trim_end().ends_with('{') || lines[j].trim_end().ends_with(';'))
    else {
        return 0;
    };
    if lines[open].trim_end().ends_with(';') {
        return 0;
    }
    let close = format!("{}}}", " ".repeat(indent));
    let Some(end) = (open + 1..lines.len()).find(|&j| lines[j].trim_end() == close) else { return 0 };
    lines[open + 1..end].iter().filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//")).count()
}

/// The measures ARCHITECTURE.md's header states, read from its `measures:` line.
fn stated_measures(text: &str) -> Option<Measures> {
    let line = text.lines().find(|l| l.starts_with("Measures (checked by `sim/tests/it/doc_counts.rs`):"))?;
    let number = |key: &str| -> Option<usize> {
        let at = line.find(key)?;
        line[..at].trim_end().rsplit(' ').next()?.replace(',', "").parse().ok()
    };
    Some(Measures {
        lines: number("code lines")?,
        over_40: number("functions over 40 lines")?,
        over_70: number("over 70")?,
        asserts: number("assertions")?,
        debug_asserts: number("debug-only")?,
    })
}

/// Whether the stated measures are the code's, to what the line promises: code lines and
/// functions over 40 lines within 5% (any change moves them; the line is a map, not a ledger),
/// functions over 70 lines exactly (clippy holds them), assertions and debug-only ones within 10%
/// or 3, whichever is more.
fn measures_hold(stated: &Measures, real: &Measures) -> bool {
    let near = |a: usize, b: usize, percent: usize, floor: usize| a.abs_diff(b) <= (b * percent / 100).max(floor);
    near(stated.lines, real.lines, 5, 0)
        && near(stated.over_40, real.over_40, 5, 2)
        && stated.over_70 == real.over_70
        && near(stated.asserts, real.asserts, 10, 3)
        && near(stated.debug_asserts, real.debug_asserts, 10, 3)
}

/// ARCHITECTURE.md's header states the house's measures as they are (within `measures_hold`'s
/// margins): a change that moves one past them updates the line, which this test prints.
#[test]
fn the_house_measures_in_architecture_are_the_codes() {
    let root = crate::workspace::root();
    let text = fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let m = Measures::of_tree(&root);
    let per_thousand = m.asserts * 1000 / m.lines.max(1);
    let line = format!(
        "Measures (checked by `sim/tests/it/doc_counts.rs`): {} code lines outside tests, {} functions over 40 lines, {} over 70, {} assertions ({per_thousand} per thousand lines), {} debug-only.",
        m.lines, m.over_40, m.over_70, m.asserts, m.debug_asserts
    );
    let stated = stated_measures(&text).expect("ARCHITECTURE.md has a measures line");
    assert!(measures_hold(&stated, &m), "ARCHITECTURE.md's measures line is out of date; it is now:\n{line}");
}

#[test]
fn the_measures_can_fail() {
    let mut m = Measures::default();
    m.add("//! doc\nfn short() {\n    a();\n}\n\nfn one_line() -> u32 { 1 }\ntrait T {\n    fn decl(&self);\n}\n");
    assert_eq!((m.lines, m.over_40, m.over_70, m.asserts), (7, 0, 0, 0));
    let long: String = (0..41).map(|i| format!("    step({i});\n")).collect();
    let mut m = Measures::default();
    m.add(&format!("pub(crate) fn long(\n    x: u32,\n) {{\n{long}    assert!(x > 0);\n    debug_assert_eq!(x, 1);\n}}\n#[cfg(test)]\nmod tests {{\n    fn t() {{ assert!(true); }}\n}}\n#[cfg(test)]\nmod more;\nfn after() {{ assert!(x); }}\n"));
    assert_eq!((m.over_40, m.over_70, m.asserts, m.debug_asserts), (1, 0, 2, 1));
    let stated = "Measures (checked by `sim/tests/it/doc_counts.rs`): 1,200 code lines outside tests, 3 functions over 40 lines, 1 over 70, 9 assertions (7 per thousand lines), 2 debug-only.";
    assert_eq!(
        stated_measures(stated),
        Some(Measures { lines: 1200, over_40: 3, over_70: 1, asserts: 9, debug_asserts: 2 })
    );
    let real = Measures { lines: 28_000, over_40: 100, over_70: 1, asserts: 40, debug_asserts: 2 };
    assert!(measures_hold(&Measures { lines: 27_000, over_40: 103, ..real }, &real));
    assert!(!measures_hold(&Measures { lines: 26_000, ..real }, &real), "5% of the lines");
    assert!(!measures_hold(&Measures { over_40: 90, ..real }, &real), "5% of the long functions");
    assert!(!measures_hold(&Measures { over_70: 2, ..real }, &real), "the very long ones exactly");
    assert!(!measures_hold(&Measures { asserts: 1, ..real }, &real), "assertions within 10%");
}
