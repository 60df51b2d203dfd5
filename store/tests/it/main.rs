//! fencesim-store's integration tests, one test binary (issue 39: one per file linked the store
//! and rusqlite three times). Each module is what its own binary was. Run one file's tests with
//! `cargo test -p fencesim-store --test it MODULE::`.

mod defects;
mod kit_mutants;
mod model;
