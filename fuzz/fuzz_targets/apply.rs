//! Sequences of commands over a small universe (a few sessions, live, ended
//! and never created; a few lock names, valid and not; request ids that
//! repeat; tokens next to real ones; TTLs, waits, permits and metadata at
//! and around their limits), applied at increasing log indexes and times.
//! After every step the machine's invariants, the reply, the events, the
//! fencing tokens and the snapshot and backup round trips are checked
//! (`raft-store/tests/support/invariants.rs`). A panic here is a finding.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use raftlock_fuzz::support::gen::Driver;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut driver = Driver::default();
    if let Err(finding) = driver.run(&mut u, 256) {
        panic!("{finding}");
    }
});
