//! The semaphore model of the linearizability search: counted permits at
//! the moment of each grant, and Describe and Validate answers of a
//! semaphore. In `H`, process `p` runs in session `p + 100`; `sem_hold`
//! states a size of 2.

use super::*;

fn describe(h: &mut H, p: u64, t0: u64, t1: u64, holders: serde_json::Value) {
    h.rec(t0, p, Type::Invoke, F::Describe, "s", None, None, None)
        .rec(
            t1,
            p,
            Type::Ok,
            F::Describe,
            "s",
            None,
            None,
            Some(json!({ "holders": holders })),
        );
}

fn validate(h: &mut H, p: u64, token: u64, t0: u64, t1: u64, valid: bool) {
    h.rec(
        t0,
        p,
        Type::Invoke,
        F::Validate,
        "s",
        Some(token),
        None,
        None,
    )
    .rec(
        t1,
        p,
        Type::Ok,
        F::Validate,
        "s",
        Some(token),
        None,
        Some(json!({ "valid": valid })),
    );
}

fn verdict(h: &mut H) -> (Verdict, String) {
    h.0.sort_by_key(|o| o.time_ns);
    let rs = check_all(&h.0);
    let r = get(&rs, "semaphore_linearizable");
    (r.verdict, r.explanation.clone())
}

/// Two holders of one permit each over [5, 100] and [15, 100].
fn two_holders() -> H {
    let mut h = H::default();
    sem_hold(&mut h, 0, 1, 5, 0, 100);
    sem_hold(&mut h, 1, 1, 6, 10, 100);
    h
}

#[test]
fn a_describe_must_name_the_holders_of_one_moment() {
    let mut h = two_holders();
    describe(&mut h, 2, 30, 40, json!([[100, 5], [101, 6]]));
    assert_eq!(verdict(&mut h).0, Verdict::Valid, "{:?}", verdict(&mut h));

    // Before the second grant, the first alone.
    let mut h = two_holders();
    describe(&mut h, 2, 1, 12, json!([[100, 5]]));
    assert_eq!(verdict(&mut h).0, Verdict::Valid, "{:?}", verdict(&mut h));

    // Both live, one left out: no moment had that.
    let mut h = two_holders();
    describe(&mut h, 2, 30, 40, json!([[101, 6]]));
    assert_eq!(verdict(&mut h).0, Verdict::Invalid);

    // Naming a released holder long after its release answered.
    let mut h = two_holders();
    describe(&mut h, 2, 200, 210, json!([[100, 5], [101, 6]]));
    assert_eq!(verdict(&mut h).0, Verdict::Invalid);
}

#[test]
fn validate_of_a_semaphore_holder_is_judged_as_of_one_moment() {
    let mut h = two_holders();
    validate(&mut h, 0, 5, 30, 40, true);
    validate(&mut h, 0, 5, 120, 130, false);
    assert_eq!(verdict(&mut h).0, Verdict::Valid, "{:?}", verdict(&mut h));

    // A released token still valid after the release answered.
    let mut h = two_holders();
    validate(&mut h, 0, 5, 120, 130, true);
    assert_eq!(verdict(&mut h).0, Verdict::Invalid);

    // A live holder called not valid.
    let mut h = two_holders();
    validate(&mut h, 1, 6, 30, 40, false);
    assert_eq!(verdict(&mut h).0, Verdict::Invalid);
}

#[test]
fn a_grant_that_a_describe_shows_full_is_caught() {
    // Size 2, both permits held at 30..40 as Describe shows; a third
    // holder granted inside that moment and known held past it.
    let mut h = two_holders();
    describe(&mut h, 2, 30, 40, json!([[100, 5], [101, 6]]));
    sem_hold(&mut h, 3, 1, 7, 28, 100);
    assert_eq!(verdict(&mut h).0, Verdict::Invalid);
}
