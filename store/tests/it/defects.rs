//! The planted-defect switch: with the `defects` feature a planted defect acts, without it the
//! same request is inert, so a production build cannot carry a planted bug. `cargo test
//! --workspace` builds this crate with the feature (the `fencesim` binary enables it); `cargo test
//! -p fencesim-store` builds it without, and CI runs both.

use std::sync::Arc;

use fencesim_store::{
    JournalEntry, JournalStore, ManualClock, SqliteOptions, SqliteStore, StoreDefect, StoreDefects, StoreError,
};

#[test]
fn a_planted_defect_acts_only_when_compiled_in() {
    let options = SqliteOptions::memdb(format!("defect-switch-{}", std::process::id()), Arc::new(ManualClock::new(0)))
        .defects(StoreDefects::of(&[StoreDefect::NoSeqGuard]));
    let store = SqliteStore::open(options).unwrap();
    let run = "switch-run".into();
    store.append(&run, &JournalEntry::new(5, "step", "ok"), None).unwrap();
    let again = store.append(&run, &JournalEntry::new(5, "step", "ok"), None);
    if StoreDefects::compiled_in() {
        assert_eq!(again, Ok(()), "no-seq-guard planted: a duplicate seq is accepted");
        assert_eq!(store.load(&run).unwrap().len(), 2);
    } else {
        assert!(
            matches!(again, Err(StoreError::JournalOrder { .. })),
            "without the feature the guard holds: {again:?}"
        );
        assert_eq!(store.load(&run).unwrap().len(), 1);
    }
}

#[test]
fn defect_names_round_trip() {
    for d in StoreDefect::ALL {
        assert_eq!(StoreDefect::parse(d.name()), Some(d));
        assert!(!d.story().is_empty());
    }
    assert_eq!(StoreDefect::parse("no-such-defect"), None);
}
