//! One segment: a single execution of a workflow body for a run (contracts 3.1-3.6). The boot
//! meta write bumps `segments`; each agent step is a two-phase dispatch replayed from the journal
//! when it already finished, redispatched against the same running seq (from its checkpoint) when
//! it dangles, or dispatched fresh; then settle: drain, `run_settle` append, seal, terminal meta.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use fencesim_store::{JournalEntry, Lease, RunId, RunMeta, RunStatus, Seq, StoreError, StoreResult};
use serde_json::{Value, json};

use crate::checkpoint::Checkpoint;
use crate::core::Core;
use crate::defects::EngineDefect;
use crate::entries::{self, kind, status};
use crate::env::{Env, Fault, Point, Site, Write};
use crate::error::{EngineError, EngineResult, SettleStage};
use crate::options::{CancelToken, Outcome, RunOptions};
use crate::probe::{self, Probe};
use crate::workflow::{Agent, Step, SuspendKind, Workflow};

/// How a step ended.
enum StepEnd {
    Value(Value),
    /// Parked on an open suspension: the run settles `suspended`.
    Parked,
    Cancelled,
    Failed,
}

pub(crate) struct Segment<'e, E: Env> {
    engine: &'e Core<E>,
    run: &'e RunId,
    lease: Option<Lease>,
    cancel: CancelToken,
    /// The loaded journal plus everything this segment appended.
    journal: RefCell<Vec<JournalEntry>>,
    appended: Cell<u32>,
    writes: Cell<u32>,
    sealed: Cell<bool>,
    /// Terminals of dispatches cancelled mid-flight, appended by the settle drain.
    stragglers: RefCell<Vec<JournalEntry>>,
}

impl<'e, E: Env> Segment<'e, E> {
    pub(crate) fn new(
        engine: &'e Core<E>,
        run: &'e RunId,
        lease: Option<Lease>,
        cancel: CancelToken,
        journal: Vec<JournalEntry>,
    ) -> Self {
        Self {
            engine,
            run,
            lease,
            cancel,
            journal: RefCell::new(journal),
            appended: Cell::new(0),
            writes: Cell::new(0),
            sealed: Cell::new(false),
            stragglers: RefCell::new(Vec::new()),
        }
    }

    fn has(&self, defect: EngineDefect) -> bool {
        self.engine.has(defect)
    }

    /// The lease a write of this kind carries; the unthreaded defects drop it.
    fn lease_for(&self, unthreaded: EngineDefect) -> Option<&Lease> {
        if self.has(unthreaded) { None } else { self.lease.as_ref() }
    }

    async fn write(&self, write: Write<'_>, lease: Option<&Lease>) -> EngineResult<StoreResult<()>> {
        // E2: a segment writes under the lease it owns (or none, where a defect drops it), never
        // under another's.
        assert!(
            lease.is_none_or(|l| self.lease.as_ref() == Some(l)),
            "run {}: a segment write carries a lease it does not hold",
            self.run
        );
        let epoch = self.lease.as_ref().map(|l| l.epoch);
        self.engine.write(self.run, epoch, &self.writes, write, lease).await
    }

    /// Append at the journal's tail; the seq is consumed only when the append lands.
    async fn append(&self, entry: JournalEntry) -> EngineResult<StoreResult<Seq>> {
        if self.sealed.get() {
            return Ok(Err(StoreError::Config(format!("journal of run {} is sealed after its settle", self.run))));
        }
        // A segment appends at its journal's tail + 1, under the one lease it holds: every seq it
        // mints comes from `next_seq` over the journal it read under that lease.
        assert_eq!(
            entry.seq.0,
            self.journal.borrow().last().map_or(0, |e| e.seq.0) + 1,
            "run {}: an append not at the journal's tail + 1",
            self.run
        );
        let result = self.write(Write::Append(&entry), self.lease.as_ref()).await?;
        Ok(result.map(|()| {
            let seq = entry.seq;
            self.journal.borrow_mut().push(entry);
            self.appended.set(self.appended.get() + 1);
            // The settle's decision reads `appended` as entries of this journal this segment wrote.
            assert!(
                self.appended.get() as usize <= self.journal.borrow().len(),
                "run {}: {} entries appended to a journal of {}",
                self.run,
                self.appended.get(),
                self.journal.borrow().len()
            );
            seq
        }))
    }

