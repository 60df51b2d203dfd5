//! The engine's built-in workflows restated as the oracle's [`Script`]s: the data its
//! `reference-model` checker walks each run's journal against, so the oracle never runs engine code.

use fencesim_engine::workflow::{Step, SuspendKind, Workflow};

use fencesim_oracle::{Script, ScriptStep};

/// One workflow as a script.
pub fn script(workflow: &Workflow) -> Script {
    let steps = workflow
        .steps
        .iter()
        .map(|step| match step {
            Step::Agent(a) => ScriptStep::Agent {
                key: a.key.clone(),
                tool_turns: a.tool_turns,
                answer: a.answer.clone(),
                max_turns: a.max_turns,
                max_tool_calls: a.max_tool_calls,
            },
            Step::Suspend { key, kind, .. } => ScriptStep::Suspend {
                key: key.clone(),
                kind: match kind {
                    SuspendKind::Approval => "approval".into(),
                    SuspendKind::External => "external".into(),
                },
            },
        })
        .collect();
    Script { name: workflow.name.clone(), steps }
}

/// Every built-in workflow's script.
pub fn builtin() -> Vec<Script> {
    let scripts: Vec<Script> =
        Workflow::BUILTIN.iter().filter_map(|name| Workflow::builtin(name)).map(|w| script(&w)).collect();
    // `reference-model` judges a run only by its workflow's script: every built-in one has one.
    assert_eq!(scripts.len(), Workflow::BUILTIN.len(), "a built-in workflow without its script");
    scripts
}
