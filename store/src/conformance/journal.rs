//! The journal suite (contracts 2.1, J1-J7): appends are atomic and totally ordered per run, a
//! writer reads its own writes, payloads are opaque, seqs strictly increase (A5), meta lives apart
//! from the journal, and `delete` removes journal, meta and lease row but keeps the epoch
//! high-water mark. Every check runs on every store, leasable or not (the lease parts of J7 are
//! left out on a store without leases); cross-connection steps use two connections over one
//! location, so a per-connection cache cannot hide a missing guard.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::{Value, json};

use super::{
    Check, CheckResult, MAIN_TTL_MS, OWNER_A, OWNER_B, Suite, Target, Verdict, ensure, entry, expect_epoch_above,
    expect_meta, expect_ok, fail, markers, seqs,
};
use crate::error::StoreError;
use crate::fault::{FaultAction, FaultPoint, FaultSite};
use crate::spi::Store;
use crate::types::{JournalEntry, RunFilter, RunId, RunMeta, RunStatus};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check("J1", "a1-append-atomicity", append_atomicity),
        check("J2", "a2-total-order", total_order),
        check("J3", "a3-read-your-writes", read_your_writes),
        check("J4", "a4-opaque-payload", opaque_payload),
        check("J4", "a4-exact-integers", exact_integers),
        check("J4", "shadowed-field-refused", shadowed_field_refused),
        check("J5", "a5-monotonic-seq", monotonic_seq),
        check("J5", "a5-stale-tail-race", stale_tail_race),
        check("J6", "meta-separation", meta_separation),
        check("J7", "delete-removes-run", delete_removes_run),
        check("J7", "delete-cut-whole-or-nothing", delete_cut_whole_or_nothing),
    ]
}

fn check(id: &'static str, name: &'static str, run: fn(&dyn Target) -> CheckResult) -> Check {
    Check { id, name, suite: Suite::Journal, run }
}

/// J1: twelve ~8 KiB entries appended alternately through two connections, each followed by
/// loads through both. No load may show an entry that differs from a submitted one, and every
/// append is whole as soon as it returns.
fn append_atomicity(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let conns = [fx.connect()?, fx.connect()?];
    let run = RunId::from("a1-run");
    let submitted: Vec<JournalEntry> =
        (1..=12).map(|seq| JournalEntry::new(seq, "agent", "ok").with("blob", json!(bulky(seq)))).collect();
    for (n, e) in submitted.iter().enumerate() {
        conns[n % 2].append(&run, e, None)?;
        for (side, conn) in ["a", "b"].into_iter().zip(&conns) {
            let seen = conn.load(&run)?;
            if let Some(torn) = seen.iter().find(|s| !submitted.contains(s)) {
                fail!(
                    "load through {side} saw an entry equal to no submitted one: expected one of 12 entries of 8192 chars, got seq={} blob_chars={} run={run}",
                    torn.seq,
                    blob_chars(torn)
                );
            }
            ensure!(
                seen.len() == n + 1,
                "load through {side} after {} appends: expected {} entries, got {} run={run}",
                n + 1,
                n + 1,
                seen.len()
            );
        }
    }
    let last = conns[0].load(&run)?;
    ensure!(
        last == submitted,
        "final load differs from the submitted entries: expected seqs {:?}, got {:?} run={run}",
        seqs(&submitted),
        seqs(&last)
    );
    Ok(())
}

/// An 8192-char payload, distinct per seq, with multi-byte characters so a truncation shows.
fn bulky(seq: i64) -> String {
    const FILL: [char; 7] = ['a', 'b', 'é', 'ß', '漢', '🙂', ' '];
    let head = format!("entry-{seq:02}:");
    head.chars().chain((0..).map(|k| FILL[k % FILL.len()])).take(8192).collect()
}

fn blob_chars(e: &JournalEntry) -> usize {
    e.extra.get("blob").and_then(Value::as_str).map_or(0, |s| s.chars().count())
}

