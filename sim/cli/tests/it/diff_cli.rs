//! `fencesim diff` end to end: fencesim's own store on a memdb and on a file answers every call of
//! a few seeds alike; a planted store defect on one side diverges, and the report names the first
//! differing call with both full answers (a world failing its oracle exits 1); a divergence where
//! both worlds pass exits 0 unless `--fail-on-divergence`; bad input exits 2 with one line.

use crate::cli;

use cli::{assert_exit, fencesim, stderr, stdout};

#[test]
fn memdb_and_file_answer_every_call_alike() {
    for (scenario, seeds) in [("mid-call-takeover", "4"), ("swarm", "2")] {
        let out = fencesim(&[
            "diff",
            "--scenario",
            scenario,
            "--seed",
            "1",
            "--seeds",
            seeds,
            "--store",
            "memdb",
            "--store",
            "file",
        ]);
        assert_exit(&out, 0);
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("diff {scenario} seeds 1..={seeds}: A memdb, B file"), "{text}");
        let n: usize = seeds.parse().unwrap();
        for (i, line) in lines[1..=n].iter().enumerate() {
            let prefix = format!("seed {}: identical (", i + 1);
            assert!(line.starts_with(&prefix) && line.ends_with(" store calls compared)"), "{text}");
        }
        let summary = lines.last().unwrap();
        assert!(
            summary.starts_with(&format!(
                "{scenario}: {seeds} seed(s) (1..={seeds}): {seeds} identical, 0 diverged, 0 with a violation; "
            )),
            "{text}"
        );
    }
}

/// The defect lets an acquire through while a fenced write is between its check and its mutation:
/// fencesim's store answers the usurper busy, the planted one grants it, and that world fails.
#[test]
fn a_planted_defect_on_one_side_is_named_at_its_first_differing_call_with_both_answers() {
    let out = fencesim(&[
        "diff",
        "--scenario",
        "mid-call-takeover",
        "--seed",
        "1",
        "--store",
        "memdb",
        "--store",
        "memdb",
        "--defect-b",
        "non-atomic-fence",
    ]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    assert_eq!(lines[0], "diff mid-call-takeover seed 1: A memdb, B memdb (defects non-atomic-fence)", "{text}");
    assert_eq!(
        lines[1],
        "seed 1: DIVERGED at store call 42 (row #57, 2.000s): answers differ: usurper acquire r02: A error busy, B ok",
        "{text}"
    );
    let squeezed = |line: &str| line.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        squeezed(lines[2]),
        r#"call usurper acquire {"now_ms":1700000003001,"owner":"usurper","run":"r02"}"#,
        "{text}"
    );
    assert_eq!(squeezed(lines[3]), r#"A memdb {"error":{"code":"busy","op":"acquire","run":"r02"}}"#, "{text}");
    assert_eq!(
        squeezed(lines[4]),
        r#"B memdb (defects non-atomic-fence) {"ok":{"epoch":2,"owner":"usurper","run":"r02"}}"#,
        "{text}"
    );
    assert!(lines[5].starts_with("  B FAIL: 3 violation(s), first no-stale-acceptance: "), "{text}");
    assert!(text.contains(
        "  repro: fencesim diff --scenario mid-call-takeover --seed 1 --store memdb --store memdb --defect-b non-atomic-fence\n"
    ));
    assert_eq!(
        lines[lines.len() - 2],
        "only each seed's first divergence is compared: once the stores answer differently the worlds go different ways"
    );
    let summary = lines[lines.len() - 1];
    assert_eq!(
        summary,
        "mid-call-takeover: 1 seed(s) (1..=1): 0 identical, 1 diverged (1 answers differ), 1 with a violation; 41 store calls compared alike"
    );
}

/// The planted defect skips the blob writes' fence check, and with it their fault point: the
/// world's next mid-call takeover lands elsewhere, before any answer differs, and neither world
/// fails. A finding (exit 0), or a failure for CI with `--fail-on-divergence`.
#[test]
fn a_divergence_both_worlds_pass_exits_0_unless_told_to_fail() {
    let args = [
        "diff",
        "--scenario",
        "swarm",
        "--seed",
        "1",
        "--store",
        "memdb",
        "--store",
        "memdb",
        "--defect-b",
        "unfenced-blobs",
    ];
    let out = fencesim(&args);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("seed 1: DIVERGED at row #280 (after 215 store calls alike): rows differ before any answer did"),
        "{text}"
    );
    assert!(text.contains("FAULT takeover r13 mid-put_meta of client.1"), "{text}");
    assert!(text.contains("both worlds pass the oracle: a difference between the stores, not a violation"), "{text}");
    assert!(!text.contains("FAIL"), "{text}");
    let strict = fencesim(&[&args[..], &["--fail-on-divergence"]].concat());
    assert_exit(&strict, 1);
    assert_eq!(stdout(&strict), text, "the flag changes the exit code only");
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let world = ["diff", "--scenario", "mid-call-takeover", "--seed", "1"];
    for (extra, expected) in [
        (&["--store", "memdb"][..], "diff compares two stores: give --store twice, A then B (got 1)"),
        (&["--store", "memdb", "--store", "file", "--store", "file"][..], "(got 3)"),
        (&["--store", "memdb", "--store", "sqlite"][..], "unknown store 'sqlite' (valid: memdb, file, cmd:COMMAND)"),
        (&["--store", "memdb", "--store", "cmd:"][..], "the adapter command after cmd: is empty"),
        (&["--store", "memdb", "--store", "file", "--seeds", "0"][..], "--seeds must be at least 1"),
        (&["--store", "memdb", "--store", "file", "--defect-a", "nope"][..], "unknown defect 'nope'"),
        (
            &["--store", "memdb", "--store", "file", "--adapter-timeout-ms", "5"][..],
            "--adapter-timeout-ms applies only to a store adapter",
        ),
        (
            &["--store", "memdb", "--store", "cmd:true", "--defect-b", "non-atomic-fence"][..],
            "store B (cmd:true): store defects are planted in fencesim's own store",
        ),
    ] {
        let out = fencesim(&[&world[..], extra].concat());
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{extra:?}: {err}");
        assert!(err.contains(expected), "{extra:?}: {err}");
        assert!(out.stdout.is_empty(), "{extra:?}: {}", stdout(&out));
    }
    let unknown =
        fencesim(&["diff", "--scenario", "no-such-scenario", "--seed", "1", "--store", "memdb", "--store", "file"]);
    assert_exit(&unknown, 2);
    assert_eq!(stderr(&unknown).lines().count(), 1, "{}", stderr(&unknown));
}
