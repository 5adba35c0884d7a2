//! The linearizability checker on every answer of an exclusive lock: a
//! try-lock's BUSY and the holders it names, Validate's verdict, and
//! Describe's holders. In `H`, process `p` runs in session `p + 100`.

use super::*;

fn busy(h: &mut H, p: u64, t0: u64, t1: u64, named: serde_json::Value) {
    h.rec(
        t0,
        p,
        Type::Invoke,
        F::Acquire,
        "a",
        None,
        None,
        Some(json!({"try": true})),
    )
    .rec(
        t1,
        p,
        Type::Fail,
        F::Acquire,
        "a",
        None,
        None,
        Some(json!({"try": true, "busy": named})),
    );
}

fn validate(h: &mut H, p: u64, token: u64, t0: u64, t1: u64, valid: bool) {
    h.rec(
        t0,
        p,
        Type::Invoke,
        F::Validate,
        "a",
        Some(token),
        None,
        None,
    )
    .rec(
        t1,
        p,
        Type::Ok,
        F::Validate,
        "a",
        Some(token),
        None,
        Some(json!({ "valid": valid })),
    );
}

fn describe(h: &mut H, p: u64, t0: u64, t1: u64, holders: serde_json::Value) {
    h.rec(t0, p, Type::Invoke, F::Describe, "a", None, None, None)
        .rec(
            t1,
            p,
            Type::Ok,
            F::Describe,
            "a",
            None,
            None,
            Some(json!({ "holders": holders })),
        );
}

fn verdict(h: &H) -> (Verdict, String) {
    let rs = check_all(&h.0);
    let r = get(&rs, "linearizable");
    (r.verdict, r.explanation.clone())
}

#[test]
fn a_busy_answer_must_name_the_holder_of_its_moment() {
    // Process 1 (session 101) holds token 3 over [5, 100].
    let base = || {
        let mut h = H::default();
        h.hold(1, "a", 3, 0, 5, 100, 105);
        h
    };
    let mut h = base();
    busy(&mut h, 2, 20, 30, json!([[101, 3]]));
    assert_eq!(verdict(&h).0, Verdict::Valid, "{}", verdict(&h).1);
    // Naming nobody, or another token, fits no order.
    for named in [json!([]), json!([[101, 4]]), json!([[101, 3], [102, 9]])] {
        let mut h = base();
        busy(&mut h, 2, 20, 30, named.clone());
        assert_invalid(&check_all(&h.0), "linearizable");
    }
    // Overlapping the release, naming the holder still fits.
    let mut h = base();
    busy(&mut h, 2, 98, 110, json!([[101, 3]]));
    assert_eq!(verdict(&h).0, Verdict::Valid);
    // After the release completed, it does not.
    let mut h = base();
    busy(&mut h, 2, 110, 120, json!([[101, 3]]));
    assert_invalid(&check_all(&h.0), "linearizable");
}

#[test]
fn validate_is_valid_exactly_while_the_token_is_held() {
    let mut h = H::default();
    h.hold(1, "a", 3, 0, 5, 100, 105);
    validate(&mut h, 1, 3, 50, 60, true);
    validate(&mut h, 1, 3, 110, 120, false);
    assert_eq!(verdict(&h).0, Verdict::Valid, "{}", verdict(&h).1);
    // A released token that still validates: a stale read.
    let mut h = H::default();
    h.hold(1, "a", 3, 0, 5, 100, 105);
    validate(&mut h, 1, 3, 110, 120, true);
    assert_invalid(&check_all(&h.0), "linearizable");
    // A held token called invalid, with no lease that could have ended.
    let mut h = H::default();
    h.hold(1, "a", 3, 0, 5, 100, 105);
    validate(&mut h, 2, 3, 50, 60, false);
    assert_invalid(&check_all(&h.0), "linearizable");
}

#[test]
fn describe_names_the_holders_of_one_moment() {
    let mut h = H::default();
    h.hold(1, "a", 3, 0, 5, 100, 105);
    describe(&mut h, 2, 50, 60, json!([[101, 3]]));
    describe(&mut h, 2, 110, 120, json!([]));
    assert_eq!(verdict(&h).0, Verdict::Valid, "{}", verdict(&h).1);
    for (t0, t1, holders) in [(50, 60, json!([])), (110, 120, json!([[101, 3]]))] {
        let mut h = H::default();
        h.hold(1, "a", 3, 0, 5, 100, 105);
        describe(&mut h, 2, t0, t1, holders);
        assert_invalid(&check_all(&h.0), "linearizable");
    }
}

#[test]
fn a_grant_whose_answer_was_lost_is_known_by_the_answers_that_name_it() {
    // Process 1's acquire never returned (info): a BUSY at [60, 70] naming
    // its session shows it was granted token 7.
    let lost = |close_at: u64| {
        let mut h = H::default();
        h.rec(0, 1, Type::Invoke, F::Acquire, "a", None, None, None)
            .rec(50, 1, Type::Info, F::Acquire, "a", None, None, None)
            .rec(close_at, 1, Type::Invoke, F::Close, "", None, None, None)
            .rec(close_at + 1, 1, Type::Ok, F::Close, "", None, None, None);
        busy(&mut h, 2, 60, 70, json!([[101, 7]]));
        h
    };
    // Nothing bounds its hold after the BUSY: its session may have expired
    // (a frozen holder's is never closed), so another acquire may take it.
    let mut h = lost(200);
    h.hold(3, "a", 9, 80, 90, 230, 240);
    assert_eq!(verdict(&h).0, Verdict::Valid, "{}", verdict(&h).1);
    // But not before the BUSY that saw it held, nor with a smaller token.
    let mut h = lost(200);
    h.hold(3, "a", 9, 10, 20, 40, 45);
    assert_invalid(&check_all(&h.0), "linearizable");
    let mut h = lost(200);
    h.hold(3, "a", 5, 80, 90, 230, 240);
    assert_invalid(&check_all(&h.0), "linearizable");
    // A known token named as another session's, and a grant to a session
    // that never asked, are invented.
    for named in [json!([[555, 3]]), json!([[555, 4]])] {
        let mut h = H::default();
        h.hold(1, "a", 3, 0, 5, 100, 105);
        busy(&mut h, 2, 20, 30, named);
        assert_invalid(&check_all(&h.0), "linearizable");
    }
}