/// J2: ten sequential appends, then eight interleaved from two connections. Each load equals the
/// append order so far, repeated loads are identical, and all 18 seqs are there once.
fn total_order(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let conns = [fx.connect()?, fx.connect()?];
    let run = RunId::from("a2-run");
    let mut appended = Vec::new();
    for seq in 1..=10 {
        let e = entry(seq, "sequential");
        conns[0].append(&run, &e, None)?;
        appended.push(e);
    }
    for seq in 11..=18 {
        let side = usize::from(seq % 2 == 0);
        let e = entry(seq, ["interleaved-a", "interleaved-b"][side]);
        conns[side].append(&run, &e, None)?;
        appended.push(e);
        let seen = conns[1 - side].load(&run)?;
        ensure!(
            seen == appended,
            "load through the other connection after seq {seq}: expected seqs {:?}, got {:?} run={run}",
            seqs(&appended),
            seqs(&seen)
        );
    }
    let loads = [conns[0].load(&run)?, conns[1].load(&run)?, conns[0].load(&run)?];
    for (n, seen) in loads.iter().enumerate() {
        ensure!(
            *seen == appended,
            "load {} of 3 differs from the append order: expected seqs {:?}, got {:?} run={run}",
            n + 1,
            seqs(&appended),
            seqs(seen)
        );
    }
    let unique: BTreeSet<i64> = seqs(&loads[0]).into_iter().collect();
    ensure!(unique.len() == 18, "journal after 18 appends: expected 18 unique seqs, got {} run={run}", unique.len());
    Ok(())
}

/// J3: once an append returns, the same client's next load ends with it.
fn read_your_writes(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let conns = [fx.connect()?, fx.connect()?];
    let run = RunId::from("a3-run");
    for seq in 1..=6 {
        let conn = &conns[usize::from(seq % 2 == 0)];
        let e = entry(seq, "mine");
        conn.append(&run, &e, None)?;
        let seen = conn.load(&run)?;
        ensure!(
            seen.last() == Some(&e) && seen.len() == usize::try_from(seq).unwrap_or(0),
            "load right after append: expected {seq} entries ending with seq {seq}, got seqs {:?} run={run}",
            seqs(&seen)
        );
    }
    Ok(())
}

/// J4: a legacy-shaped terminal entry (with its typed `ref`) and a meta record with fields the
/// store has never heard of come back equal: no field added (above all no `hashVersion`), none
/// lost, none normalised.
fn opaque_payload(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let run = RunId::from("a4-run");
    let appended = legacy_entry()?;
    a.append(&run, &appended, None)?;
    let seen = b.load(&run)?;
    let [got] = seen.as_slice() else {
        fail!("load after one append: expected 1 entry, got {} run={run}", seen.len());
    };
    ensure!(
        !got.extra.contains_key("hashVersion"),
        "legacy entry came back with an injected field: expected no hashVersion, got {} run={run}",
        got.extra["hashVersion"]
    );
    ensure!(
        *got == appended,
        "legacy entry did not round-trip: expected it unchanged, got {} run={run}",
        diff_fields(&appended, got)
    );

    let meta = legacy_meta(&run);
    a.put_meta(&meta, None)?;
    match b.get_meta(&run)? {
        Some(got) if got == meta => Ok(()),
        Some(got) => fail!(
            "meta with unknown fields did not round-trip: expected it unchanged, got {} run={run}",
            diff_fields(&meta, &got)
        ),
        None => fail!("meta after put_meta: expected the record, got none run={run}"),
    }
}

/// J4 for numbers: integers a double cannot hold (2^53 + 1, the i64 extremes) come back digit for
/// digit, in an entry and in a meta. A store that declares it cannot (`exact_integers`: false,
/// rulvar's stores read payloads back as JavaScript doubles) is skipped with that reason: a
/// declared property, never a silent pass.
fn exact_integers(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    if !a.exact_integers() {
        return Err(Verdict::Skip(
            "the store declares it rounds integers beyond 2^53 (exact_integers: false)".to_owned(),
        ));
    }
    let run = RunId::from("a4-int-run");
    let wide = json!({
        "seq": 1,
        "kind": "numbers",
        "status": "ok",
        "big": 9_007_199_254_740_993_i64,
        "smallest": i64::MIN,
        "largest": i64::MAX,
    });
    let appended: JournalEntry = serde_json::from_value(wide)
        .map_err(|e| Verdict::Fail(format!("the kit could not build its wide entry: {e}")))?;
    a.append(&run, &appended, None)?;
    let seen = b.load(&run)?;
    let [got] = seen.as_slice() else {
        fail!("load after one append: expected 1 entry, got {} run={run}", seen.len());
    };
    ensure!(
        *got == appended,
        "integers beyond 2^53 did not round-trip in an entry: got {} run={run}",
        diff_fields(&appended, got)
    );
    let mut meta = RunMeta::new(run.clone(), RunStatus::Running);
    meta.extra = fields([("big", json!(9_007_199_254_740_993_i64)), ("smallest", json!(i64::MIN))]);
    a.put_meta(&meta, None)?;
    match b.get_meta(&run)? {
        Some(got) if got == meta => Ok(()),
        Some(got) => {
            fail!("integers beyond 2^53 did not round-trip in a meta: got {} run={run}", diff_fields(&meta, &got))
        }
        None => fail!("meta after put_meta: expected the record, got none run={run}"),
    }
}

