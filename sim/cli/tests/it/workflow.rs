//! The GitHub Actions workflow (`.github/workflows/ci.yml`) cannot run here, so this test reads it
//! as YAML and runs it in miniature: every `run` step that invokes `"$FENCESIM"` runs under
//! `bash -eo pipefail` (as Actions does) with `FENCESIM` pointing at this build's binary, in a
//! scratch folder holding tiny copies of the corpora, once per matrix combination, jobs in
//! `needs` order, with the workflow's sizes shrunk (the soak at its default quorum). Each must exit
//! 0. It also checks what the workflow promises: every built-in scenario swept nightly, 32 shards,
//! at least 1,000,000 seeds, shard counts that match the matrices, failure bundles, the soak's
//! release quorum nightly and its planted defects on every push.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use fencesim_sim::catalogue;
use serde_yaml_ng::Value;

fn workflow() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.github/workflows/ci.yml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn env_of(doc: &Value) -> BTreeMap<String, String> {
    doc["env"]
        .as_mapping()
        .expect("a workflow-level env block")
        .iter()
        .map(|(k, v)| {
            let value = v.as_str().map(str::to_owned).or_else(|| v.as_u64().map(|n| n.to_string()));
            (k.as_str().expect("env key").to_owned(), value.expect("env value"))
        })
        .collect()
}

/// Every `run` script of a job, one after another.
fn scripts(job: &Value) -> String {
    job["steps"].as_sequence().expect("steps").iter().filter_map(|step| step["run"].as_str()).collect()
}

fn shards(job: &Value) -> Vec<u64> {
    job["strategy"]["matrix"]["shard"]
        .as_sequence()
        .map_or_else(Vec::new, |s| s.iter().filter_map(Value::as_u64).collect())
}

#[test]
fn the_workflow_keeps_its_promises() {
    let doc = workflow();
    let env = env_of(&doc);
    let listed: Vec<&str> = env["SCENARIOS"].split_whitespace().collect();
    for (name, _) in catalogue::SCENARIOS {
        assert!(listed.contains(&name), "SCENARIOS in ci.yml lacks {name}");
    }
    let on = &doc["on"];
    assert!(on.get("push").is_some() && on["schedule"][0]["cron"].as_str().is_some(), "push and a nightly schedule");
    let jobs = &doc["jobs"];
    let nightly: u64 = env["NIGHTLY_SHARDS"].parse().unwrap();
    assert_eq!(nightly, 32);
    assert_eq!(shards(&jobs["nightly"]), (0..nightly).collect::<Vec<_>>());
    assert_eq!(shards(&jobs["sweep"]), (0..env["PUSH_SHARDS"].parse::<u64>().unwrap()).collect::<Vec<_>>());
    let seeds: u64 = env["NIGHTLY_SEEDS"].parse().unwrap();
    assert!(seeds * listed.len() as u64 >= 1_000_000, "{seeds} seeds x {} scenarios", listed.len());
    // The merged fleet is held to each scenario's coverage aims, push and nightly.
    for job in ["sweep-merge", "nightly-merge"] {
        let text = serde_yaml_ng::to_string(&jobs[job]).unwrap();
        assert!(text.contains("merge") && text.contains("--require-coverage"), "{job} requires coverage");
    }
    // Every sweep bundles its failures; the store soak's release quorum runs nightly, and the soak
    // must fail on the planted defects on every push.
    for job in ["sweep", "nightly"] {
        assert!(scripts(&jobs[job]).contains("--bundle"), "{job} bundles its failures");
    }
    assert_eq!(env["SOAK_QUORUM"], "release");
    let soak = scripts(&jobs["nightly-soak"]);
    assert!(soak.contains("soak --level store --quorum \"$SOAK_QUORUM\" --writers 5"), "{soak}");
    let push_soak = scripts(&jobs["soak"]);
    assert!(
        push_soak.contains("unfenced-meta non-atomic-fence") && push_soak.contains("expected exit 1"),
        "{push_soak}"
    );
    for (name, job) in jobs.as_mapping().unwrap() {
        let text = serde_yaml_ng::to_string(job).unwrap();
        for needed in ["actions/upload-artifact"] {
            if name.as_str().is_some_and(|n| n.starts_with("nightly")) {
                assert!(text.contains(needed), "{name:?} uploads its reports");
            }
        }
    }
}

