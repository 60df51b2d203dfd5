//! `reference-model` (`script.rs`): a run bound to a workflow walks only what a correct engine
//! could reach from its script.

use fencesim_store::{JournalEntry, Seq};
use serde_json::json;

use super::fixtures::{CFG, H, b2, clean};
use crate::history::{Call, EffectKind, Event, Payload};
use crate::{OracleConfig, Script, ScriptStep, Violation, check};

/// The clean history's r1 as a workflow: one agent step `ask` answering "answer" (no tools), then
/// an approval `sign-off`; `more` appends further steps.
fn r1_script(more: Vec<ScriptStep>) -> OracleConfig {
    let ask = ScriptStep::Agent {
        key: "ask".into(),
        tool_turns: 0,
        answer: json!("answer"),
        max_turns: 4,
        max_tool_calls: 2,
    };
    let sign_off = ScriptStep::Suspend { key: "sign-off".into(), kind: "approval".into() };
    let steps = [vec![ask, sign_off], more].concat();
    OracleConfig { scripts: vec![Script { name: "r1-flow".into(), steps }], ..CFG }
}

/// Every meta write of r1 binds it to `r1-flow`, as the engine's boot meta does.
fn bound(mut h: H) -> H {
    for row in &mut h.rows {
        if let Event::Call(Call { run, payload: Payload::Meta(meta), .. }) = &mut row.event
            && run.as_str() == "r1"
        {
            meta.extra.insert("workflow".into(), json!("r1-flow"));
        }
    }
    h
}

fn model_findings(h: &H, cfg: &OracleConfig) -> Vec<Violation> {
    check(&h.rows, &h.store(), cfg).into_iter().filter(|v| v.checker.name() == "reference-model").collect()
}

#[test]
fn reference_model_passes_the_clean_history_walked_by_its_script() {
    let h = bound(clean());
    assert_eq!(check(&h.rows, &h.store(), &r1_script(vec![])), Vec::new());
}

/// A step dispatched before the approval before it was given; an answer the script never gives;
/// a turn the step cannot reach; an `ok` settle of an unfinished script: each is named at its row.
#[test]
fn reference_model_catches_runs_a_correct_engine_could_not_reach() {
    let act =
        ScriptStep::Agent { key: "act".into(), tool_turns: 0, answer: json!("done"), max_turns: 4, max_tool_calls: 2 };
    // `act` opens while `sign-off` waits for its approval.
    let mut h = bound(clean());
    let early = h.insert_after("settle-e2", |x| {
        x.append("w2", &b2(), 1525, JournalEntry::new(5, "agent", "running").with("key", json!("act")));
    });
    // Renumber the later r1 entries past the inserted seq 5.
    for name in ["resolution", "settle-e3"] {
        if let Payload::Entry(e) = &mut h.call_mut(name).payload {
            e.seq = Seq(e.seq.0 + 1);
        }
    }
    if let Payload::Entry(e) = &mut h.call_mut("resolution").payload {
        e.extra.insert("resolution".into(), json!({ "target": 3 }));
    }
    let found = model_findings(&h, &r1_script(vec![act.clone()]));
    assert!(found[0].explanation.contains("seq 5 opens step 'act' before step 'sign-off' finished"), "{found:#?}");
    assert_eq!(found[0].row, Some(early));

    // The terminal carries another answer than the script's.
    let mut h = bound(clean());
    if let Payload::Entry(e) = &mut h.call_mut("terminal-1").payload {
        e.extra.insert("value".into(), json!("a different answer"));
    }
    let found = model_findings(&h, &r1_script(vec![]));
    assert!(
        found[0]
            .explanation
            .contains("ends step 'ask' ok with \"a different answer\", where the script answers \"answer\""),
        "{found:#?}"
    );
    assert_eq!(found[0].row, Some(h.at("terminal-1")));

    // A second call turn of a step that answers on its first.
    let mut h = bound(clean());
    let past = h.insert_after("pay-e2", |x| {
        x.effect("w2", EffectKind::Call, &b2(), 1, 2);
    });
    let found = model_findings(&h, &r1_script(vec![]));
    assert!(
        found[0]
            .explanation
            .contains("paid call turn 2 of step 'ask' (dispatch running=1), where its script reaches at most 1"),
        "{found:#?}"
    );
    assert_eq!(found[0].row, Some(past));

    // The run settles ok although the script's last step never ran.
    let h = bound(clean());
    let found = model_findings(&h, &r1_script(vec![act]));
    assert!(
        found[0].explanation.contains("seq 6 settles the run ok while step 'act' of workflow 'r1-flow' never finished"),
        "{found:#?}"
    );
    assert_eq!(found[0].row, Some(h.at("settle-e3")));
}
