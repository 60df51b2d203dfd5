//! The committed JSON Schemas (`reports/world.schema.json`, `replay.schema.json`,
//! `sweep.schema.json`) describe the reports fencesim really writes. Reports are validated by a
//! maintained JSON Schema library (`jsonschema`, draft 2020-12), with every sibling schema
//! registered so `$ref: "world.schema.json"` resolves. Every object schema that lists properties
//! closes itself with `unevaluatedProperties: false`, so a key a report emits and the schema does
//! not declare fails (a lint below holds every schema file to it); the world schema's root stays
//! open because replay entries extend it, and a world report is validated through
//! [`WORLD_CLOSED`]. The enums are checked against the code's own lists, and validation is shown
//! able to fail.

use std::path::Path;
use std::process::Command;

use fencesim::report;
use fencesim_oracle::CHECKERS;
use fencesim_sim::catalogue::{self, Defect};
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig};
use serde_json::{Value, json};

/// The schema files, each registered under `json-schema:///NAME` (the base a `$ref` by file
/// name resolves against).
const SCHEMAS: [&str; 3] = ["world.schema.json", "replay.schema.json", "sweep.schema.json"];

/// A world report on its own: the world schema, closed at its root.
const WORLD_CLOSED: &str = "world-closed";

fn schema(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reports").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every place `value` breaks the schema `name` (a file of [`SCHEMAS`] or [`WORLD_CLOSED`]), as
/// `instance-path: why`.
fn check(name: &str, value: &Value) -> Vec<String> {
    let mut registry = jsonschema::Registry::new();
    for file in SCHEMAS {
        registry = registry.add(format!("json-schema:///{file}"), schema(file)).expect("a schema URI");
    }
    let registry = registry.prepare().expect("the schemas resolve");
    let root = if name == WORLD_CLOSED {
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": "world.schema.json", "unevaluatedProperties": false})
    } else {
        schema(name)
    };
    let validator = jsonschema::options()
        .with_registry(&registry)
        .build(&root)
        .unwrap_or_else(|e| panic!("{name} is not a valid schema: {e}"));
    validator.iter_errors(value).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

fn world_config(scenario: &str, seed: u64, defects: &[Defect]) -> WorldConfig {
    let (engine_defects, store_defects) = Defect::split(defects);
    WorldConfig {
        scenario: catalogue::scenario(scenario).expect("a built-in scenario"),
        seed,
        db: DbKind::Memdb,
        store_defects,
        engine_defects,
        keep_db: None,
        adapter: None,
    }
}

/// A passing world, a failing one with violations that name rows, and a traced one, as
/// `fencesim run --format json` builds them.
#[test]
fn world_reports_match_the_world_schema() {
    let clean = world::run(&world_config("swarm", 7, &[])).expect("the world runs");
    assert!(clean.passed());
    let defects = [Defect::parse("non-atomic-fence").unwrap()];
    let failed = (1..=10)
        .map(|seed| world::run(&world_config("mid-call-takeover", seed, &defects)).expect("the world runs"))
        .find(|r| r.violations.iter().any(|v| v.row.is_some() && v.cause.is_some()))
        .expect("non-atomic-fence breaks a mid-call-takeover world with a cause row");

    let mut traced = report::world_json(&clean, &[]);
    traced["trace"] = clean.rows.iter().take(5).map(ToString::to_string).collect();
    for (what, doc) in [
        ("clean", report::world_json(&clean, &[])),
        ("failed", report::world_json(&failed, &defects)),
        ("traced", traced),
    ] {
        assert_eq!(check(WORLD_CLOSED, &doc), Vec::<String>::new(), "{what}: {doc}");
        if what != "traced" {
            let typed: report::WorldDoc = serde_json::from_value(doc.clone()).expect("a world report reads back typed");
            assert_eq!(serde_json::to_value(&typed).unwrap(), doc, "{what}: the typed report round-trips");
        }
    }
    let doc = report::world_json(&failed, &defects);
    assert!(doc["violations"][0]["row_text"].is_string() && doc["repro"].is_string(), "{doc}");
}

#[test]
fn a_replay_report_matches_the_replay_schema() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.txt");
    std::fs::write(&corpus, "swarm 1\nstale-settle 2\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .arg("replay")
        .arg(&corpus)
        .arg("--report")
        .arg(dir.path())
        .output()
        .expect("run fencesim");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("replay.json")).unwrap()).unwrap();
    assert_eq!(doc["worlds"].as_array().map(Vec::len), Some(2));
    assert_eq!(check("replay.schema.json", &doc), Vec::<String>::new(), "{doc}");
    let typed: report::ReplayDoc = serde_json::from_value(doc.clone()).expect("a replay report reads back typed");
    assert_eq!((typed.summary.verdict, typed.worlds.len()), (report::Verdict::Pass, 2));
    assert!(typed.worlds.iter().all(|w| w.deterministic && w.world.verdict == report::Verdict::Pass));
}

