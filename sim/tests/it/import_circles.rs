//! No import circle anywhere in the workspace (issue 26): for every crate, the modules form a
//! graph by the paths they name (`crate::a::b`, `super::x`, grouped `use crate::{a, b::c}`), and
//! that graph must have no cycle. A module naming its own ancestor or descendant is structure
//! (a `mod.rs` declares its children; a child's tests read its parent), not an import, and is not
//! counted. A cycle fails naming every module on it and one line of each edge.
//!
//! Only code is read: comment lines (`//`, `//!`, `///`) never make an edge, so a doc link to a
//! sibling is free.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every workspace member's `src` folder (a hand-kept list once left the protocol crate out, and
/// a circle in it went unseen).
fn sources(root: &Path) -> Vec<String> {
    crate::workspace::members(root).into_iter().map(|m| format!("{m}/src")).collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> =
        fs::read_dir(dir).expect("a source folder is readable").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a/b.rs` is `[a, b]`, `a/mod.rs` is `[a]`, `lib.rs` and `main.rs` are the root `[]`.
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).expect("a file of the crate");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_owned());
    }
    parts
}

/// The module a file's `super` names: the parent of a `mod.rs` module's own module, or of a file
/// module.
fn parent(module: &Module) -> Module {
    module[..module.len().saturating_sub(1)].to_vec()
}

/// Every path a line of code names from the crate root: `crate::a::b` and `super::...` resolved
/// against `here`, and each branch of a grouped `use crate::{...}`.
fn named_paths(code: &str, here: &Module) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let text: String = bytes.iter().collect();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(start).map(|i| i + from) {
            from = at + start.len();
            let before = text[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let (mut base, mut rest) =
                if start == "crate::" { (Vec::new(), &text[from..]) } else { (parent(here), &text[from..]) };
            while let Some(more) = rest.strip_prefix("super::") {
                base = parent(&base);
                rest = more;
            }
            for branch in branches(rest) {
                let mut path = base.clone();
                path.extend(branch);
                out.push(path);
            }
        }
    }
    out
}

/// The paths after `crate::`: one path `a::b::c`, or every branch of a group `{a, b::{c, d}}`,
/// nested groups included.
fn branches(rest: &str) -> Vec<Vec<String>> {
    let mut head = Vec::new();
    let mut s = rest;
    loop {
        if let Some(group) = s.strip_prefix('{') {
            return group_items(group)
                .into_iter()
                .flat_map(branches)
                .map(|tail| head.iter().cloned().chain(tail).collect())
                .collect();
        }
        let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
        if end == 0 {
            break;
        }
        head.push(s[..end].to_owned());
        match s[end..].strip_prefix("::") {
            Some(more) => s = more,
            None => break,
        }
    }
    if head.is_empty() { Vec::new() } else { vec![head] }
}

/// The top-level items of a group's text (after its `{`, up to its matching `}`).
fn group_items(group: &str) -> Vec<&str> {
    let mut depth = 0;
    let mut item_start = 0;
    let mut out = Vec::new();
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                out.push(group[item_start..i].trim());
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(group[item_start..i].trim());
                item_start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// The code of a file with comment lines dropped, joined so a grouped `use` spans its lines.
fn code_of(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = 0i32;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        let code = trimmed.split(" //").next().unwrap_or_default();
        if open > 0 {
            out.last_mut().expect("an open group has a line").1.push_str(code);
        } else {
            out.push((i + 1, code.to_owned()));
        }
        if trimmed.starts_with("use ") || trimmed.starts_with("pub use ") || open > 0 {
            open += code.matches('{').count() as i32 - code.matches('}').count() as i32;
        }
    }
    out
}

/// The module graph of one crate: an edge for every module a file names outside its own line of
/// ancestors and descendants, with the first `file:line` that names it.
fn graph(root: &Path, src: &Path) -> BTreeMap<Module, BTreeMap<Module, String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<Module, BTreeMap<Module, String>> = BTreeMap::new();
    for file in &files {
        let here = module_of(src, file);
        let text = fs::read_to_string(file).expect("a source file is readable");
        for (line, code) in code_of(&text) {
            for path in named_paths(&code, &here) {
                let target = (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|m| modules.contains(m));
                let Some(target) = target else { continue };
                if target.starts_with(&here) || here.starts_with(&target) {
                    continue;
                }
                let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
                edges.entry(here.clone()).or_default().entry(target).or_insert(format!("{shown}:{line}"));
            }
        }
    }
    edges
}

/// Every cycle's modules, found as the strongly connected components of more than one module.
fn cycles(edges: &BTreeMap<Module, BTreeMap<Module, String>>) -> Vec<Vec<Module>> {
    let nodes: BTreeSet<&Module> = edges.keys().chain(edges.values().flat_map(|t| t.keys())).collect();
    let reach = |from: &Module| -> BTreeSet<Module> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for next in edges.get(&m).into_iter().flat_map(|t| t.keys()) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&Module, BTreeSet<Module>> = nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done: BTreeSet<Module> = BTreeSet::new();
    let mut out = Vec::new();
    for node in &nodes {
        if done.contains(*node) || !reached[node].contains(*node) {
            continue;
        }
        let component: Vec<Module> = nodes
            .iter()
            .filter(|m| reached[node].contains(**m) && reached[*m].contains(*node))
            .map(|m| (*m).clone())
            .collect();
        done.extend(component.iter().cloned());
        out.push(component);
    }
    out
}

fn shown(m: &Module) -> String {
    if m.is_empty() { "crate".into() } else { m.join("::") }
}

fn report(src: &str, edges: &BTreeMap<Module, BTreeMap<Module, String>>) -> Vec<String> {
    cycles(edges)
        .into_iter()
        .map(|component| {
            let members: BTreeSet<&Module> = component.iter().collect();
            let mut lines = vec![format!("{src}: {}", component.iter().map(shown).collect::<Vec<_>>().join(" <-> "))];
            for from in &component {
                for (to, at) in edges.get(from).into_iter().flatten() {
                    if members.contains(to) {
                        lines.push(format!("    {} -> {} at {at}", shown(from), shown(to)));
                    }
                }
            }
            lines.join("\n")
        })
        .collect()
}

#[test]
fn no_module_imports_another_that_imports_it_back() {
    let root = crate::workspace::root();
    let found: Vec<String> =
        sources(&root).iter().flat_map(|src| report(src, &graph(&root, &root.join(src)))).collect();
    assert!(found.is_empty(), "{} import circles:\n{}", found.len(), found.join("\n"));
}

#[test]
fn a_planted_circle_is_found_with_its_edges() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("soak")).unwrap();
    fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod soak;\n").unwrap();
    fs::write(src.join("a.rs"), "//! a\nuse crate::b::Thing;\n").unwrap();
    fs::write(src.join("b.rs"), "//! b names a in a comment: crate::a\nuse crate::{soak::{referee::X}, c};\n").unwrap();
    fs::write(src.join("soak/mod.rs"), "pub mod referee;\npub mod report;\n").unwrap();
    fs::write(src.join("soak/referee.rs"), "use super::report::Y;\n").unwrap();
    fs::write(src.join("soak/report.rs"), "fn f() { crate::a::g(); }\n").unwrap();
    let found = report("src", &graph(dir.path(), &src));
    assert_eq!(found.len(), 1, "{found:?}");
    for edge in [
        "a -> b at src/a.rs:2",
        "b -> soak::referee at src/b.rs:2",
        "soak::referee -> soak::report",
        "soak::report -> a",
    ] {
        assert!(found[0].contains(edge), "{edge} missing from {}", found[0]);
    }
    // A comment's path and a child naming its parent make no edge.
    fs::write(src.join("soak/report.rs"), "// crate::a::g()\nfn f() { super::referee::h(); }\n").unwrap();
    assert!(report("src", &graph(dir.path(), &src)).iter().all(|c| !c.contains("soak::report -> a")));
}
