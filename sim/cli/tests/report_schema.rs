//! The committed JSON Schemas (`reports/world.schema.json`, `reports/replay.schema.json`) describe
//! the reports fencesim really writes. A small structural checker walks a report beside its
//! schema: every `required` key present, every `type`, `const` and `enum` honoured, objects and
//! arrays recursively, `$ref` to the sibling schema file followed; and, stricter than JSON Schema,
//! every key a report emits must be declared, so the schemas cannot fall behind the code. The
//! enums are checked against the code's own lists, and the checker is shown able to fail.

use std::path::Path;
use std::process::Command;

use fencesim::report;
use fencesim_oracle::CHECKERS;
use fencesim_sim::catalogue::{self, Defect};
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig};
use serde_json::{Map, Value, json};

fn schema(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reports").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every place `value` breaks `schema`, as `path: why`.
fn check(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    walk(schema, value, "$", &mut errors);
    errors
}

/// The keywords of a schema with its `$ref` (a sibling file) merged in: the referring schema's
/// `required` and `properties` add to the referred one's.
fn resolve(schema: &Value) -> Map<String, Value> {
    let mut merged = Map::new();
    if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
        merged = resolve(&self::schema(target));
    }
    for (key, value) in schema.as_object().expect("a schema is an object") {
        match (key.as_str(), merged.get_mut(key)) {
            ("$ref", _) => {}
            ("required", Some(Value::Array(base))) => base.extend(value.as_array().cloned().unwrap_or_default()),
            ("properties", Some(Value::Object(base))) => {
                base.extend(value.as_object().cloned().unwrap_or_default());
            }
            _ => {
                merged.insert(key.clone(), value.clone());
            }
        }
    }
    merged
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn walk(schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let schema = resolve(schema);
    let actual = type_name(value);
    if let Some(expected) = schema.get("type") {
        let allowed: Vec<&str> = match expected {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            other => panic!("{at}: unsupported type keyword {other}"),
        };
        let ok = allowed.iter().any(|t| *t == actual || (*t == "number" && actual == "integer"));
        if !ok {
            errors.push(format!("{at}: expected {}, got {actual} {value}", allowed.join(" or ")));
            return;
        }
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        errors.push(format!("{at}: expected {constant}, got {value}"));
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        errors.push(format!("{at}: {value} is not one of {}", Value::Array(options.clone())));
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), value.as_f64())
        && n < min
    {
        errors.push(format!("{at}: {n} is below the minimum {min}"));
    }
    match value {
        Value::Object(object) => {
            for key in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                let key = key.as_str().expect("required keys are strings");
                if !object.contains_key(key) {
                    errors.push(format!("{at}: missing required key '{key}'"));
                }
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            for (key, item) in object {
                let path = format!("{at}.{key}");
                match (properties.and_then(|p| p.get(key)), schema.get("additionalProperties")) {
                    (Some(sub), _) => walk(sub, item, &path, errors),
                    (None, Some(extra)) if extra.is_object() => walk(extra, item, &path, errors),
                    // Stricter than JSON Schema: an object with declared properties declares all.
                    (None, _) if properties.is_some() => errors.push(format!("{path}: not declared by the schema")),
                    (None, _) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(sub, item, &format!("{at}[{i}]"), errors);
                }
            }
        }
        _ => {}
    }
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
    }
}

/// A passing world, a failing one with violations that name rows, and a traced one, as
/// `fencesim run --format json` builds them.
#[test]
fn world_reports_match_the_world_schema() {
    let schema = schema("world.schema.json");
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
        assert_eq!(check(&schema, &doc), Vec::<String>::new(), "{what}: {doc}");
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
    assert_eq!(check(&schema("replay.schema.json"), &doc), Vec::<String>::new(), "{doc}");
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
        assert_eq!(check(&schema("sweep.schema.json"), &doc), Vec::<String>::new(), "{doc}");
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
    assert_eq!(enum_of(&world, "/properties/db/enum"), dbs);
    assert_eq!(enum_of(&replay, "/properties/summary/properties/db/enum"), dbs);
    for s in [&world, &replay] {
        assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }
}

/// The checker can fail: a missing key, a wrong type, a value outside an enum, an undeclared key
/// and a broken `$ref`'d world inside a replay are each reported.
#[test]
fn the_checker_reports_each_kind_of_breakage() {
    let schema = schema("world.schema.json");
    let good = report::world_json(&world::run(&world_config("stale-settle", 1, &[])).expect("runs"), &[]);
    assert_eq!(check(&schema, &good), Vec::<String>::new());
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut doc = good.clone();
        edit(&mut doc);
        check(&schema, &doc)
    };
    let missing = broken(&|d| {
        d.as_object_mut().unwrap().remove("fingerprint");
    });
    assert_eq!(missing, ["$: missing required key 'fingerprint'"]);
    assert_eq!(broken(&|d| d["seed"] = json!("7")), ["$.seed: expected integer, got string \"7\""]);
    assert_eq!(broken(&|d| d["counters"]["rows"] = json!(-1)), ["$.counters.rows: -1 is below the minimum 0"]);
    assert_eq!(broken(&|d| d["verdict"] = json!("ok")), ["$.verdict: \"ok\" is not one of [\"pass\",\"fail\"]"]);
    assert_eq!(broken(&|d| d["schema"] = json!("fencesim.world/0")).len(), 1);
    assert_eq!(
        broken(&|d| d["counters"]["new_counter"] = json!(1)),
        ["$.counters.new_counter: not declared by the schema"]
    );
    assert_eq!(broken(&|d| d["counters"]["faults"]["crash"] = json!("x")).len(), 1);
    let replay = json!({
        "schema": report::REPLAY_SCHEMA, "corpus": "c.txt", "commit": null,
        "summary": {"verdict": "pass", "worlds": 1, "passed": 1, "failed": 0, "nondeterministic": 0, "db": "memdb", "jobs": 1, "seconds": 0.5},
        "worlds": [good],
    });
    let errors = check(&self::schema("replay.schema.json"), &replay);
    assert_eq!(errors.len(), 7, "{errors:?}");
    assert!(errors.iter().all(|e| e.starts_with("$.worlds[0]: missing required key")), "{errors:?}");
}
