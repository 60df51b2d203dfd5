//! What the checkers share: the lease table replayed once along the history by the SQLite store's
//! rule (contracts 1.1, 2.2) and what each call met in it, the journal vocabulary restated from
//! contracts 1.3 and 4.1 (settles, suspensions, resolutions), the effective epoch of every call,
//! the index from stored payloads back to the rows that wrote them, and the one-line labels
//! violations quote.
//!
//! The replay reads an indeterminate call (its process died before the outcome) the way that can
//! only loosen the table: a renew as not committed; an acquire, or a release or delete that a
//! correct store could have committed, leaves the row in doubt, and a release or delete it must
//! have refused changes nothing. One limit: a cut acquire leaves in doubt only the row live at its
//! own row, while a soak records a cut call at its begin, so one that began before another's grant
//! and landed after it (possible only with clock skew over half the ttl) is not seen.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, JournalEntry, RunId, RunMeta, RunStatus, Seq};
use serde_json::Value;

use crate::history::{Call, CallOutcome, Event, Payload, Request, Row, Snapshot, Surface, digest, digest_json};

/// A run as the checkers key their maps by it: its number in the history, which compares as a
/// word where the name compares as a string, and its name. Runs are numbered in name order, so a
/// map keyed by `Run` iterates as one keyed by the name would (violations keep their order).
#[derive(Clone, Copy, Debug)]
pub(super) struct Run<'a> {
    number: u32,
    id: &'a RunId,
}

impl PartialEq for Run<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.number == other.number
    }
}

impl Eq for Run<'_> {}

impl PartialOrd for Run<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Run<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.number.cmp(&other.number)
    }
}

impl std::ops::Deref for Run<'_> {
    type Target = RunId;

    fn deref(&self) -> &RunId {
        self.id
    }
}

impl std::fmt::Display for Run<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.id.fmt(f)
    }
}

/// The run a row is about: a call's target run, an effect's, a fault's, an outcome's, a repair's.
fn run_of(row: &Row) -> Option<&RunId> {
    match &row.event {
        Event::Call(call) => Some(&call.run),
        Event::Effect(effect) => Some(&effect.run),
        Event::Fault { run, .. } => run.as_ref(),
        Event::Outcome { run, .. } | Event::Repair { run, .. } | Event::Request(Request::Cancel { run }) => Some(run),
        Event::Request(Request::Stop) | Event::Note(_) => None,
    }
}

/// Every run the rows name, numbered in name order, and the run of each row (by position).
#[derive(Debug, Default)]
pub(super) struct Runs<'a> {
    numbers: BTreeMap<&'a RunId, u32>,
    of_row: Vec<Option<Run<'a>>>,
}

impl<'a> Runs<'a> {
    pub fn new(rows: &'a [Row]) -> Self {
        // Numbered as first seen in one pass, then renumbered in name order.
        let mut numbers: BTreeMap<&'a RunId, u32> = BTreeMap::new();
        let seen: Vec<Option<(u32, &'a RunId)>> = rows
            .iter()
            .map(|row| {
                let id = run_of(row)?;
                let next = u32::try_from(numbers.len()).expect("fewer than 2^32 runs");
                Some((*numbers.entry(id).or_insert(next), id))
            })
            .collect();
        let mut rank = vec![0; numbers.len()];
        for (by_name, first_seen) in numbers.values_mut().enumerate() {
            rank[*first_seen as usize] = u32::try_from(by_name).expect("fewer than 2^32 runs");
            *first_seen = rank[*first_seen as usize];
        }
        // Runs are numbered in name order: maps keyed by number iterate (and report) as names do.
        assert!(numbers.values().enumerate().all(|(i, &n)| n as usize == i), "runs numbered out of name order");
        let of_row: Vec<_> = seen.into_iter().map(|s| s.map(|(n, id)| Run { number: rank[n as usize], id })).collect();
        assert_eq!(of_row.len(), rows.len(), "a run slot per row");
        Self { numbers, of_row }
    }

    /// The run of the row at position `pos` (see [`run_of`]).
    pub fn at(&self, pos: usize) -> Option<Run<'a>> {
        self.of_row.get(pos).copied().flatten()
    }

