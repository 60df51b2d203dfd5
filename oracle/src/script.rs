//! `reference-model`: a run's journal and its payments against what its workflow's script allows,
//! a sequential specification the way Porcupine and Knossos check a history against a model
//! (contracts 1.3, 3.4-3.6, 5.13). The oracle is told the scripts as data ([`Script`]); it never
//! runs engine code. For the journal of each run the final store holds, bound to a known
//! workflow, in seq order:
//!
//! - every dispatch and suspension names a step of the script, of the step's kind;
//! - a step opens only once every step before it finished (an agent's `ok` terminal, or a `limit`
//!   one a later settle stamped; a suspension's resolution), and never after a step ended the run
//!   (`error`, `cancelled`), so no approval is acted on before it is given;
//! - an `ok` terminal carries the script's answer, a `limit` terminal the limit value;
//! - a `run_settle` of `ok` comes only when every step of the script finished, one of `suspended`
//!   only over an open suspension;
//!
//! and, over the history, no dispatch pays a call turn or runs a tool past what its step's
//! script can reach (`max_turns`, `tool_turns`, `max_tool_calls`), whatever the re-pay bound
//! allows for repeats. Each difference names the run, the first entry or payment that differs and
//! what the model allowed there.

use crate::checker::Checker;
use std::collections::BTreeMap;

use fencesim_store::{JournalEntry, RunId, RunStatus, Seq};
use serde_json::{Value, json};

use super::model::settle_status;
use super::{Context, Descriptor, Scope, Violation};
use crate::history::{Effect, EffectKind, Event, Surface};

pub(super) const REFERENCE_MODEL: Checker = Checker::ReferenceModel;
pub(super) const REFERENCE_MODEL_CHECK: Descriptor = Descriptor {
    checker: REFERENCE_MODEL,
    scope: Scope::Engine,
    invariant: "each run's journal walks its workflow's script in order (a step opens only after the steps before it finished, ok terminals carry the scripted answer, ok settles only a finished script) and no dispatch pays past what its step can reach (1.3, 3.4-3.6)",
    check: reference_model,
};

/// A workflow as the oracle knows it: its name (the run meta's `workflow` binding) and steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Script {
    pub name: String,
    pub steps: Vec<ScriptStep>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptStep {
    /// A two-phase dispatch of paid turns: the model requests a tool on `tool_turns` turns, then
    /// answers `answer`; `max_turns` and `max_tool_calls` end it `limit` first.
    Agent { key: String, tool_turns: u32, answer: Value, max_turns: u32, max_tool_calls: u32 },
    /// A suspension of journal kind `kind` (`approval`, `external`), closed by a resolution.
    Suspend { key: String, kind: String },
}

impl ScriptStep {
    fn key(&self) -> &str {
        match self {
            ScriptStep::Agent { key, .. } | ScriptStep::Suspend { key, .. } => key,
        }
    }

    /// The last call turn and tool number a dispatch of this step can pay.
    fn reach(&self) -> Option<(u32, u32)> {
        let ScriptStep::Agent { tool_turns, max_turns, max_tool_calls, .. } = self else { return None };
        let turns = (*max_turns).min(tool_turns.saturating_add(1)).min(max_tool_calls.saturating_add(1));
        Some((turns, (*tool_turns).min(*max_tool_calls).min(*max_turns)))
    }
}

fn key_of(entry: &JournalEntry) -> Option<&str> {
    entry.extra.get("key").and_then(Value::as_str)
}

fn resolution_target(entry: &JournalEntry) -> Option<Seq> {
    (entry.kind == "resolution").then(|| entry.extra.get("resolution")?.get("target")?.as_i64().map(Seq)).flatten()
}

fn violation(run: &RunId, what: String, row: Option<usize>) -> Violation {
    Violation::new(REFERENCE_MODEL, format!("run {run}: {what}"), row, None)
}

