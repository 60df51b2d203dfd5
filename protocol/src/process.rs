//! One adapter process, spoken to one JSON line at a time, never allowed to outlive fencesim or to
//! hang it. Everything waits in one `poll` loop over the adapter's stdin (written without
//! blocking), stdout, stderr and exit (its pidfd), each wait under one deadline: a request must
//! be read within the timeout, an answer line must arrive whole within it, and a closing adapter
//! must exit within [`EXIT_GRACE_MS`], however it trickles or floods meanwhile. Its stderr is
//! drained by the same loop into a bounded tail ([`Tail`]); an answer line is cut in linear time
//! and refused past [`MAX_ANSWER_BYTES`]. On any failure the adapter's process group is killed
//! and its stderr read to its end before the error quotes it, and an error says how the process
//! ended from what `waitid` reported, never from a guess.
//!
//! Nothing here reads a clock: a deadline is a kernel timer (a timerfd) in the same `poll`, so it
//! holds when a simulated world (under madsim, whose clock stands still meanwhile) calls a store.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::process::{ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::time::TimeSpec;
use nix::sys::timer::{Expiration, TimerSetTimeFlags};
use nix::sys::timerfd::{ClockId, TimerFd, TimerFlags};

use crate::child::{AdapterChild, Ended};
use crate::error::{AdapterError, Ending, Failure, Waiting};
use crate::spec::Spec;
use crate::tail::{Lines, Tail};

/// The longest answer line fencesim reads, in bytes (the newline not counted): a longer one is a
/// harness error naming this bound, so a runaway adapter cannot take fencesim's memory with it.
pub const MAX_ANSWER_BYTES: usize = 64 << 20;

/// How long the handshake may take at least, in ms: it includes the program's start.
const START_TIMEOUT_MS: u32 = 30_000;

/// How long a closing adapter may take to exit on its own once its stdin is closed (closing its
/// databases cleanly), in all, before its group is killed; also how long an adapter that closed
/// its stdout is given to exit before an error says it had not.
pub const EXIT_GRACE_MS: u32 = 2_000;

/// How long fencesim reads a dead adapter's stderr to its end (a process outside its group may
/// hold the pipe open), in ms.
const STDERR_DRAIN_MS: u32 = 500;

/// How many of stderr's last lines an error quotes.
const STDERR_LINES: usize = 5;

/// How much one read takes from a pipe.
const CHUNK: usize = 64 << 10;

/// A point in time a wait must not pass: a one-shot kernel timer (a timerfd), polled with the
/// pipes. No clock is read: a world's store calls run under madsim, whose clock (the one
/// `Instant` and `clock_gettime` read there) stands still while a real process works.
struct Deadline {
    /// `None` where no timer could be made: each wait then gets the whole `ms` (as before there
    /// were deadlines).
    timer: Option<TimerFd>,
    ms: u32,
}

impl Deadline {
    fn after(ms: u32) -> Self {
        let timer = TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK)
            .ok()
            .filter(|timer| {
                // A zero expiration disarms a timerfd: a deadline of 0 ms is 1 ns away.
                let after = Duration::from_millis(u64::from(ms)).max(Duration::from_nanos(1));
                timer.set(Expiration::OneShot(TimeSpec::from_duration(after)), TimerSetTimeFlags::empty()).is_ok()
            });
        Deadline { timer, ms }
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.timer.as_ref().map(AsFd::as_fd)
    }

    /// How long one `poll` may block: until the timer fires, or the whole `ms` without one.
    fn poll_timeout(&self) -> PollTimeout {
        if self.timer.is_some() {
            PollTimeout::NONE
        } else {
            PollTimeout::try_from(self.ms).unwrap_or(PollTimeout::MAX)
        }
    }
}

/// What a wait may end on.
#[derive(Clone, Copy, Default)]
struct Want {
    stdin: bool,
    stdout: bool,
    exit: bool,
}

/// What was ready when a wait ended.
#[derive(Default)]
struct Ready {
    stdin: bool,
    stdout: bool,
    exit: bool,
}

pub(crate) struct Process {
    spec: Spec,
    child: AdapterChild,
    /// Non-blocking; `None` once closed.
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    stdout_eof: bool,
    /// `None` once it reached its end.
    stderr: Option<ChildStderr>,
    lines: Lines,
    tail: Tail,
}

