use super::retry::{unreachable_retries, FAST_RETRY_WINDOW};
use super::rpc::commit_to_send;
use super::*;
use openraft::CommittedLeaderId;

fn connection(appended: tokio::sync::watch::Receiver<Option<LogId>>) -> PeerConnection {
    PeerConnection {
        target: 2,
        client: Err("no network in this test".into()),
        lacks: Arc::default(),
        flushed: None,
        append_stream: None,
        appended: Some(appended),
        confirmed: None,
        commit_heard: None,
        retry: Duration::from_millis(100),
    }
}

fn heartbeat(prev: u64, commit: u64) -> AppendEntriesRequest<TypeConfig> {
    AppendEntriesRequest {
        vote: Vote::new_committed(2, 1),
        prev_log_id: Some(id(2, prev)),
        entries: vec![],
        leader_commit: Some(id(2, commit)),
    }
}

/// A commit-only heartbeat rides with the append that follows it, and
/// only then: a follower that has not confirmed the log point, a
/// heartbeat with no new commit, or no append coming sends it.
#[tokio::test]
async fn a_commit_heartbeat_is_left_to_the_append_that_follows_it() {
    let (log, appended) = tokio::sync::watch::channel(Some(id(2, 7)));
    let mut c = connection(appended);
    // Nothing confirmed on this connection yet (a leadership check's
    // connection is always new): sent.
    assert!(!c.superseded(&heartbeat(7, 7)).await);

    // The follower acknowledged entries up to 7 and commit 6.
    let mut append = heartbeat(6, 6);
    append.entries = vec![openraft::Entry {
        log_id: id(2, 7),
        payload: openraft::EntryPayload::Blank,
    }];
    c.note_answer(&append, &Ok::<_, ()>(AppendEntriesResponse::Success));
    assert_eq!(
        c.confirmed,
        Some((Vote::new_committed(2, 1), Some(id(2, 7))))
    );

    // No news (a periodic heartbeat): sent, since the follower's
    // election timer runs on them.
    assert!(!c.superseded(&heartbeat(7, 6)).await);
    // Commit 7, and no append comes within the wait: sent.
    let started = std::time::Instant::now();
    assert!(!c.superseded(&heartbeat(7, 7)).await);
    assert!(started.elapsed() >= COMMIT_HEARTBEAT_DEFER);
    // Commit 7, and entry 8 is appended meanwhile: left to that append.
    // (This runtime has one thread: the append runs once `superseded`
    // waits, without a sleep that could outlast its deferral.)
    let appending = tokio::spawn(async move {
        log.send_replace(Some(id(2, 8)));
        log
    });
    assert!(c.superseded(&heartbeat(7, 7)).await);
    let _log = appending.await.unwrap();
    // A heartbeat about a log point the follower has not confirmed
    // (it is behind): sent.
    assert!(!c.superseded(&heartbeat(6, 7)).await);

    // After a refusal nothing is confirmed: every heartbeat is sent
    // until an append succeeds again.
    c.note_answer(
        &heartbeat(7, 7),
        &Ok::<_, ()>(AppendEntriesResponse::Conflict),
    );
    assert_eq!(c.confirmed, None);
    assert!(!c.superseded(&heartbeat(7, 7)).await);
}

fn id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

/// A follower never hears of a commit the leader's disk does not hold:
/// it could apply an entry that a power loss of the leader then takes
/// from the majority.
#[test]
fn the_commit_sent_to_followers_stops_at_the_leaders_durable_point() {
    assert_eq!(
        commit_to_send(Some(id(2, 9)), Some(id(2, 7))),
        Some(id(2, 7))
    );
    assert_eq!(commit_to_send(Some(id(2, 9)), None), None);
    assert_eq!(
        commit_to_send(Some(id(2, 9)), Some(id(2, 9))),
        Some(id(2, 9))
    );
    assert_eq!(
        commit_to_send(Some(id(2, 9)), Some(id(2, 12))),
        Some(id(2, 9))
    );
    assert_eq!(commit_to_send(None, Some(id(2, 12))), None);
}

/// A peer that cannot be reached is tried every heartbeat early in the
/// outage, so a node that comes up hears from the leader before its
/// election timeout; later every 500 ms, as openraft does.
#[test]
fn an_unreachable_peer_is_retried_every_heartbeat_early_in_an_outage() {
    let waits: Vec<Duration> = unreachable_retries(Duration::from_millis(100))
        .take(40)
        .collect();
    let fast = waits
        .iter()
        .take_while(|w| **w == Duration::from_millis(100))
        .count();
    assert_eq!(
        Duration::from_millis(100) * fast as u32,
        FAST_RETRY_WINDOW,
        "{waits:?}"
    );
    assert!(
        waits[fast..]
            .iter()
            .all(|w| *w == Duration::from_millis(500)),
        "{waits:?}"
    );
    // Never slower than openraft, and never a flood for a tiny heartbeat.
    assert!(unreachable_retries(Duration::from_secs(2))
        .take(10)
        .all(|w| w == Duration::from_millis(500)));
    assert_eq!(
        unreachable_retries(Duration::from_millis(1)).next(),
        Some(Duration::from_millis(50))
    );
    assert_eq!(
        unreachable_retries(Duration::ZERO).next(),
        Some(Duration::from_millis(50))
    );
}
