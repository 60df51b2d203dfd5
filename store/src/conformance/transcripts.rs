//! The transcript suite (contracts 2.4, T1-T7): blobs addressed by `<run>/<name>` refs. The basics,
//! unleased passthrough, the journal delete that leaves blobs alone and the one-twin lifetime run
//! on every store; stale and cross-run blob writes (T2-T4) are the fenced side and skip on a store
//! that does not declare fenced writes. Leases are minted on the journal side and guard blobs in
//! the same transactional domain, through any connection.

use super::{
    CKPT_REF, Check, CheckResult, FENCED_RUN, MAIN_TTL_MS, OTHER_RUN, OWNER_A, OWNER_B, Suite, Target, ensure, entry,
    expect_blob, expect_lease_held, expect_ok, expect_run_mismatch, leases, require_fenced, supersede,
};
use crate::spi::Store;
use crate::types::{RunFilter, RunId, RunMeta, RunStatus};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check("T1", "transcripts-basics", basics),
        check("T2", "transcripts-same-domain", same_domain),
        check("T3", "fenced-transcripts-stale-put-rejected", stale_put_rejected),
        check("T3", "fenced-transcripts-stale-delete-rejected", stale_delete_rejected),
        check("T4", "fenced-transcripts-run-match", run_match),
        check("T5", "transcripts-unleased-passthrough", unleased_passthrough),
        check("T6", "journal-delete-keeps-blobs", journal_delete_keeps_blobs),
        check("T7", "one-twin-per-store", one_twin_per_store),
    ]
}

fn check(id: &'static str, name: &'static str, run: fn(&dyn Target) -> CheckResult) -> Check {
    Check { id, name, suite: Suite::FencedTranscripts, run }
}

fn expect_list(store: &dyn Store, run: &RunId, want: &[&str], when: &str) -> CheckResult {
    let got = store.list_blobs(run)?;
    ensure!(got == want, "list {when}: expected {want:?}, got {got:?} run={run}");
    Ok(())
}

/// T1: a missing ref reads as none and deletes as a no-op (also under a live lease); list returns
/// exactly the refs under `<run>/`, sorted, without the bare run ref, a look-alike run or a ref
/// that only contains the run's name; an empty blob is a blob; put overwrites in place. (The
/// reference's "a read is a copy" needs no check here: `get_blob` returns an owned `Vec`.)
fn basics(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let run = RunId::from("basics-run");
    let missing = "basics-run/missing";
    expect_blob(&*a, missing, None, "of a ref never written")?;
    expect_ok("delete of a missing ref", a.delete_blob(missing, None))?;
    if let Some(la) = a.leases() {
        let lease = la.acquire(&run, OWNER_A)?;
        expect_ok("delete of a missing ref under a live lease", a.delete_blob(missing, Some(&lease)))?;
    }

    let puts: [(&str, &[u8]); 7] = [
        ("basics-run/t1", &[1]),
        ("basics-run/ckpt/3", &[2]),
        ("basics-run/a", &[3]),
        ("basics-run/empty", &[]),
        ("basics-run", &[4]),
        ("basics-run-2/t1", &[5]),
        ("other-run/basics-run/t1", &[6]),
    ];
    for (blob_ref, bytes) in puts {
        a.put_blob(blob_ref, bytes, None)?;
    }
    let listed = ["basics-run/a", "basics-run/ckpt/3", "basics-run/empty", "basics-run/t1"];
    expect_list(&*b, &run, &listed, "of a run among look-alikes")?;
    expect_list(&*b, &RunId::from("basics_run"), &[], "of a run whose name is a LIKE pattern of another")?;
    expect_blob(&*b, "basics-run/empty", Some(&[]), "written empty")?;
    expect_blob(&*b, "basics-run", Some(&[4]), "under the bare run ref")?;

    a.put_blob("basics-run/t1", &[9, 9], None)?;
    expect_blob(&*b, "basics-run/t1", Some(&[9, 9]), "after an overwrite")?;
    expect_list(&*b, &run, &listed, "after an overwrite")
}