    fn next_seq(&self) -> EngineResult<Seq> {
        entries::next_seq(self.run, &self.journal.borrow()).map_err(EngineError::Store)
    }

    /// A failed body write: a lease rejection is lease loss (cancel); anything else fails the run.
    fn body_failure(&self, e: &StoreError) -> StepEnd {
        if e.is_lease_held() {
            self.probe(probe::BODY_LEASE_LOST);
            self.cancel.cancel(format!("ownership lost: {e}"));
            StepEnd::Cancelled
        } else {
            self.probe(probe::BODY_STORE_FAILED);
            StepEnd::Failed
        }
    }

    /// Tell the env which branch this segment took.
    fn probe(&self, probe: Probe) {
        self.engine.env().probe(probe);
    }

    pub(crate) async fn drive(
        &self,
        workflow: &Workflow,
        meta: Option<RunMeta>,
        opts: &RunOptions,
        fresh: bool,
    ) -> EngineResult<Outcome> {
        let (boot, segment) = self.boot_meta(workflow, meta, opts, fresh)?;
        let lease = self.lease_for(EngineDefect::UnthreadedMetaLease);
        // A superseded segment's first refused write fails it before any paid call (E4).
        self.write(Write::PutMeta(&boot), lease).await?.map_err(crate::error::lease_or_store)?;

        let (end_status, value) = self.steps(workflow).await?;
        self.settle(boot, end_status, value, segment).await
    }

    /// The meta a segment boots with, and its segment number: the workflow binding is checked,
    /// the count advanced, the genesis minted where there is none.
    fn boot_meta(
        &self,
        workflow: &Workflow,
        meta: Option<RunMeta>,
        opts: &RunOptions,
        fresh: bool,
    ) -> EngineResult<(RunMeta, u32)> {
        // The workflow binding is checked before anything is written (contracts 3.7).
        let bound = meta.as_ref().and_then(|m| m.extra.get("workflow")).and_then(Value::as_str);
        if let Some(bound) = bound
            && bound != workflow.name
        {
            self.probe(probe::BINDING_REFUSED);
            return Err(EngineError::Binding(format!(
                "run {} is bound to workflow '{bound}', not '{}'",
                self.run, workflow.name
            )));
        }
        // E1: segments before this one; a resume with no usable count had one prior segment.
        let before = if fresh { 0 } else { meta.as_ref().map_or(0, |m| m.segments).max(1) };
        let segment = before.checked_add(1).ok_or_else(|| {
            EngineError::Store(StoreError::Overflow {
                op: fencesim_store::Op::PutMeta,
                run: self.run.clone(),
                what: format!("segment count {before}"),
            })
        })?;
        let mut boot = meta.unwrap_or_else(|| {
            let mut m = RunMeta::new(self.run.clone(), RunStatus::Running);
            m.name = opts.name.clone();
            m
        });
        // A resume of a run that crashed before its first meta write has no genesis yet.
        if fresh || boot.genesis.is_none() {
            boot.genesis = Some(opts.genesis.clone().unwrap_or_else(|| self.mint_genesis()));
        }
        boot.status = RunStatus::Running;
        boot.segments = segment;
        boot.updated_at_ms = Some(self.engine.env().now_ms());
        boot.extra.insert("workflow".into(), json!(workflow.name));
        boot.extra.remove(entries::SUSPENDED_AT);
        // E1: the boot meta is a running run of this segment, one above those before, with its
        // genesis; the settle stamps the same segment number.
        assert!(
            boot.status == RunStatus::Running && boot.segments == segment && segment > before && boot.genesis.is_some(),
            "run {}: boot meta of segment {segment} is not this segment's",
            self.run
        );
        Ok((boot, segment))
    }

