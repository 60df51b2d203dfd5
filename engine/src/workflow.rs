//! Scripted, deterministic workflows: the programs a run executes. A workflow is a list of steps;
//! an agent step is one two-phase dispatch of model turns (each turn a paid call that answers or
//! requests a tool), a suspension step waits for an external resolution. The two workflows of the
//! kill-point suite (contracts 5.13) are built in.

use serde_json::{Value, json};

use crate::error::EngineError;

/// One agent dispatch: a running entry, turns of paid calls and tools, a terminal entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Agent {
    /// The dispatch's content key, unique in its workflow.
    pub key: String,
    /// Where the step's value lands in the run's value; `None` merges an object value in.
    pub output: Option<String>,
    /// The model requests a tool on this many turns, then answers; `u32::MAX`: always.
    pub tool_turns: u32,
    /// The final answer.
    pub answer: Value,
    /// Turn cap (contracts: `maxTurns`): reached, the dispatch ends `limit`.
    pub max_turns: u32,
    /// Executed-tool cap (`maxToolCalls`): a tool request past it ends the dispatch `limit`.
    pub max_tool_calls: u32,
}

/// How a suspension is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuspendKind {
    External,
    Approval,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Agent(Agent),
    /// Park the run until a resolution entry closes this suspension; the resolution's value is
    /// the step's value.
    Suspend {
        key: String,
        kind: SuspendKind,
        output: Option<String>,
    },
}

impl Step {
    pub fn key(&self) -> &str {
        match self {
            Step::Agent(a) => &a.key,
            Step::Suspend { key, .. } => key,
        }
    }

    pub fn output(&self) -> Option<&str> {
        match self {
            Step::Agent(a) => a.output.as_deref(),
            Step::Suspend { output, .. } => output.as_deref(),
        }
    }
}

/// A named workflow; the name is recorded in the run's meta so a worker can resume it.
#[derive(Clone, Debug, PartialEq)]
pub struct Workflow {
    pub name: String,
    pub steps: Vec<Step>,
}

impl Workflow {
    /// A workflow whose step keys are unique.
    pub fn new(name: impl Into<String>, steps: Vec<Step>) -> Result<Self, EngineError> {
        let name = name.into();
        for (i, step) in steps.iter().enumerate() {
            if steps[..i].iter().any(|s| s.key() == step.key()) {
                return Err(EngineError::Config(format!("workflow '{name}': step key '{}' repeats", step.key())));
            }
            if let Step::Agent(a) = step
                && a.max_turns == 0
            {
                return Err(EngineError::Config(format!("workflow '{name}': step '{}' has max_turns 0", a.key)));
            }
        }
        Ok(Self { name, steps })
    }

    /// Kill-point `happy`: two agents prompted "step one" (answers alpha) and "step two" (beta);
    /// value `{one: alpha, two: beta}`.
    pub fn happy() -> Self {
        let agent = |key: &str, output: &str, answer: &str| {
            Step::Agent(Agent {
                key: key.to_owned(),
                output: Some(output.to_owned()),
                tool_turns: 0,
                answer: json!(answer),
                max_turns: 4,
                max_tool_calls: 2,
            })
        };
        Self { name: "happy".into(), steps: vec![agent("step one", "one", "alpha"), agent("step two", "two", "beta")] }
    }

    /// Kill-point `limit`: one agent with a `probe` tool, limits 4 turns and 2 tool calls; the
    /// model always requests the tool, so it ends on the executed-call cap; value
    /// `{agentStatus: limit}`.
    pub fn limit() -> Self {
        Self {
            name: "limit".into(),
            steps: vec![Step::Agent(Agent {
                key: "probe".into(),
                output: None,
                tool_turns: u32::MAX,
                answer: json!("unreachable"),
                max_turns: 4,
                max_tool_calls: 2,
            })],
        }
    }

    /// A suspension followed by an agent: the client's approval shape.
    pub fn approval() -> Self {
        Self {
            name: "approval".into(),
            steps: vec![
                Step::Suspend { key: "approve".into(), kind: SuspendKind::Approval, output: Some("approval".into()) },
                Step::Agent(Agent {
                    key: "act".into(),
                    output: Some("act".into()),
                    tool_turns: 1,
                    answer: json!("done"),
                    max_turns: 4,
                    max_tool_calls: 2,
                }),
            ],
        }
    }

    /// The built-in workflows by name.
    pub fn builtin(name: &str) -> Option<Workflow> {
        match name {
            "happy" => Some(Self::happy()),
            "limit" => Some(Self::limit()),
            "approval" => Some(Self::approval()),
            _ => None,
        }
    }

    pub const BUILTIN: [&'static str; 3] = ["happy", "limit", "approval"];
}