    /// The run named `id`, if any row names it.
    pub fn named(&self, id: &RunId) -> Option<Run<'a>> {
        self.numbers.get_key_value(id).map(|(&id, &number)| Run { number, id })
    }
}

/// One lease row of the model: who holds the run, under which epoch, until when.
#[derive(Clone, Debug)]
pub(super) struct Tenancy<'a> {
    pub owner: &'a str,
    pub epoch: Epoch,
    /// The row is live for a call made at clock `c` iff `c < expires_at`.
    pub expires_at: i64,
    /// The row (`Row::index`) of the acquire that granted it.
    pub granted: usize,
    /// An indeterminate release or delete that a correct store could have committed may have
    /// removed the row, an indeterminate acquire may have replaced it: it is gone for an
    /// acquire's check and there for a fenced call's, so neither is judged against a fate the
    /// dead call may not have had.
    pub in_doubt: bool,
}

impl Tenancy<'_> {
    pub fn label(&self) -> String {
        format!("{}@e{}", self.owner, self.epoch)
    }

    fn is(&self, owner: &str, epoch: Epoch) -> bool {
        self.owner == owner && self.epoch == epoch
    }
}

/// How a call's lease stood against the model's lease table at that call.
#[derive(Clone, Debug)]
pub(super) enum Fence<'a> {
    /// The lease is the live holder of the call's target run.
    Holder,
    /// The lease is the run's live row, which an indeterminate acquire, release or delete before
    /// the call may have taken ([`Tenancy::in_doubt`]): the call may be accepted, or refused as
    /// stale.
    HolderInDoubt,
    /// The call carried no lease.
    Unleased,
    /// The lease fences another run.
    OtherRun(&'a RunId),
    /// The lease is the run's lease row, but the row had expired at the call's clock.
    Expired { clock: i64, expires_at: i64 },
    /// Another lease was the live holder.
    Superseded(Tenancy<'a>),
    /// No live lease at all; the expired row that remained, if any.
    NoLiveLease(Option<Tenancy<'a>>),
}

/// Whether a call through `surface` is fenced by the lease it carries: every mutation, renew and
/// release. Reads and acquire are not.
pub(super) fn is_fenced(surface: Surface) -> bool {
    surface.is_mutation() || matches!(surface, Surface::Renew | Surface::Release)
}

/// The lease table, replayed call by call in row order.
#[derive(Debug)]
struct Leases<'a> {
    ttl_ms: i64,
    rows: BTreeMap<Run<'a>, Tenancy<'a>>,
}

impl<'a> Leases<'a> {
    fn new(ttl_ms: i64) -> Self {
        Self { ttl_ms, rows: BTreeMap::new() }
    }

    /// The run's lease row if it is live at `clock` (and not in doubt: an acquire may have met
    /// it gone).
    fn live(&self, run: Run<'a>, clock: i64) -> Option<&Tenancy<'a>> {
        self.rows.get(&run).filter(|t| !t.in_doubt && clock < t.expires_at)
    }

    /// Whether `call`'s lease was the live holder of its target run at the call. `run` is the
    /// call's target run.
    fn fence(&self, run: Run<'a>, call: &'a Call) -> Fence<'a> {
        let Some(lease) = &call.lease else { return Fence::Unleased };
        if lease.run != call.run {
            return Fence::OtherRun(&lease.run);
        }
        let row = self.rows.get(&run);
        match row {
            Some(t) if call.clock_ms < t.expires_at && t.is(&lease.owner, lease.epoch) && t.in_doubt => {
                Fence::HolderInDoubt
            }
            Some(t) if call.clock_ms < t.expires_at && t.is(&lease.owner, lease.epoch) => Fence::Holder,
            Some(t) if call.clock_ms < t.expires_at => Fence::Superseded(t.clone()),
            Some(t) if t.is(&lease.owner, lease.epoch) => {
                Fence::Expired { clock: call.clock_ms, expires_at: t.expires_at }
            }
            other => Fence::NoLiveLease(other.cloned()),
        }
    }

    /// Apply an accepted call's effect on the lease table; anything else leaves it unchanged.
    /// Renew and release touch only a row they name by owner and epoch (S3); an accepted delete
    /// removes the row (the epoch high-water mark it keeps is [`effective_epochs`]' business).
    ///
    /// An indeterminate call (its process died before the outcome) is taken the way that can only
    /// loosen the table: a renew as not committed, so a later grant is never judged against a
    /// lease the dead call may have failed to extend; an acquire, or a release or delete that a
    /// correct store could have committed (`fence`, what the call met: its lease the live holder,
    /// or a delete with none), leaves the row in doubt ([`Tenancy::in_doubt`]), and a release or
    /// delete it must have refused changes nothing. Taking such a call as committed outright
    /// loosened the table for a grant but tightened it for the live holder: a stale delete probe
    /// cut by a SIGKILL removed the holder's row, and the holder's next accepted writes were
    /// judged unleased (issue 38). Taking a cut acquire as not committed tightened it the other
    /// way: a grant that landed (the store judges expiry by the caller's clock, and a writer whose
    /// clock runs ahead may be granted inside the holder's ttl by the holder's clock) left the old
    /// holder live, and its refusal as stale was judged a live holder's.
    fn apply(&mut self, index: usize, run: Run<'a>, call: &'a Call, fence: Option<&Fence<'a>>) {
        if call.outcome == CallOutcome::Indeterminate {
            let could_commit = matches!(
                (call.surface, fence),
                (Surface::Release | Surface::Delete, Some(Fence::Holder | Fence::HolderInDoubt))
                    | (Surface::Delete, Some(Fence::Unleased))
                    | (Surface::Acquire, _)
            );
            if let Some(t) = self.rows.get_mut(&run).filter(|_| could_commit) {
                t.in_doubt = true;
            }
            return;
        }
        if !call.outcome.is_ok() {
            return;
        }
        let expiry = call.clock_ms.saturating_add(self.ttl_ms);
        match (call.surface, &call.lease) {
            (Surface::Acquire, Some(lease)) => {
                let tenancy = Tenancy {
                    owner: &lease.owner,
                    epoch: lease.epoch,
                    expires_at: expiry,
                    granted: index,
                    in_doubt: false,
                };
                self.rows.insert(run, tenancy);
            }
            (Surface::Renew, Some(lease)) => {
                if let Some(t) = self.rows.get_mut(&run).filter(|t| t.is(&lease.owner, lease.epoch)) {
                    t.expires_at = expiry;
                }
            }
            (Surface::Release, Some(lease)) if self.rows.get(&run).is_some_and(|t| t.is(&lease.owner, lease.epoch)) => {
                self.rows.remove(&run);
            }
            (Surface::Delete, _) => {
                self.rows.remove(&run);
            }
            _ => {}
        }
    }
}

/// The lease table replayed once along the rows, and what each call met in it just before its
/// own effect was applied: a fenced call ([`is_fenced`]) its [`Fence`], an acquire the lease row
/// live at the acquirer's clock. Indexed by position in `rows`.
#[derive(Debug, Default)]
pub(super) struct LeaseReplay<'a> {
    fences: Vec<Option<Fence<'a>>>,
    live: Vec<Option<Tenancy<'a>>>,
}