/// J4, this SPI's side of opacity: an `extra` field that reuses a typed field's key (`seq` of an
/// entry, `status` of a meta) would be stored twice in one payload and make the record, and every
/// listing containing it, unreadable. The store refuses it with a typed error and nothing changes.
fn shadowed_field_refused(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let run = RunId::from("shadow-run");
    a.append(&run, &entry(1, "plain"), None)?;
    let meta = RunMeta::new(run.clone(), RunStatus::Running);
    a.put_meta(&meta, None)?;

    let shadowing_entry = entry(2, "shadowing").with("seq", json!(99));
    expect_invalid("append whose extra holds `seq`", a.append(&run, &shadowing_entry, None))?;
    let mut shadowing_meta = RunMeta::new(run.clone(), RunStatus::Running);
    shadowing_meta.extra.insert("status".to_owned(), json!("ok"));
    expect_invalid("put_meta whose extra holds `status`", a.put_meta(&shadowing_meta, None))?;

    let seen = b.load(&run)?;
    ensure!(
        markers(&seen) == ["plain"],
        "journal after the refused append: expected [plain], got {:?} run={run}",
        markers(&seen)
    );
    expect_meta(&*b, &run, Some(&meta), "after the refused put_meta")?;
    let listed = b.list_runs(&RunFilter::all())?;
    ensure!(listed == [meta], "list_runs after the refused put_meta: expected the original record, got {listed:?}");
    Ok(())
}

fn expect_invalid(what: &str, result: crate::error::StoreResult<()>) -> CheckResult {
    match result {
        Err(StoreError::InvalidPayload { .. }) => Ok(()),
        Err(e) => fail!("{what}: expected invalid_payload, got {} ({e})", e.code()),
        Ok(()) => fail!("{what}: expected invalid_payload, but it was accepted"),
    }
}

/// A legacy-shaped terminal entry (seq 2, its typed `ref` to seq 1) with text a store could
/// mangle, a float, nulls at every depth and a top-level field no version defined.
fn legacy_entry() -> Result<JournalEntry, Verdict> {
    let legacy = json!({
        "v": 1,
        "seq": 2,
        "ref": 1,
        "kind": "wormhole.v9",
        "status": "ok",
        "text": "ünïcödé ✓ 漢字 🙂 \"quoted\" back\\slash\ttab\nnewline",
        "value": 0.1_f64 + 0.2_f64,
        "nested": {"a": null, "b": [null, {"c": null}], "d": {"e": []}},
        "unknownTopLevel": {"keep": ["me", 1, true]},
    });
    serde_json::from_value(legacy).map_err(|e| Verdict::Fail(format!("the kit could not build its legacy entry: {e}")))
}

fn legacy_meta(run: &RunId) -> RunMeta {
    let mut meta = RunMeta::new(run.clone(), RunStatus::Suspended).with_segments(4);
    meta.extra = fields([
        ("v", json!(1)),
        ("ratio", json!(0.1_f64 + 0.2_f64)),
        ("note", json!("ünïcödé ✓ 漢字 🙂")),
        ("mysteryField", json!({"nested": [null, {"deeper": null}]})),
        ("nothing", Value::Null),
    ]);
    meta
}

