//! The reasons [`super::reasons`] cannot cause with one healthy cluster:
//! those that need a cluster without a quorum, a node on its way out, a
//! learner that never catches up, or a session's exactly-once records at
//! their bounds. Each is produced on a real cluster and checked on the raw
//! status and, where the client library can see it, as its typed error.
//!
//! Three reasons have no passing test. WAIT_NOT_FOUND answers only
//! `CancelWait`, which the leader proposes itself and whose refusal it
//! absorbs: no client can cause it. REQUEST_FINISHED answers a retry of a
//! numbered acquisition that ended without how it ended being kept, which
//! only a state restored from a snapshot of an older release holds.
//! INTERNAL marks replies that do not fit their
//! command and answers that cannot be encoded, faults no correct server
//! shows a client; one it does show, through a bug, is the ignored last
//! test, which expects what the answer should be.

use futures::StreamExt;
use raftlock_client::{Client, Error};
use raftlock_proto::limits::{FINISHED_REQUESTS_PER_SESSION, MAX_UNACKED_REQUESTS_PER_SESSION};
use raftlock_proto::reason::{self, Reason};
use raftlock_proto::v1::cluster_client::ClusterClient;
use raftlock_proto::v1::lock_client::LockClient;
use raftlock_proto::v1::*;
use raftlock_tests::raw::sequenced;
use raftlock_tests::{client_options, raw, Cluster};
use std::time::Duration;

fn expect<T: std::fmt::Debug>(res: Result<T, tonic::Status>, want: Reason) {
    match res {
        Ok(v) => panic!("expected {want}, got {v:?}"),
        Err(s) => {
            assert_eq!(reason::of(&s), Some(want), "{s:?}");
            assert_eq!(s.code(), want.code(), "{s:?}");
        }
    }
}

/// A raw call that must be answered: a hang fails the test instead of
/// stalling the binary.
async fn answered<T>(within: Duration, call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(within, call)
        .await
        .unwrap_or_else(|_| panic!("no answer within {within:?}"))
}

fn add_learner(id: u64, peer_addr: &str, client_addr: &str, wait: bool) -> AddLearnerRequest {
    AddLearnerRequest {
        node_id: id,
        peer_addr: peer_addr.into(),
        client_addr: client_addr.into(),
        wait_caught_up: wait,
    }
}

/// Kills every node but the leader: what it proposes or reads from now on
/// waits for a quorum that never answers.
async fn leader_alone(cluster: &mut Cluster) -> (u64, String) {
    let leader_id = cluster.wait_for_leader(Duration::from_secs(10)).await;
    for id in 1..=3 {
        if id != leader_id {
            cluster.kill(id);
        }
    }
    (leader_id, cluster.node(leader_id).client_addr.clone())
}

