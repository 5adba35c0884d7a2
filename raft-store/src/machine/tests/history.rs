//! Log entries in every shape a release of raftlock has written: their
//! bytes must decode to the same commands and apply as the same requests
//! (`request.rs` maps the shapes). Postcard numbers enum variants by
//! position, so a variant moved, removed or changed in type shows here as
//! bytes that no longer decode, or decode to something else.

use super::*;

/// One command of each shape and the bytes it has in the log (postcard),
/// as hex.
fn history() -> Vec<(Command, &'static str)> {
    let origin = Origin {
        host: "web-1".into(),
        pid: 42,
    };
    let acquire = Command::Acquire {
        session: 1,
        name: "a".into(),
        request_id: RequestId(7),
        mode: Mode::Exclusive,
        permits: None,
        wait_ms: Some(1_000),
        metadata: vec![1, 2],
    };
    let take = Command::Take {
        name: "r".into(),
        n: 1,
        spec: Some(LimitSpec {
            rate: 10,
            per_ms: 1_000,
            burst: 5,
        }),
        lease_ms: 500,
        now_ns: 1_000_000,
    };
    vec![
        (
            Command::CreateSession {
                ttl_ms: 5_000,
                client_name: "c".into(),
                owner: "o".into(),
            },
            HEX[0],
        ),
        (Command::CloseSession { session: 1 }, HEX[1]),
        (
            Command::ExpireSessions {
                sessions: vec![1, 300],
            },
            HEX[2],
        ),
        (acquire.clone(), HEX[3]),
        (
            Command::Release {
                session: 1,
                name: "a".into(),
                token: 65_536,
            },
            HEX[4],
        ),
        (
            Command::CancelWait {
                session: 1,
                name: "a".into(),
                request_id: RequestId(7),
            },
            HEX[5],
        ),
        (
            Command::Proclaim {
                session: 1,
                name: "e".into(),
                token: 65_536,
                value: vec![9],
            },
            HEX[6],
        ),
        (Command::ForceRelease { name: "a".into() }, HEX[7]),
        (
            Command::Sequenced {
                seq: 3,
                acked_below: 2,
                command: Box::new(acquire.clone()),
            },
            HEX[8],
        ),
        (
            Command::CreateSessionOnce {
                ttl_ms: 5_000,
                client_name: "c".into(),
                owner: "o".into(),
                key: 11,
            },
            HEX[9],
        ),
        (
            Command::CreateSessionAt {
                ttl_ms: 5_000,
                client_name: "c".into(),
                owner: "o".into(),
                key: Some(12),
                origin,
            },
            HEX[10],
        ),
        (
            Command::WithTerms {
                terms: Terms {
                    count: 2,
                    max_hold_ms: 3_000,
                    lock_delay_ms: 100,
                },
                command: Box::new(acquire.clone()),
            },
            HEX[11],
        ),
        (
            Command::EndHold {
                name: "a".into(),
                session: 1,
                token: 65_536,
            },
            HEX[12],
        ),
        (Command::EndLockDelay { name: "a".into() }, HEX[13]),
        (
            Command::Resize {
                name: "s".into(),
                permits: 3,
            },
            HEX[14],
        ),
        (
            Command::DefineLimit {
                name: "r".into(),
                spec: LimitSpec {
                    rate: 10,
                    per_ms: 1_000,
                    burst: 5,
                },
                now_ns: 1_000_000,
            },
            HEX[15],
        ),
        (take.clone(), HEX[16]),
        (
            Command::ReturnTokens {
                name: "r".into(),
                lease: 9,
                unused: 1,
                now_ns: 2_000_000,
            },
            HEX[17],
        ),
        (Command::DeleteLimit { name: "r".into() }, HEX[18]),
        (
            Command::SequencedAcks {
                seq: 5,
                acked_below: 2,
                in_flight: vec![3, 4],
                command: Box::new(acquire),
            },
            HEX[19],
        ),
        (
            Command::EndLockDelayAt {
                name: "a".into(),
                started: 17,
            },
            HEX[20],
        ),
        (
            Command::ByOwner {
                owner: "o".into(),
                command: Box::new(take),
            },
            HEX[21],
        ),
        (
            Command::AcquireAll {
                session: 1,
                names: vec!["a".into(), "b".into()],
                request_id: RequestId(7),
                wait_ms: Some(1_000),
                metadata: vec![1, 2],
            },
            HEX[22],
        ),
        (
            Command::WithinSessionLimit {
                max_sessions: 10_000,
                command: Box::new(Command::CreateSession {
                    ttl_ms: 5_000,
                    client_name: "c".into(),
                    owner: "o".into(),
                }),
            },
            HEX[23],
        ),
        (
            Command::SequencedSet {
                seq: 5,
                acked_below: 2,
                in_flight: vec![3, 4],
                command: Box::new(Command::AcquireAll {
                    session: 1,
                    names: vec!["a".into(), "b".into()],
                    request_id: RequestId(7),
                    wait_ms: None,
                    metadata: vec![],
                }),
            },
            HEX[24],
        ),
    ]
}

