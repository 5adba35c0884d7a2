//! Shared by the stable property tests in this folder (`fuzz_props.rs`,
//! `fuzz_regressions.rs`) and the cargo-fuzz targets in `/fuzz`, which
//! include this module by path: the same generators, decoders and invariant
//! checks run under proptest on stable (CI) and under libFuzzer on nightly.
//!
//! Every check returns `Err(description)` rather than panicking, so a fuzz
//! target panics only where a finding is.
#![allow(dead_code)]

pub mod decoders;
pub mod gen;
pub mod invariants;