fn fields<const N: usize>(pairs: [(&str, Value); N]) -> BTreeMap<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// Which top-level fields of `got` were added, lost or changed against `expected`.
fn diff_fields(expected: &impl Serialize, got: &impl Serialize) -> String {
    let (Ok(Value::Object(want)), Ok(Value::Object(have))) =
        (serde_json::to_value(expected), serde_json::to_value(got))
    else {
        return "a value that is not a json object".to_owned();
    };
    let added: Vec<&String> = have.keys().filter(|k| !want.contains_key(*k)).collect();
    let lost: Vec<&String> = want.keys().filter(|k| !have.contains_key(*k)).collect();
    let changed: Vec<&String> =
        want.iter().filter(|(k, v)| have.get(*k).is_some_and(|h| h != *v)).map(|(k, _)| k).collect();
    format!("added={added:?} lost={lost:?} changed={changed:?}")
}

/// J5: an equal or lower seq is refused with a journal order violation and never shows up, also
/// through another connection; a gap above the tail is legal.
fn monotonic_seq(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let run = RunId::from("a5-run");
    let mut kept = vec![entry(1, "first"), entry(2, "second")];
    for e in &kept {
        a.append(&run, e, None)?;
    }
    expect_order("equal seq", &*a, &run, 2)?;
    expect_order("equal seq through the other connection", &*b, &run, 2)?;
    expect_order("lower seq", &*a, &run, 1)?;
    same_journal([&*a, &*b], &run, &kept, "after the refused appends")?;
    let gap = entry(7, "gap");
    expect_ok("append of seq 7 over tail 2 (gaps are legal)", b.append(&run, &gap, None))?;
    kept.push(gap);
    expect_order("seq inside the gap below the tail", &*a, &run, 5)?;
    same_journal([&*a, &*b], &run, &kept, "after the gap")
}

/// Append `seq` through `conn` and expect the A5 guard to refuse it.
fn expect_order(what: &str, conn: &dyn Store, run: &RunId, seq: i64) -> CheckResult {
    match conn.append(run, &entry(seq, what), None) {
        Err(StoreError::JournalOrder { .. }) => Ok(()),
        Err(e) => fail!("{what}: expected journal_order_violation, got {} ({e}) run={run} seq={seq}", e.code()),
        Ok(()) => fail!("{what}: expected journal_order_violation, but it was accepted run={run} seq={seq}"),
    }
}

fn same_journal(conns: [&dyn Store; 2], run: &RunId, want: &[JournalEntry], when: &str) -> CheckResult {
    for (side, conn) in ["a", "b"].into_iter().zip(conns) {
        let seen = conn.load(run)?;
        ensure!(
            seen == want,
            "load through {side} {when}: expected {:?}, got {:?} run={run}",
            markers(want),
            markers(&seen)
        );
    }
    Ok(())
}

/// J5: two connections read the same tail and both append the next seq. Exactly one wins, the
/// loser gets a journal order violation, and the journal holds that seq once.
fn stale_tail_race(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let run = RunId::from("a5-race-run");
    for seq in 1..=3 {
        a.append(&run, &entry(seq, "prefix"), None)?;
    }
    let tail_a = a.load(&run)?.last().map(|e| e.seq.0);
    let tail_b = b.load(&run)?.last().map(|e| e.seq.0);
    ensure!(
        tail_a == Some(3) && tail_b == Some(3),
        "both writers read the tail: expected 3 twice, got a={tail_a:?} b={tail_b:?} run={run}"
    );
    let next = 4;
    let loser = match (a.append(&run, &entry(next, "writer-a"), None), b.append(&run, &entry(next, "writer-b"), None)) {
        (Ok(()), Err(e)) | (Err(e), Ok(())) => e,
        (Ok(()), Ok(())) => {
            fail!("two appends of the same next seq: expected exactly one to succeed, got both run={run} seq={next}")
        }
        (Err(ea), Err(eb)) => fail!(
            "two appends of the same next seq: expected exactly one to succeed, got {} and {} run={run} seq={next}",
            ea.code(),
            eb.code()
        ),
    };
    ensure!(
        loser.is_journal_order(),
        "the losing append: expected journal_order_violation, got {} ({loser}) run={run} seq={next}",
        loser.code()
    );
    let seen = b.load(&run)?;
    let copies = seen.iter().filter(|e| e.seq.0 == next).count();
    ensure!(
        copies == 1 && seen.len() == 4,
        "journal after the race: expected seq {next} once among 4 entries, got {copies} copies among {} run={run}",
        seen.len()
    );
    Ok(())
}

