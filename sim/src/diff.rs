//! The differential (`fencesim diff`): one seed's world run against two stores and compared call
//! by call. A world run with [`world::run_recording`](crate::world::run_recording) keeps, beside
//! its history, every store call as the store protocol carries it and the store's full answer (an
//! [`Exchange`]); [`compare`] walks two such worlds row by row and names the first place they part.
//!
//! A world is a function of its seed and of the answers its store gives: two stores that answer
//! every call alike give the same rows, so the first row that differs is where the stores first
//! answered differently (or, when the calls differ before any answer did, where the worlds' fault
//! points differ). After it the worlds go their own ways, so nothing later is compared.

use fencesim_store::RunId;
use serde_json::Value;

pub use crate::history::{Answer, Answers, Exchange, Recording, answer, request};
use crate::history::{Event, Row};

/// One world of a comparison: its rows and what it recorded.
#[derive(Clone, Copy, Debug)]
pub struct Side<'a> {
    pub rows: &'a [Row],
    pub recording: &'a Recording,
}

impl Side<'_> {
    /// How many store calls the world made.
    pub fn calls(&self) -> usize {
        self.rows.iter().filter(|r| r.call().is_some()).count()
    }

    fn exchange(&self, row: usize) -> Option<&Exchange> {
        let exchanges = &self.recording.exchanges;
        exchanges.binary_search_by_key(&row, |e| e.row).ok().map(|i| &exchanges[i])
    }
}

/// Where two worlds of one seed first part.
#[derive(Clone, Debug, PartialEq)]
pub enum Comparison {
    /// Every row, every call and its answer, and the final store state alike.
    Identical { calls: usize, rows: usize },
    /// Boxed: a divergence carries two rows and their exchanges.
    Diverged(Box<Divergence>),
}

/// The first difference of two worlds: only it is meaningful, since everything after it follows
/// from it.
#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    pub kind: Kind,
    /// The row both worlds reached (a row index in both: rows before it are alike).
    pub row: usize,
    /// The store calls both worlds made alike before it.
    pub calls_alike: usize,
    /// Each world's row there (`None` for a world that ended first), and its exchange when the
    /// row is a store call.
    pub a: Option<(Row, Option<Exchange>)>,
    pub b: Option<(Row, Option<Exchange>)>,
    /// For [`Kind::FinalState`]: the first run whose final state differs.
    pub run: Option<RunId>,
}

/// What differs first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The same node made the same call, and the stores answered it differently.
    Answers,
    /// The worlds made different store calls with every answer alike before: not the stores'
    /// answers but where the world's faults landed (a store's fault points, a cut).
    Calls,
    /// A row that is not a store call differs first (a fault, a payment, an outcome).
    Rows,
    /// One world stopped where the other went on.
    Ended,
    /// Every row alike, but the stores' final states differ (a write both accepted alike and
    /// kept differently).
    FinalState,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Answers => "answers differ",
            Kind::Calls => "calls differ",
            Kind::Rows => "rows differ",
            Kind::Ended => "one world ended first",
            Kind::FinalState => "final states differ",
        }
    }
}

