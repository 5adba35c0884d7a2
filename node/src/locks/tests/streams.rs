//! The streams a caller keeps open: a watch names what happened to locks
//! with its cause, and an election observer follows the leader and ends
//! when this node stops leading.

use super::*;
use futures::StreamExt;
use watch::LockEventKind;

async fn next_events(
    stream: &mut (impl futures::Stream<Item = Result<watch::Watched, NodeError>> + Unpin),
) -> Vec<(LockEventKind, String, SessionId)> {
    let w = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("an answer in time")
        .expect("the stream goes on")
        .expect("not refused");
    w.events
        .into_iter()
        .map(|e| (e.kind, e.name, e.session))
        .collect()
}

#[tokio::test]
async fn a_watch_names_grants_sets_handoffs_and_releases_by_their_cause() {
    let f = fixture().await;
    let (a, b) = (f.session().await, f.session().await);
    let mut events = Box::pin(f.locks.watch(f.anyone.clone(), "w/".into(), 0).unwrap());
    assert!(
        next_events(&mut events).await.is_empty(),
        "the opening answer"
    );
    let g = f.hold(a, "w/1").await;
    assert_eq!(
        next_events(&mut events).await,
        [(LockEventKind::Granted, "w/1".to_string(), a)]
    );
    // A set granted at once is a grant of each lock, not a handoff.
    let set = AcquireAll {
        session: b,
        names: vec!["w/2".into(), "w/3".into()],
        request_id: request(),
        wait: None,
        metadata: Vec::new(),
        sequence: None,
    };
    f.locks.run(&f.anyone, set).await.unwrap();
    assert_eq!(
        next_events(&mut events).await,
        [
            (LockEventKind::Granted, "w/2".to_string(), b),
            (LockEventKind::Granted, "w/3".to_string(), b)
        ]
    );
    let waiting = {
        let (locks, anyone) = (f.locks.clone(), f.anyone.clone());
        let op = acquire(b, "w/1", Some(Duration::from_secs(30)));
        tokio::spawn(async move { locks.run(&anyone, op).await })
    };
    f.until_waiters("w/1", 1).await;
    f.release(&g).await.unwrap();
    assert_eq!(
        next_events(&mut events).await,
        [
            (LockEventKind::Released, "w/1".to_string(), a),
            (LockEventKind::Handoff, "w/1".to_string(), b)
        ]
    );
    assert!(matches!(waiting.await.unwrap(), Ok(Acquired::Granted(_))));
    let forced = ForceRelease { name: "w/2".into() };
    f.locks.run(&f.anyone, forced).await.unwrap();
    assert_eq!(
        next_events(&mut events).await,
        [(LockEventKind::ForceReleased, "w/2".to_string(), b)]
    );
}

#[tokio::test]
async fn an_observer_follows_the_leader_and_ends_when_this_node_stops_leading() {
    let f = fixture().await;
    let a = f.session().await;
    let mut leaders = Box::pin(f.locks.observe(&f.anyone, "e".into()).await.unwrap());
    let in_time = Duration::from_secs(5);
    let first = tokio::time::timeout(in_time, leaders.next()).await.unwrap();
    assert_eq!(first.unwrap().unwrap(), None);
    let campaign = Campaign {
        session: a,
        name: "e".into(),
        request_id: request(),
        value: b"me".to_vec(),
        wait: None,
        sequence: None,
    };
    let g = f.locks.run(&f.anyone, campaign).await.unwrap();
    let seen = tokio::time::timeout(in_time, leaders.next()).await.unwrap();
    let seen: Option<Grant> = seen.unwrap().unwrap();
    assert_eq!(seen.map(|l| l.token), Some(g.token));
    f.fake.set_leading(false);
    let end = tokio::time::timeout(in_time, leaders.next()).await.unwrap();
    let end: Result<Option<Grant>, NodeError> = end.unwrap();
    assert_eq!(reason_of(end), Reason::NotLeader);
}