impl<'a> LeaseReplay<'a> {
    pub fn new(rows: &'a [Row], runs: &Runs<'a>, ttl_ms: i64) -> Self {
        let mut leases = Leases::new(ttl_ms);
        let mut replay = LeaseReplay { fences: Vec::with_capacity(rows.len()), live: Vec::with_capacity(rows.len()) };
        for (pos, row) in rows.iter().enumerate() {
            let call = row.call().zip(runs.at(pos));
            // The lease table is keyed by the run the call itself names.
            assert!(call.is_none_or(|(call, run)| *run == call.run), "row {pos}: a call keyed by another run");
            let (fence, live) = match call {
                Some((call, run)) if is_fenced(call.surface) => (Some(leases.fence(run, call)), None),
                Some((call, run)) if call.surface == Surface::Acquire => {
                    (None, leases.live(run, call.clock_ms).cloned())
                }
                _ => (None, None),
            };
            // What a call met was granted by an earlier row: the table holds only applied grants.
            let met = match &fence {
                Some(Fence::Superseded(t) | Fence::NoLiveLease(Some(t))) => Some(t.granted),
                _ => None,
            };
            assert!(met.is_none_or(|granted| granted < row.index), "row {pos}: met a lease granted at or after it");
            assert!(
                live.as_ref().is_none_or(|t| t.granted < row.index),
                "row {pos}: an acquire met a lease granted at or after it"
            );
            if let Some((call, run)) = call {
                leases.apply(row.index, run, call, fence.as_ref());
            }
            replay.fences.push(fence);
            replay.live.push(live);
        }
        // The checkers look both views up by a row's position.
        assert!(
            replay.fences.len() == rows.len() && replay.live.len() == rows.len(),
            "the lease replay has a slot per row"
        );
        replay
    }