/// Compare two worlds of one seed, row by row. The first row (the note naming the world's store)
/// is skipped; a row is alike when its time, node and event are, and a call's when its request
/// and answer are too.
pub fn compare(a: Side<'_>, b: Side<'_>) -> Comparison {
    let mut calls_alike = 0;
    let longest = a.rows.len().max(b.rows.len());
    for index in 0..longest {
        let (row_a, row_b) = (a.rows.get(index), b.rows.get(index));
        // Both worlds' rows are their histories, numbered by position: `index` names a row in both.
        assert!(
            row_a.is_none_or(|r| r.index == index) && row_b.is_none_or(|r| r.index == index),
            "row {index} of a compared world is numbered otherwise"
        );
        let (Some(ra), Some(rb)) = (row_a, row_b) else {
            let with = |side: Side<'_>, row: Option<&Row>| row.map(|r| (r.clone(), side.exchange(r.index).cloned()));
            return Comparison::Diverged(Box::new(Divergence {
                kind: Kind::Ended,
                row: index,
                calls_alike,
                a: with(a, row_a),
                b: with(b, row_b),
                run: None,
            }));
        };
        if index == 0 && matches!((&ra.event, &rb.event), (Event::Note(_), Event::Note(_))) {
            continue;
        }
        let (ea, eb) = (a.exchange(ra.index), b.exchange(rb.index));
        let rows_alike = ra.at_ms == rb.at_ms && ra.node == rb.node && ra.event == rb.event;
        if rows_alike && ea == eb {
            calls_alike += usize::from(ra.call().is_some());
            continue;
        }
        let kind = match (ea, eb) {
            (Some(x), Some(y)) if x.node == y.node && x.request == y.request && x.answer != y.answer => Kind::Answers,
            _ if ra.call().is_some() && rb.call().is_some() => Kind::Calls,
            _ => Kind::Rows,
        };
        return Comparison::Diverged(Box::new(Divergence {
            kind,
            row: index,
            calls_alike,
            a: Some((ra.clone(), ea.cloned())),
            b: Some((rb.clone(), eb.cloned())),
            run: None,
        }));
    }
    let (sa, sb) = (&a.recording.snapshot, &b.recording.snapshot);
    if sa != sb {
        let runs = sa.runs.keys().chain(sb.runs.keys());
        let run = runs.filter(|r| sa.runs.get(*r) != sb.runs.get(*r)).min().cloned();
        return Comparison::Diverged(Box::new(Divergence {
            kind: Kind::FinalState,
            row: longest,
            calls_alike,
            a: None,
            b: None,
            run,
        }));
    }
    Comparison::Identical { calls: calls_alike, rows: longest }
}

/// How an answer reads in one word or two: `ok`, or `error <code>` (`lease_held` with its
/// rejection's kind).
pub fn answer_class(answer: &Value) -> String {
    if answer.get("ok").is_some() {
        return "ok".to_owned();
    }
    let error = answer.get("error");
    let code = error.and_then(|e| e.get("code")).and_then(Value::as_str).unwrap_or("?");
    match error.and_then(|e| e.pointer("/rejection/kind")).and_then(Value::as_str) {
        Some(kind) => format!("error {code} ({kind})"),
        None => format!("error {code}"),
    }
}

#[cfg(test)]
mod tests {
    use fencesim_store::{Epoch, JournalEntry, Lease, LeaseRejection, Op, StoreError};
    use serde_json::json;

    use super::*;
    use crate::history::{Call, CallOutcome, Payload, Role, Surface};

    fn call_row(index: usize, surface: Surface, outcome: CallOutcome) -> Row {
        let call = Call {
            clock_ms: 5,
            lease: None,
            owner: Some("w1".into()),
            counter: 0,
            surface,
            run: RunId::new("r1"),
            blob_ref: None,
            payload: Payload::None,
            outcome,
            read: None,
        };
        Row { index, at_ms: 5, node: "w1.1".into(), role: Role::Worker, event: Event::Call(call) }
    }

    fn note(index: usize, text: &str) -> Row {
        Row { index, at_ms: 0, node: "world".into(), role: Role::Harness, event: Event::Note(text.into()) }
    }

    fn exchange(row: &Row, answer: Value) -> Exchange {
        Exchange { row: row.index, node: row.node.clone(), request: request(row.call().unwrap(), None), answer }
    }

    #[test]
    fn the_store_note_is_skipped_and_alike_worlds_are_identical() {
        let rows_a = vec![note(0, "db memdb"), call_row(1, Surface::Load, CallOutcome::Ok)];
        let rows_b = vec![note(0, "db file"), call_row(1, Surface::Load, CallOutcome::Ok)];
        let ok = json!({"ok": []});
        let rec_a = Recording { exchanges: vec![exchange(&rows_a[1], ok.clone())], ..Recording::default() };
        let rec_b = Recording { exchanges: vec![exchange(&rows_b[1], ok)], ..Recording::default() };
        let compared = compare(Side { rows: &rows_a, recording: &rec_a }, Side { rows: &rows_b, recording: &rec_b });
        assert_eq!(compared, Comparison::Identical { calls: 1, rows: 2 });
    }

