//! The leasable suite (contracts 2.2, L1-L9): acquire is exclusive and atomic, epochs only grow
//! (across release, expiry, delete and recreate), a lease that is not the live holder guards
//! nothing, renew and release belong to the live holder alone, the renew cadence keeps a lease,
//! and every fence check commits with its mutation. Expiry is driven by the fixture's manual
//! clock on a short-ttl fixture; everything else uses the long main ttl so that nothing expires
//! by accident (D17). Stores without leases skip the suite.
//!
//! [`fence_window`] is the RFC-F3 shim, shared with the fenced-writes suite (W4).

use super::{
    Check, CheckResult, EXPIRY_TTL_MS, FENCED_RUN, Fixture, MAIN_TTL_MS, OWNER_A, OWNER_B, OWNER_C, OWNER_STABLE,
    Suite, Target, ensure, entry, expect_epoch_above, expect_held_by, expect_lease_held, expect_meta, expect_ok, fail,
    fenced_meta, hook_once, leases, markers, require_fenced, supersede,
};
use crate::error::{StoreError, StoreResult};
use crate::fault::FaultPoint;
use crate::spi::{LeasableStore, Store};
use crate::types::{Epoch, Lease, RunId, RunStatus};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check("L1", "lease-exclusive-acquire", exclusive_acquire),
        check("L2", "atomic-acquire", atomic_acquire),
        check("L3", "fencing-stale-epoch", stale_epoch),
        check("L4", "fencing-epoch-tombstone", epoch_tombstone),
        check("L5", "lease-release-fences", release_fences),
        check("L6", "lease-renew", renew),
        check("L6", "expired-is-stale", expired_is_stale),
        check("L7", "lease-release-strict", release_strict),
        check("L8", "lease-ttl-and-renew-cadence", ttl_and_renew_cadence),
        check("L9", "fencing-atomicity-append", atomicity_append),
        check("L9", "fencing-atomicity-renew", atomicity_renew),
        check("L9", "fencing-atomicity-release", atomicity_release),
    ]
}

fn check(id: &'static str, name: &'static str, run: fn(&dyn Target) -> CheckResult) -> Check {
    Check { id, name, suite: Suite::Leasable, run }
}

fn expiry_ttl_ms() -> i64 {
    i64::from(EXPIRY_TTL_MS)
}

