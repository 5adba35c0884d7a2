//! Stable twins of the cargo-fuzz targets in `/fuzz` (see `fuzz/README.md`),
//! so that `cargo test` exercises the same properties briefly on every run:
//!
//! - arbitrary and mutated bytes into the log-entry, snapshot, backup and
//!   peer-message decoders never panic, and whatever decodes round-trips and
//!   applies without breaking the invariants (`entry_decode`);
//! - arbitrary command sequences keep the state machine's invariants after
//!   every step (`apply`).
//!
//! The generators, decoders and checks live in `support/`, which the fuzz
//! targets include by path.

mod support;

use proptest::prelude::*;
use support::decoders::{decode_all, prepared, prepared_commands, seeds, PREPARED_NEXT};
use support::gen::{Bytes, Driver};
use support::invariants::{check_invariants, checked_apply, Tracker};

#[test]
fn the_prepared_state_is_reached_by_checked_steps_and_keeps_the_invariants() {
    let mut m = raftlock_store::machine::LeaseMachine::default();
    let mut t = Tracker::default();
    for (i, cmd) in prepared_commands().iter().enumerate() {
        let outcome = checked_apply(&mut m, cmd, i as u64 + 1, 1_000 + i as u64, &mut t);
        assert!(
            outcome.as_ref().is_ok_and(|o| o.reply.is_ok()),
            "{outcome:?}"
        );
    }
    assert_eq!(m, prepared());
    assert_eq!(m.counts(), (4, 3, 2));
    assert_eq!(t.next_index(), Some(PREPARED_NEXT));
    check_invariants(&m).unwrap();
}

/// The checker is not vacuous: states broken on purpose (through the
/// snapshot's JSON) fail it.
#[test]
fn the_checker_catches_broken_states() {
    let good: serde_json::Value = serde_json::from_slice(&prepared().to_json_snapshot()).unwrap();
    type Breakage = fn(&mut serde_json::Value);
    let breakages: [(&str, Breakage); 11] = [
        ("a holder's session is gone", |v| {
            v["machine"]["sessions"]
                .as_object_mut()
                .unwrap()
                .remove("1");
        }),
        ("shared holders above the permits", |v| {
            v["machine"]["locks"]["b"]["permits"] = 1.into();
        }),
        ("a waiter without a holder", |v| {
            v["machine"]["locks"]["a"]["holders"] = serde_json::json!([]);
        }),
        ("a stale owner counter", |v| {
            v["machine"]["owners"]["team-c"] = 1.into();
        }),
        ("an owner counted wrong", |v| {
            v["machine"]["owners"]["team-a"] = 1.into();
        }),
        ("a waiter that fits", |v| {
            v["machine"]["locks"]["b"]["permits"] = 3.into();
        }),
        ("a session that forgot what it holds", |v| {
            v["machine"]["sessions"]["2"]["held"] = serde_json::json!({});
        }),
        ("exactly-once bookkeeping of an ended session", |v| {
            v["machine"]["once"]["99"] =
                serde_json::json!({"key": null, "acked_below": 0, "answers": {}});
        }),
        ("a creation key of an ended session", |v| {
            v["machine"]["session_keys"][format!("{:032x}/", 7)] = 99.into();
        }),
        ("a session created with a key the index lacks", |v| {
            v["machine"]["once"]["1"] =
                serde_json::json!({"key": 7, "acked_below": 0, "answers": {}});
        }),
        ("an answer kept below the acknowledged mark", |v| {
            v["machine"]["once"]["1"] = serde_json::json!({
                "key": null,
                "acked_below": 5,
                "answers": {"3": {"request_id": 1, "first": {"Ok": "WaitCancelled"}}},
            });
        }),
    ];
    for (what, breakage) in breakages {
        let mut v = good.clone();
        breakage(&mut v);
        let m =
            raftlock_store::machine::LeaseMachine::from_snapshot(&serde_json::to_vec(&v).unwrap())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(check_invariants(&m).is_err(), "{what} was not caught");
    }
}

#[test]
fn every_seed_decodes_and_passes() {
    let seeds = seeds();
    assert!(seeds.len() > 30);
    for (i, seed) in seeds.iter().enumerate() {
        assert!(!seed.is_empty(), "seed {i} did not encode");
        decode_all(seed).unwrap_or_else(|e| panic!("seed {i}: {e}"));
    }
    // The seeds reach the decoders they are meant for.
    let entries = seeds
        .iter()
        .filter(|s| raftlock_store::log_store::decode(s).is_ok())
        .count();
    assert!(entries >= 13, "{entries} log entries");
    assert!(seeds
        .iter()
        .any(|s| raftlock_store::state_machine::decode_snapshot_file(s).is_ok()));
    assert!(seeds
        .iter()
        .any(|s| raftlock_store::backup::decode(s).is_ok()));
}

/// Writes the seeds as the `entry_decode` fuzz target's starting corpus:
/// `cargo test -p raftlock-store --test fuzz_props -- --ignored write_fuzz_seeds`.
#[test]
#[ignore = "writes fuzz/seeds/entry_decode; run by hand"]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/entry_decode");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, seed) in seeds().iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), seed).unwrap();
    }
}

/// A seed with a few byte-level mutations (overwrite, insert, delete, cut).
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let seeds = seeds();
    let n = seeds.len();
    (
        0..n,
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 0..6),
    )
        .prop_map(move |(i, edits)| {
            let mut bytes = seeds[i].clone();
            for (at, kind, b) in edits {
                if bytes.is_empty() {
                    break;
                }
                let at = at.index(bytes.len());
                match kind {
                    0 => bytes[at] = b,
                    1 => bytes.insert(at, b),
                    2 => {
                        bytes.remove(at);
                    }
                    _ => bytes.truncate(at),
                }
            }
            bytes
        })
}

/// A seed with one JSON-meaningful edit: a digit, quote, bracket or keyword
/// swapped in, so more mutants still parse.
fn json_mutated() -> impl Strategy<Value = Vec<u8>> {
    const TOKENS: [&[u8]; 12] = [
        b"0",
        b"18446744073709551615",
        b"-1",
        b"\"\"",
        b"null",
        b"true",
        b"[]",
        b"{}",
        b"\"a\"",
        b"1e3",
        b"340282366920938463463374607431768211455",
        b"\"\\u0000\"",
    ];
    let seeds = seeds();
    let n = seeds.len();
    (
        0..n,
        any::<prop::sample::Index>(),
        0..TOKENS.len(),
        0usize..8,
    )
        .prop_map(move |(i, at, token, span)| {
            let mut bytes = seeds[i].clone();
            let at = at.index(bytes.len().max(1)).min(bytes.len());
            let end = (at + span).min(bytes.len());
            bytes.splice(at..end, TOKENS[token].iter().copied());
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Err(e) = decode_all(&bytes) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn decoders_never_panic_on_mutated_encodings(bytes in prop_oneof![mutated(), json_mutated()]) {
        if let Err(e) = decode_all(&bytes) {
            prop_assert!(false, "{}", e);
        }
    }
}

proptest! {
    // Each step is checked with snapshot, replay and backup round trips;
    // sequences of up to 48 steps keep 512 cases to seconds (the fuzz
    // target runs longer ones).
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn command_sequences_keep_the_invariants(bytes in prop::collection::vec(any::<u8>(), 0..480)) {
        let mut driver = Driver::default();
        if let Err(e) = driver.run(&mut Bytes::new(&bytes), 48) {
            prop_assert!(false, "{}", e);
        }
    }
}
