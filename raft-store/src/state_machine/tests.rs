use super::*;
use crate::machine::{Command, Mode, Reply, RequestId};
use crate::state_machine::snapshot_file::*;
use openraft::{CommittedLeaderId, EntryPayload};

fn entry(index: u64, commands: Vec<Command>) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(crate::Proposal::batch(1_000, commands)),
    }
}

fn create() -> Command {
    Command::CreateSession {
        ttl_ms: 5_000,
        client_name: "t".into(),
        owner: String::new(),
    }
}

fn acquire(session: u64, req: u128) -> Command {
    Command::Acquire {
        session,
        name: "l".into(),
        request_id: RequestId(req),
        mode: Mode::Exclusive,
        permits: None,
        wait_ms: Some(1_000),
        metadata: vec![],
    }
}

fn session_id(o: &Outcome) -> u64 {
    match &o.reply {
        Ok(Reply::SessionCreated { session, .. }) => *session,
        other => panic!("not a session: {other:?}"),
    }
}

/// An entry is applied (and its caller answered) only once this node's
/// log holds it durably: a leader replicating while it writes counts
/// itself towards the commit before its own copy is on disk.
#[tokio::test]
async fn nothing_is_applied_before_the_log_holds_it_durably() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = StateMachineStore::open(dir.path().join("snap")).unwrap();
    let (durable, flushed) = tokio::sync::watch::channel(None);
    sm.apply_after_flush(flushed);
    let shared = sm.shared();
    let apply = tokio::spawn(async move { sm.apply(vec![entry(2, vec![create()])]).await });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(shared.read().machine.counts().0, 0, "applied too early");
    durable.send_replace(Some(LogId::new(CommittedLeaderId::new(1, 1), 1)));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(
        !apply.is_finished(),
        "applied before its own index was durable"
    );
    durable.send_replace(Some(LogId::new(CommittedLeaderId::new(1, 1), 2)));
    let applied = apply.await.unwrap().unwrap();
    assert_eq!(applied.len(), 1);
    assert_eq!(shared.read().machine.counts().0, 1);
}

/// Group commit must not cost uniqueness: commands sharing an entry get
/// distinct ids, and tokens granted later in the log stay larger, also
/// when a handoff grants a waiter inside a batch.
#[tokio::test]
async fn commands_of_one_entry_get_distinct_increasing_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = StateMachineStore::open(dir.path().join("snap")).unwrap();
    let applied = sm
        .apply(vec![entry(7, vec![create(), create(), create()])])
        .await
        .unwrap();
    assert_eq!(applied.len(), 1);
    let at: Vec<u64> = applied[0].outcomes.iter().map(|(i, _)| *i).collect();
    assert_eq!(at, vec![7 << 16, (7 << 16) + 1, (7 << 16) + 2]);
    let ids: Vec<u64> = applied[0]
        .outcomes
        .iter()
        .map(|(_, o)| session_id(o))
        .collect();
    assert_eq!(ids, at, "a session's id is the index it applied at");

    let applied = sm
        .apply(vec![entry(8, vec![acquire(ids[0], 1), acquire(ids[1], 2)])])
        .await
        .unwrap();
    let first = match &applied[0].outcomes[0].1.reply {
        Ok(Reply::Acquired(g)) => g.token,
        other => panic!("{other:?}"),
    };
    assert_eq!(first, batch_index(8, 0));
    assert!(matches!(
        applied[0].outcomes[1].1.reply,
        Ok(Reply::Queued { .. })
    ));
    // A blank entry between keeps the numbering of the next one.
    sm.apply(vec![Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), 9),
        payload: EntryPayload::Blank,
    }])
    .await
    .unwrap();
    let applied = sm
        .apply(vec![entry(
            10,
            vec![
                create(),
                Command::Release {
                    session: ids[0],
                    name: "l".into(),
                    token: first,
                },
            ],
        )])
        .await
        .unwrap();
    let handed = applied[0].outcomes[1]
        .1
        .events
        .iter()
        .find_map(|e| match e {
            crate::machine::Event::HandedOver(g) => Some(g.token),
            _ => None,
        })
        .expect("the waiter is granted in the release's step");
    assert_eq!(handed, batch_index(10, 1));
    assert!(handed > first);
}

/// openraft builds snapshots in a task of their own and may install one
/// from the leader meanwhile. Whatever the interleaving, the file left
/// on disk is whole and is the newer of the two: an older built snapshot
/// must never replace an installed newer one (whose install let the log
/// be purged up to it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_build_racing_an_install_never_leaves_the_older_snapshot() {
    for round in 0..200u64 {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("snap");
        let mut follower = StateMachineStore::open(file.clone()).unwrap();
        follower
            .apply(vec![entry(1, vec![create()])])
            .await
            .unwrap();
        let mut leader = StateMachineStore::open(dir.path().join("leader")).unwrap();
        leader
            .apply(vec![entry(1, vec![create()]), entry(2, vec![create()])])
            .await
            .unwrap();
        let newer = leader.build_snapshot().await.unwrap();
        let mut builder = follower.get_snapshot_builder().await;
        let (built, installed) = tokio::join!(
            tokio::spawn(async move { builder.build_snapshot().await }),
            follower.install_snapshot(&newer.meta, newer.snapshot),
        );
        built.unwrap().unwrap();
        installed.unwrap();
        let (meta, data) = read_snapshot_file(&file)
            .unwrap_or_else(|e| panic!("round {round}: snapshot file unreadable: {e}"))
            .expect("a snapshot file");
        assert_eq!(
            meta.last_log_id.map(|l| l.index),
            Some(2),
            "round {round}: the older built snapshot replaced the installed one"
        );
        LeaseMachine::from_snapshot(&data).unwrap();
        // Nor does a later, older build overwrite it.
        let again = follower.build_snapshot().await.unwrap();
        assert_eq!(again.meta.last_log_id.map(|l| l.index), Some(2));
    }
}