/// T2: a lease minted through connection a guards a blob put made through connection b; after a
/// takeover on a, b's put with the old lease is refused.
fn same_domain(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    require_fenced(&*a)?;
    let la = leases(&*a)?;
    let run = RunId::from(FENCED_RUN);
    let blob_ref = "fenced-run/t1";
    let first = la.acquire(&run, OWNER_A)?;
    expect_ok("blob put through b with a lease minted on a", b.put_blob(blob_ref, &[1], Some(&first)))?;
    expect_blob(&*a, blob_ref, Some(&[1]), "read through a after b's fenced put")?;
    let next = supersede(la, &first, la)?;
    expect_lease_held("stale blob put through b after the takeover on a", b.put_blob(blob_ref, &[2], Some(&first)))?;
    expect_blob(&*a, blob_ref, Some(&[1]), "after the stale put")?;
    expect_ok("blob put through b by the successor", b.put_blob(blob_ref, &[3], Some(&next)))?;
    expect_blob(&*a, blob_ref, Some(&[3]), "after the successor's put")
}

/// T3 and RFC-F2: a's checkpoint [1,1,42], a takeover, the successor's [1,3,42]; a's stale
/// [1,2,42] is refused and the blob stays [1,3,42] byte for byte.
fn stale_put_rejected(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    require_fenced(&*a)?;
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let stale = la.acquire(&RunId::from(FENCED_RUN), OWNER_A)?;
    expect_ok("checkpoint put by the live holder", a.put_blob(CKPT_REF, &[1, 1, 42], Some(&stale)))?;
    let next = supersede(la, &stale, lb)?;
    expect_ok("checkpoint put by the successor", b.put_blob(CKPT_REF, &[1, 3, 42], Some(&next)))?;
    expect_lease_held("stale checkpoint put after the takeover", a.put_blob(CKPT_REF, &[1, 2, 42], Some(&stale)))?;
    expect_blob(&*b, CKPT_REF, Some(&[1, 3, 42]), "after the stale put")
}

/// T3: a stale blob delete is refused and the successor's checkpoint survives; the successor's
/// own delete then removes it.
fn stale_delete_rejected(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    require_fenced(&*a)?;
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let run = RunId::from(FENCED_RUN);
    let stale = la.acquire(&run, OWNER_A)?;
    expect_ok("checkpoint put by the live holder", a.put_blob(CKPT_REF, &[1, 1, 42], Some(&stale)))?;
    let next = supersede(la, &stale, lb)?;
    expect_ok("checkpoint put by the successor", b.put_blob(CKPT_REF, &[1, 3, 42], Some(&next)))?;
    expect_lease_held("stale checkpoint delete after the takeover", a.delete_blob(CKPT_REF, Some(&stale)))?;
    expect_blob(&*b, CKPT_REF, Some(&[1, 3, 42]), "after the stale delete")?;
    expect_list(&*b, &run, &[CKPT_REF], "after the stale delete")?;
    expect_ok("checkpoint delete by the successor", b.delete_blob(CKPT_REF, Some(&next)))?;
    expect_blob(&*a, CKPT_REF, None, "after the successor's delete")
}

/// T4 and D8: a live lease on fenced-other-run guards no ref of fenced-run (nor the bare ref, nor
/// a run whose name merely starts with its own): puts and deletes fail with a run mismatch and
/// the blob is intact. Positive control: the same lease guards a ref under its own run.
fn run_match(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    require_fenced(&*a)?;
    let la = leases(&*a)?;
    let foreign = la.acquire(&RunId::from(OTHER_RUN), OWNER_A)?;
    let blob_ref = "fenced-run/t1";
    b.put_blob(blob_ref, &[7], None)?;
    let target = RunId::from(FENCED_RUN);
    let what = |op: &str, r: &str| format!("blob {op} of {r} with a live lease on {OTHER_RUN}");
    expect_run_mismatch(&what("put", blob_ref), a.put_blob(blob_ref, &[8], Some(&foreign)), &target)?;
    expect_run_mismatch(&what("delete", blob_ref), a.delete_blob(blob_ref, Some(&foreign)), &target)?;
    expect_blob(&*b, blob_ref, Some(&[7]), "after cross-run writes")?;
    for look_alike in [FENCED_RUN, "fenced-other-run-2/t1"] {
        let owner = RunId::of_ref(look_alike);
        expect_run_mismatch(&what("put", look_alike), a.put_blob(look_alike, &[8], Some(&foreign)), &owner)?;
        expect_blob(&*b, look_alike, None, "after a cross-run put")?;
    }

    let own_ref = "fenced-other-run/t1";
    expect_ok("blob put under the lease's own run", a.put_blob(own_ref, &[9], Some(&foreign)))?;
    expect_blob(&*b, own_ref, Some(&[9]), "put under the lease's own run")?;
    expect_ok("blob delete under the lease's own run", a.delete_blob(own_ref, Some(&foreign)))?;
    expect_blob(&*b, own_ref, None, "deleted under the lease's own run")
}