/// J6: put_meta replaces the record whole, every optional field round-trips, a missing run has no
/// meta and an empty journal, a journal alone lists nothing, get_meta agrees with list_runs, and
/// list_runs filters (status or statuses, all tags, name) never drop a row and order by run id.
fn meta_separation(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    meta_replaced_whole(&*a, &*b)?;
    no_meta_without_put(&*a, &*b)?;
    list_runs_agrees(&*b)?;
    list_runs_filters(&*b)
}

/// put_meta (through `a`) replaces a record whole, every optional field round-tripping (read
/// through `b`).
fn meta_replaced_whole(a: &dyn Store, b: &dyn Store) -> CheckResult {
    // The replaced records set every field their replacements leave unset (meta-a has no genesis,
    // updated_at or extra field, meta-c no tags, meta-d no name): a merging upsert shows.
    for run in ["meta-a", "meta-c", "meta-d"] {
        a.put_meta(&rich_meta(run), None)?;
    }
    let metas = [
        listed("meta-d", RunStatus::Cancelled, None, &["y"]),
        listed("meta-b", RunStatus::Suspended, Some("beta"), &["x"]),
        listed("meta-a", RunStatus::Running, Some("alpha"), &["x", "y"]),
        listed("meta-c", RunStatus::Ok, Some("alpha"), &[]),
        rich_meta("meta-rich"),
    ];
    for meta in &metas {
        a.put_meta(meta, None)?;
    }
    for meta in &metas {
        match b.get_meta(&meta.run_id)? {
            Some(got) if got == *meta => {}
            Some(got) => fail!(
                "meta did not round-trip whole (put_meta replaces, never merges): expected it unchanged, got {} run={}",
                diff_fields(meta, &got),
                meta.run_id
            ),
            None => fail!("meta after put_meta: expected the record, got none run={}", meta.run_id),
        }
    }
    Ok(())
}

/// A run never written has no meta and an empty journal; a journal alone (appended through `a`)
/// gives no meta (read through `b`).
fn no_meta_without_put(a: &dyn Store, b: &dyn Store) -> CheckResult {
    let missing = RunId::from("meta-missing");
    expect_meta(b, &missing, None, "of a run never written")?;
    let journal = b.load(&missing)?;
    ensure!(journal.is_empty(), "load of an unknown run: expected [], got seqs {:?} run={missing}", seqs(&journal));
    let journal_only = RunId::from("meta-journal-only");
    a.append(&journal_only, &entry(1, "journal-only"), None)?;
    expect_meta(b, &journal_only, None, "of a run with a journal and no meta")?;
    Ok(())
}

/// list_runs lists every run with a meta, in run id order, each as get_meta reads it.
fn list_runs_agrees(b: &dyn Store) -> CheckResult {
    let listing = b.list_runs(&RunFilter::all())?;
    let ids: Vec<&str> = listing.iter().map(|m| m.run_id.as_str()).collect();
    let want = ["meta-a", "meta-b", "meta-c", "meta-d", "meta-rich"];
    ensure!(ids == want, "list_runs of every run: expected {want:?} in run id order, got {ids:?}");
    for meta in &listing {
        expect_meta(b, &meta.run_id, Some(meta), "by get_meta against list_runs")?;
    }
    Ok(())
}