    /// How the lease of the fenced call at `pos` stood; `None` for any other row.
    pub fn fence(&self, pos: usize) -> Option<&Fence<'a>> {
        self.fences.get(pos)?.as_ref()
    }

    /// The lease row of its run live at the clock of the acquire at `pos` (whatever the acquire's
    /// outcome); `None` if there was none, or for any other row.
    pub fn live_at_acquire(&self, pos: usize) -> Option<&Tenancy<'a>> {
        self.live.get(pos)?.as_ref()
    }
}

/// The epoch each row's call is ordered under: the epoch its lease carried, or for an unleased
/// call the run's high-water mark at that call (0 before any grant); 0 for rows that are not calls.
/// Indexed by position in `rows`.
pub(super) fn effective_epochs(rows: &[Row], runs: &Runs<'_>) -> Vec<Epoch> {
    let mut high: BTreeMap<Run<'_>, Epoch> = BTreeMap::new();
    rows.iter()
        .enumerate()
        .map(|(pos, row)| {
            let Some((call, run)) = row.call().zip(runs.at(pos)) else { return Epoch(0) };
            let epoch = call.epoch().unwrap_or_else(|| high.get(&run).copied().unwrap_or(Epoch(0)));
            if let (Surface::Acquire, true, Some(lease)) = (call.surface, call.outcome.is_ok(), &call.lease) {
                let mark = high.entry(run).or_insert(lease.epoch);
                *mark = (*mark).max(lease.epoch);
            }
            epoch
        })
        .collect()
}

/// The `runStatus` of a `run_settle` decision, read defensively (contracts 1.3, 4.1): an entry
/// of kind `decision` whose `value.decisionType` is `run_settle`; anything malformed is no settle.
pub(super) fn settle_status(entry: &JournalEntry) -> Option<RunStatus> {
    if entry.kind != "decision" {
        return None;
    }
    let value = entry.extra.get("value")?;
    if value.get("decisionType")?.as_str()? != "run_settle" {
        return None;
    }
    RunStatus::parse(value.get("runStatus")?.as_str()?)
}

/// The position and status of the journal's last `run_settle`.
pub(super) fn last_settle<'a>(journal: impl IntoIterator<Item = &'a JournalEntry>) -> Option<(usize, RunStatus)> {
    journal.into_iter().enumerate().filter_map(|(i, e)| settle_status(e).map(|s| (i, s))).last()
}

/// The suspension a resolution entry closes (`resolution.target`).
fn resolution_target(entry: &JournalEntry) -> Option<Seq> {
    if entry.kind != "resolution" {
        return None;
    }
    entry.extra.get("resolution")?.get("target")?.as_i64().map(Seq)
}

/// Suspensions (entries with status `suspended`) no resolution in the journal targets.
pub(super) fn open_suspensions(journal: &[JournalEntry]) -> Vec<Seq> {
    journal
        .iter()
        .filter(|e| e.status == "suspended" && !journal.iter().any(|r| resolution_target(r) == Some(e.seq)))
        .map(|e| e.seq)
        .collect()
}

/// Whether `blob_ref` is a checkpoint ref, `<run>/ckpt/<running seq>` (contracts 1.4).
pub(super) fn is_checkpoint(blob_ref: &str) -> bool {
    let parts: Vec<&str> = blob_ref.split('/').collect();
    matches!(parts.as_slice(), [run, "ckpt", n] if !run.is_empty() && n.parse::<i64>().is_ok())
}

pub(super) fn entry_digest(entry: &JournalEntry) -> u64 {
    digest_json(entry)
}