    /// Drive the workflow's steps in order until one parks, is cancelled or fails: the run's end
    /// status and its outputs.
    async fn steps(&self, workflow: &Workflow) -> EngineResult<(RunStatus, Value)> {
        let mut outputs = BTreeMap::new();
        let mut end_status = RunStatus::Ok;
        // A journal that records a terminal settle is final (contracts 3.6): its steps replay
        // only while they are finished; a step the settle left unfinished (a dangling dispatch
        // of a run that settled `error`, a dispatch cancelled before the run settled
        // `cancelled`) is never dispatched again, and nothing is appended.
        let settled = entries::last_run_settle(&self.journal.borrow()).is_some_and(|s| s.run_status.is_terminal());
        for step in &workflow.steps {
            if settled && !self.finished(step) {
                self.probe(probe::SETTLED_JOURNAL_FINAL);
                break;
            }
            if self.cancel.is_cancelled() {
                end_status = RunStatus::Cancelled;
                break;
            }
            let end = match step {
                Step::Agent(agent) => self.dispatch(agent).await?,
                Step::Suspend { key, kind, .. } => self.suspend(key, *kind).await?,
            };
            match end {
                StepEnd::Value(value) => match step.output() {
                    Some(name) => {
                        outputs.insert(name.to_owned(), value);
                    }
                    None => {
                        if let Value::Object(fields) = value {
                            outputs.extend(fields);
                        }
                    }
                },
                StepEnd::Parked => {
                    self.probe(probe::STEP_PARKED);
                    end_status = RunStatus::Suspended;
                    break;
                }
                StepEnd::Cancelled => {
                    end_status = RunStatus::Cancelled;
                    break;
                }
                StepEnd::Failed => {
                    end_status = RunStatus::Error;
                    break;
                }
            }
        }
        Ok((end_status, Value::Object(outputs.into_iter().collect())))
    }

    /// A genesis no other generation of this run shares: the lease epoch is never reused for the
    /// run (L4); an unleased run falls back to the engine's own counter.
    fn mint_genesis(&self) -> String {
        let now = self.engine.env().now_ms();
        match &self.lease {
            Some(lease) => format!("{}@{now}#e{}", self.run, lease.epoch),
            None => format!("{}@{now}#{}", self.run, self.engine.next_genesis()),
        }
    }

    /// Whether a step replays from the journal without a dispatch: an agent step by an `ok`
    /// terminal of its latest dispatch or a `limit` one a settle stamped (a `cancelled` or
    /// `error` terminal ended the dispatch but gave the step no value), a suspension step by a
    /// resolution (replaying it appends nothing).
    fn finished(&self, step: &Step) -> bool {
        match step {
            Step::Agent(agent) => matches!(self.prior(&agent.key), Some((_, Some(t))) if self.replays(&t)),
            Step::Suspend { key, .. } => {
                let journal = self.journal.borrow();
                let open = entries::open_suspensions(&journal);
                journal.iter().any(|e| entries::key_of(e) == Some(key.as_str()) && !open.contains(&e.seq))
            }
        }
    }

    /// Whether a dispatch's terminal gives its step a value to replay: an `ok` terminal is final;
    /// a `limit` terminal only once a settle stamped it (contracts 5.13: an unstamped limit in a
    /// never-settled run is rerun live).
    fn replays(&self, terminal: &JournalEntry) -> bool {
        terminal.status == status::OK
            || (terminal.status == status::LIMIT && !entries::is_unstamped(&self.journal.borrow(), terminal))
    }

    /// The latest running entry of `key` and its terminal, if any.
    fn prior(&self, key: &str) -> Option<(Seq, Option<JournalEntry>)> {
        let journal = self.journal.borrow();
        let of_key =
            |e: &&JournalEntry| e.kind == kind::AGENT && e.status == status::RUNNING && entries::key_of(e) == Some(key);
        let running = if self.has(EngineDefect::PriorFindsFirstDispatch) {
            journal.iter().find(of_key)
        } else {
            journal.iter().rev().find(of_key)
        }?;
        let terminal = journal.iter().find(|t| t.ref_seq == Some(running.seq)).cloned();
        Some((running.seq, terminal))
    }

