//! Refusing records whose opaque `extra` shadows a typed field: encoded, the key would appear
//! twice and the record could not be read back. Its own module so the types know no error and
//! the errors know the types (no import circle).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{Op, StoreError};
use crate::types::{JournalEntry, RunId, RunMeta};

impl RunMeta {
    /// Refuse a record whose `extra` shadows a typed field: encoded, the key would appear twice
    /// and the record could not be read back.
    pub fn check_fields(&self) -> Result<(), StoreError> {
        check_extra(Op::PutMeta, &self.run_id, &self.extra, &Self::TYPED_FIELDS)
    }
}

impl JournalEntry {
    /// Refuse an entry whose `extra` shadows a typed field (see [`RunMeta::check_fields`]).
    pub fn check_fields(&self, run: &RunId) -> Result<(), StoreError> {
        check_extra(Op::Append, run, &self.extra, &Self::TYPED_FIELDS)
    }
}

fn check_extra(op: Op, run: &RunId, extra: &BTreeMap<String, Value>, typed: &[&str]) -> Result<(), StoreError> {
    match extra.keys().find(|k| typed.contains(&k.as_str())) {
        None => Ok(()),
        Some(key) => Err(StoreError::InvalidPayload {
            op,
            run: run.clone(),
            reason: format!("extra field `{key}` shadows a typed field"),
        }),
    }
}
