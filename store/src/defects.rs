//! Planted store defects: the reference project's real fencing bugs (contracts section 6), each
//! switchable at run time so the harness can prove, every run, that it catches them. The switch
//! only has an effect when the crate is built with the `defects` feature; without it
//! [`StoreDefects::has`] is a constant `false` and every planted branch compiles away.

use std::fmt;
use std::marker::PhantomData;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StoreDefect {
    /// D3: lease check and mutation in separate statements; renew/release WHERE keyed by run only.
    NonAtomicFence,
    /// D7: `delete` erases the epoch high-water mark, so epochs restart at 1.
    EpochResetOnDelete,
    /// D8: the fence checks the lease against its own run, not the call's target run.
    NoRunMatch,
    /// D1, store side: `put_meta` ignores its lease.
    UnfencedMeta,
    /// D2, store side: blob put/delete ignore their lease.
    UnfencedBlobs,
    /// D4, store side: `delete` ignores its lease.
    UnfencedDelete,
    /// L7 loosened: a stale release returns ok silently.
    StaleReleaseAccepted,
    /// Contracts 9.1 broken: an expired row still guards writes and can be renewed.
    ExpiredLeaseLive,
    /// J5 absent: appends are plain inserts.
    NoSeqGuard,
    /// D6: the bootstrap is tried once; a busy boot fails.
    NoBootRetry,
    /// W7 broken: the fence of put_meta, delete and both blob writes compares the epoch, not the
    /// owner, so a forged owner at the live epoch passes (append, renew, release keep both).
    EpochOnlyFence,
    /// T4 broken on one surface: `delete_blob` checks the lease against its own run, not the
    /// ref's, so a live lease of run A deletes run B's blob.
    BlobDeleteNoRunMatch,
    /// 9.1 off by one: the fence counts a row live through its expiry millisecond
    /// (`now <= expires_at`), while acquire already sees it expired.
    ExpiryInstantLive,
    /// S6 broken: the unleased (administrative) delete also erases the epoch high-water mark; the
    /// fenced delete keeps it.
    AdminDeleteDropsTombstone,
    /// L8 broken (blind set 2026-12-04, `01-renew-extends-old-expiry.patch`): renew adds the ttl
    /// to the row's old expiry instead of setting it to now + ttl, so every renew pushes the
    /// expiry past now + ttl and a lease stays live (and fences others out) well beyond a ttl
    /// after its last renew.
    RenewExtendsOldExpiry,
    /// L3 and 9.1 broken (blind set 2026-12-04, `02-acquire-reclaims-own-epoch.patch`): acquire
    /// by the owner of the run's (expired) lease row reuses that row's epoch instead of bumping the
    /// high-water mark, so a holder that lost the lease and reacquires gets its old epoch back.
    AcquireReclaimsOwnEpoch,
    /// J7 and S6 broken (blind set 2026-12-04, `03-purge-keeps-lease-row.patch`): the unleased
    /// (administrative) delete keeps the run's lease row, so a live holder's lease survives the
    /// purge and still fences the recreated run.
    PurgeKeepsLeaseRow,
    /// T1 and E9 broken (blind set 2026-12-04, `04-list-blobs-prefix.patch`): `list_blobs`
    /// matches refs by prefix, so a run whose id is a prefix of another's lists that run's blobs.
    ListBlobsPrefix,
    /// S6/J7 broken: `delete` commits table by table (to hold the write lock for less time), so a
    /// crash between two of its statements leaves a run half deleted: its journal gone, its meta
    /// or its lease still there.
    DeleteInPieces,
}

