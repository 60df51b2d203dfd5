//! Fault points: named places inside a store call where the reference project's bugs lived. A
//! synchronous hook installed on a store is called at each, inside the call's transaction when it
//! has one. The conformance kit and the simulator use it to attempt a takeover from another
//! connection between the fence check and the mutation (the "shim" of the reference RFC). With no
//! hook installed a fault point costs one borrow and a branch.
//!
//! A hook must not call back into the store it is installed on.

use crate::error::Op;
use crate::types::RunId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultPoint {
    /// A fenced call passed its lease check and has not yet mutated.
    FenceChecked,
    /// `acquire` found no live lease and has not yet written the new one.
    AcquireChecked,
}

/// Where a fault point fired.
#[derive(Clone, Copy, Debug)]
pub struct FaultSite<'a> {
    pub point: FaultPoint,
    pub op: Op,
    /// The run whose lease row the call reads.
    pub run: &'a RunId,
}

pub type FaultHook = Box<dyn FnMut(&FaultSite<'_>) + Send>;
