//! Tests of the oracle.
