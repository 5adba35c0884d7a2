//! Arbitrary bytes into every decoder the storage and the Raft peers run:
//! the sled log store's entry decoder, the snapshot file and snapshot
//! decoders, the backup decoder, the log's meta values and the openraft
//! messages inside `RaftPayload`. Nothing may panic; what decodes must
//! round-trip; a decoded command is applied, checked, to an empty and to a
//! busy machine; a decoded state that keeps the invariants keeps them under
//! commands made from it. A panic here is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raftlock_fuzz::support::decoders::decode_all;

fuzz_target!(|data: &[u8]| {
    if let Err(finding) = decode_all(data) {
        panic!("{finding}");
    }
});