pub(super) fn reference_model(ctx: &Context) -> Vec<Violation> {
    let scripts: BTreeMap<&str, &Script> = ctx.cfg.scripts.iter().map(|s| (s.name.as_str(), s)).collect();
    if scripts.is_empty() {
        return Vec::new();
    }
    // Each run's payments since its last accepted delete (an earlier generation's running seqs
    // name other entries), in one pass.
    let mut paid: BTreeMap<&RunId, Vec<(usize, &Effect)>> = BTreeMap::new();
    for row in ctx.rows {
        match &row.event {
            Event::Effect(effect) => paid.entry(&effect.run).or_default().push((row.index, effect)),
            Event::Call(c) if c.surface == Surface::Delete && c.outcome.is_ok() => {
                paid.remove(&c.run);
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for (run, state) in &ctx.snapshot.runs {
        let bound = state.meta.as_ref().and_then(|m| m.extra.get("workflow")).and_then(Value::as_str);
        let Some(script) = bound.and_then(|name| scripts.get(name)) else { continue };
        let row_of = |entry: &JournalEntry| ctx.writers.entry(run, entry);
        found.extend(Walk::new(script).journal(run, &state.journal, row_of));
        let payments = paid.get(run).map_or(&[][..], Vec::as_slice);
        found.extend(past_reach(run, &state.journal, script, payments));
    }
    found
}

/// The model's position in a script while a journal is read.
struct Walk<'s> {
    script: &'s Script,
    /// Per step: the seq of its latest running entry or suspension, and whether it finished.
    opened: Vec<Option<Seq>>,
    finished: Vec<bool>,
    /// Steps whose `limit` terminal waits for a settle to stamp it (until then it is rerun live).
    unstamped: Vec<usize>,
    /// The step whose end ended the run (`error`, `cancelled`), if any.
    ended: Option<(usize, String)>,
}

impl<'s> Walk<'s> {
    fn new(script: &'s Script) -> Self {
        let n = script.steps.len();
        Self { script, opened: vec![None; n], finished: vec![false; n], unstamped: Vec::new(), ended: None }
    }

    fn step(&self, key: &str) -> Option<(usize, &'s ScriptStep)> {
        self.script.steps.iter().enumerate().find(|(_, s)| s.key() == key)
    }

    /// The first difference between the journal and the model, if any.
    fn journal(
        mut self,
        run: &RunId,
        journal: &[JournalEntry],
        row_of: impl Fn(&JournalEntry) -> Option<usize>,
    ) -> Option<Violation> {
        for entry in journal {
            if let Err(what) = self.read(entry) {
                return Some(violation(run, format!("seq {} {what}", entry.seq), row_of(entry)));
            }
        }
        None
    }

    fn read(&mut self, entry: &JournalEntry) -> Result<(), String> {
        if let Some(status) = settle_status(entry) {
            return self.settle(status);
        }
        if let Some(target) = resolution_target(entry) {
            if let Some(step) = self.opened.iter().position(|o| *o == Some(target)) {
                self.finished[step] = true;
            }
            return Ok(());
        }
        let Some(key) = key_of(entry) else { return Ok(()) };
        let Some((index, step)) = self.step(key) else {
            return Err(format!("names step '{key}', which workflow '{}' does not have", self.script.name));
        };
        match (step, entry.status.as_str()) {
            (ScriptStep::Agent { .. }, "running") if entry.kind == "agent" => self.open(index, entry.seq),
            (ScriptStep::Agent { answer, .. }, status) if entry.kind == "agent" => {
                self.close(index, status, entry, answer)
            }
            (ScriptStep::Suspend { kind, .. }, "suspended") if &entry.kind == kind => self.open(index, entry.seq),
            _ => Err(format!(
                "is a '{}' entry of status '{}' for step '{key}', which the script does not make",
                entry.kind, entry.status
            )),
        }
    }

    /// A step opens only after every step before it finished, and never after another step
    /// ended the run (the step that ended it may be dispatched again while no settle made it final).
    fn open(&mut self, index: usize, seq: Seq) -> Result<(), String> {
        if self.ended.as_ref().is_some_and(|(ended, _)| *ended == index) {
            self.ended = None;
        }
        if let Some((ended, why)) = &self.ended {
            let key = self.script.steps[*ended].key();
            return Err(format!(
                "opens step '{}' after step '{key}' ended the run {why}",
                self.script.steps[index].key()
            ));
        }
        if let Some(before) = (0..index).find(|&i| !self.finished[i]) {
            return Err(format!(
                "opens step '{}' before step '{}' finished (the model allows only step '{}' here)",
                self.script.steps[index].key(),
                self.script.steps[before].key(),
                self.script.steps[before].key()
            ));
        }
        if self.finished[index] {
            return Err(format!("opens step '{}' again after it finished", self.script.steps[index].key()));
        }
        self.opened[index] = Some(seq);
        Ok(())
    }

    fn close(&mut self, index: usize, status: &str, entry: &JournalEntry, answer: &Value) -> Result<(), String> {
        let key = self.script.steps[index].key();
        if entry.ref_seq.is_none() || entry.ref_seq != self.opened[index] {
            return Err(format!(
                "closes step '{key}' with ref {:?}, not its open dispatch {:?}",
                entry.ref_seq, self.opened[index]
            ));
        }
        let value = entry.extra.get("value").cloned().unwrap_or(Value::Null);
        match status {
            "ok" if &value == answer => self.finished[index] = true,
            "ok" => return Err(format!("ends step '{key}' ok with {value}, where the script answers {answer}")),
            "limit" if value == json!({"agentStatus": "limit"}) => self.unstamped.push(index),
            "limit" => return Err(format!("ends step '{key}' limit with {value}")),
            "error" | "cancelled" => self.ended = Some((index, format!("'{status}'"))),
            other => return Err(format!("ends step '{key}' with status '{other}', which no dispatch has")),
        }
        Ok(())
    }

    /// A settle stamps the limits before it; `ok` needs every step finished, `suspended` an open
    /// suspension.
    fn settle(&mut self, status: RunStatus) -> Result<(), String> {
        for index in self.unstamped.drain(..) {
            self.finished[index] = true;
        }
        let unfinished = (0..self.finished.len()).find(|&i| !self.finished[i]);
        match (status, unfinished) {
            (RunStatus::Ok, Some(i)) => Err(format!(
                "settles the run ok while step '{}' of workflow '{}' never finished",
                self.script.steps[i].key(),
                self.script.name
            )),
            (RunStatus::Suspended, _) => {
                let waiting = self.script.steps.iter().enumerate().any(|(i, s)| {
                    matches!(s, ScriptStep::Suspend { .. }) && self.opened[i].is_some() && !self.finished[i]
                });
                if waiting { Ok(()) } else { Err("settles the run suspended with no open suspension".into()) }
            }
            _ => Ok(()),
        }
    }
}

/// The first payment of a dispatch past what its step's script can reach. The dispatch is found by
/// its running entry in the final journal.
fn past_reach(
    run: &RunId,
    journal: &[JournalEntry],
    script: &Script,
    payments: &[(usize, &Effect)],
) -> Option<Violation> {
    payments.iter().find_map(|&(row, effect)| {
        let running = journal.iter().find(|e| e.seq == effect.running && e.status == "running")?;
        let step = key_of(running).and_then(|k| script.steps.iter().find(|s| s.key() == k))?;
        let (turns, tools) = step.reach()?;
        let (what, reach) = match effect.kind {
            EffectKind::Call => ("call turn", turns),
            EffectKind::Tool => ("tool", tools),
        };
        (effect.n > reach || effect.n == 0).then(|| {
            violation(
                run,
                format!(
                    "paid {what} {} of step '{}' (dispatch running={}), where its script reaches at most {reach}",
                    effect.n,
                    step.key(),
                    effect.running
                ),
                Some(row),
            )
        })
    })
}