#[test]
fn sweep_and_merged_reports_match_the_sweep_schema() {
    let dir = tempfile::tempdir().unwrap();
    for (i, shard) in ["0/2", "1/2"].iter().enumerate() {
        let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
            .args(["sweep", "--scenario", "mid-call-takeover", "--seeds", "3", "--defect", "non-atomic-fence"])
            .args(["--shard", shard, "--report"])
            .arg(dir.path().join(format!("s{i}")))
            .output()
            .expect("run fencesim");
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .arg("merge")
        .args([dir.path().join("s0"), dir.path().join("s1")])
        .arg("--out")
        .arg(dir.path().join("m"))
        .output()
        .expect("run fencesim");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    for report in ["s0", "s1", "m"] {
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(report).join("sweep.json")).unwrap())
                .unwrap();
        assert!(!doc["failures"].as_array().unwrap().is_empty(), "{doc}");
        assert_eq!(check("sweep.schema.json", &doc), Vec::<String>::new(), "{doc}");
        let typed: report::SweepDoc = serde_json::from_value(doc.clone()).expect("a sweep report reads back typed");
        assert_eq!(typed.summary.verdict, report::Verdict::Fail, "{report}");
        assert!(typed.summary.failed >= 1 && !typed.failures.is_empty());
    }
    assert_eq!(schema("sweep.schema.json")["properties"]["schema"]["const"], report::SWEEP_SCHEMA);
}

fn enum_of(schema: &Value, pointer: &str) -> Vec<String> {
    let values = schema.pointer(pointer).and_then(Value::as_array).unwrap_or_else(|| panic!("no enum at {pointer}"));
    values.iter().map(|v| v.as_str().expect("string enum").to_owned()).collect()
}

#[test]
fn the_schemas_enums_and_versions_match_the_code() {
    let world = schema("world.schema.json");
    let replay = schema("replay.schema.json");
    assert_eq!(world["properties"]["schema"]["const"], report::WORLD_SCHEMA);
    assert_eq!(replay["properties"]["schema"]["const"], report::REPLAY_SCHEMA);
    let checkers: Vec<String> = CHECKERS.iter().map(|c| c.name().to_owned()).collect();
    assert_eq!(enum_of(&world, "/properties/violations/items/properties/checker/enum"), checkers);
    let defects: Vec<String> = Defect::all().iter().map(|d| d.name().to_owned()).collect();
    assert_eq!(enum_of(&world, "/properties/defects/items/enum"), defects);
    let dbs: Vec<String> = [DbKind::Memdb, DbKind::File].iter().map(|d| d.as_str().to_owned()).collect();
    // fencesim's own stores by name; a store adapter by its `cmd:` command (the second branch).
    assert_eq!(enum_of(&world, "/properties/db/anyOf/0/enum"), dbs);
    assert_eq!(enum_of(&replay, "/properties/summary/properties/db/anyOf/0/enum"), dbs);
    assert_eq!(world.pointer("/properties/db/anyOf/1/pattern"), Some(&json!("^cmd:")));
    for s in [&world, &replay] {
        assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }
}