    /// Where a dispatch of `agent` starts: its running seq and checkpoint state, or the step's
    /// end when it replays or the store fails first.
    async fn start(&self, agent: &Agent) -> EngineResult<Result<(Seq, Checkpoint), StepEnd>> {
        Ok(Ok(match self.prior(&agent.key) {
            // Replay: a finished dispatch is never paid again.
            Some((_, Some(t))) if self.replays(&t) => {
                self.probe(probe::STEP_REPLAYED);
                return Ok(Err(StepEnd::Value(entries::value_of(&t))));
            }
            // Dangling: redispatch against the same running seq, from its checkpoint if it decodes.
            Some((seq, None)) if !self.has(EngineDefect::RedispatchNewEntry) => {
                let ckpt_ref = entries::checkpoint_ref(self.run, seq);
                let blob = self.engine.retry_busy(|| self.engine.store().get_blob(&ckpt_ref)).await;
                self.probe(probe::DISPATCH_RESUMED);
                let state = match blob {
                    Ok(Some(_)) if self.has(EngineDefect::CheckpointIgnored) => None,
                    Ok(Some(bytes)) => {
                        let state = Checkpoint::decode(&bytes, agent.max_turns, agent.max_tool_calls);
                        self.probe(if state.is_some() {
                            probe::CHECKPOINT_RESUMED
                        } else {
                            probe::CHECKPOINT_UNDECODABLE
                        });
                        state
                    }
                    Ok(None) => None,
                    Err(e) => {
                        self.probe(probe::CHECKPOINT_READ_FAILED);
                        return Ok(Err(self.body_failure(&e)));
                    }
                };
                (seq, state.unwrap_or_default())
            }
            // Never dispatched, or its terminal was not final: a fresh dispatch.
            _ => match self.fresh_dispatch(agent).await? {
                Ok(seq) => (seq, Checkpoint::default()),
                Err(e) => return Ok(Err(self.body_failure(&e))),
            },
        }))
    }

    /// A fresh dispatch's running entry.
    async fn fresh_dispatch(&self, agent: &Agent) -> EngineResult<StoreResult<Seq>> {
        self.probe(probe::DISPATCH_FRESH);
        let running = entries::running(self.next_seq()?, kind::AGENT, &agent.key);
        // The writer and `prior`'s reader agree: a resume finds this dispatch by its key.
        assert!(
            running.kind == kind::AGENT
                && running.status == status::RUNNING
                && entries::key_of(&running) == Some(agent.key.as_str()),
            "run {}: the running entry of '{}' would not be found again by its key",
            self.run,
            agent.key
        );
        self.append(running).await
    }

    async fn dispatch(&self, agent: &Agent) -> EngineResult<StepEnd> {
        let (running, mut state) = match self.start(agent).await? {
            Ok(started) => started,
            Err(end) => return Ok(end),
        };
        let ckpt_ref = entries::checkpoint_ref(self.run, running);
        let limit =
            |state| self.finish(agent, running, status::LIMIT, json!({"agentStatus": "limit"}), state, &ckpt_ref);
        loop {
            // A dispatch's phases go in order, call then tool: what the state says was paid
            // (decoded from a checkpoint under these caps, or counted here) stays within them.
            assert!(
                state.tool_calls_used <= state.turns
                    && state.turns <= agent.max_turns
                    && state.tool_calls_used <= agent.max_tool_calls,
                "run {} dispatch {running}: state {state:?} outside the caps of '{}'",
                self.run,
                agent.key
            );
            if self.cancel.is_cancelled() {
                return Ok(self.abandon(agent, running));
            }
            // A checkpoint of an ended dispatch (its final state, saved after a terminal this
            // tenure never saw): the model already answered, or already asked past the tool cap.
            // It ends as it did, paying nothing: no turn past the script's last is ever paid.
            if state.turns > agent.tool_turns {
                return self.finish(agent, running, status::OK, agent.answer.clone(), state, &ckpt_ref).await;
            }
            if state.turns > state.tool_calls_used && state.tool_calls_used >= agent.max_tool_calls {
                return limit(state).await;
            }
            if state.turns >= agent.max_turns {
                return limit(state).await;
            }
            let turn = state.turns + 1;
            if let Fault::Crash = self.fault(Site::Call { running, turn }).await {
                return Err(EngineError::Crashed);
            }
            // A stall at the fault point can outlive the lease: a lost lease pays nothing (E2).
            if self.cancel.is_cancelled() && !self.has(EngineDefect::CallPaidAfterLostLease) {
                return Ok(self.abandon(agent, running));
            }
            self.paid(Site::Call { running, turn });
            self.engine.ledger().pay_call(self.run, running);
            self.engine.env().sleep(u64::from(self.engine.options().call_ms)).await;
            if self.cancel.is_cancelled() {
                return Ok(self.abandon(agent, running));
            }
            state.turns = turn;
            if turn > agent.tool_turns {
                return self.finish(agent, running, status::OK, agent.answer.clone(), state, &ckpt_ref).await;
            }
            if state.tool_calls_used >= agent.max_tool_calls {
                return limit(state).await;
            }
            let n = state.tool_calls_used + 1;
            if let Fault::Crash = self.fault(Site::Tool { running, n }).await {
                return Err(EngineError::Crashed);
            }
            if self.cancel.is_cancelled() {
                return Ok(self.abandon(agent, running));
            }
            self.paid(Site::Tool { running, n });
            self.engine.ledger().pay_tool(self.run, running);
            self.engine.env().sleep(u64::from(self.engine.options().tool_ms)).await;
            state.tool_calls_used = n;
            if let Err(e) = self.save_checkpoint(&ckpt_ref, state).await? {
                return Ok(self.body_failure(&e));
            }
        }
    }

