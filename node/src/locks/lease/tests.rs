use super::*;

fn leading() -> Deadlines {
    Deadlines {
        term: Some(3),
        ..Deadlines::default()
    }
}

const TTL: Duration = Duration::from_secs(10);

#[test]
fn a_late_renewal_never_pulls_a_deadline_back() {
    let mut d = leading();
    let t0 = Instant::now();
    // Renewal B, received at t0 + 2 s, is acknowledged first.
    d.renew(
        7,
        t0 + Duration::from_secs(2),
        TTL,
        t0 + Duration::from_secs(2),
        true,
    )
    .unwrap();
    // Renewal A was received at t0 but waited; it finishes later.
    d.renew(7, t0, TTL, t0 + Duration::from_secs(3), true)
        .unwrap();
    assert_eq!(d.sessions[&7].0, t0 + Duration::from_secs(12));
}

#[test]
fn a_renewal_never_shortens_a_new_leaders_full_ttl() {
    let mut d = leading();
    let elected = Instant::now() + Duration::from_secs(5);
    // What `rebuild` gives every session on election.
    d.sessions.insert(7, (elected + TTL, TTL));
    // A keep-alive received before the election, answered after it.
    d.renew(7, elected - Duration::from_secs(4), TTL, elected, true)
        .unwrap();
    assert_eq!(d.sessions[&7].0, elected + TTL);
}

#[test]
fn a_session_past_its_deadline_is_not_renewed() {
    let mut d = leading();
    let t0 = Instant::now();
    d.sessions.insert(7, (t0 + TTL, TTL));
    let late = t0 + TTL + Duration::from_millis(1);
    assert_eq!(d.renew(7, late, TTL, late, true), Err(Refused::Expired));
    assert_eq!(d.sessions[&7].0, t0 + TTL, "an expiry may be in flight");
    assert!(!d.live(7, late));
}

#[test]
fn an_applied_expiry_is_not_undone_by_a_renewal() {
    let mut d = leading();
    let t0 = Instant::now();
    d.sessions.insert(7, (t0 + TTL, TTL));
    assert_eq!(d.renew(7, t0, TTL, t0, false), Err(Refused::Expired));
    assert!(!d.sessions.contains_key(&7));
    assert!(!d.live(7, t0));
}

#[test]
fn a_session_the_driver_has_not_seen_yet_is_renewed() {
    let mut d = leading();
    let t0 = Instant::now();
    d.renew(9, t0, TTL, t0, true).unwrap();
    assert_eq!(d.sessions[&9], (t0 + TTL, TTL));
    assert!(d.live(9, t0));
}

#[test]
fn a_follower_renews_nothing() {
    let mut d = Deadlines::default();
    let t0 = Instant::now();
    assert_eq!(d.renew(9, t0, TTL, t0, true), Err(Refused::NotLeader));
    assert!(d.sessions.is_empty());
}
