//! Proof that every checker can fail: one hand-written clean history (two runs, a crash and a
//! takeover, a suspension and its resolution, a delete and a recreate) passes every checker, and
//! for each checker a tampered copy of it (or of its snapshot, or a config planning a run it never
//! starts) makes exactly that checker fail, pointing at the right rows. Rows are built directly,
//! so a test can tamper with any field.
//!
//! One file per checker file of the oracle (named after it), `check` for the oracle as a whole,
//! `model` and `history` for the views and indexes the checkers share; the fixtures every file
//! builds on are in `fixtures`.

mod fixtures;

mod candidacy;
mod check;
mod conduct;
mod contiguous;
mod deletes;
mod duties;
mod failures;
mod history;
mod journal;
mod leases;
mod model;
mod monotonic;
mod outcomes;
mod reads;
mod requests;
mod script;
mod serial;