impl Process {
    /// Start the adapter, its stdin, stdout and stderr pipes ours.
    pub(crate) fn spawn(spec: &Spec) -> Result<Process, AdapterError> {
        let fail = |what: String| spec.error("start", Failure::Start(what), String::new());
        let mut command = Command::new(&spec.argv[0]);
        command.args(&spec.argv[1..]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        share_a_core();
        let mut child = AdapterChild::spawn(command, spec.group)
            .map_err(|e| fail(format!("cannot run `{}`: {e}", spec.argv[0])))?;
        let pipes = child.child_mut();
        let (Some(stdin), Some(stdout), Some(stderr)) = (pipes.stdin.take(), pipes.stdout.take(), pipes.stderr.take())
        else {
            return Err(fail("its pipes were not set up".to_owned()));
        };
        set_nonblocking(stdin.as_fd()).map_err(|e| fail(format!("cannot make its stdin non-blocking: {e}")))?;
        Ok(Process {
            spec: spec.clone(),
            child,
            stdin: Some(stdin),
            stdout,
            stdout_eof: false,
            stderr: Some(stderr),
            lines: Lines::new(MAX_ANSWER_BYTES),
            tail: Tail::default(),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// The per-request timeout; the handshake waits for the program's start too (an
    /// interpreter, a JVM): at least `START_TIMEOUT_MS`.
    fn timeout_ms(&self, request: &str) -> u32 {
        if request == "hello" { self.spec.timeout_ms.max(START_TIMEOUT_MS) } else { self.spec.timeout_ms }
    }

    /// Write one request line, all of it read by the adapter within the timeout.
    pub(crate) fn send(&mut self, request: &str, line: &str) -> Result<(), AdapterError> {
        let ms = self.timeout_ms(request);
        let deadline = Deadline::after(ms);
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        let mut written = 0;
        while written < bytes.len() {
            let Some(stdin) = self.stdin.as_mut() else {
                return Err(self.closed(request, "its stdin is closed".to_owned()));
            };
            match stdin.write(&bytes[written..]) {
                Ok(0) => return Err(self.closed(request, "its stdin took no more bytes".to_owned())),
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    // Its answers are read meanwhile (a full stdout would stop it reading), up
                    // to the bound on one answer.
                    let stdout = !self.stdout_eof && self.lines.pending() <= MAX_ANSWER_BYTES;
                    match self.wait(Want { stdin: true, stdout, exit: false }, &deadline) {
                        Some(ready) if ready.stdout => self.read_stdout(request)?,
                        Some(_) => {}
                        None => return Err(self.fail(request, Failure::Timeout { ms, waiting: Waiting::Read })),
                    }
                }
                Err(e) => {
                    let what = format!("it stopped reading its stdin (writing the request: {e})");
                    return Err(self.closed(request, what));
                }
            }
        }
        // Written whole, newline included: the adapter reads one request a line.
        assert_eq!(written, bytes.len(), "a request written in part");
        Ok(())
    }

    /// Read one answer line: all of it within the timeout, however it is chunked.
    pub(crate) fn recv(&mut self, request: &str) -> Result<String, AdapterError> {
        let ms = self.timeout_ms(request);
        let deadline = Deadline::after(ms);
        loop {
            if let Some(line) = self.next_line(request)? {
                return Ok(line);
            }
            if self.stdout_eof {
                return Err(self.closed(request, "it closed its stdout".to_owned()));
            }
            match self.wait(Want { stdout: true, ..Want::default() }, &deadline) {
                Some(_) => self.read_stdout(request)?,
                None => return Err(self.fail(request, Failure::Timeout { ms, waiting: Waiting::Answer })),
            }
        }
    }

    /// What the adapter wrote on its stdout beyond the answers read so far, at this instant:
    /// the first such line (or the part of one), if any.
    pub(crate) fn stray(&mut self, request: &str) -> Result<Option<String>, AdapterError> {
        while !self.stdout_eof && self.readable_now() {
            self.read_stdout(request)?;
            if self.lines.pending() > 0 {
                break;
            }
        }
        if let Some(line) = self.next_line(request)? {
            return Ok(Some(line));
        }
        let partial = self.lines.partial();
        Ok((!partial.is_empty()).then(|| String::from_utf8_lossy(partial).into_owned()))
    }

    fn readable_now(&self) -> bool {
        let mut fds = [PollFd::new(self.stdout.as_fd(), PollFlags::POLLIN)];
        matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
    }

    fn next_line(&mut self, request: &str) -> Result<Option<String>, AdapterError> {
        match self.lines.next_line() {
            Ok(None) => Ok(None),
            Ok(Some(line)) => String::from_utf8(line).map(Some).map_err(|e| {
                let shown = String::from_utf8_lossy(e.as_bytes()).into_owned();
                self.fail(request, Failure::Garbage { line: shown, why: "not UTF-8".to_owned() })
            }),
            Err(_) => Err(self.fail(request, Failure::TooLong { max: MAX_ANSWER_BYTES })),
        }
    }

    /// One read of stdout into the line buffer (EOF noted).
    fn read_stdout(&mut self, request: &str) -> Result<(), AdapterError> {
        let mut chunk = vec![0u8; CHUNK];
        loop {
            match self.stdout.read(&mut chunk) {
                Ok(0) => self.stdout_eof = true,
                Ok(n) => self.lines.push(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let what = format!("reading its stdout failed: {e}");
                    return Err(self.closed(request, what));
                }
            }
            return Ok(());
        }
    }

    /// One read of stderr into the tail (EOF closes it).
    fn read_stderr(&mut self) {
        let Some(stderr) = self.stderr.as_mut() else { return };
        let mut chunk = [0u8; 16 << 10];
        loop {
            match stderr.read(&mut chunk) {
                Ok(0) => self.stderr = None,
                Ok(n) => self.tail.push(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => self.stderr = None,
            }
            return;
        }
    }

    /// Wait until something `want`ed is ready, draining stderr meanwhile; `None` once the
    /// deadline passed with nothing wanted ready.
    fn wait(&mut self, want: Want, deadline: &Deadline) -> Option<Ready> {
        loop {
            let (ready, stderr_ready, expired) = self.poll_once(want, Some(deadline));
            if stderr_ready {
                self.read_stderr();
            }
            if ready.is_some() {
                return ready;
            }
            if expired {
                // One last look: what is ready now counts (a process stopped and continued past
                // its deadline, its answer waiting, has not timed out).
                let (ready, stderr_ready, _) = self.poll_once(want, None);
                if stderr_ready {
                    self.read_stderr();
                }
                return ready;
            }
        }
    }

    /// One `poll` of the wanted descriptors, stderr and the deadline's timer (without a deadline,
    /// a look that does not block): what was wanted and ready (`None`: nothing wanted was),
    /// whether stderr was, and whether the deadline passed.
    fn poll_once(&self, want: Want, deadline: Option<&Deadline>) -> (Option<Ready>, bool, bool) {
        // Slots: stdin, stdout, stderr, exit, the deadline; each the index of its descriptor in
        // `fds`.
        let candidates: [Option<(BorrowedFd<'_>, PollFlags)>; 5] = [
            self.stdin.as_ref().filter(|_| want.stdin).map(|fd| (fd.as_fd(), PollFlags::POLLOUT)),
            (want.stdout && !self.stdout_eof).then(|| (self.stdout.as_fd(), PollFlags::POLLIN)),
            self.stderr.as_ref().map(|fd| (fd.as_fd(), PollFlags::POLLIN)),
            self.child.exit_fd().filter(|_| want.exit).map(|fd| (fd, PollFlags::POLLIN)),
            deadline.and_then(Deadline::fd).map(|fd| (fd, PollFlags::POLLIN)),
        ];
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(5);
        let mut slots: [Option<usize>; 5] = [None; 5];
        for (slot, candidate) in candidates.into_iter().enumerate() {
            if let Some((fd, flags)) = candidate {
                slots[slot] = Some(fds.len());
                fds.push(PollFd::new(fd, flags));
            }
        }
        // Nothing to wait on but the deadline (every pipe closed, no pidfd): as good as ready,
        // the caller finds out what is closed.
        if slots[..4].iter().all(Option::is_none) {
            return (Some(Ready::default()), false, false);
        }
        let timeout = deadline.map_or(PollTimeout::ZERO, Deadline::poll_timeout);
        let fired = |fds: &[PollFd<'_>], slot: Option<usize>| {
            slot.and_then(|i| fds[i].revents()).is_some_and(|r| !r.is_empty())
        };
        match poll(&mut fds, timeout) {
            Ok(n) if n > 0 => {
                let ready =
                    Ready { stdin: fired(&fds, slots[0]), stdout: fired(&fds, slots[1]), exit: fired(&fds, slots[3]) };
                let wanted = ready.stdin || ready.stdout || ready.exit;
                (wanted.then_some(ready), fired(&fds, slots[2]), fired(&fds, slots[4]))
            }
            Err(nix::errno::Errno::EINTR) => (None, false, false),
            // Timed out: only a deadline without a timer times a poll out, or a look.
            _ => (None, false, true),
        }
    }

    /// The adapter stopped serving (`what` it did): how it ended, given a moment to exit on its
    /// own, as a failure.
    fn closed(&mut self, request: &str, what: String) -> AdapterError {
        let ending = self.await_exit(EXIT_GRACE_MS);
        self.fail(request, Failure::Exited { what, ending })
    }

    /// Wait at most `ms` for the process to exit on its own (reading its pipes meanwhile, so that
    /// a full one does not hold it), then kill its group either way: how it ended.
    fn await_exit(&mut self, ms: u32) -> Ending {
        let deadline = Deadline::after(ms);
        let mut sink = vec![0u8; CHUNK];
        loop {
            if let Some(ended) = self.child.ended() {
                self.child.kill();
                return Ending::Ended(ended);
            }
            if !self.child.watchable() && self.stdout_eof && self.stderr.is_none() {
                // No pidfd: both pipes' ends are the best sign of an exit there is.
                return match self.child.kill() {
                    (ended, true) => Ending::Ended(ended),
                    (_, false) => Ending::Killed { after_ms: ms },
                };
            }
            let want = Want { stdout: true, exit: true, ..Want::default() };
            match self.wait(want, &deadline) {
                // Output after the last answer is not read as answers any more.
                Some(ready) if ready.stdout => match self.stdout.read(&mut sink) {
                    Ok(0) => self.stdout_eof = true,
                    Err(e) if e.kind() != std::io::ErrorKind::Interrupted => self.stdout_eof = true,
                    _ => {}
                },
                Some(_) => {}
                None => {
                    return match self.child.kill() {
                        (ended, true) => Ending::Ended(ended),
                        (_, false) => Ending::Killed { after_ms: ms },
                    };
                }
            }
        }
    }

    /// The adapter failed the protocol: kill its group, read its stderr to the end, and say so.
    pub(crate) fn fail(&mut self, request: &str, failure: Failure) -> AdapterError {
        self.kill();
        self.spec.error(request, failure, self.tail.last_lines(STDERR_LINES))
    }

    /// Kill the adapter's group and reap it; read what it left on stderr.
    pub(crate) fn kill(&mut self) -> Ended {
        self.stdin = None;
        let (ended, _) = self.child.kill();
        self.drain_stderr();
        ended
    }

    /// Read stderr to its end, at most [`STDERR_DRAIN_MS`].
    fn drain_stderr(&mut self) {
        let deadline = Deadline::after(STDERR_DRAIN_MS);
        while self.stderr.is_some() {
            // Only stderr is waited on: the wait ends at its end, or at the deadline.
            if self.wait(Want::default(), &deadline).is_none() {
                self.stderr = None;
            }
        }
    }

    /// Close stdin, which a well-behaved adapter takes as its cue to close its databases and
    /// exit, and give it [`EXIT_GRACE_MS`] in all to do so; then kill its group regardless (a
    /// wrapper's children go with it). How it ended.
    pub(crate) fn close(&mut self) -> Ending {
        self.stdin = None;
        self.await_exit(EXIT_GRACE_MS)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            self.close();
        }
        self.kill();
    }
}

/// Set `O_NONBLOCK` on a pipe end.
fn set_nonblocking(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: fcntl(2) on a descriptor this process owns (borrowed for the call), with integer
    // arguments only.
    let set = unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 { flags } else { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) }
    };
    if set < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
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
