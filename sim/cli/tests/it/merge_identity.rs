//! `fencesim merge` joins the shards of one run only: every report carries what ran (the store,
//! the scenario's or the corpus's content) and what ran it (`build`, what built the binary), and
//! shards that differ in either are refused (exit 2) naming the field. `commit`, the checkout a
//! shard ran in (null outside one), is not what ran: shards of one build merge wherever they ran.
//! Before, shards of two stores, of two corpora under one file name and of two builds merged into
//! one passing report, and shards of one build run from two folders were refused for their commit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::cli;

use cli::{need, program, stderr};

fn fencesim_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).current_dir(dir).args(args).output().expect("run fencesim")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// `replay CORPUS --shard I/2 --report DIR` in `cwd`, passing.
fn replay(cwd: &Path, corpus: &Path, shard: &str, report: &Path, extra: &[&str]) {
    let args = [&["replay", path(corpus), "--shard", shard, "--report", path(report)][..], extra].concat();
    let out = fencesim_in(cwd, &args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
}

/// `merge` of `shards` into `DIR/m`.
fn merge(dir: &Path, shards: &[&Path]) -> Output {
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(shards.iter().map(|s| path(s)));
    let out = dir.join("m");
    args.extend(["--out", path(&out)]);
    let _ = std::fs::remove_dir_all(&out);
    fencesim_in(dir, &args)
}

fn assert_refused_for(out: &Output, field: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "expected a refusal naming {field}: {err}");
    assert!(err.contains(&format!("are reports of different runs ({field} differs)")), "{err}");
}

#[test]
fn replay_shards_of_one_build_merge_wherever_they_ran() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let corpus = p.join("c.txt");
    std::fs::write(&corpus, "swarm 1\nswarm 2\n").unwrap();
    // Shard 0 from a git checkout of one commit, shard 1 from a folder outside any.
    let checkout = p.join("checkout");
    std::fs::create_dir(&checkout).unwrap();
    let git = need(program(&["git"]), "git, to make a checkout");
    for args in [
        &["init", "-q"][..],
        &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "t"],
    ] {
        let status = Command::new(&git).current_dir(&checkout).args(args).status().expect("run git");
        assert!(status.success(), "git {args:?}");
    }
    let outside = p.join("outside");
    std::fs::create_dir(&outside).unwrap();
    replay(&checkout, &corpus, "0/2", &p.join("r0"), &[]);
    replay(&outside, &corpus, "1/2", &p.join("r1"), &[]);
    let (r0, r1) = (json(&p.join("r0/replay.json")), json(&p.join("r1/replay.json")));
    assert!(r0["commit"].as_str().is_some_and(|c| c.len() == 40), "{}", r0["commit"]);
    assert_eq!(r1["commit"], serde_json::Value::Null);
    assert_eq!((&r0["build"], &r0["corpus_sha256"]), (&r1["build"], &r1["corpus_sha256"]));
    let out = merge(p, &[&p.join("r0"), &p.join("r1")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json(&p.join("m/replay.json"))["summary"]["worlds"], 2);
}

#[test]
fn shards_of_other_contents_stores_or_builds_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let corpus = p.join("c.txt");

    // One corpus name, two contents.
    std::fs::write(&corpus, "swarm 1\nswarm 2\n").unwrap();
    replay(p, &corpus, "0/2", &p.join("a0"), &[]);
    std::fs::write(&corpus, "swarm 3\nswarm 4\n").unwrap();
    replay(p, &corpus, "1/2", &p.join("a1"), &[]);
    assert_refused_for(&merge(p, &[&p.join("a0"), &p.join("a1")]), "corpus_sha256");

    // One corpus, two stores.
    std::fs::write(&corpus, "swarm 1\nswarm 2\n").unwrap();
    replay(p, &corpus, "1/2", &p.join("f1"), &["--db", "file"]);
    assert_refused_for(&merge(p, &[&p.join("a0"), &p.join("f1")]), "db");

    // One corpus and store, two builds.
    replay(p, &corpus, "1/2", &p.join("b1"), &[]);
    assert_eq!(merge(p, &[&p.join("a0"), &p.join("b1")]).status.code(), Some(0), "the same build merges");
    let report = p.join("b1/replay.json");
    let mut doc = json(&report);
    doc["build"] = serde_json::json!("0".repeat(64));
    std::fs::write(&report, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    assert_refused_for(&merge(p, &[&p.join("a0"), &p.join("b1")]), "build");

    // A sweep of one scenario file name, two contents (a comment is enough: it is another file).
    let scenario = p.join("s.toml");
    let text = std::fs::read_to_string(repo().join("scenarios/mid-call-takeover.toml")).unwrap();
    std::fs::write(&scenario, &text).unwrap();
    for (shard, report) in [("0/2", "w0"), ("1/2", "w1")] {
        if shard == "1/2" {
            std::fs::write(&scenario, format!("# edited\n{text}")).unwrap();
        }
        let args = ["sweep", "--scenario", path(&scenario), "--seeds", "2", "--shard", shard, "--report", report];
        let out = fencesim_in(p, &args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    }
    assert_refused_for(&merge(p, &[&p.join("w0"), &p.join("w1")]), "scenario_sha256");
}
