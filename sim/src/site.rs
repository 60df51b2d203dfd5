//! The classes of fault points a scenario's faults aim at and coverage counts crashes by: the
//! engine's, and the two a crash alone may name inside the store's calls (a leaf both stand on).

use std::fmt;

/// The class of a fault point, what a fault kind's `sites` aim at. The engine's
/// (`fencesim_engine::Site`): about to take the lease, lease just taken, a model call, a tool, a
/// journal write (running entry, terminal entry, settle), a meta write, a checkpoint blob, a
/// delete. And the store's, where only a crash lands: inside a write call between its statements
/// (`mid-call`: its transaction is cut before it commits), and just after a write call returned,
/// before the caller saw the answer (`after-call`: between two steps of every cascade).
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
    MidCall,
    AfterCall,
}

impl SiteClass {
    pub const ALL: [SiteClass; 12] = [
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
        SiteClass::MidCall,
        SiteClass::AfterCall,
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
            SiteClass::MidCall => "mid-call",
            SiteClass::AfterCall => "after-call",
        }
    }

    /// A point inside or between the store's calls rather than the engine's: `any` does not
    /// cover it, and only a crash may name it.
    pub fn in_store(self) -> bool {
        matches!(self, SiteClass::MidCall | SiteClass::AfterCall)
    }
}

impl fmt::Display for SiteClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}
