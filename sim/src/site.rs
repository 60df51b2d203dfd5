//! The classes of engine fault points a scenario's faults aim at and coverage counts crashes by:
//! a leaf both stand on.

use std::fmt;

/// The class of an engine fault point (`fencesim_engine::Site`), what a fault kind's `sites` aim
/// at: about to take the lease, lease just taken, a model call, a tool, a journal write (running
/// entry, terminal entry, settle), a meta write, a checkpoint blob, a delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SiteClass {
    Acquire,
    Owned,
    Call,
    Tool,
    Running,
    Terminal,
    Settle,
    Meta,
    Checkpoint,
    Delete,
}

impl SiteClass {
    pub const ALL: [SiteClass; 10] = [
        SiteClass::Acquire,
        SiteClass::Owned,
        SiteClass::Call,
        SiteClass::Tool,
        SiteClass::Running,
        SiteClass::Terminal,
        SiteClass::Settle,
        SiteClass::Meta,
        SiteClass::Checkpoint,
        SiteClass::Delete,
    ];

    /// Its name in `sites`, in traces (`... at settle`) and in coverage events (`crash-at-settle`).
    pub fn as_str(self) -> &'static str {
        match self {
            SiteClass::Acquire => "acquire",
            SiteClass::Owned => "owned",
            SiteClass::Call => "call",
            SiteClass::Tool => "tool",
            SiteClass::Running => "running",
            SiteClass::Terminal => "terminal",
            SiteClass::Settle => "settle",
            SiteClass::Meta => "meta",
            SiteClass::Checkpoint => "checkpoint",
            SiteClass::Delete => "delete",
        }
    }
}

impl fmt::Display for SiteClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}