    async fn fault(&self, site: Site<'_>) -> Fault {
        let epoch = self.lease.as_ref().map(|l| l.epoch);
        self.engine.env().fault(&Point { run: self.run, epoch, site }).await
    }

    /// Tell the env a paid effect goes ahead (its recorder counts it here).
    fn paid(&self, site: Site<'_>) {
        let epoch = self.lease.as_ref().map(|l| l.epoch);
        self.engine.env().paid(&Point { run: self.run, epoch, site });
    }

    async fn save_checkpoint(&self, ckpt_ref: &str, state: Checkpoint) -> EngineResult<StoreResult<()>> {
        let bytes = state.encode();
        // A redispatch resumes from what it saves: the blob decodes to this state under any caps
        // it stays within.
        assert_eq!(
            Checkpoint::decode(&bytes, state.turns, state.tool_calls_used),
            Some(state),
            "run {}: checkpoint {ckpt_ref} does not decode to the state it saves",
            self.run
        );
        let lease = self.lease_for(EngineDefect::UnthreadedCheckpointLease);
        self.write(Write::PutBlob { blob_ref: ckpt_ref, bytes: &bytes }, lease).await
    }

    /// A cancelled live dispatch: its `cancelled` terminal is left to the settle drain.
    fn abandon(&self, agent: &Agent, running: Seq) -> StepEnd {
        self.probe(probe::DISPATCH_CANCELLED);
        let value = json!({ "reason": self.cancel.reason() });
        // The seq is minted at drain time; record the shape now.
        let entry = entries::terminal(Seq(0), running, kind::AGENT, status::CANCELLED, &agent.key, value);
        self.stragglers.borrow_mut().push(entry);
        StepEnd::Cancelled
    }

    /// The terminal entry (naming its checkpoint), then the checkpoint of the final state.
    async fn finish(
        &self,
        agent: &Agent,
        running: Seq,
        terminal_status: &str,
        value: Value,
        state: Checkpoint,
        ckpt_ref: &str,
    ) -> EngineResult<StepEnd> {
        self.probe(if terminal_status == status::LIMIT { probe::DISPATCH_LIMIT } else { probe::DISPATCH_OK });
        let terminal =
            entries::terminal(self.next_seq()?, running, kind::AGENT, terminal_status, &agent.key, value.clone())
                .with("checkpointRef", json!(ckpt_ref));
        // The writer and `prior`'s reader agree: this terminal closes the running entry it names.
        assert!(
            terminal.ref_seq == Some(running) && entries::key_of(&terminal) == Some(agent.key.as_str()),
            "run {}: the terminal of '{}' would not close its running entry {running}",
            self.run,
            agent.key
        );
        if let Err(e) = self.append(terminal).await? {
            return Ok(self.body_failure(&e));
        }
        if let Err(e) = self.save_checkpoint(ckpt_ref, state).await? {
            return Ok(self.body_failure(&e));
        }
        Ok(StepEnd::Value(value))
    }

