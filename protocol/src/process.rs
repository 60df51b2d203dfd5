//! One adapter process: started from its command line, spoken to one JSON line at a time, and
//! never allowed to outlive fencesim or to hang it. The child asks the kernel for `SIGKILL` when
//! the thread that started it ends (`PR_SET_PDEATHSIG`, set between fork and exec, so a foreign
//! program needs no help from its author), a read waits at most the adapter's timeout (then the
//! child is killed), and its stderr goes to an unlinked temporary file whose last lines every
//! error quotes. Nothing here reads a clock: the timeout is the kernel's `poll`.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::error::{AdapterError, Failure};
use crate::spec::Spec;

/// An answer line longer than this is garbage, not a store's answer (a runaway adapter must not
/// take fencesim's memory with it).
const LINE_MAX_BYTES: usize = 64 << 20;

/// How long the handshake may take at least, in ms: it includes the program's start.
const START_TIMEOUT_MS: u32 = 30_000;

/// How many of stderr's last lines an error quotes.
const STDERR_LINES: usize = 5;

pub(crate) struct Process {
    spec: Spec,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    /// Bytes read past the last full line.
    pending: Vec<u8>,
    stderr: File,
}

impl Process {
    /// Start the adapter. Its stdin and stdout are ours; its stderr goes to an unlinked file.
    pub(crate) fn spawn(spec: &Spec) -> Result<Process, AdapterError> {
        let fail = |what: String| spec.error("start", Failure::Start(what), String::new());
        let stderr = tempfile::tempfile().map_err(|e| fail(format!("cannot make a file for its stderr: {e}")))?;
        let log = stderr.try_clone().map_err(|e| fail(format!("cannot share its stderr file: {e}")))?;
        let mut command = Command::new(&spec.argv[0]);
        command.args(&spec.argv[1..]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::from(log));
        die_with_this_thread(&mut command);
        share_a_core();
        let mut child = command.spawn().map_err(|e| fail(format!("cannot run `{}`: {e}", spec.argv[0])))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail("its pipes were not set up".to_owned()));
        };
        Ok(Process { spec: spec.clone(), child, stdin: Some(stdin), stdout, pending: Vec::new(), stderr })
    }

    /// Write one request line.
    pub(crate) fn send(&mut self, request: &str, line: &str) -> Result<(), AdapterError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(self.fail(request, Failure::Exited("its stdin is closed".to_owned())));
        };
        let written =
            stdin.write_all(line.as_bytes()).and_then(|()| stdin.write_all(b"\n")).and_then(|()| stdin.flush());
        match written {
            Ok(()) => Ok(()),
            Err(e) => {
                let status = self.exit_status();
                Err(self.fail(request, Failure::Exited(format!("writing the request failed ({e}); {status}"))))
            }
        }
    }

    /// Read one answer line, waiting at most the spec's timeout for each chunk of it.
    pub(crate) fn recv(&mut self, request: &str) -> Result<String, AdapterError> {
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return String::from_utf8(line[..end].to_vec()).map_err(|_| {
                    let shown = String::from_utf8_lossy(&line[..end]).into_owned();
                    self.fail(request, Failure::Garbage { line: shown, why: "not UTF-8".to_owned() })
                });
            }
            if self.pending.len() > LINE_MAX_BYTES {
                return Err(self.fail(
                    request,
                    Failure::Garbage { line: String::new(), why: format!("a line over {LINE_MAX_BYTES} bytes") },
                ));
            }
            self.wait_readable(request)?;
            let mut chunk = [0u8; 64 * 1024];
            match self.stdout.read(&mut chunk) {
                Ok(0) => {
                    let status = self.exit_status();
                    return Err(self.fail(request, Failure::Exited(format!("it closed its stdout; {status}"))));
                }
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail(request, Failure::Exited(format!("reading its stdout failed: {e}")))),
            }
        }
    }

    /// Wait until stdout has something to read (or was closed), at most the timeout; past it the
    /// adapter is killed.
    fn wait_readable(&mut self, request: &str) -> Result<(), AdapterError> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        // The handshake waits for the program to start too (an interpreter, a JVM): at least
        // START_TIMEOUT_MS, whatever the per-call timeout.
        let ms = if request == "hello" { self.spec.timeout_ms.max(START_TIMEOUT_MS) } else { self.spec.timeout_ms };
        let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
        loop {
            let mut fds = [PollFd::new(self.stdout.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, timeout) {
                Ok(0) => {
                    self.kill();
                    return Err(self.fail(request, Failure::Timeout(ms)));
                }
                Ok(_) => return Ok(()),
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(self.fail(request, Failure::Exited(format!("waiting on its stdout failed: {e}")))),
            }
        }
    }

    /// How the child ended, if it did (reaped here), for an error's text.
    fn exit_status(&mut self) -> String {
        match self.child.try_wait() {
            Ok(Some(status)) => format!("it {}", describe(status)),
            _ => "it is still running".to_owned(),
        }
    }

    pub(crate) fn fail(&mut self, request: &str, failure: Failure) -> AdapterError {
        let stderr = self.stderr_tail();
        self.spec.error(request, failure, stderr)
    }

    /// The last lines the adapter wrote to its stderr, joined with ` | `.
    fn stderr_tail(&mut self) -> String {
        let mut text = String::new();
        if self.stderr.seek(SeekFrom::Start(0)).is_ok() {
            let _ = (&self.stderr).take(16 << 20).read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(STDERR_LINES)..].join(" | ")
    }

    pub(crate) fn kill(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a closing adapter may take to exit on its own once its stdin is closed (closing its
/// databases cleanly) before it is killed.
const EXIT_GRACE_MS: u16 = 2_000;

impl Drop for Process {
    /// Close its stdin, which a well-behaved adapter takes as its cue to close its databases and
    /// exit; wait for its stdout to close, at most [`EXIT_GRACE_MS`]; then kill it regardless.
    fn drop(&mut self) {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        if self.stdin.take().is_some() {
            let mut sink = [0u8; 4096];
            loop {
                let mut fds = [PollFd::new(self.stdout.as_fd(), PollFlags::POLLIN)];
                match poll(&mut fds, PollTimeout::from(EXIT_GRACE_MS)) {
                    Ok(n) if n > 0 && matches!(self.stdout.read(&mut sink), Ok(n) if n > 0) => {}
                    Err(nix::errno::Errno::EINTR) => {}
                    _ => break,
                }
            }
        }
        self.kill();
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "ended".to_owned(),
    }
}

/// Adapters started so far in this process: the next one's core.
static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Pin the calling thread and the child to one core, a different one for each adapter in turn.
/// Every call is a round trip between the two, each waiting while the other works: on one core a
/// wake-up is a context switch, across cores it is an inter-processor interrupt, which on this
/// project's virtual machines made a call twice as slow (a swarm world on one job ran at 2.5 and
/// 4.9 worlds/s unpinned and pinned). Where affinity cannot be set, nothing is pinned.
fn share_a_core() {
    use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
    use nix::unistd::Pid;
    let Ok(allowed) = sched_getaffinity(Pid::from_raw(0)) else { return };
    let cores: Vec<usize> = (0..CpuSet::count()).filter(|c| allowed.is_set(*c).unwrap_or(false)).collect();
    if cores.len() < 2 {
        return;
    }
    // Offset by the pid: processes that each start one adapter (the soak's writers) spread too.
    let turn = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + std::process::id() as usize;
    let core = cores[turn % cores.len()];
    let mut one = CpuSet::new();
    // The child inherits the thread's affinity at fork.
    if one.set(core).is_ok() {
        let _ = sched_setaffinity(Pid::from_raw(0), &one);
    }
}

/// Have the kernel `SIGKILL` the child when the thread that starts it ends (fencesim killed
/// included), and have the child exit at once if that already happened before it asked.
#[allow(unsafe_code)]
fn die_with_this_thread(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and calls only async-signal-safe
    // functions: prctl(2), getppid(2) and _exit(2), with no allocation and no lock.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent.as_raw() {
                libc::_exit(2);
            }
            Ok(())
        });
    }
}