/// Written by releases from the first (`CreateSession` .. `ForceRelease`)
/// to the newest (`SequencedSet`); one line per variant, in variant order.
const HEX: [&str; 25] = [
    "0088270163016f",
    "0101",
    "020201ac02",
    "0301016107000001e807020102",
    "04010161808004",
    "0501016107",
    "060101658080040109",
    "070161",
    "0803020301016107000001e807020102",
    "0988270163016f0b",
    "0a88270163016f010c057765622d312a",
    "0b02b817640301016107000001e807020102",
    "0c016101808004",
    "0d0161",
    "0e017303",
    "0f01720ae80705c0843d",
    "10017201010ae80705f403c0843d",
    "110172090180897a",
    "120172",
    "1305020203040301016107000001e807020102",
    "14016111",
    "15016f10017201010ae80705f403c0843d",
    "160102016101620701e807020102",
    "17904e0088270163016f",
    "18050202030416010201610162070000",
];

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_shape_the_log_has_held_decodes_to_the_same_command() {
    for (command, bytes) in history() {
        let encoded = postcard::to_allocvec(&command).expect("encodes");
        assert_eq!(
            hex(&encoded),
            bytes,
            "{} is written differently now",
            command.kind()
        );
        let decoded: Command = postcard::from_bytes(&encoded).expect("decodes");
        assert_eq!(decoded, command);
    }
}

/// Prints the table above (run with `--ignored --nocapture` after adding
/// a variant, and append the new line; never change an existing one).
#[test]
#[ignore]
fn print_history_bytes() {
    for (command, _) in history() {
        println!(
            "    \"{}\",",
            hex(&postcard::to_allocvec(&command).unwrap())
        );
    }
}

fn reply(o: &Outcome) -> Result<Reply, LeaseError> {
    o.reply.clone()
}

#[test]
fn the_three_session_creations_are_one_request() {
    let mut log = Log::new();
    let plain = log.apply(Command::CreateSession {
        ttl_ms: 5_000,
        client_name: "c".into(),
        owner: "o".into(),
    });
    assert_eq!(
        reply(&plain),
        Ok(Reply::SessionCreated {
            session: 1,
            ttl_ms: 5_000
        })
    );
    let keyed = Command::CreateSessionOnce {
        ttl_ms: 6_000,
        client_name: "c".into(),
        owner: "o".into(),
        key: 11,
    };
    let first = log.apply(keyed.clone());
    let retry = log.apply(keyed);
    assert_eq!(
        reply(&first),
        reply(&retry),
        "a retry gets the first session"
    );
    let at = Command::CreateSessionAt {
        ttl_ms: 7_000,
        client_name: "c".into(),
        owner: "o".into(),
        key: Some(11),
        origin: Origin {
            host: "web-1".into(),
            pid: 42,
        },
    };
    // The same key as the keyed creation: the same session, whichever
    // shape asked.
    assert_eq!(reply(&log.apply(at)), reply(&first));
    let fresh = log.apply(Command::CreateSessionAt {
        ttl_ms: 7_000,
        client_name: "c".into(),
        owner: "o".into(),
        key: None,
        origin: Origin {
            host: "web-2".into(),
            pid: 43,
        },
    });
    let Ok(Reply::SessionCreated { session, .. }) = reply(&fresh) else {
        panic!("{fresh}")
    };
    assert_eq!(
        log.m.origin(session).map(|o| o.host.as_str()),
        Some("web-2")
    );
    let bad_host = log.apply(Command::CreateSessionAt {
        ttl_ms: 7_000,
        client_name: "c".into(),
        owner: "o".into(),
        key: None,
        origin: Origin {
            host: "x".repeat(10_000),
            pid: 1,
        },
    });
    assert!(bad_host.reply.is_err(), "{bad_host}");
}