/// Whether two entries encode the same ([`entry_digest`] compares encodings): the checkers ask
/// this of every stored entry, and comparing fields is far cheaper than encoding both.
pub(super) fn same_entry(a: &JournalEntry, b: &JournalEntry) -> bool {
    let JournalEntry { seq, ref_seq, kind, status, extra } = a;
    *seq == b.seq && *ref_seq == b.ref_seq && *kind == b.kind && *status == b.status && same_map(extra, &b.extra)
}

/// Whether two metas encode the same (see [`same_entry`]).
pub(super) fn same_meta(a: &RunMeta, b: &RunMeta) -> bool {
    let RunMeta { run_id, status, segments, name, tags, genesis, updated_at_ms, extra } = a;
    *run_id == b.run_id
        && *status == b.status
        && *segments == b.segments
        && *name == b.name
        && *tags == b.tags
        && *genesis == b.genesis
        && *updated_at_ms == b.updated_at_ms
        && same_map(extra, &b.extra)
}

/// Whether two JSON maps encode the same: the same keys in the same order, each value the same.
fn same_map<'a>(
    a: impl IntoIterator<Item = (&'a String, &'a Value)>,
    b: impl IntoIterator<Item = (&'a String, &'a Value)>,
) -> bool {
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some((ka, va)), Some((kb, vb))) if ka == kb && same_json(va, vb) => {}
            _ => return false,
        }
    }
}

/// Whether two JSON values encode the same. `Value`'s `==` nearly says so, but holds `0.0` equal
/// to `-0.0`, which encode apart.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y && x.as_f64().map(f64::is_sign_negative) == y.as_f64().map(f64::is_sign_negative)
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && same_map(x, y),
        _ => a == b,
    }
}

pub(super) fn meta_digest(meta: &RunMeta) -> u64 {
    digest_json(meta)
}

pub(super) fn blob_digest(bytes: &[u8]) -> u64 {
    digest(bytes)
}

/// The cut appends (indeterminate: the caller died mid-call) that may have landed, by row index.
/// One did not when the final store proves it: its run was never deleted after it and its final
/// journal holds no such entry at that seq. An accepted delete is after it when its row is; a cut
/// delete may be wherever its row is (a soak records a cut call at its begin, and it may land
/// later), so any cut delete of the run counts. A checker that needs an entry present (a
/// `run_settle` a successor adopted, say) counts these as possibly there; one that needs it
/// absent counts them as possibly not.
pub(super) fn cut_appends_maybe_landed(rows: &[Row], snapshot: &Snapshot) -> BTreeSet<usize> {
    let mut deleted_after: BTreeMap<&RunId, usize> = BTreeMap::new();
    for (pos, call) in rows.iter().enumerate().filter_map(|(pos, row)| Some((pos, row.call()?))) {
        let last = match call.outcome {
            CallOutcome::Ok if call.surface == Surface::Delete => pos,
            CallOutcome::Indeterminate if call.surface == Surface::Delete => usize::MAX,
            _ => continue,
        };
        let at = deleted_after.entry(&call.run).or_default();
        *at = (*at).max(last);
    }
    let mut maybe = BTreeSet::new();
    for (pos, row) in rows.iter().enumerate() {
        let Some(call) = row.call().filter(|c| c.surface == Surface::Append && c.outcome == CallOutcome::Indeterminate)
        else {
            continue;
        };
        let Payload::Entry(entry) = &call.payload else { continue };
        let stored = snapshot
            .run(&call.run)
            .is_some_and(|s| s.journal.iter().any(|e| e.seq == entry.seq && same_entry(e, entry)));
        if stored || deleted_after.get(&call.run).is_some_and(|&last| last > pos) {
            maybe.insert(row.index);
        }
    }
    maybe
}

/// `seq=5 decision/ok #0123456789abcdef`.
pub(super) fn entry_label(entry: &JournalEntry) -> String {
    format!("seq={} {}/{} #{:016x}", entry.seq, entry.kind, entry.status, entry_digest(entry))
}

/// `ok seg=3 #0123456789abcdef`.
pub(super) fn meta_label(meta: &RunMeta) -> String {
    format!("{} seg={} #{:016x}", meta.status, meta.segments, meta_digest(meta))
}