/// list_runs' filters (status or statuses, all tags, name) never drop a row that matches.
fn list_runs_filters(b: &dyn Store) -> CheckResult {
    let either = |status, statuses: &[RunStatus]| RunFilter {
        status: Some(status),
        statuses: Some(statuses.to_vec()),
        ..RunFilter::default()
    };
    let tags =
        |tags: &[&str]| RunFilter { tags: tags.iter().map(|t| (*t).to_owned()).collect(), ..RunFilter::default() };
    let name = |name: &str, rest: RunFilter| RunFilter { name: Some(name.to_owned()), ..rest };
    let cases: [(&str, RunFilter, &[&str]); 11] = [
        ("status=running", RunFilter { status: Some(RunStatus::Running), ..RunFilter::default() }, &["meta-a"]),
        ("statuses=[suspended,ok]", RunFilter::statuses(&[RunStatus::Suspended, RunStatus::Ok]), &["meta-b", "meta-c"]),
        ("status=running statuses=[ok]", either(RunStatus::Running, &[RunStatus::Ok]), &["meta-a", "meta-c"]),
        ("status=running statuses=[]", either(RunStatus::Running, &[]), &["meta-a"]),
        ("statuses=[]", RunFilter::statuses(&[]), &[]),
        ("tags=[x]", tags(&["x"]), &["meta-a", "meta-b"]),
        ("tags=[x,y]", tags(&["x", "y"]), &["meta-a"]),
        ("tags=[z]", tags(&["z"]), &[]),
        ("name=alpha", name("alpha", RunFilter::all()), &["meta-a", "meta-c"]),
        ("name=alpha tags=[y]", name("alpha", tags(&["y"])), &["meta-a"]),
        (
            "name=alpha status=ok",
            name("alpha", RunFilter { status: Some(RunStatus::Ok), ..RunFilter::default() }),
            &["meta-c"],
        ),
    ];
    for (label, filter, want) in cases {
        expect_listing(b, label, &filter, want)?;
    }
    Ok(())
}

/// One list_runs filter: ordered by run id, no matching row dropped. Over-returning by status is
/// allowed (callers re-check), except that `statuses: []` alone matches nothing.
fn expect_listing(store: &dyn Store, label: &str, filter: &RunFilter, want: &[&str]) -> CheckResult {
    let got = store.list_runs(filter)?;
    let ids: Vec<&str> = got.iter().map(|m| m.run_id.as_str()).collect();
    ensure!(
        ids.is_sorted() && ids.windows(2).all(|w| w[0] != w[1]),
        "list_runs {label}: expected rows in run id order, got {ids:?}"
    );
    let dropped: Vec<&str> = want.iter().copied().filter(|w| !ids.contains(w)).collect();
    ensure!(dropped.is_empty(), "list_runs {label}: expected {want:?}, got {ids:?} (dropped {dropped:?})");
    let loose = RunFilter { status: None, statuses: None, ..filter.clone() };
    let strays: Vec<&str> = got.iter().filter(|m| !loose.matches(m)).map(|m| m.run_id.as_str()).collect();
    ensure!(
        strays.is_empty(),
        "list_runs {label}: expected only rows matching its name and tags, got {strays:?} as well"
    );
    let matches_nothing = filter.status.is_none() && filter.statuses.as_ref().is_some_and(Vec::is_empty);
    ensure!(!matches_nothing || ids.is_empty(), "list_runs {label}: expected nothing, got {ids:?}");
    Ok(())
}

fn listed(run: &str, status: RunStatus, name: Option<&str>, tags: &[&str]) -> RunMeta {
    let mut meta = RunMeta::new(run, status).with_segments(1);
    meta.name = name.map(str::to_owned);
    meta.tags = tags.iter().map(|t| (*t).to_owned()).collect();
    meta
}

/// A meta record with every optional field the reference kit checks.
fn rich_meta(run: &str) -> RunMeta {
    let mut meta = RunMeta::new(run, RunStatus::Exhausted).with_segments(3);
    meta.name = Some("rich".to_owned());
    meta.tags = vec!["t1".to_owned(), "t2".to_owned()];
    meta.genesis = Some("genesis-7f3a".to_owned());
    meta.updated_at_ms = Some(1_700_000_000_123);
    meta.extra = fields([
        ("budgetUsd", json!(12.5)),
        ("maxInFlightExposureUsd", json!(0.1_f64 + 0.2_f64)),
        ("budgetPolicy", json!({"mode": "hard", "graceUsd": null})),
        ("scope", json!(["repo:o-stepper/rulvar", "branch:main"])),
        ("scopeNormalize", json!(true)),
        ("strictPricing", json!(false)),
        ("argsProvided", json!(true)),
        ("argsHash", json!("sha256:5f1d0c")),
        ("execKeyDerivation", json!(2)),
        ("workflowName", json!("wf")),
        ("soak", json!({"nonce": "n-42"})),
    ]);
    meta
}

