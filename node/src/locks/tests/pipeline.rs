//! The steps every operation shares (`pipeline.rs`): each refusal comes
//! before anything is proposed, and a failed proposal reaches the caller.

use super::*;

#[tokio::test]
async fn a_caller_without_the_right_is_refused_before_anything_is_written() {
    let f = fixture().await;
    let reader = identity("reader", "", &[Access::Read]);
    let before = f.fake.next_entry();
    let r = f.locks.run(&reader, create(10_000)).await;
    assert_eq!(reason_of(r), Reason::PermissionDenied);
    let s = f.session().await;
    let before_acquire = f.fake.next_entry();
    let locker = identity("locker", "jobs/", &[Access::Lock]);
    let r = f.locks.run(&locker, acquire(s, "other/x", None)).await;
    assert_eq!(reason_of(r), Reason::PermissionDenied);
    assert!(before < before_acquire);
    assert_eq!(f.fake.next_entry(), before_acquire);
}

#[tokio::test]
async fn a_session_serves_only_the_identity_that_made_it() {
    let f = fixture().await;
    let alice = identity("alice", "", &[Access::Lock, Access::Read]);
    let bob = identity("bob", "", &[Access::Lock, Access::Read]);
    let s = f.session_as(&alice).await;
    let r = f.locks.run(&alice, acquire(s, "x", None)).await.unwrap();
    assert!(matches!(r, Acquired::Granted(_)));
    let r = f.locks.run(&bob, acquire(s, "y", None)).await;
    assert_eq!(reason_of(r), Reason::PermissionDenied);
    let r = f.locks.run(&bob, CloseSession { session: s }).await;
    assert_eq!(reason_of(r), Reason::PermissionDenied);
    // An id nobody made is not found, rather than left for someone to
    // create before the command commits.
    let r = f.locks.run(&bob, KeepAlive { session: s + 1_000 }).await;
    assert_eq!(reason_of(r), Reason::SessionNotFound);
}

#[tokio::test]
async fn bad_fields_are_refused_before_the_rights_and_the_proposal() {
    let f = fixture().await;
    let s = f.session().await;
    let before = f.fake.next_entry();
    let r = f.locks.run(&f.anyone, acquire(s, "", None)).await;
    assert_eq!(reason_of(r), Reason::InvalidName);
    let r = f.locks.run(&f.anyone, acquire(0, "x", None)).await;
    assert_eq!(reason_of(r), Reason::InvalidArgument);
    let long_wait = acquire(s, "x", Some(Duration::from_secs(7 * 24 * 3600)));
    let r = f.locks.run(&f.anyone, long_wait).await;
    assert_eq!(reason_of(r), Reason::InvalidArgument);
    assert_eq!(f.fake.next_entry(), before);
}

#[tokio::test]
async fn short_of_space_what_grows_the_state_is_refused_and_releases_go_on() {
    let f = fixture().await;
    let s = f.session().await;
    let g = f.hold(s, "x").await;
    f.fake.set_no_space(true);
    let r = f.locks.run(&f.anyone, acquire(s, "y", None)).await;
    assert_eq!(reason_of(r), Reason::NoSpace);
    let r = f.locks.run(&f.anyone, create(10_000)).await;
    assert_eq!(reason_of(r), Reason::NoSpace);
    f.release(&g).await.unwrap();
    f.locks
        .run(&f.anyone, CloseSession { session: s })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_failed_proposal_reaches_the_caller_and_changes_nothing() {
    let f = fixture().await;
    let s = f.session().await;
    f.fake
        .refuse_proposals(Some(NodeError::Unavailable("test".into())));
    let r = f.locks.run(&f.anyone, acquire(s, "x", None)).await;
    assert_eq!(reason_of(r), Reason::NoQuorum);
    f.fake.refuse_proposals(None);
    assert!(f.holders("x").await.is_empty());
    assert!(f.locks.waits().is_empty(), "no wait left registered");
}

#[tokio::test]
async fn a_follower_sends_writes_and_reads_to_the_leader() {
    let f = fixture().await;
    let s = f.session().await;
    f.fake.set_leading(false);
    let r = f.locks.run(&f.anyone, acquire(s, "x", None)).await;
    assert_eq!(reason_of(r), Reason::NotLeader);
    assert_eq!(
        reason_of(f.locks.describe(&f.anyone, "x").await),
        Reason::NotLeader
    );
    assert_eq!(
        reason_of(f.locks.leader(&f.anyone, "x").await),
        Reason::NotLeader
    );
}

#[tokio::test]
async fn reads_are_refused_when_no_quorum_confirms_them() {
    let f = fixture().await;
    let s = f.session().await;
    let g = f.hold(s, "x").await;
    f.fake
        .refuse_confirmations(Some(NodeError::Unavailable("test".into())));
    assert_eq!(
        reason_of(f.locks.validate(&f.anyone, "x", g.token).await),
        Reason::NoQuorum
    );
    assert_eq!(
        reason_of(f.locks.describe(&f.anyone, "x").await),
        Reason::NoQuorum
    );
    let q = ListQuery::default();
    assert_eq!(
        reason_of(f.locks.list(&f.anyone, q).await),
        Reason::NoQuorum
    );
    let r = f.locks.run(&f.anyone, KeepAlive { session: s }).await;
    assert_eq!(reason_of(r), Reason::NoQuorum);
}