/// `12B #0123456789abcdef`.
pub(super) fn blob_label(bytes: &[u8]) -> String {
    format!("{}B #{:016x}", bytes.len(), blob_digest(bytes))
}

/// `w1.1@e2`, or `unleased`.
pub(super) fn holder(call: &Call) -> String {
    call.lease.as_ref().map_or_else(|| "unleased".to_owned(), |l| format!("{}@e{}", l.owner, l.epoch))
}

/// The blob ref a call targets, or its run.
pub(super) fn target(call: &Call) -> String {
    call.blob_ref.clone().unwrap_or_else(|| call.run.to_string())
}

/// Accepted mutations by what they wrote, so a stored payload can be traced back to the row that
/// wrote it: the last such row in history order (a position in `rows`). Entries and metas are
/// indexed by where they were written and compared whole on lookup; blobs by their digest.
#[derive(Debug, Default)]
pub(super) struct Writers<'a> {
    entries: BTreeMap<(&'a RunId, Seq), Vec<(usize, &'a JournalEntry)>>,
    metas: BTreeMap<&'a RunId, Vec<(usize, &'a RunMeta)>>,
    blobs: BTreeMap<(&'a str, u64), usize>,
}

impl<'a> Writers<'a> {
    pub fn new(rows: &'a [Row]) -> Self {
        let mut writers = Writers::default();
        for (pos, row) in rows.iter().enumerate() {
            let Some(call) = row.call().filter(|c| c.is_accepted_mutation()) else { continue };
            match (&call.payload, &call.blob_ref) {
                (Payload::Entry(entry), _) if call.surface == Surface::Append => {
                    let written = writers.entries.entry((&call.run, entry.seq)).or_default();
                    // In history order: `entry` reads the newest writer from the back.
                    assert!(written.last().is_none_or(|&(p, _)| p < pos), "row {pos}: appends indexed out of order");
                    written.push((pos, entry));
                }
                (Payload::Meta(meta), _) if call.surface == Surface::PutMeta => {
                    let written = writers.metas.entry(&call.run).or_default();
                    assert!(written.last().is_none_or(|&(p, _)| p < pos), "row {pos}: metas indexed out of order");
                    written.push((pos, meta));
                }
                (Payload::Blob(_), Some(blob_ref)) if call.surface == Surface::PutBlob => {
                    let earlier = writers.blobs.insert((blob_ref, call.payload.digest()), pos);
                    // The last writer of the same bytes wins: each replaces an earlier row's.
                    assert!(earlier.is_none_or(|p| p < pos), "row {pos}: blobs indexed out of order");
                }
                _ => {}
            }
        }
        writers
    }

    /// The accepted append that wrote this stored entry.
    pub fn entry(&self, run: &RunId, entry: &JournalEntry) -> Option<usize> {
        let written = self.entries.get(&(run, entry.seq))?;
        written.iter().rev().find(|(_, e)| same_entry(e, entry)).map(|&(pos, _)| pos)
    }

    /// The accepted put_meta that wrote this stored meta.
    pub fn meta(&self, run: &RunId, meta: &RunMeta) -> Option<usize> {
        let written = self.metas.get(run)?;
        written.iter().rev().find(|(_, m)| same_meta(m, meta)).map(|&(pos, _)| pos)
    }

    /// The accepted put_blob that wrote these stored bytes under `blob_ref`.
    pub fn blob(&self, blob_ref: &str, bytes: &[u8]) -> Option<usize> {
        self.blobs.get(&(blob_ref, blob_digest(bytes))).copied()
    }
}

/// The `Row::index` of the row at position `pos` in `rows`.
pub(super) fn index_of(rows: &[Row], pos: Option<usize>) -> Option<usize> {
    pos.and_then(|p| rows.get(p)).map(|r| r.index)
}

/// ` from row 12 (w1.1@e2)`, naming the row at position `pos` in `rows`.
pub(super) fn from_row(rows: &[Row], pos: usize) -> String {
    match rows.get(pos) {
        Some(row) => match row.call() {
            Some(call) => format!(" from row {} ({})", row.index, holder(call)),
            None => format!(" from row {}", row.index),
        },
        None => String::new(),
    }
}