    async fn suspend(&self, key: &str, suspend_kind: SuspendKind) -> EngineResult<StepEnd> {
        let kind_name = match suspend_kind {
            SuspendKind::External => kind::EXTERNAL,
            SuspendKind::Approval => kind::APPROVAL,
        };
        let existing = {
            let journal = self.journal.borrow();
            journal
                .iter()
                .find(|e| e.status == status::SUSPENDED && e.kind == kind_name && entries::key_of(e) == Some(key))
                .map(|s| {
                    // The first resolution in journal order wins; later ones are no-ops.
                    let resolution = journal.iter().find(|r| entries::resolution_target(r) == Some(s.seq));
                    resolution.map(entries::value_of)
                })
        };
        match existing {
            Some(Some(value)) => Ok(StepEnd::Value(value)),
            Some(None) => Ok(StepEnd::Parked),
            None => {
                let suspension = entries::suspension(self.next_seq()?, kind_name, key);
                // The writer and the lookup above agree: a resume finds this suspension again.
                assert!(
                    suspension.status == status::SUSPENDED
                        && suspension.kind == kind_name
                        && entries::key_of(&suspension) == Some(key),
                    "run {}: the suspension '{key}' would not be found again",
                    self.run
                );
                match self.append(suspension).await? {
                    Ok(_) => Ok(StepEnd::Parked),
                    Err(e) => Ok(self.body_failure(&e)),
                }
            }
        }
    }

    /// Append the drained terminals of cancelled dispatches; failures are expected (a lost lease)
    /// and change nothing.
    async fn drain(&self) -> EngineResult<()> {
        // The drain comes before the seal (late only under `stragglers-after-settle`, which never
        // seals): a sealed journal would refuse every straggler.
        assert!(!self.sealed.get(), "run {}: cancelled dispatches drained into a sealed journal", self.run);
        let pending = std::mem::take(&mut *self.stragglers.borrow_mut());
        for mut entry in pending {
            // Only `abandon` queues stragglers: each the cancelled terminal of its running entry.
            assert!(
                entry.status == status::CANCELLED && entry.ref_seq.is_some(),
                "run {}: a straggler that is not a cancelled terminal",
                self.run
            );
            entry.seq = self.next_seq()?;
            let _ = self.append(entry).await?;
        }
        Ok(())
    }

    /// Settle (contracts 3.6): drain, `run_settle` when needed, seal, terminal meta.
    async fn settle(&self, mut meta: RunMeta, status: RunStatus, value: Value, segment: u32) -> EngineResult<Outcome> {
        // One settle per segment: only it seals the journal.
        assert!(!self.sealed.get(), "run {}: segment {segment} settles a second time", self.run);
        let late_stragglers = self.has(EngineDefect::StragglersAfterSettle);
        if !late_stragglers {
            self.drain().await?;
        }
        // A journal that already records a terminal settle is final (contracts 3.6): this
        // segment only replayed it, so it adopts that outcome and appends nothing, whatever it
        // would have concluded itself (a cancellation or lease loss noticed on the way).
        let settled =
            entries::last_run_settle(&self.journal.borrow()).map(|s| s.run_status).filter(|s| s.is_terminal());
        let status = settled.unwrap_or(status);
        meta.status = status;
        meta.updated_at_ms = Some(self.engine.env().now_ms());
        if status == RunStatus::Suspended && self.has(EngineDefect::SuspendedAtCountsSettle) {
            meta.extra.insert(entries::SUSPENDED_AT.into(), json!(self.journal.borrow().len() + 1));
        }
        let meta_first = self.has(EngineDefect::MetaBeforeSettle);
        if meta_first {
            self.put_terminal_meta(&mut meta, status, true).await?;
        }
        let (needed, mut recorded) = self.settle_needed(status);
        // Drain before settle: no cancelled dispatch's terminal may land after the `run_settle`
        // (only the planted `stragglers-after-settle` drains late).
        assert!(
            late_stragglers || self.stragglers.borrow().is_empty(),
            "run {}: cancelled dispatches left undrained at the settle",
            self.run
        );
        if needed {
            self.append_settle(status, segment).await?;
            recorded = true;
        }
        if !late_stragglers {
            self.sealed.set(true);
        }
        // The defect forgets the projection of a clean settle: only a repair would put it right.
        let forgotten = self.has(EngineDefect::TerminalMetaSkipped) && self.appended.get() > 0 && recorded;
        if !meta_first && !forgotten {
            self.put_terminal_meta(&mut meta, status, recorded).await?;
        }
        if late_stragglers {
            self.drain().await?;
        }
        Ok(Outcome { run: self.run.clone(), status, value, segment, appended: self.appended.get() })
    }

