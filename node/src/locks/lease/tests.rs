use super::deadlines::Due;
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

#[test]
fn what_is_due_comes_in_deadline_order_and_moves_with_its_deadline() {
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut d: Due<SessionId, Duration> = Due::default();
    d.insert(1, (at(30), TTL));
    d.insert(2, (at(10), TTL));
    d.insert(3, (at(20), TTL));
    let due = |d: &Due<SessionId, Duration>, s| d.due(at(s)).map(|(k, _)| *k).collect::<Vec<_>>();
    assert_eq!(due(&d, 5), Vec::<u64>::new());
    assert!(!d.any_due(at(5)));
    assert_eq!(due(&d, 20), [2, 3]);
    // A renewal moves a session to its new place, and only there.
    d.update(&2, |deadline, _| *deadline = at(40));
    assert_eq!(due(&d, 35), [3, 1]);
    d.insert(3, (at(50), TTL));
    assert_eq!(due(&d, 45), [1, 2]);
    assert_eq!(d.remove(&1), Some((at(30), TTL)));
    assert_eq!(due(&d, 60), [2, 3]);
    d.update_all(|deadline, ttl| *deadline = (*deadline).max(at(45) + *ttl));
    assert_eq!(due(&d, 54), Vec::<u64>::new());
    assert_eq!(due(&d, 60), [2, 3]);
}

#[test]
fn a_session_that_ends_takes_all_and_only_its_waits_with_it() {
    let t0 = Instant::now();
    let mut waits: Due<(SessionId, String), u64> = Due::default();
    for (s, name) in [(6, "z"), (7, ""), (7, "a"), (7, "zz"), (8, "a")] {
        waits.insert((s, name.to_owned()), (t0, 0));
    }
    waits.remove_range(of_session(7));
    let left: Vec<_> = waits.due(t0).map(|(k, _)| k.clone()).collect();
    assert_eq!(left, [(6, "z".to_owned()), (8, "a".to_owned())]);
    waits.insert((SessionId::MAX, "a".to_owned()), (t0, 0));
    waits.remove_range(of_session(SessionId::MAX));
    assert_eq!(waits.due(t0).count(), 2);
    assert!(!waits.is_empty());
}