    #[test]
    fn the_first_differing_answer_is_named_with_both_answers() {
        let rows_a = vec![note(0, "a"), call_row(1, Surface::Acquire, CallOutcome::Busy)];
        let rows_b = vec![note(0, "b"), call_row(1, Surface::Acquire, CallOutcome::Ok)];
        let busy = answer::<Lease>(&Err(StoreError::Busy { op: Op::Acquire, run: Some(RunId::new("r1")) }));
        let lease = Lease { run: RunId::new("r1"), owner: "w1".into(), epoch: Epoch(1) };
        let granted = answer(&Ok(lease));
        let rec_a = Recording { exchanges: vec![exchange(&rows_a[1], busy.clone())], ..Recording::default() };
        let rec_b = Recording { exchanges: vec![exchange(&rows_b[1], granted.clone())], ..Recording::default() };
        let Comparison::Diverged(d) =
            compare(Side { rows: &rows_a, recording: &rec_a }, Side { rows: &rows_b, recording: &rec_b })
        else {
            panic!("the answers differ")
        };
        assert_eq!((d.kind, d.row, d.calls_alike), (Kind::Answers, 1, 0));
        let answers = (d.a.unwrap().1.unwrap().answer, d.b.unwrap().1.unwrap().answer);
        assert_eq!(answers, (busy.clone(), granted.clone()));
        assert_eq!(answer_class(&busy), "error busy");
        assert_eq!(answer_class(&granted), "ok");
        assert_eq!(granted, json!({"ok": {"run": "r1", "owner": "w1", "epoch": 1}}));
    }

    #[test]
    fn a_world_that_ends_first_and_a_different_final_state_are_divergences() {
        let rows = vec![note(0, "a"), call_row(1, Surface::Load, CallOutcome::Ok)];
        let rec = Recording { exchanges: vec![exchange(&rows[1], json!({"ok": []}))], ..Recording::default() };
        let Comparison::Diverged(d) =
            compare(Side { rows: &rows, recording: &rec }, Side { rows: &rows[..1], recording: &Recording::default() })
        else {
            panic!("B ended first")
        };
        assert_eq!((d.kind, d.row, d.a.is_some(), d.b.is_none()), (Kind::Ended, 1, true, true));
        let mut other = rec.clone();
        other.snapshot.runs.insert(RunId::new("r2"), crate::history::RunState::default());
        let Comparison::Diverged(d) =
            compare(Side { rows: &rows, recording: &rec }, Side { rows: &rows, recording: &other })
        else {
            panic!("the final states differ")
        };
        assert_eq!((d.kind, d.run), (Kind::FinalState, Some(RunId::new("r2"))));
    }

    #[test]
    fn requests_carry_the_protocols_arguments() {
        let mut row = call_row(0, Surface::Append, CallOutcome::Ok);
        let Event::Call(call) = &mut row.event else { unreachable!() };
        call.payload = Payload::Entry(JournalEntry::new(2, "agent", "running"));
        call.lease = Some(Lease { run: RunId::new("r1"), owner: "w1".into(), epoch: Epoch(3) });
        assert_eq!(
            request(call, None),
            json!({"op": "append", "run": "r1", "entry": {"seq": 2, "kind": "agent", "status": "running"},
                   "lease": {"run": "r1", "owner": "w1", "epoch": 3}, "now_ms": 5})
        );
        let held = StoreError::lease_held(
            Op::Append,
            Lease { run: RunId::new("r1"), owner: "w1".into(), epoch: Epoch(3) },
            LeaseRejection::Stale { live: None },
        );
        assert_eq!(answer_class(&answer::<()>(&Err(held))), "error lease_held (stale)");
    }
}
