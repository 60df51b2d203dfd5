//! fencesim's real-process side: the multi-process soak at both levels (writers storming one
//! SQLite file under SIGKILL, SIGSTOP and clock skew; queue workers and a client over the engine),
//! the real kill points (a child SIGKILLs itself at each durable write), and the process toolkit
//! both use ([`proc`]: the janitor that removes temporary folders however a process ends, the
//! signal mask that turns a termination signal into a clean exit); every process it starts dies
//! with its parent through the protocol crate's one `die_with_parent`.
//!
//! Everything here runs in real time between real processes; the simulator (`fencesim-sim`) runs
//! none of it. The oracle judges what both produce.

#[cfg(not(madsim))]
compile_error!(
    "fencesim-real must be built with --cfg madsim: a RUSTFLAGS variable overrode .cargo/config.toml; unset it"
);

pub mod killpoints;
pub mod par;
pub mod proc;
pub mod soak;
