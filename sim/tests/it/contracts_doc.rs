//! Every contract the code cites resolves in `docs/contracts.md`. The code names contracts by id
//! (J1, L7, W3, T3, B2, S5, E6, R4, D12b) and by section number ("contracts 2.7.1", "(3.6, D14)")
//! in its comments and strings; this test reads every `.rs` file of the four crates, collects
//! those citations, and fails naming each one the document does not define, with the file and
//! line that cites it.
//!
//! The document's convention, which this test is the machine check of: an id is defined by a
//! heading whose first word is the id (`### D7 Epoch reset on delete`) or by a list entry that
//! opens with the id in bold (`- **J5** Monotonic seq.`); a section number is defined by a heading
//! whose first word is the number (`## 2.7 Consolidated oracle`, `### 2.7.1 No stale acceptance`).
//!
//! Only prose is scanned (comments and string literals): a test's clock constant named like a
//! transcript contract is code, not a citation. A bare section number counts as a citation after the word
//! "contracts" (`contracts 5.13`, `contracts section 6`) or inside a parenthesised citation list
//! whose every item is an id or a section number (`(2.7.5-6, 5.9)`); ranges cite both ends.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const CRATES: [&str; 4] = ["store", "engine", "oracle", "sim"];
const ID_LETTERS: &str = "JLWTBSERD";
const DOC: &str = "docs/contracts.md";

/// A citation: an id such as `D12a` or a section number such as `2.7.1`.
type Citation = String;

