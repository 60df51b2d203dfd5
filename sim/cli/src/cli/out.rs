//! Standard output and standard error for every command: a write that fails never stops a
//! command before the files it writes are written.
//!
//! `fencesim sweep --report R | true` closes the pipe before the first line; `println!` then
//! panics, and the binary ended at once with SIGPIPE's status, `R` empty and the bundles of the
//! failing seeds never written. Every command prints through [`outln!`], [`out!`] and [`errln!`]
//! instead: the first failed write to a stream is kept ([`finish`] answers it once the command
//! is done: 141 for a closed pipe, exit 2 naming any other error), nothing more is written to
//! that stream, and the command goes on to write its files. A test holds every file of the
//! command line to it (no `println!`, `print!`, `eprintln!`, `eprint!` or `std::io::stdout()`
//! outside this module).

use std::fmt;
use std::io;
use std::sync::Mutex;

/// The first error a write to standard output met, if any.
static STDOUT: Mutex<Option<io::Error>> = Mutex::new(None);
/// The first error a write to standard error met, if any.
static STDERR: Mutex<Option<io::Error>> = Mutex::new(None);

fn write(failed: &Mutex<Option<io::Error>>, mut stream: impl io::Write, args: fmt::Arguments<'_>) {
    let mut failed = failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if failed.is_some() {
        return;
    }
    if let Err(e) = stream.write_fmt(args).and_then(|()| stream.flush()) {
        *failed = Some(e);
    }
}

/// Write to standard output; after a failed write, nothing (see the module).
pub fn stdout(args: fmt::Arguments<'_>) {
    write(&STDOUT, io::stdout().lock(), args);
}

/// Write to standard error; after a failed write, nothing.
pub fn stderr(args: fmt::Arguments<'_>) {
    write(&STDERR, io::stderr().lock(), args);
}

/// The command is done: the first error standard output met, if any (a closed pipe ends the
/// process with 141, as a shell reports SIGPIPE; anything else is a harness error).
pub fn finish() -> io::Result<()> {
    match STDOUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// `print!` for commands: a failed write is kept for [`finish`], never a panic.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::out::stdout(format_args!($($arg)*))
    };
}

/// `println!` for commands: a failed write is kept for [`finish`], never a panic.
macro_rules! outln {
    () => {
        $crate::cli::out::stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::out::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` for commands: a failed write is dropped, never a panic.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::out::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` for commands (the progress line): a failed write is dropped, never a panic.
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::cli::out::stderr(format_args!($($arg)*))
    };
}

pub(crate) use {err, errln, out, outln};

#[cfg(test)]
mod tests {
    /// Every file of the command line prints through this module: a `println!` anywhere would
    /// end a command at a closed pipe before its reports and bundles were written.
    #[test]
    fn every_command_prints_through_this_module() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        for dir in [root.clone(), root.join("cli")] {
            for entry in std::fs::read_dir(&dir).expect("list src") {
                let path = entry.expect("an entry").path();
                if path.extension().is_some_and(|x| x == "rs") {
                    files.push(path);
                }
            }
        }
        let direct = ["println!", "print!(", "eprintln!", "eprint!(", "io::stdout()", "io::stderr()"];
        let mut offenders = Vec::new();
        for path in &files {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let text = std::fs::read_to_string(path).expect("read a source file");
            if name == "out.rs" {
                continue;
            }
            for (i, line) in text.lines().enumerate() {
                // Asking whether a stream is a terminal writes nothing.
                let writes = direct.iter().any(|d| line.contains(d)) && !line.contains(".is_terminal()");
                if writes && !line.trim_start().starts_with("//") {
                    offenders.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                }
            }
        }
        assert!(offenders.is_empty(), "print through cli::out (outln!, out!, errln!):\n{}", offenders.join("\n"));
    }
}
