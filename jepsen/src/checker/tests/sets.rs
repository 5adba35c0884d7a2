//! Holds of lock sets: each lock of a set is a hold of its own, bounded by
//! the lease deadlines its session recorded while releasing the others. In
//! `H`, process `p` runs in session `p + 100`.

use super::*;

/// Process 0 is granted {a, b} with token 5 at 10 ms, releases `a` at 20
/// ms recording a lease deadline of 1,000 ms, is paused and never releases
/// `b`, and closes its session at 6,000 ms. Process 1 is granted `b` with
/// token 9, answered at `granted_at` ms.
fn set_holder_paused_between_releases(granted_at: u64) -> H {
    let mut h = H::default();
    let locks = json!({"locks": ["a", "b"]});
    h.rec(
        0,
        0,
        Type::Invoke,
        F::AcquireAll,
        "a,b",
        None,
        None,
        Some(locks),
    )
    .rec(
        10,
        0,
        Type::Ok,
        F::AcquireAll,
        "a,b",
        Some(5),
        None,
        Some(json!({"locks": ["a", "b"], "tokens": [5, 5]})),
    )
    .rec(
        20,
        0,
        Type::Invoke,
        F::Release,
        "a",
        Some(5),
        Some(1_000),
        None,
    )
    .rec(25, 0, Type::Ok, F::Release, "a", Some(5), None, None)
    .rec(6_000, 0, Type::Invoke, F::Close, "", None, None, None)
    .rec(6_010, 0, Type::Ok, F::Close, "", None, None, None)
    .rec(
        granted_at - 100,
        1,
        Type::Invoke,
        F::Acquire,
        "b",
        None,
        None,
        None,
    )
    .rec(
        granted_at,
        1,
        Type::Ok,
        F::Acquire,
        "b",
        Some(9),
        None,
        None,
    )
    .rec(
        granted_at + 10,
        1,
        Type::Invoke,
        F::Release,
        "b",
        Some(9),
        Some(granted_at + 2_000),
        None,
    )
    .rec(
        granted_at + 20,
        1,
        Type::Ok,
        F::Release,
        "b",
        Some(9),
        None,
        None,
    );
    h.0.sort_by_key(|o| o.time_ns);
    h
}

/// The leader may expire the paused session once its lease ran out and
/// grant `b` to another: no overlap. Judged up to the close, the hold of
/// `b` seemed to last until 6 s, and a correct server was called wrong.
#[test]
fn a_set_holder_paused_between_releases_holds_the_rest_only_until_its_lease() {
    let h = set_holder_paused_between_releases(3_000);
    let rs = check_all(&h.0);
    assert_eq!(
        get(&rs, "mutual_exclusion").verdict,
        Verdict::Valid,
        "{:?}",
        get(&rs, "mutual_exclusion")
    );
    // Before that deadline, `b` was still its: two holders at once.
    let h = set_holder_paused_between_releases(500);
    assert_invalid(&check_all(&h.0), "mutual_exclusion");
}
