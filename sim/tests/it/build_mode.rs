//! The build mode guard. `.cargo/config.toml` compiles the workspace with `--cfg madsim`; a
//! `RUSTFLAGS` environment variable silently replaces that, and the simulator would vanish while
//! every other test stayed green. This test is deliberately not cfg-gated: without the cfg it
//! fails.

#[test]
#[allow(clippy::assertions_on_constants, reason = "a runtime failure, not a compile error, is the point")]
fn workspace_is_built_with_the_simulator() {
    assert!(cfg!(madsim), "built without --cfg madsim: a RUSTFLAGS variable overrode .cargo/config.toml; unset it");
}

/// The simulator is really there: virtual time passes without wall time passing.
#[cfg(madsim)]
#[test]
fn simulated_time_is_virtual() {
    let runtime = madsim::runtime::Runtime::with_seed_and_config(7, madsim::Config::default());
    let elapsed = runtime.block_on(async {
        #[allow(clippy::disallowed_methods, reason = "madsim's Instant is virtual inside its runtime")]
        let start = madsim::time::Instant::now();
        madsim::time::sleep(std::time::Duration::from_secs(3600)).await;
        start.elapsed()
    });
    assert!(elapsed >= std::time::Duration::from_secs(3600), "virtual sleep returned early: {elapsed:?}");
}