/// J7: delete removes journal, meta and lease row (another owner acquires at once although the
/// deleted lease had not expired), keeps the epoch high-water mark (that acquire gets a higher
/// epoch), leaves other runs alone, and a recreated run starts a fresh journal.
fn delete_removes_run(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let run = RunId::from("delete-run");
    let bystander = RunId::from("delete-bystander-run");
    for target in [&run, &bystander] {
        a.append(target, &entry(1, "before-delete"), None)?;
        a.put_meta(&RunMeta::new(target.clone(), RunStatus::Running), None)?;
    }
    a.append(&run, &entry(2, "before-delete"), None)?;
    let held = match a.leases() {
        Some(la) => Some(la.acquire(&run, OWNER_A)?),
        None => None,
    };

    b.delete(&run, None)?;
    let left = a.load(&run)?;
    ensure!(left.is_empty(), "journal after delete: expected no entries, got seqs {:?} run={run}", seqs(&left));
    expect_meta(&*a, &run, None, "after delete")?;
    let listing = a.list_runs(&RunFilter::all())?;
    let ids: Vec<&str> = listing.iter().map(|m| m.run_id.as_str()).collect();
    ensure!(ids == [bystander.as_str()], "list_runs after delete: expected [{bystander}], got {ids:?} run={run}");
    let other = a.load(&bystander)?;
    ensure!(other.len() == 1, "delete touched another run: expected 1 entry, got {} run={bystander}", other.len());

    if let (Some(held), Some(lb)) = (held, b.leases()) {
        match lb.acquire(&run, OWNER_B) {
            Ok(next) => expect_epoch_above("acquire after delete (the high-water mark survives)", &next, &held)?,
            Err(e) => fail!(
                "delete left the lease row: expected another owner to acquire at once, got {} ({e}) run={run}",
                e.code()
            ),
        }
    }

    let reborn = entry(1, "recreated");
    expect_ok("append of seq 1 to a deleted run (a fresh journal)", a.append(&run, &reborn, None))?;
    let seen = b.load(&run)?;
    ensure!(seen == [reborn], "journal of the recreated run: expected [recreated], got {:?} run={run}", markers(&seen));
    Ok(())
}

/// A delete is one transaction (S6): the caller dying between any two of its statements leaves
/// the run whole, and a delete nobody cuts removes it all. Cut at its first statement point, then
/// its second, and so on until one runs through; each cut is a fresh run. Needs a store with
/// statement fault points (a hook answering `Crash` there); one without is skipped.
fn delete_cut_whole_or_nothing(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, reader) = (fx.connect()?, fx.connect()?);
    for n in 1..=16u32 {
        let run = RunId::from(format!("delete-cut-{n}").as_str());
        a.append(&run, &entry(1, "before-delete"), None)?;
        a.append(&run, &entry(2, "before-delete"), None)?;
        a.put_meta(&RunMeta::new(run.clone(), RunStatus::Running), None)?;
        let seen = Arc::new(Mutex::new(0u32));
        let count = Arc::clone(&seen);
        let hook = move |site: &FaultSite<'_>| {
            let mut statements = count.lock().unwrap_or_else(PoisonError::into_inner);
            *statements += u32::from(site.point == FaultPoint::Statement);
            if site.point == FaultPoint::Statement && *statements == n {
                FaultAction::Crash
            } else {
                FaultAction::Resume
            }
        };
        if !a.set_fault_hook(Some(Box::new(hook))) {
            return Err(Verdict::Skip("store has no fault points".to_owned()));
        }
        let result = a.delete(&run, None);
        a.set_fault_hook(None);
        let statements = *seen.lock().unwrap_or_else(PoisonError::into_inner);
        if n == 1 && statements == 0 {
            return Err(Verdict::Skip("store has no statement fault points".to_owned()));
        }
        let (journal, meta) = (reader.load(&run)?, reader.get_meta(&run)?);
        if statements < n {
            result?;
            ensure!(journal.is_empty() && meta.is_none(), "an uncut delete left {} entries run={run}", journal.len());
            return Ok(());
        }
        let whole = journal.len() == 2 && meta.is_some();
        let gone = journal.is_empty() && meta.is_none();
        ensure!(
            whole || gone,
            "delete cut at its statement {n} left half a run: {} of 2 entries, meta {} run={run}",
            journal.len(),
            if meta.is_some() { "kept" } else { "gone" }
        );
    }
    fail!("a delete with more than 16 statement points: the check gave up")
}
