//! The lease driver on a fake leader, in paused time: a session ends when
//! its TTL passes without a keep-alive, only on a leader, and a node that
//! becomes leader gives every session a full TTL from then.

use super::*;

const TTL: Duration = Duration::from_secs(2);

async fn alive(f: &Fixture, s: SessionId) -> bool {
    f.fake.state().read().machine.session(s).is_some()
}

async fn session_with_ttl(f: &Fixture) -> SessionId {
    f.locks
        .run(&f.anyone, create(TTL.as_millis() as u64))
        .await
        .unwrap()
        .0
}

/// Lets paused time run for `d`, in steps the driver sees as ticks (one
/// jump past its stall bound would read as a paused process).
async fn pass(d: Duration) {
    let step = Duration::from_millis(50);
    let mut left = d;
    while left > Duration::ZERO {
        let s = step.min(left);
        tokio::time::sleep(s).await;
        left -= s;
    }
}

#[tokio::test(start_paused = true)]
async fn a_session_without_keep_alives_ends_after_its_ttl_and_frees_its_locks() {
    let f = fixture().await;
    let s = session_with_ttl(&f).await;
    f.hold(s, "x").await;
    pass(TTL - Duration::from_millis(200)).await;
    assert!(alive(&f, s).await, "ended before its TTL");
    pass(Duration::from_millis(600)).await;
    assert!(!alive(&f, s).await, "still alive after its TTL");
    assert!(f.holders("x").await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn keep_alives_keep_a_session() {
    let f = fixture().await;
    let s = session_with_ttl(&f).await;
    for _ in 0..6 {
        pass(TTL / 2).await;
        f.locks
            .run(&f.anyone, KeepAlive { session: s })
            .await
            .unwrap();
    }
    assert!(alive(&f, s).await);
    let left = f.locks.session_time_left(s).unwrap();
    assert!(left > TTL - Duration::from_millis(100), "{left:?}");
}

#[tokio::test(start_paused = true)]
async fn a_follower_expires_nothing_and_a_new_leader_gives_a_full_ttl() {
    let f = fixture().await;
    let s = session_with_ttl(&f).await;
    f.fake.set_leading(false);
    pass(TTL * 3).await;
    assert!(alive(&f, s).await, "a follower expired a session");
    assert!(f.locks.session_time_left(s).is_none());
    f.fake.set_leading(true);
    pass(TTL - Duration::from_millis(200)).await;
    assert!(alive(&f, s).await, "the new leader did not give a full TTL");
    pass(Duration::from_millis(600)).await;
    assert!(!alive(&f, s).await);
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_leadership_is_not_confirmed_expires_nothing() {
    let f = fixture().await;
    let s = session_with_ttl(&f).await;
    f.fake
        .refuse_confirmations(Some(NodeError::Unavailable("test".into())));
    pass(TTL * 3).await;
    assert!(alive(&f, s).await, "expired without a confirmed leadership");
    f.fake.refuse_confirmations(None);
    pass(Duration::from_millis(300)).await;
    assert!(!alive(&f, s).await);
}

#[tokio::test(start_paused = true)]
async fn a_hold_cap_releases_the_lock_on_time() {
    let f = fixture().await;
    let s = f.session().await;
    let mut op = acquire(s, "capped", None);
    op.terms.max_hold_ms = 1_000;
    let r = f.locks.run(&f.anyone, op).await.unwrap();
    assert!(matches!(r, Acquired::Granted(_)));
    pass(Duration::from_millis(900)).await;
    assert_eq!(f.holders("capped").await.len(), 1, "released early");
    pass(Duration::from_millis(400)).await;
    assert!(
        f.holders("capped").await.is_empty(),
        "the cap did not release it"
    );
}