#[test]
fn every_cited_contract_is_defined_in_docs_contracts_md() {
    let root = crate::workspace::root();
    let doc = fs::read_to_string(root.join(DOC)).expect("docs/contracts.md is readable");
    let defined = definitions(&doc);

    let mut cited: BTreeMap<Citation, Vec<String>> = BTreeMap::new();
    for krate in CRATES {
        for file in rust_files(&root.join(krate)) {
            let text = fs::read_to_string(&file).expect("a source file is readable");
            let shown = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
            for (line, prose) in prose_of(&text) {
                for c in citations(&prose) {
                    cited.entry(c).or_default().push(format!("{shown}:{line}"));
                }
            }
        }
    }

    // The scan finds what the code is known to cite; a broken scanner cannot pass by finding nothing.
    for known in ["J5", "L4", "W3", "T3", "B2", "S1", "E6", "R4", "D12b", "2.7.1", "5.13", "9.1"] {
        assert!(cited.contains_key(known), "the scan no longer finds {known}: the scanner is broken");
    }

    let missing: Vec<String> = cited
        .iter()
        .filter(|(c, _)| !defined.contains(c.as_str()))
        .map(|(c, at)| format!("{c} (cited at {})", at.iter().take(3).cloned().collect::<Vec<_>>().join(", ")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} cited contract(s) not defined in {DOC} (define each as `### ID ...`, `- **ID** ...`, or a heading `## N.N ...`):\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
    println!("{} cited contracts, each defined in {DOC}: {:?}", cited.len(), cited.keys().collect::<Vec<_>>());
}

/// The project reads without any file outside the repository: the contracts page and the two
/// top-level guides never point at `../shared`, and both guides point at the contracts page.
#[test]
fn the_project_reads_without_files_outside_it() {
    let root = crate::workspace::root();
    for page in ["README.md", "ARCHITECTURE.md", DOC] {
        let text = fs::read_to_string(root.join(page)).expect("the page is readable");
        for (i, line) in text.lines().enumerate() {
            assert!(!line.contains("../shared"), "{page}:{} points outside the repository: {line}", i + 1);
        }
        if page != DOC {
            assert!(text.contains(DOC), "{page} does not point at {DOC}");
        }
    }
}

/// The scanner and the convention, on text small enough to read.
#[test]
fn the_scanner_finds_citations_and_the_convention_defines_them() {
    let found = |s: &str| citations(s).into_iter().collect::<BTreeSet<_>>();
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(found("the seq guard (S5, J5) and D12a/D12b"), set(&["S5", "J5", "D12a", "D12b"]));
    assert_eq!(found("rows R1-R9 of contracts 4.2"), set(&["R1", "R9", "4.2"]));
    assert_eq!(found("replayed (2.7.5-6, 5.9) and (5.9.2-4)"), set(&["2.7.5", "2.7.6", "5.9", "5.9.2", "5.9.4"]));
    assert_eq!(found("contracts section 6 and contracts 5.3-5.5"), set(&["6", "5.3", "5.5"]));
    assert_eq!(found("not ids: JS, D1xy, AD1, E2E, 1.5 x ttl, (1.5 x ttl), v1.2"), set(&[]));

    let prose: Vec<String> =
        prose_of(concat!("const T", "0: i64 = 1; // J1 here\nlet s = \"L2 \\\" (3.6)\"; 'a'; x<'b>"))
            .into_iter()
            .map(|(_, p)| p)
            .collect();
    assert_eq!(prose.join("|"), " J1 here|L2 \\\" (3.6)");

    let doc = "# Title\n\n## 2.7 Oracle\n### 2.7.1 First\n- **J5** Monotonic.\n### D7 Epoch reset\n";
    assert_eq!(definitions(doc), ["2.7", "2.7.1", "J5", "D7"].iter().map(|s| s.to_string()).collect());
}

/// What the document defines: heading first words and bold ids opening a list entry.
fn definitions(doc: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in doc.lines() {
        if let Some(rest) = line.strip_prefix('#') {
            let first = rest.trim_start_matches('#').split_whitespace().next().unwrap_or("");
            if is_id(first) || is_section(first) {
                out.insert(first.to_owned());
            }
        } else if let Some(rest) = line.trim_start().strip_prefix("- **")
            && let Some(end) = rest.find("**")
            && is_id(&rest[..end])
        {
            out.insert(rest[..end].to_owned());
        }
    }
    out
}

fn is_id(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else { return false };
    let rest: Vec<char> = chars.collect();
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    ID_LETTERS.contains(first)
        && digits > 0
        && (rest.len() == digits || (rest.len() == digits + 1 && rest[digits].is_ascii_lowercase()))
}

/// `3`, `2.7`, `2.7.1`: components of digits, the first one nonzero.
fn is_section(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|p| !p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit()))
        && !s.starts_with('0')
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every citation in one piece of prose.
fn citations(prose: &str) -> Vec<Citation> {
    let chars: Vec<char> = prose.chars().collect();
    let mut out = Vec::new();

    // Ids: a letter of ID_LETTERS at a word start, digits, an optional lowercase suffix, a word end.
    for i in 0..chars.len() {
        if !ID_LETTERS.contains(chars[i]) || (i > 0 && is_word(chars[i - 1])) {
            continue;
        }
        let digits = chars[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            continue;
        }
        let after = i + 1 + digits;
        let ends_at = |k: usize| chars.get(k).is_none_or(|c| !is_word(*c));
        if ends_at(after) {
            out.push(chars[i..after].iter().collect());
        } else if chars[after].is_ascii_lowercase() && ends_at(after + 1) {
            out.push(chars[i..=after].iter().collect());
        }
    }

    // "contracts N", "contract N", "contracts section N", with an optional range.
    let lower = prose.to_ascii_lowercase();
    for (at, _) in lower.match_indices("contract") {
        if at > 0 && lower[..at].chars().next_back().is_some_and(is_word) {
            continue;
        }
        let mut rest = lower[at + "contract".len()..].trim_start_matches('s');
        for lead in [" sections ", " section ", " §"] {
            if let Some(r) = rest.strip_prefix(lead) {
                rest = r;
            }
        }
        let rest = rest.strip_prefix(' ').unwrap_or(rest);
        let token: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-').collect();
        out.extend(section_range(token.trim_end_matches(['.', '-'])));
    }

    // Parenthesised lists whose every item is an id or a section number: "(3.6, D14)", "(9.1)".
    let mut start = None;
    for (k, c) in prose.char_indices() {
        match c {
            '(' => start = Some(k + 1),
            ')' => {
                if let Some(s) = start.take() {
                    let items: Vec<&str> = prose[s..k].split(',').map(str::trim).collect();
                    let item_ok = |it: &str| {
                        let it = it.strip_prefix("contracts ").unwrap_or(it);
                        it.split(['-', '/']).all(|p| is_id(p) || is_section(p))
                    };
                    if items.iter().all(|it| item_ok(it)) {
                        for it in items {
                            let it = it.strip_prefix("contracts ").unwrap_or(it);
                            if !is_id(it.split(['-', '/']).next().unwrap_or("")) {
                                out.extend(section_range(it));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// `5.3-5.5` cites 5.3 and 5.5; `2.7.5-6` cites 2.7.5 and 2.7.6; a plain number cites itself.
fn section_range(token: &str) -> Vec<Citation> {
    let mut parts = token.splitn(2, '-');
    let left = parts.next().unwrap_or("");
    if !is_section(left) {
        return Vec::new();
    }
    let mut out = vec![left.to_owned()];
    if let Some(right) = parts.next().filter(|r| is_section(r)) {
        let (l, r): (Vec<&str>, Vec<&str>) = (left.split('.').collect(), right.split('.').collect());
        let joined =
            if r.len() < l.len() { [&l[..l.len() - r.len()], &r[..]].concat().join(".") } else { right.to_owned() };
        out.push(joined);
    }
    out
}

/// The comments and string literals of a Rust file, each with the line it starts on.
fn prose_of(text: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            let start = i + 2;
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            out.push((line, chars[start..i].iter().collect::<String>().trim_start_matches(['/', '!']).to_owned()));
        } else if c == '/' && at(i + 1) == '*' {
            let (start, from) = (i + 2, line);
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && at(i + 1) == '/') {
                line += usize::from(chars[i] == '\n');
                i += 1;
            }
            out.push((from, chars[start..i.min(chars.len())].iter().collect()));
            i += 2;
        } else if c == 'r' && (at(i + 1) == '"' || (at(i + 1) == '#' && (i == 0 || !is_word(chars[i - 1])))) {
            let mut hashes = 0;
            let mut j = i + 1;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                i += 1;
                continue;
            }
            let (start, from) = (j + 1, line);
            let mut k = start;
            while k < chars.len() && !(chars[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#')) {
                line += usize::from(chars[k] == '\n');
                k += 1;
            }
            out.push((from, chars[start..k.min(chars.len())].iter().collect()));
            i = k + 1 + hashes;
        } else if c == '"' {
            let (start, from) = (i + 1, line);
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                line += usize::from(at(i) == '\n');
                i += 1;
            }
            out.push((from, chars[start..i.min(chars.len())].iter().collect()));
            i += 1;
        } else if c == '\'' {
            // A char literal ('a', '\n', '\'') is skipped whole; a lifetime or label is code.
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else {
            line += usize::from(c == '\n');
            i += 1;
        }
    }
    out
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}