/// Validation can fail: a missing key, a wrong type, a value below its minimum or outside an
/// enum, an undeclared key and a broken `$ref`'d world inside a replay are each reported, at
/// their place.
#[test]
fn validation_reports_each_kind_of_breakage() {
    let good = report::world_json(&world::run(&world_config("stale-settle", 1, &[])).expect("runs"), &[]);
    assert_eq!(check(WORLD_CLOSED, &good), Vec::<String>::new());
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut doc = good.clone();
        edit(&mut doc);
        check(WORLD_CLOSED, &doc)
    };
    let one = |errors: Vec<String>, at: &str, says: &str| {
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with(&format!("{at}: ")) && errors[0].contains(says), "{errors:?}");
    };
    one(
        broken(&|d| {
            d.as_object_mut().unwrap().remove("fingerprint");
        }),
        "",
        "fingerprint",
    );
    one(broken(&|d| d["seed"] = json!("7")), "/seed", "integer");
    one(broken(&|d| d["counters"]["rows"] = json!(-1)), "/counters/rows", "minimum");
    one(broken(&|d| d["verdict"] = json!("ok")), "/verdict", "ok");
    one(broken(&|d| d["schema"] = json!("fencesim.world/0")), "/schema", "fencesim.world/1");
    one(broken(&|d| d["counters"]["new_counter"] = json!(1)), "/counters", "new_counter");
    one(broken(&|d| d["new_key"] = json!(1)), "", "new_key");
    one(broken(&|d| d["counters"]["faults"]["crash"] = json!("x")), "/counters/faults/crash", "integer");
    let replay = json!({
        "schema": report::REPLAY_SCHEMA, "corpus": "c.txt", "corpus_sha256": "0".repeat(64),
        "build": report::BUILD_ID, "commit": null,
        "summary": {"verdict": "pass", "worlds": 1, "passed": 1, "failed": 0, "nondeterministic": 0, "db": "memdb", "jobs": 1, "seconds": 0.5},
        "worlds": [good],
    });
    let errors = check("replay.schema.json", &replay);
    assert!(!errors.is_empty() && errors.iter().all(|e| e.starts_with("/worlds/0")), "{errors:?}");
}

/// Every object schema that lists properties is closed (`unevaluatedProperties: false`, or
/// `additionalProperties`), so no report key can go undeclared; only the world schema's root is
/// open, for the replay entries that extend it.
#[test]
fn every_object_schema_is_closed() {
    fn open_objects(s: &Value, at: &str, out: &mut Vec<String>) {
        match s {
            Value::Object(map) => {
                let closed = map.contains_key("unevaluatedProperties") || map.contains_key("additionalProperties");
                if map.contains_key("properties") && !closed {
                    out.push(at.to_owned());
                }
                for (k, v) in map {
                    open_objects(v, &format!("{at}/{k}"), out);
                }
            }
            Value::Array(items) => {
                items.iter().enumerate().for_each(|(i, v)| open_objects(v, &format!("{at}/{i}"), out))
            }
            _ => {}
        }
    }
    for file in SCHEMAS {
        let mut open = Vec::new();
        open_objects(&schema(file), "", &mut open);
        let expected: &[&str] = if file == "world.schema.json" { &[""] } else { &[] };
        assert_eq!(open, expected, "{file}: open object schemas");
    }
    let mut planted = Vec::new();
    open_objects(
        &json!({"properties": {"a": {"type": "object", "properties": {}}}, "unevaluatedProperties": false}),
        "",
        &mut planted,
    );
    assert_eq!(planted, ["/properties/a"], "the lint finds an open object");
}

/// A world run against a store adapter (`--store cmd:...`) reports the adapter as its store, and
/// the report still matches the closed world schema.
#[test]
fn a_world_against_a_store_adapter_matches_the_schema() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../adapters/python-sqlite/adapter.py");
    let spec = fencesim_protocol::Spec::parse(&format!("cmd:{} {}", crate::cli::python(), script.display()))
        .expect("a command");
    let cfg = WorldConfig { adapter: Some(spec.clone()), ..world_config("swarm", 2, &[]) };
    let doc = report::world_json(&world::run(&cfg).expect("runs"), &[]);
    assert_eq!(doc["db"], json!(spec.to_string()));
    assert_eq!(check(WORLD_CLOSED, &doc), Vec::<String>::new(), "{doc}");
}
