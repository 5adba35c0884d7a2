//! Shared by the fuzz targets: the generators, decoders and invariant checks
//! of `raft-store/tests/support`, included by path so that the stable
//! property tests (`raft-store/tests/fuzz_props.rs`) and these targets check
//! exactly the same things.

#[path = "../../raft-store/tests/support/mod.rs"]
pub mod support;

use arbitrary::{Arbitrary, Unstructured};

/// libFuzzer's bytes as the generators' source of choices.
impl support::gen::Draw for Unstructured<'_> {
    fn byte(&mut self) -> u8 {
        // An exhausted `Unstructured` yields zeros; the error case is
        // unreachable for `u8` but must not panic either.
        u8::arbitrary(self).unwrap_or(0)
    }

    fn is_empty(&self) -> bool {
        Unstructured::is_empty(self)
    }
}