/// A leader whose followers are dead can neither commit nor confirm its
/// leadership: writes and linearizable reads end in NO_QUORUM, which the
/// client reports as unavailability.
#[tokio::test]
async fn a_leader_without_a_quorum_refuses_with_no_quorum() {
    let mut cluster = Cluster::start(3).await;
    let leader_id = cluster.wait_for_leader(Duration::from_secs(10)).await;
    // Connected before the kills, since connecting reads the status
    // linearizably; a deadline shorter than the server's 3 s confirmation
    // timeout makes the first answer the last.
    let client = Client::connect_with(
        [cluster.node(leader_id).client_addr.clone()],
        raftlock_client::Options {
            deadline: Duration::from_secs(1),
            attempt_timeout: Duration::from_secs(15),
            ..client_options(&cluster.access)
        },
    )
    .await
    .expect("client connects");
    let (_, leader) = leader_alone(&mut cluster).await;

    expect(
        answered(
            Duration::from_secs(30),
            raw::create_session(&leader, 10_000),
        )
        .await,
        Reason::NoQuorum,
    );
    expect(
        answered(Duration::from_secs(30), raw::describe(&leader, "nq/a")).await,
        Reason::NoQuorum,
    );
    match answered(Duration::from_secs(30), client.status()).await {
        Err(Error::Unavailable(_)) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// Calls that hang on Raft when a node is told to stop (here on a leader
/// without a quorum: a membership change, which has no timeout of its own,
/// and session writes, whose 5 s timeout outlasts the ~1 s from SIGTERM to
/// Raft's shutdown) are failed with STOPPING rather than left unanswered.
///
/// The process exits right after Raft's shutdown, so some of these answers
/// are lost to the race and reach the client as a broken stream: the test
/// asks for at least one STOPPING, with a fresh cluster if a whole attempt
/// loses the race. The client library retries both elsewhere.
#[tokio::test]
async fn calls_cut_short_by_a_shutdown_end_in_stopping() {
    for attempt in 1..=3 {
        let mut cluster = Cluster::start(3).await;
        let (leader_id, leader) = leader_alone(&mut cluster).await;
        let mut admin = ClusterClient::new(cluster.access.channel(&leader).await.unwrap());
        let mut calls = vec![tokio::spawn(async move {
            admin
                .add_learner(add_learner(9, "127.0.0.1:1", "127.0.0.1:1", false))
                .await
                .map(|_| ())
        })];
        // Each on its own connection, so each answer has its own chance.
        for _ in 0..8 {
            let leader = leader.clone();
            calls.push(tokio::spawn(async move {
                raw::create_session(&leader, 10_000).await.map(|_| ())
            }));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(calls.iter().all(|c| !c.is_finished()), "nothing commits");
        cluster.terminate(leader_id).await;
        let mut stopping = 0;
        for call in calls {
            let s = answered(Duration::from_secs(10), call)
                .await
                .unwrap()
                .expect_err("nothing commits");
            match reason::of(&s) {
                Some(Reason::Stopping) => {
                    assert_eq!(s.code(), Reason::Stopping.code(), "{s:?}");
                    stopping += 1;
                }
                // The answer lost to the process's exit.
                None => {}
                Some(other) => panic!(
                    "expected STOPPING, got {other}: {s:?}\n{}",
                    cluster.log_of(leader_id)
                ),
            }
        }
        if stopping > 0 {
            return;
        }
        eprintln!("attempt {attempt}: every STOPPING was lost to the exit");
    }
    panic!("no call was answered with STOPPING in 3 attempts");
}

/// A learner that is down never catches up: an AddLearner that waits for it
/// gives up after the server's 120 s with LEARNER_NOT_CAUGHT_UP, which the
/// client reports as its own error (not as unavailability to retry).
#[tokio::test]
async fn waiting_for_a_learner_that_is_down_ends_in_learner_not_caught_up() {
    let mut cluster = Cluster::start_with(3, &["--max-learner-wait-ms", "5000"]).await;
    let leader_id = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let leader = cluster.node(leader_id).client_addr.clone();
    // Two new nodes that die before they are added: one asked for raw, one
    // through the client, waiting at the same time.
    let mut learners = Vec::new();
    for _ in 0..2 {
        let id = cluster.start_new_node();
        cluster.kill(id);
        let n = cluster.node(id);
        learners.push((id, n.peer_addr.clone(), n.client_addr.clone()));
    }
    let client = Client::connect_with(
        [leader.clone()],
        raftlock_client::Options {
            deadline: Duration::from_secs(180),
            ..client_options(&cluster.access)
        },
    )
    .await
    .expect("client connects");

    let mut admin = ClusterClient::new(cluster.access.channel(&leader).await.unwrap());
    let (id, peer, addr) = learners[0].clone();
    let raw_wait =
        tokio::spawn(async move { admin.add_learner(add_learner(id, &peer, &addr, true)).await });
    // Membership changes one at a time: the first learner's entry commits
    // at once, only its wait goes on.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (id, peer, addr) = learners[1].clone();
    let typed_wait = tokio::spawn(async move { client.add_learner(id, &peer, &addr, true).await });

    expect(
        answered(Duration::from_secs(30), raw_wait).await.unwrap(),
        Reason::LearnerNotCaughtUp,
    );
    match answered(Duration::from_secs(30), typed_wait).await.unwrap() {
        Err(Error::LearnerNotCaughtUp(_)) => {}
        other => panic!("expected LearnerNotCaughtUp, got {other:?}"),
    }
}

/// A retry of a numbered acquisition is answered by how it ended
/// (REQUEST_RELEASED) for as long as the client has not acknowledged its
/// answer, however many acquisitions of the session end meanwhile. Ends
/// were kept in a bounded history of the session's last 256, so one pushed
/// out of it answered only that it ended (REQUEST_FINISHED). An
/// unnumbered acquisition still has the bounded history.
#[tokio::test]
async fn a_retry_of_a_numbered_acquisition_learns_how_it_ended_until_acknowledged() {
    let cluster = Cluster::start(3).await;
    let leader_id = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let leader = cluster.node(leader_id).client_addr.clone();
    let mut locks = LockClient::new(cluster.access.channel(&leader).await.unwrap());
    let s = raw::silent_session(&leader, 120_000).await;

    let first = locks
        .acquire(sequenced(s, "rf/first", 1, 1, 1))
        .await
        .unwrap()
        .into_inner();
    raw::release(&leader, s, "rf/first", first.grant.unwrap().token)
        .await
        .unwrap();
    expect(
        locks.acquire(sequenced(s, "rf/first", 1, 1, 1)).await,
        Reason::RequestReleased,
    );

    let ended = futures::stream::iter(0..FINISHED_REQUESTS_PER_SESSION + 10)
        .map(|i| {
            let leader = leader.clone();
            async move {
                let name = format!("rf/{i}");
                let g = raw::acquire(&leader, s, &name, None).await?.grant.unwrap();
                raw::release(&leader, s, &name, g.token).await
            }
        })
        .buffer_unordered(32)
        .filter(|r| std::future::ready(r.is_ok()))
        .count();
    assert_eq!(
        answered(Duration::from_secs(120), ended).await,
        FINISHED_REQUESTS_PER_SESSION + 10
    );
    expect(
        locks.acquire(sequenced(s, "rf/first", 1, 1, 1)).await,
        Reason::RequestReleased,
    );
    // Acknowledged by the next numbered call: the number is refused now.
    let next = locks
        .acquire(sequenced(s, "rf/next", 2, 2, 2))
        .await
        .unwrap()
        .into_inner();
    assert!(next.acquired);
    expect(
        locks.acquire(sequenced(s, "rf/first", 1, 1, 1)).await,
        Reason::RequestAcknowledged,
    );
}

/// Answers a client has not acknowledged are bounded. One that
/// acknowledges by the mark alone (as clients of older releases do) keeps
/// every answer after its oldest call in progress, so beside one long wait
/// its next call after as many as a session may keep is refused unexecuted
/// with TOO_MANY_UNACKNOWLEDGED. Listing its calls in flight acknowledges
/// the rest, and the same call is served.
#[tokio::test]
async fn a_long_wait_holds_back_acknowledgement_until_too_many_unacknowledged() {
    let cluster = Cluster::start(3).await;
    let leader_id = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let leader = cluster.node(leader_id).client_addr.clone();
    let client = cluster.client().await;
    let holder = client.session(Duration::from_secs(60)).await.unwrap();
    let _queue = holder.lock("tu/queue").acquire().await.unwrap();
    let _held = holder.lock("tu/held").acquire().await.unwrap();

    // Sequence number 1 of session s: a wait that stays in progress.
    let s = client.session(Duration::from_secs(60)).await.unwrap();
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move {
            s.lock("tu/queue")
                .timeout(Duration::from_secs(120))
                .acquire()
                .await
        })
    };
    let queued = async {
        while raw::describe(&leader, "tu/queue")
            .await
            .map_or(true, |d| d.waiters.is_empty())
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    answered(Duration::from_secs(20), queued).await;

    // Numbers 2 onwards, acknowledging by the mark alone: every answer
    // stays on record beside the wait's.
    let max = MAX_UNACKED_REQUESTS_PER_SESSION as u64;
    let channel = cluster.access.channel(&leader).await.unwrap();
    let busy = futures::stream::iter(2..=max)
        .map(|seq| {
            let mut locks = LockClient::new(channel.clone());
            let id = s.id();
            async move {
                locks
                    .acquire(sequenced(id, "tu/held", u128::from(seq), seq, 1))
                    .await
                    .map(|r| !r.into_inner().acquired)
            }
        })
        .buffer_unordered(64)
        .filter(|r| std::future::ready(matches!(r, Ok(true))))
        .count();
    assert_eq!(
        answered(Duration::from_secs(240), busy).await,
        max as usize - 1
    );
    let mut locks = LockClient::new(channel.clone());
    let next = max + 1;
    expect(
        locks
            .acquire(sequenced(s.id(), "tu/held", u128::from(next), next, 1))
            .await,
        Reason::TooManyUnacknowledged,
    );
    // The same call listing what is in flight (the wait and itself)
    // acknowledges 2 to 4,096: served.
    let mut listed = sequenced(s.id(), "tu/held", u128::from(next), next, 1);
    listed.in_flight = vec![1, next];
    let r = locks.acquire(listed).await.unwrap().into_inner();
    assert!(!r.acquired, "busy, and answered: {r:?}");
    assert!(!waiter.is_finished(), "the wait was still in progress");
    waiter.abort();
}

/// A sequence number is replayed by request id alone, whatever the call:
/// a campaign reusing the number and id of a try-lock that answered busy
/// gets that busy answer, which a waiting campaign cannot give, and the
/// server answers INTERNAL for what is the client's mistake.
#[tokio::test]
async fn a_sequence_number_reused_by_another_call_is_an_invalid_argument() {
    use raftlock_proto::v1::election_client::ElectionClient;
    let cluster = Cluster::start(3).await;
    let leader_id = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let leader = cluster.node(leader_id).client_addr.clone();
    let owner = raw::silent_session(&leader, 60_000).await;
    raw::acquire(&leader, owner, "bug/e", None).await.unwrap();
    let s = raw::silent_session(&leader, 60_000).await;
    let mut locks = LockClient::new(cluster.access.channel(&leader).await.unwrap());
    let busy = locks
        .acquire(sequenced(s, "bug/e", 7, 1, 1))
        .await
        .unwrap()
        .into_inner();
    assert!(!busy.acquired);
    let mut elections = ElectionClient::new(cluster.access.channel(&leader).await.unwrap());
    expect(
        elections
            .campaign(CampaignRequest {
                name: "bug/e".into(),
                session_id: s,
                request_id: 7u128.to_be_bytes().to_vec(),
                wait_timeout_ms: Some(1_000),
                seq: 1,
                acked_below: 1,
                ..Default::default()
            })
            .await,
        Reason::InvalidArgument,
    );
}