#[test]
fn a_wrapper_around_what_it_cannot_wrap_is_refused_as_before() {
    let mut log = Log::new();
    let s = log.session();
    let release = Command::Release {
        session: s,
        name: "a".into(),
        token: 1,
    };
    let cases = [
        (
            Command::WithTerms {
                terms: Terms::default(),
                command: Box::new(release.clone()),
            },
            "not an acquire",
        ),
        (
            Command::Sequenced {
                seq: 1,
                acked_below: 0,
                command: Box::new(release.clone()),
            },
            "only an acquire can be sequenced, not release",
        ),
        (
            Command::SequencedAcks {
                seq: 1,
                acked_below: 0,
                in_flight: vec![],
                command: Box::new(release.clone()),
            },
            "only an acquire can be sequenced, not release",
        ),
        (
            Command::ByOwner {
                owner: "o".into(),
                command: Box::new(release.clone()),
            },
            "only a take or a return carries an owner, not release",
        ),
        (
            Command::SequencedSet {
                seq: 1,
                acked_below: 0,
                in_flight: vec![],
                command: Box::new(release.clone()),
            },
            "only a lock set is sequenced as a set, not release",
        ),
        (
            Command::Sequenced {
                seq: 1,
                acked_below: 0,
                command: Box::new(Command::AcquireAll {
                    session: s,
                    names: vec!["a".into(), "b".into()],
                    request_id: RequestId(1),
                    wait_ms: None,
                    metadata: vec![],
                }),
            },
            "only an acquire can be sequenced, not acquire_all",
        ),
    ];
    for (command, message) in cases {
        let o = log.apply(command);
        assert_eq!(
            o.reply,
            Err(LeaseError::InvalidArgument(message.into())),
            "{o}"
        );
        assert!(o.events.is_empty());
    }
}

#[test]
fn wrapped_acquires_apply_as_the_acquire_they_wrap() {
    let mut log = Log::new();
    let s = log.session();
    let acquire = |name: &str, req: u128| Command::Acquire {
        session: s,
        name: name.into(),
        request_id: RequestId(req),
        mode: Mode::Shared,
        permits: Some(4),
        wait_ms: None,
        metadata: vec![],
    };
    let termed = log.apply(Command::WithTerms {
        terms: Terms {
            count: 2,
            max_hold_ms: 0,
            lock_delay_ms: 0,
        },
        command: Box::new(acquire("t", 1)),
    });
    assert_eq!(granted(&termed).terms.count, 2);
    let sequenced = log.apply(Command::Sequenced {
        seq: 1,
        acked_below: 1,
        command: Box::new(acquire("q", 2)),
    });
    let g = granted(&sequenced);
    // A retry of the same number is the same acquisition.
    let again = log.apply(Command::Sequenced {
        seq: 1,
        acked_below: 1,
        command: Box::new(acquire("q", 2)),
    });
    assert_eq!(granted(&again).token, g.token);
    let acks = log.apply(Command::SequencedAcks {
        seq: 2,
        acked_below: 1,
        in_flight: vec![2],
        command: Box::new(Command::WithTerms {
            terms: Terms {
                count: 3,
                max_hold_ms: 0,
                lock_delay_ms: 0,
            },
            command: Box::new(acquire("u", 3)),
        }),
    });
    assert_eq!(granted(&acks).terms.count, 3);
}