/// L1: a live lease refuses every other acquire (naming its holder), the returned lease names
/// the requested run and owner, and the run is free again exactly at expiry, with a higher epoch.
fn exclusive_acquire(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(EXPIRY_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let run = RunId::from(FENCED_RUN);
    let first = la.acquire(&run, OWNER_A)?;
    ensure!(
        first.run == run && first.owner == OWNER_A,
        "acquire returned someone else's lease: expected run={run} owner={OWNER_A}, got {first}"
    );
    expect_held_by("acquire by another owner while live", lb.acquire(&run, OWNER_B), OWNER_A, first.epoch)?;
    expect_held_by("acquire by the same owner while live", la.acquire(&run, OWNER_A), OWNER_A, first.epoch)?;
    fx.clock().advance(expiry_ttl_ms() - 1);
    expect_held_by("acquire one millisecond before expiry", lb.acquire(&run, OWNER_B), OWNER_A, first.epoch)?;
    fx.clock().advance(1);
    let next = expect_ok("acquire at expiry (now == expires_at)", lb.acquire(&run, OWNER_B))?;
    ensure!(
        next.run == run && next.owner == OWNER_B,
        "acquire after expiry returned someone else's lease: expected run={run} owner={OWNER_B}, got {next}"
    );
    expect_epoch_above("acquire after expiry", &next, &first)?;
    Ok(())
}

/// L2: the liveness check, the epoch bump and the row write of an acquire are one unit. A
/// competing acquire from another connection between check and write fails busy, the first
/// acquire gets epoch 1, and the competitor's later acquire sees it.
fn atomic_acquire(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let a = fx.connect()?;
    let la = leases(&*a)?;
    let run = RunId::from(FENCED_RUN);
    let b = fx.connect()?;
    let target = run.clone();
    let slot = hook_once(&*a, FaultPoint::AcquireChecked, move || with_leases(&*b, |lb| lb.acquire(&target, OWNER_B)))?;
    let result = la.acquire(&run, OWNER_A);
    match slot.finish(&*a) {
        None => fail!("fault point never fired: expected acquire_checked during acquire run={run}"),
        Some(Ok(landed)) => fail!(
            "competing acquire landed between the acquire check and the lease write (epoch {}) run={run}",
            landed.epoch
        ),
        Some(Err(StoreError::Busy { .. })) => {}
        Some(Err(e)) => {
            fail!("competing acquire inside the acquire window: expected busy, got {} ({e}) run={run}", e.code())
        }
    }
    let lease = expect_ok("acquire whose window saw a competing acquire", result)?;
    ensure!(lease.epoch == Epoch(1), "first acquire of a fresh run: expected epoch 1, got {} run={run}", lease.epoch);
    let c = fx.connect()?;
    expect_held_by("competing acquire after the call", leases(&*c)?.acquire(&run, OWNER_B), OWNER_A, lease.epoch)
}

/// L3 and L5: epochs strictly increase across release and across reclaim of an expired lease,
/// and an append with an older epoch is refused and never visible.
fn stale_epoch(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(EXPIRY_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let run = RunId::from(FENCED_RUN);
    let first = la.acquire(&run, OWNER_A)?;
    let second = supersede(la, &first, lb)?;
    expect_lease_held("append with the released epoch", a.append(&run, &entry(1, "stale-released"), Some(&first)))?;
    expect_ok("append by the live holder", b.append(&run, &entry(1, "holder-2"), Some(&second)))?;
    fx.clock().advance(expiry_ttl_ms());
    let third = expect_ok("reclaim of an expired lease", la.acquire(&run, OWNER_A))?;
    expect_epoch_above("reclaim of an expired lease", &third, &second)?;
    expect_lease_held("append with the expired epoch", b.append(&run, &entry(2, "stale-expired"), Some(&second)))?;
    expect_ok("append by the reclaiming holder", a.append(&run, &entry(2, "holder-3"), Some(&third)))?;
    let seen = b.load(&run)?;
    ensure!(
        markers(&seen) == ["holder-2", "holder-3"],
        "journal after stale appends: expected [holder-2, holder-3], got {:?} run={run}",
        markers(&seen)
    );
    Ok(())
}

/// L4: the epoch high-water mark survives delete. A stable owner that re-acquires after a
/// delete gets a higher epoch, so its old lease (the zombie) can neither append nor renew, and
/// the recreated journal holds only the new incarnation's entry.
fn epoch_tombstone(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let run = RunId::from(FENCED_RUN);
    let zombie = la.acquire(&run, OWNER_STABLE)?;
    expect_ok("append by the first incarnation", a.append(&run, &entry(1, "incarnation-1"), Some(&zombie)))?;
    la.release(&zombie)?;
    b.delete(&run, None)?;
    let reborn = lb.acquire(&run, OWNER_STABLE)?;
    expect_epoch_above("re-acquire after delete by the same owner", &reborn, &zombie)?;
    expect_ok("append by the new incarnation", b.append(&run, &entry(1, "incarnation-2"), Some(&reborn)))?;
    expect_lease_held("zombie append after delete and recreate", a.append(&run, &entry(2, "zombie"), Some(&zombie)))?;
    expect_lease_held("zombie renew after delete and recreate", la.renew(&zombie))?;
    let seen = b.load(&run)?;
    ensure!(
        markers(&seen) == ["incarnation-2"],
        "recreated journal: expected exactly [incarnation-2], got {:?} run={run}",
        markers(&seen)
    );
    Ok(())
}

/// L5: appends with a released lease, an expired one, a foreign owner at the live epoch and the
/// live owner at an older epoch are all refused, and none of them shows up.
fn release_fences(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(EXPIRY_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let run = RunId::from(FENCED_RUN);
    let released = la.acquire(&run, OWNER_A)?;
    la.release(&released)?;
    expect_lease_held("append with a released lease", a.append(&run, &entry(1, "released"), Some(&released)))?;
    let expired = la.acquire(&run, OWNER_A)?;
    fx.clock().advance(expiry_ttl_ms());
    expect_lease_held("append with an expired lease", a.append(&run, &entry(2, "expired"), Some(&expired)))?;
    let live = lb.acquire(&run, OWNER_B)?;
    let foreign = Lease { owner: OWNER_C.to_owned(), ..live.clone() };
    expect_lease_held(
        "append by a foreign owner at the live epoch",
        a.append(&run, &entry(3, "foreign"), Some(&foreign)),
    )?;
    let older = Lease { epoch: expired.epoch, ..live.clone() };
    expect_lease_held(
        "append by the live owner at an older epoch",
        a.append(&run, &entry(4, "older-epoch"), Some(&older)),
    )?;
    expect_ok("append by the live holder", b.append(&run, &entry(5, "live"), Some(&live)))?;
    let seen = a.load(&run)?;
    ensure!(
        markers(&seen) == ["live"],
        "journal after stale appends: expected only [live], got {:?} run={run}",
        markers(&seen)
    );
    Ok(())
}

/// L6: a holder's renew extends its lease past the original expiry. Then the SQLite
/// cross-instance shape (ttl 100, clock 1 000 000): a's lease expires, b acquires at t+150, a's
/// stale renew at t+200 is refused and does not move b's expiry: held at t+240, free at t+260.
fn renew(t: &dyn Target) -> CheckResult {
    const T0: i64 = 1_000_000;
    let fx = t.fresh(100)?;
    fx.clock().set(T0);
    let (a, b) = (fx.connect()?, fx.connect()?);
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let run = RunId::from("renew-run");
    let held = la.acquire(&run, OWNER_A)?;
    fx.clock().set(T0 + 50);
    expect_ok("renew by the live holder at t+50", la.renew(&held))?;
    fx.clock().set(T0 + 110);
    expect_held_by(
        "acquire at t+110, past the original expiry of a renewed lease",
        lb.acquire(&run, OWNER_B),
        OWNER_A,
        held.epoch,
    )?;

    let fx = t.fresh(100)?;
    fx.clock().set(T0);
    let (a, b, c) = (fx.connect()?, fx.connect()?, fx.connect()?);
    let (la, lb, lc) = (leases(&*a)?, leases(&*b)?, leases(&*c)?);
    let run = RunId::from(FENCED_RUN);
    let stale = la.acquire(&run, OWNER_A)?;
    fx.clock().set(T0 + 150);
    let next = expect_ok("acquire at t+150 after a's expiry", lb.acquire(&run, OWNER_B))?;
    fx.clock().set(T0 + 200);
    expect_lease_held("stale renew at t+200 after the takeover", la.renew(&stale))?;
    fx.clock().set(T0 + 240);
    expect_held_by("third acquire at t+240 while the successor holds", lc.acquire(&run, OWNER_C), OWNER_B, next.epoch)?;
    fx.clock().set(T0 + 260);
    expect_ok("third acquire at t+260, after the successor's own expiry", lc.acquire(&run, OWNER_C))?;
    Ok(())
}

/// L6 and contracts 9.1: an expired lease is stale even when nobody took over. Its holder can
/// neither renew it nor write with it, and must re-acquire (a higher epoch).
fn expired_is_stale(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(EXPIRY_TTL_MS)?;
    let a = fx.connect()?;
    let la = leases(&*a)?;
    let run = RunId::from(FENCED_RUN);
    let lease = la.acquire(&run, OWNER_A)?;
    let fenced_meta_writes = a.fenced_writes();
    let running = fenced_meta(RunStatus::Running, 1);
    if fenced_meta_writes {
        expect_ok("put_meta by the live holder", a.put_meta(&running, Some(&lease)))?;
    }
    expect_ok("append by the live holder", a.append(&run, &entry(1, "before-expiry"), Some(&lease)))?;
    fx.clock().advance(expiry_ttl_ms());
    expect_lease_held("renew of an expired lease nobody took over", la.renew(&lease))?;
    expect_lease_held(
        "append with an expired lease nobody took over",
        a.append(&run, &entry(2, "after-expiry"), Some(&lease)),
    )?;
    if fenced_meta_writes {
        let cancelled = fenced_meta(RunStatus::Cancelled, 1);
        expect_lease_held("put_meta with an expired lease nobody took over", a.put_meta(&cancelled, Some(&lease)))?;
        expect_meta(&*a, &run, Some(&running), "after writes with an expired lease")?;
    }
    let seen = a.load(&run)?;
    ensure!(
        markers(&seen) == ["before-expiry"],
        "journal after an append with an expired lease: expected [before-expiry], got {:?} run={run}",
        markers(&seen)
    );
    let again = expect_ok("re-acquire by the expired holder", la.acquire(&run, OWNER_A))?;
    expect_epoch_above("re-acquire after expiry", &again, &lease)?;
    expect_ok("append after re-acquiring", a.append(&run, &entry(2, "re-acquired"), Some(&again)))?;
    Ok(())
}

/// L7: the holder's release frees the run at once. A stale release after a takeover is refused
/// (so is a foreign owner's), and the successor's row survives: a third owner still cannot
/// acquire and the successor can still append.
fn release_strict(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b, c) = (fx.connect()?, fx.connect()?, fx.connect()?);
    let (la, lb, lc) = (leases(&*a)?, leases(&*b)?, leases(&*c)?);
    let run = RunId::from(FENCED_RUN);
    let first = la.acquire(&run, OWNER_A)?;
    expect_ok("release by the live holder", la.release(&first))?;
    let next = expect_ok("acquire by another owner right after the release", lb.acquire(&run, OWNER_B))?;
    expect_epoch_above("acquire after release", &next, &first)?;
    expect_lease_held("stale release after the takeover", la.release(&first))?;
    let forged = Lease { owner: OWNER_C.to_owned(), ..next.clone() };
    expect_lease_held("release by a foreign owner at the live epoch", lc.release(&forged))?;
    expect_held_by("third owner's acquire after the refused releases", lc.acquire(&run, OWNER_C), OWNER_B, next.epoch)?;
    expect_ok(
        "append by the successor after the refused releases",
        b.append(&run, &entry(1, "successor"), Some(&next)),
    )?;
    Ok(())
}

/// L8: lease_ttl_ms reports the configured ttl; renewing every floor(ttl/3) keeps a lease held
/// past 1.5 x ttl (a competing acquire fails after every renew); once renewals stop the run is
/// reclaimable after 1.2 x ttl, with a higher epoch.
fn ttl_and_renew_cadence(t: &dyn Target) -> CheckResult {
    let main = t.fresh(MAIN_TTL_MS)?;
    let conn = main.connect()?;
    let reported = leases(&*conn)?.lease_ttl_ms();
    ensure!(reported == MAIN_TTL_MS, "lease_ttl_ms: expected the configured {MAIN_TTL_MS}, got {reported}");

    let fx = t.fresh(EXPIRY_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let reported = la.lease_ttl_ms();
    ensure!(reported == EXPIRY_TTL_MS, "lease_ttl_ms: expected the configured {EXPIRY_TTL_MS}, got {reported}");
    let ttl = expiry_ttl_ms();
    let run = RunId::from(FENCED_RUN);
    let lease = la.acquire(&run, OWNER_A)?;
    let mut elapsed = 0;
    while elapsed <= ttl * 3 / 2 {
        fx.clock().advance(ttl / 3);
        elapsed += ttl / 3;
        expect_ok(&format!("renew at +{elapsed}ms"), la.renew(&lease))?;
        expect_held_by(&format!("competing acquire at +{elapsed}ms"), lb.acquire(&run, OWNER_B), OWNER_A, lease.epoch)?;
    }
    fx.clock().advance(ttl * 6 / 5);
    let next = expect_ok("acquire 1.2 x ttl after the last renew", lb.acquire(&run, OWNER_B))?;
    expect_epoch_above("reclaim after the renewals stopped", &next, &lease)?;
    Ok(())
}

/// L9, append: the append inside the window commits before the takeover; afterwards a's lease
/// appends nothing.
fn atomicity_append(t: &dyn Target) -> CheckResult {
    let in_window = entry(1, "in-window");
    fence_window(
        t,
        "append",
        |_, _| Ok(()),
        |a, lease| a.append(&lease.run, &in_window, Some(lease)),
        |w| {
            let seen = w.c.load(&w.run)?;
            ensure!(
                markers(&seen) == ["in-window"],
                "append committed inside the window: expected [in-window], got {:?} run={}",
                markers(&seen),
                w.run
            );
            expect_lease_held(
                "append with the superseded lease",
                w.a.append(&w.run, &entry(2, "stale"), Some(&w.stale)),
            )?;
            expect_ok("append by the successor", w.c.append(&w.run, &entry(2, "successor"), Some(&w.next)))?;
            let seen = w.c.load(&w.run)?;
            ensure!(
                markers(&seen) == ["in-window", "successor"],
                "journal after the takeover: expected [in-window, successor], got {:?} run={}",
                markers(&seen),
                w.run
            );
            Ok(())
        },
    )
}

/// L9, renew: a's renew inside the window acts as of its check, so the stall leaves its lease
/// expired (9.1), and it must not reach the successor's row: the successor's lease expires at
/// its own now + ttl, not later.
fn atomicity_renew(t: &dyn Target) -> CheckResult {
    fence_window(
        t,
        "renew",
        |_, _| Ok(()),
        |a, lease| with_leases(a, |la| la.renew(lease)),
        |w| {
            let (la, lc) = (leases(w.a)?, leases(w.c)?);
            expect_lease_held("renew with the superseded lease", la.renew(&w.stale))?;
            w.fx.clock().advance(expiry_ttl_ms() - 1);
            expect_held_by(
                "third acquire before the successor's expiry",
                lc.acquire(&w.run, OWNER_C),
                OWNER_B,
                w.next.epoch,
            )?;
            w.fx.clock().advance(1);
            expect_ok("third acquire at the successor's own expiry (not extended)", lc.acquire(&w.run, OWNER_C))?;
            Ok(())
        },
    )
}

/// L9, release: a's release inside the window must not delete the successor's row.
fn atomicity_release(t: &dyn Target) -> CheckResult {
    fence_window(
        t,
        "release",
        |_, _| Ok(()),
        |a, lease| with_leases(a, |la| la.release(lease)),
        |w| {
            let (la, lc) = (leases(w.a)?, leases(w.c)?);
            expect_held_by(
                "third acquire while the successor holds",
                lc.acquire(&w.run, OWNER_C),
                OWNER_B,
                w.next.epoch,
            )?;
            expect_lease_held("release with the superseded lease", la.release(&w.stale))?;
            expect_held_by(
                "third acquire after the stale release",
                lc.acquire(&w.run, OWNER_C),
                OWNER_B,
                w.next.epoch,
            )?;
            expect_ok("append by the successor", w.c.append(&w.run, &entry(1, "successor"), Some(&w.next)))?;
            Ok(())
        },
    )
}

/// Run `f` on `store`'s lease capability; a store without one answers with a config error.
fn with_leases<T>(store: &dyn Store, f: impl FnOnce(&dyn LeasableStore) -> StoreResult<T>) -> StoreResult<T> {
    store.leases().map_or_else(|| Err(StoreError::Config("store has no leases".to_owned())), f)
}

/// What a shimmed call left behind, for a variant's own post-conditions.
pub(super) struct Window<'a> {
    pub fx: &'a dyn Fixture,
    /// The connection that made the fenced call, its hook removed again.
    pub a: &'a dyn Store,
    /// A fresh connection over the same location: the successor's.
    pub c: &'a dyn Store,
    pub run: RunId,
    /// a's lease, superseded by now.
    pub stale: Lease,
    /// The successor's lease (owner-b), acquired after the call.
    pub next: Lease,
}

/// The RFC-F3 shim (L9, W4). Connection a acquires [`FENCED_RUN`] on a short-ttl fixture,
/// `prepare`s, then makes the fenced `call` with a hook that, when the call passes its fence
/// check, moves the shared clock past a's expiry and attempts owner-b's acquire from a second
/// connection. Over a correct store that acquire fails busy (a holds the write lock), the call
/// commits as of its check (a renew extends from the time of its check, not from after the stall),
/// and owner-b's acquire right after the call succeeds with a higher epoch; `after` then checks
/// that nothing stale shows.
/// Over a non-atomic fence the acquire lands inside the window and the stale call follows it.
pub(super) fn fence_window(
    t: &dyn Target,
    op: &str,
    prepare: impl FnOnce(&dyn Store, &Lease) -> CheckResult,
    call: impl FnOnce(&dyn Store, &Lease) -> StoreResult<()>,
    after: impl FnOnce(&Window<'_>) -> CheckResult,
) -> CheckResult {
    let fx = t.fresh(EXPIRY_TTL_MS)?;
    let a = fx.connect()?;
    require_fenced(&*a)?;
    let run = RunId::from(FENCED_RUN);
    let lease = leases(&*a)?.acquire(&run, OWNER_A)?;
    prepare(&*a, &lease)?;

    let b = fx.connect()?;
    let clock = fx.clock().clone();
    let target = run.clone();
    let slot = hook_once(&*a, FaultPoint::FenceChecked, move || {
        clock.advance(expiry_ttl_ms());
        with_leases(&*b, |lb| lb.acquire(&target, OWNER_B))
    })?;
    let result = call(&*a, &lease);
    match slot.finish(&*a) {
        None => fail!("fault point never fired: expected fence_checked during the fenced {op} run={run}"),
        Some(Ok(landed)) => {
            let effect = match &result {
                Ok(()) => "was accepted after the takeover".to_owned(),
                Err(e) => format!("then failed with {}", e.code()),
            };
            fail!(
                "competing acquire landed between fence check and mutation (epoch {}) and the stale {op} {effect} run={run} stale_epoch={}",
                landed.epoch,
                lease.epoch
            );
        }
        Some(Err(StoreError::Busy { .. })) => {}
        Some(Err(e)) => {
            fail!("competing acquire inside the fence window of {op}: expected busy, got {} ({e}) run={run}", e.code())
        }
    }
    expect_ok(&format!("fenced {op} by the live holder"), result)?;

    let c = fx.connect()?;
    let next = expect_ok(&format!("acquire by owner-b after the fenced {op}"), leases(&*c)?.acquire(&run, OWNER_B))?;
    expect_epoch_above("acquire after the fenced {op}", &next, &lease)?;
    after(&Window { fx: &*fx, a: &*a, c: &*c, run, stale: lease, next })
}
