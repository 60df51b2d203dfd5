//! Which adapter to run: `--store cmd:COMMAND`, the command split as a POSIX shell would split it
//! (quotes and escapes, no expansion), and how long one answer may take.

use std::fmt;

use crate::child::ProcessGroup;
use crate::error::{AdapterError, Failure};

/// How long fencesim waits for one answer line by default, in ms: far above any store call a
/// correct adapter makes (a few ms), far below a CI job's patience.
pub const TIMEOUT_MS_DEFAULT: u32 = 10_000;

/// An adapter's command line, its answer timeout and its process group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The program and its arguments (never empty).
    pub argv: Vec<String>,
    /// The command as the user gave it, for every message that names the adapter.
    pub text: String,
    pub timeout_ms: u32,
    /// A group of its own (the default), or the caller's.
    pub group: ProcessGroup,
}

impl Spec {
    /// `cmd:COMMAND` (what `--store` takes) to a spec with the default timeout.
    pub fn parse(flag: &str) -> Result<Spec, SpecError> {
        let Some(command) = flag.strip_prefix("cmd:") else {
            return Err(SpecError(format!("a store adapter is given as cmd:COMMAND, not '{flag}'")));
        };
        let argv = shlex::split(command)
            .ok_or_else(|| SpecError(format!("cannot split the adapter command '{command}' (an unclosed quote?)")))?;
        if argv.is_empty() {
            return Err(SpecError("the adapter command after cmd: is empty".to_owned()));
        }
        Ok(Spec { argv, text: command.trim().to_owned(), timeout_ms: TIMEOUT_MS_DEFAULT, group: ProcessGroup::Own })
    }

    pub fn timeout_ms(mut self, ms: u32) -> Self {
        self.timeout_ms = ms;
        self
    }

    /// Start the adapter in this process group.
    pub fn group(mut self, group: ProcessGroup) -> Self {
        self.group = group;
        self
    }

    pub(crate) fn error(&self, request: &str, failure: Failure, stderr: String) -> AdapterError {
        AdapterError { adapter: self.text.clone(), request: request.to_owned(), failure, stderr }
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cmd:{}", self.text)
    }
}

/// A `--store cmd:...` value that does not name a command.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_split_as_a_shell_would() {
        let spec = Spec::parse("cmd:python3 'my adapter.py' --db \"a b\"").expect("parses");
        assert_eq!(spec.argv, ["python3", "my adapter.py", "--db", "a b"]);
        assert_eq!(spec.to_string(), "cmd:python3 'my adapter.py' --db \"a b\"");
    }

    #[test]
    fn what_is_not_a_command_is_refused_with_its_reason() {
        for (flag, says) in [("python3 a.py", "cmd:COMMAND"), ("cmd:", "empty"), ("cmd:python3 'a", "unclosed")] {
            let error = Spec::parse(flag).expect_err(flag).to_string();
            assert!(error.contains(says), "{flag}: {error}");
        }
    }
}
