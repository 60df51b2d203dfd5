//! Known findings and expected capabilities for `fencesim conformance`: what a store is known to
//! fail, and which capabilities it is expected to lack, said by the user so that a run can be
//! green on a store with a recorded finding without skipping the check, and so that a kit that
//! skipped the fencing checks is never read as a pass.
//!
//! A known-findings file holds one finding per line, `CHECK-NAME  reason` (the kit's check name,
//! then why it fails); `#` starts a comment. A listed check that fails is reported `KNOWN` with
//! its reason; a listed check that passes fails the run (the finding is gone: remove it); a name
//! that is no check of the kit is an input error.

use std::collections::BTreeMap;
use std::path::Path;

use fencesim_store::conformance::{self, Outcome};

/// The largest known-findings file read (a list of kit checks is a few kilobytes).
const MAX_BYTES: u64 = 64 * 1024;

/// The capabilities a store can declare that the fencing checks need.
pub const CAPABILITIES: [&str; 3] = ["leases", "fenced_writes", "fault_points"];

#[derive(Debug, thiserror::Error)]
pub enum KnownError {
    #[error(transparent)]
    Input(#[from] fencesim_sim::files::InputError),
    #[error("{path}:{line}: {message}")]
    Line { path: String, line: usize, message: String },
    #[error("--expect-capabilities: unknown capability '{0}' (valid: leases, fenced_writes, fault_points, none)")]
    Capability(String),
}

/// Check name -> why it is known to fail.
#[derive(Debug, Default)]
pub struct Known(pub BTreeMap<String, String>);

impl Known {
    pub fn read(path: &Path) -> Result<Known, KnownError> {
        let text = fencesim_sim::files::read_input(path, MAX_BYTES)?;
        Known::parse(&text, &path.display().to_string())
    }

    fn parse(text: &str, path: &str) -> Result<Known, KnownError> {
        let names: Vec<&str> = conformance::checks().iter().map(|c| c.name).collect();
        let mut known = BTreeMap::new();
        for (n, raw) in text.lines().enumerate() {
            let fail = |message: String| KnownError::Line { path: path.to_owned(), line: n + 1, message };
            let line = raw.split_once('#').map_or(raw, |(before, _)| before).trim();
            if line.is_empty() {
                continue;
            }
            let (name, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let reason = reason.trim();
            if !names.contains(&name) {
                return Err(fail(format!("'{name}' is no check of the kit")));
            }
            if reason.is_empty() {
                return Err(fail(format!("'{name}' has no reason: say why it is known to fail")));
            }
            if known.insert(name.to_owned(), reason.to_owned()).is_some() {
                return Err(fail(format!("'{name}' is listed twice")));
            }
        }
        Ok(Known(known))
    }

    /// The reason a failing check is known to fail, if it is.
    pub fn reason(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Listed findings whose check did not fail (passed or skipped): the list is out of date.
    pub fn gone<'a>(&'a self, reports: &'a [conformance::CheckReport]) -> Vec<&'a str> {
        self.0
            .keys()
            .filter(|name| reports.iter().any(|r| r.name == name.as_str() && !matches!(r.outcome, Outcome::Fail(_))))
            .map(String::as_str)
            .collect()
    }
}

/// `--expect-capabilities leases,fenced_writes` (or `none`): the capabilities a store is expected
/// to have. By default all three.
pub fn parse_capabilities(list: &str) -> Result<Vec<&'static str>, KnownError> {
    if list == "none" {
        return Ok(Vec::new());
    }
    list.split(',')
        .map(|name| {
            CAPABILITIES
                .iter()
                .copied()
                .find(|c| *c == name.trim())
                .ok_or_else(|| KnownError::Capability(name.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_findings_file_names_checks_with_reasons() {
        let known =
            Known::parse("# rulvar's Postgres store\nruntime-fail-fast  waits for its run lock # B3\n\n", "f").unwrap();
        assert_eq!(known.reason("runtime-fail-fast"), Some("waits for its run lock"));
        assert_eq!(known.reason("a1-append-atomicity"), None);
    }

    #[test]
    fn unknown_names_missing_reasons_and_repeats_are_refused_with_their_line() {
        let e = Known::parse("no-such-check  why\n", "f").unwrap_err().to_string();
        assert_eq!(e, "f:1: 'no-such-check' is no check of the kit");
        let e = Known::parse("\nruntime-fail-fast\n", "f").unwrap_err().to_string();
        assert!(e.starts_with("f:2: 'runtime-fail-fast' has no reason"), "{e}");
        let e = Known::parse("runtime-fail-fast a\nruntime-fail-fast b\n", "f").unwrap_err().to_string();
        assert_eq!(e, "f:2: 'runtime-fail-fast' is listed twice");
    }

    #[test]
    fn capabilities_parse_and_refuse_unknown_names() {
        assert_eq!(parse_capabilities("leases,fenced_writes").unwrap(), ["leases", "fenced_writes"]);
        assert!(parse_capabilities("none").unwrap().is_empty());
        assert!(parse_capabilities("leases,teleport").is_err());
    }
}