/// Runs every `"$FENCESIM"` step of every job, each matrix combination, with tiny sizes. Slow
/// (about two minutes on two cores: a third of the suite's time), so it runs where `CI` or
/// `FENCESIM_SLOW_TESTS` is set (`.ci/run`, `scripts/flake-hunt`) and is listed as ignored, with
/// this reason, elsewhere.
#[test]
#[cfg_attr(
    not(fencesim_slow),
    ignore = "slow (about 2 minutes: every fencesim step of .github/workflows/ci.yml); runs under CI or FENCESIM_SLOW_TESTS=1, or with --ignored"
)]
#[allow(clippy::too_many_lines, reason = "one walk over the workflow file: its jobs, matrix and steps in order")]
fn every_fencesim_command_of_the_workflow_runs_with_tiny_sizes() {
    let doc = workflow();
    let mut env = env_of(&doc);
    let scratch = tempfile::tempdir().unwrap();
    // Tiny sizes: enough seeds for every shard to own one per scenario.
    env.insert("PUSH_SEEDS".into(), env["PUSH_SHARDS"].clone());
    env.insert("NIGHTLY_SEEDS".into(), env["NIGHTLY_SHARDS"].clone());
    env.insert("MUTANT_SEEDS".into(), "10".into());
    env.insert("SOAK_QUORUM".into(), "default".into());
    env.insert("FENCESIM".into(), env!("CARGO_BIN_EXE_fencesim").into());
    // Tiny corpora under the workflow's paths: the first entries of the real ones.
    std::fs::create_dir_all(scratch.path().join("seeds")).unwrap();
    for corpus in ["ci.txt", "regressions.txt"] {
        let real =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../seeds").join(corpus)).unwrap();
        let tiny: Vec<&str> =
            real.lines().filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty()).take(2).collect();
        std::fs::write(scratch.path().join("seeds").join(corpus), tiny.join("\n") + "\n").unwrap();
    }

    // Jobs in `needs` order.
    let jobs = doc["jobs"].as_mapping().unwrap();
    let mut order: Vec<&str> = Vec::new();
    while order.len() < jobs.len() {
        let before = order.len();
        for (name, job) in jobs {
            let name = name.as_str().unwrap();
            let needs: Vec<&str> = match &job["needs"] {
                Value::String(s) => vec![s.as_str()],
                Value::Sequence(s) => s.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !order.contains(&name) && needs.iter().all(|n| order.contains(n)) {
                order.push(name);
            }
        }
        assert!(order.len() > before, "a cycle in the jobs' needs");
    }

    let mut ran = 0;
    for name in order {
        let job = &doc["jobs"][name];
        let combos: Vec<Option<u64>> = match shards(job).as_slice() {
            [] => vec![None],
            s => s.iter().copied().map(Some).collect(),
        };
        for step in job["steps"].as_sequence().unwrap() {
            let Some(script) = step["run"].as_str().filter(|s| s.contains("\"$FENCESIM\"")) else { continue };
            for shard in &combos {
                let script = match shard {
                    Some(i) => script.replace("${{ matrix.shard }}", &i.to_string()),
                    None => script.to_owned(),
                };
                // A seed or two per shard cannot meet a scenario's coverage aims; the requirement
                // itself is tested by sweep_cli's merged_shards_are_held_to_the_scenarios_coverage.
                let script = script.replace(" --require-coverage", "");
                assert!(!script.contains("${{"), "{name}: an expression the test cannot stand in for: {script}");
                let out = Command::new("bash")
                    .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
                    .current_dir(scratch.path())
                    .envs(&env)
                    .output()
                    .expect("run bash");
                assert!(
                    out.status.success(),
                    "{name} (shard {shard:?}) failed: {script}\nstdout: {}\nstderr: {}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                ran += 1;
            }
        }
    }
    // 4 push shards, replay, merge, kill matrix, 2 soak steps, 32 nightly shards, nightly merge,
    // nightly soak.
    assert_eq!(ran, 43, "ran {ran} steps");
    // The merges wrote one report each, equal in seed count to the whole.
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(scratch.path().join("sweep/merged/sweep.json")).unwrap())
            .unwrap();
    assert_eq!(merged["summary"]["worlds"], 4);
    for (name, _) in catalogue::SCENARIOS {
        let path = scratch.path().join("merged").join(name).join("sweep.json");
        let merged: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(merged["summary"]["worlds"], 32, "{name}");
        assert!(scratch.path().join("merged").join(name).join("junit.xml").exists());
    }
}