impl StoreDefect {
    pub const ALL: [StoreDefect; 19] = [
        StoreDefect::NonAtomicFence,
        StoreDefect::EpochResetOnDelete,
        StoreDefect::NoRunMatch,
        StoreDefect::UnfencedMeta,
        StoreDefect::UnfencedBlobs,
        StoreDefect::UnfencedDelete,
        StoreDefect::StaleReleaseAccepted,
        StoreDefect::ExpiredLeaseLive,
        StoreDefect::NoSeqGuard,
        StoreDefect::NoBootRetry,
        StoreDefect::EpochOnlyFence,
        StoreDefect::BlobDeleteNoRunMatch,
        StoreDefect::ExpiryInstantLive,
        StoreDefect::AdminDeleteDropsTombstone,
        StoreDefect::RenewExtendsOldExpiry,
        StoreDefect::AcquireReclaimsOwnEpoch,
        StoreDefect::PurgeKeepsLeaseRow,
        StoreDefect::ListBlobsPrefix,
        StoreDefect::DeleteInPieces,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StoreDefect::NonAtomicFence => "non-atomic-fence",
            StoreDefect::EpochResetOnDelete => "epoch-reset-on-delete",
            StoreDefect::NoRunMatch => "no-run-match",
            StoreDefect::UnfencedMeta => "unfenced-meta",
            StoreDefect::UnfencedBlobs => "unfenced-blobs",
            StoreDefect::UnfencedDelete => "unfenced-delete",
            StoreDefect::StaleReleaseAccepted => "stale-release-accepted",
            StoreDefect::ExpiredLeaseLive => "expired-lease-live",
            StoreDefect::NoSeqGuard => "no-seq-guard",
            StoreDefect::NoBootRetry => "no-boot-retry",
            StoreDefect::EpochOnlyFence => "epoch-only-fence",
            StoreDefect::BlobDeleteNoRunMatch => "blob-delete-no-run-match",
            StoreDefect::ExpiryInstantLive => "expiry-instant-live",
            StoreDefect::AdminDeleteDropsTombstone => "admin-delete-drops-tombstone",
            StoreDefect::RenewExtendsOldExpiry => "renew-extends-old-expiry",
            StoreDefect::AcquireReclaimsOwnEpoch => "acquire-reclaims-own-epoch",
            StoreDefect::PurgeKeepsLeaseRow => "purge-keeps-lease-row",
            StoreDefect::ListBlobsPrefix => "list-blobs-prefix",
            StoreDefect::DeleteInPieces => "delete-in-pieces",
        }
    }

    /// The bug in the reference history this defect plants back.
    pub fn story(self) -> &'static str {
        match self {
            StoreDefect::NonAtomicFence => "D3: fence check not atomic with its mutation",
            StoreDefect::EpochResetOnDelete => "D7: epoch reset on delete",
            StoreDefect::NoRunMatch => "D8: missing run-match rule",
            StoreDefect::UnfencedMeta => "D1: stale terminal put_meta accepted",
            StoreDefect::UnfencedBlobs => "D2: stale checkpoint save accepted",
            StoreDefect::UnfencedDelete => "D4: destructive delete unfenced",
            StoreDefect::StaleReleaseAccepted => "L7: stale release resolves ok",
            StoreDefect::ExpiredLeaseLive => "9.1: expired lease treated as live",
            StoreDefect::NoSeqGuard => "J5: monotonic seq guard absent",
            StoreDefect::NoBootRetry => "D6: concurrent boot not retried",
            StoreDefect::EpochOnlyFence => "W7: forged owner at the live epoch accepted",
            StoreDefect::BlobDeleteNoRunMatch => "T4: cross-run blob delete accepted",
            StoreDefect::ExpiryInstantLive => "9.1: lease live at its expiry millisecond",
            StoreDefect::AdminDeleteDropsTombstone => "S6: unleased delete drops the epoch tombstone",
            StoreDefect::RenewExtendsOldExpiry => "L8 (blind 01): renew extends the old expiry, not now + ttl",
            StoreDefect::AcquireReclaimsOwnEpoch => "L3 (blind 02): reacquire by the same owner reuses its epoch",
            StoreDefect::PurgeKeepsLeaseRow => "J7 (blind 03): unleased purge keeps the lease row",
            StoreDefect::ListBlobsPrefix => "T1 (blind 04): list_blobs matches refs by run-id prefix",
            StoreDefect::DeleteInPieces => "S6: delete committed table by table, cut in half by a crash",
        }
    }

    pub fn parse(name: &str) -> Option<StoreDefect> {
        StoreDefect::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for StoreDefect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A kind of planted defect: the store's ([`StoreDefect`]) or the engine's. Each crate says
/// whether its own defects are compiled in, so planting one crate's defects never arms the
/// other's.
pub trait Defect: Copy {
    /// Whether this kind's defects can take effect in this build (its crate's `defects` feature).
    const COMPILED_IN: bool;
    /// The defect's bit in a [`DefectSet`] (below 32).
    fn bit(self) -> u32;
}

impl Defect for StoreDefect {
    const COMPILED_IN: bool = cfg!(feature = "defects");

    fn bit(self) -> u32 {
        self as u32
    }
}

/// A set of planted defects of one kind; empty by default. The run-time switch of both crates.
pub struct DefectSet<D> {
    bits: u32,
    kind: PhantomData<D>,
}

/// The store's planted defects.
pub type StoreDefects = DefectSet<StoreDefect>;

impl<D: Defect> DefectSet<D> {
    pub const NONE: Self = Self { bits: 0, kind: PhantomData };

    pub fn of(defects: &[D]) -> Self {
        let mut bits = 0;
        for defect in defects {
            // A bit past the set's width would wrap onto another defect's.
            assert!(defect.bit() < u32::BITS, "a defect's bit {} does not fit a set of {}", defect.bit(), u32::BITS);
            bits |= 1 << defect.bit();
        }
        Self { bits, kind: PhantomData }
    }

    /// Whether `defect` is planted. Always false unless its crate is built with `defects`.
    #[inline(always)]
    pub fn has(self, defect: D) -> bool {
        D::COMPILED_IN && self.bits & (1 << defect.bit()) != 0
    }

    /// Whether planted defects of this kind can take effect in this build.
    pub const fn compiled_in() -> bool {
        D::COMPILED_IN
    }
}

// By hand: derived impls would demand the same traits of the marker `D`.
impl<D> Clone for DefectSet<D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D> Copy for DefectSet<D> {}

impl<D> Default for DefectSet<D> {
    fn default() -> Self {
        Self { bits: 0, kind: PhantomData }
    }
}

impl<D> PartialEq for DefectSet<D> {
    fn eq(&self, other: &Self) -> bool {
        self.bits == other.bits
    }
}

impl<D> Eq for DefectSet<D> {}

impl<D> std::hash::Hash for DefectSet<D> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bits.hash(state);
    }
}

impl<D> fmt::Debug for DefectSet<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DefectSet({:#x})", self.bits)
    }
}