    /// Whether this segment must append a `run_settle` of `status` (it appended entries, or the
    /// journal's last settle says otherwise or is missing), and whether the journal already
    /// records that status settled.
    fn settle_needed(&self, status: RunStatus) -> (bool, bool) {
        let journal = self.journal.borrow();
        let last = entries::last_run_settle(&journal);
        let needed = self.appended.get() > 0
            || (self.has(EngineDefect::ResettleOnReplay) && !journal.is_empty())
            || last.is_some_and(|s| s.run_status != status)
            || (last.is_none() && !journal.is_empty() && !self.has(EngineDefect::SettleSkippedOnReplay));
        (needed, last.is_some_and(|s| s.run_status == status))
    }

    /// Append the `run_settle` of `status`: a lost lease ends the segment superseded, another
    /// failure unsettled (the two settle defects swallow either and go on as if it were recorded).
    async fn append_settle(&self, status: RunStatus, segment: u32) -> EngineResult<()> {
        let settle = entries::run_settle(self.next_seq()?, status, segment);
        match self.append(settle).await? {
            Ok(_) => {
                // The settle just appended is the one every reader folds: the journal's
                // last, parsed back to this status, before any terminal meta (E6).
                let journal = self.journal.borrow();
                assert!(
                    journal.last().and_then(entries::as_settle).is_some_and(|s| s.run_status == status),
                    "run {}: the run_settle appended does not read back as the journal's last settle '{status}'",
                    self.run
                );
            }
            Err(cause) if cause.is_lease_held() && !self.has(EngineDefect::SupersededGreen) => {
                return Err(EngineError::Superseded { run: self.run.clone(), status, cause });
            }
            Err(cause) if !cause.is_lease_held() && !self.has(EngineDefect::SettleMetaOnFailedAppend) => {
                return Err(EngineError::Settlement {
                    run: self.run.clone(),
                    status,
                    stage: SettleStage::RunSettle,
                    cause,
                });
            }
            // The two settle defects swallow the failure and go on as if it were recorded.
            Err(_) => {}
        }
        Ok(())
    }

    /// The terminal meta projection. A lease rejection is swallowed when the journal records the
    /// outcome (`recorded`): the projection belongs to the current holder. A segment that lost
    /// its lease before anything recorded its outcome (a fresh run superseded before its first
    /// append) was superseded: its outcome is not durable and must not be reported as settled.
    /// A `suspended` projection records the journal's length as it is now ([`entries::SUSPENDED_AT`]).
    async fn put_terminal_meta(&self, meta: &mut RunMeta, status: RunStatus, recorded: bool) -> EngineResult<()> {
        if status == RunStatus::Suspended && !self.has(EngineDefect::SuspendedAtCountsSettle) {
            meta.extra.insert(entries::SUSPENDED_AT.into(), json!(self.journal.borrow().len()));
        }
        let lease = self.lease_for(EngineDefect::UnthreadedMetaLease);
        match self.write(Write::PutMeta(meta), lease).await? {
            Ok(()) => Ok(()),
            Err(e) if e.is_lease_held() && recorded => Ok(()),
            Err(cause) if cause.is_lease_held() => {
                Err(EngineError::Superseded { run: self.run.clone(), status, cause })
            }
            Err(cause) => {
                Err(EngineError::Settlement { run: self.run.clone(), status, stage: SettleStage::Meta, cause })
            }
        }
    }
}