/// T5: unleased put, get, list, overwrite and delete work, deleting a missing ref is a no-op,
/// and on a leasable store all of it also works while another owner holds the run's lease.
fn unleased_passthrough(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let run = RunId::from("passthrough-run");
    if let Some(lb) = b.leases() {
        lb.acquire(&run, OWNER_B)?;
    }
    let (t1, t2) = ("passthrough-run/t1", "passthrough-run/t2");
    expect_ok("unleased blob put", a.put_blob(t1, &[1, 2], None))?;
    expect_ok("unleased blob put", a.put_blob(t2, &[3], None))?;
    expect_blob(&*b, t1, Some(&[1, 2]), "after an unleased put")?;
    expect_list(&*b, &run, &[t1, t2], "after unleased puts")?;
    expect_ok("unleased blob overwrite", a.put_blob(t1, &[4], None))?;
    expect_blob(&*b, t1, Some(&[4]), "after an unleased overwrite")?;
    expect_ok("unleased blob delete", a.delete_blob(t2, None))?;
    expect_blob(&*b, t2, None, "after an unleased delete")?;
    expect_ok("unleased delete of a missing ref", a.delete_blob(t2, None))?;
    expect_list(&*b, &run, &[t1], "after an unleased delete")
}

/// T6: blob cascades are the engine's; the journal delete of a run (unleased, and fenced where
/// the store declares fenced writes) leaves every blob of that run in place.
fn journal_delete_keeps_blobs(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let run = RunId::from("keep-run");
    a.append(&run, &entry(1, "doomed"), None)?;
    a.put_meta(&RunMeta::new(run.clone(), RunStatus::Running), None)?;
    a.put_blob("keep-run/t1", &[1, 2, 3], None)?;
    a.put_blob("keep-run/ckpt/1", &[4], None)?;
    b.delete(&run, None)?;
    let seen = b.load(&run)?;
    ensure!(seen.is_empty(), "journal after delete: expected [], got {} entries run={run}", seen.len());
    expect_blob(&*b, "keep-run/t1", Some(&[1, 2, 3]), "after the journal delete")?;
    expect_blob(&*b, "keep-run/ckpt/1", Some(&[4]), "after the journal delete")?;
    expect_list(&*b, &run, &["keep-run/ckpt/1", "keep-run/t1"], "after the journal delete")?;

    if let (Some(la), true) = (a.leases(), a.fenced_writes()) {
        let run = RunId::from("keep-fenced-run");
        let lease = la.acquire(&run, OWNER_A)?;
        a.append(&run, &entry(1, "doomed"), Some(&lease))?;
        a.put_blob("keep-fenced-run/t1", &[5], Some(&lease))?;
        expect_ok("fenced delete by the live holder", b.delete(&run, Some(&lease)))?;
        expect_blob(&*b, "keep-fenced-run/t1", Some(&[5]), "after a fenced journal delete")?;
    }
    Ok(())
}

/// T7: a store's blobs live as long as its location: blobs written through one connection are
/// visible through a new one, and through the same store object after journal work and after
/// another connection closed.
fn one_twin_per_store(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let a = fx.connect()?;
    let run = RunId::from("twin-run");
    a.put_blob("twin-run/t1", &[1], None)?;
    let c = fx.connect()?;
    expect_blob(&*c, "twin-run/t1", Some(&[1]), "through a new connection over the same location")?;
    c.put_blob("twin-run/t2", &[2], None)?;

    a.append(&run, &entry(1, "twin"), None)?;
    a.put_meta(&RunMeta::new(run.clone(), RunStatus::Running), None)?;
    a.load(&run)?;
    a.list_runs(&RunFilter::all())?;
    a.delete(&RunId::from("twin-other-run"), None)?;
    expect_blob(&*a, "twin-run/t1", Some(&[1]), "through the same store after journal work")?;
    expect_blob(&*a, "twin-run/t2", Some(&[2]), "written through another connection")?;
    drop(c);
    expect_list(&*a, &run, &["twin-run/t1", "twin-run/t2"], "after another connection closed")?;
    drop(a);
    let d = fx.connect()?;
    expect_list(&*d, &run, &["twin-run/t1", "twin-run/t2"], "through a connection opened after the others closed")
}
