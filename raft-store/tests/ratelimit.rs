//! Rate limits against a reference model and against the bound they
//! promise.
//!
//! The model is the textbook token bucket, written independently of the
//! machine's GCRA: a credit of time that fills at one ns per ns up to
//! `burst · T` and pays `n · T` per admitted take. The property is the
//! promise itself, judged from the outcomes alone: over every span of the
//! rate clock, the tokens admitted (leases counted when taken, returned
//! tokens given back) are at most `span / T + burst`.

use proptest::prelude::*;
use raftlock_store::machine::{Command, LeaseMachine, LimitSpec, Reply};

const SPEC: LimitSpec = LimitSpec {
    rate: 10,
    per_ms: 1_000,
    burst: 4,
};

#[derive(Clone, Debug)]
enum Op {
    /// Take `n` at `dt` ns after the previous op (`back`: before it, as a
    /// deposed leader's late clock).
    Take {
        n: u64,
        dt: u64,
        back: bool,
        lease: bool,
    },
    /// Return `frac` (of 4) of the oldest outstanding lease.
    Return { frac: u64, dt: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let dt = prop_oneof![
        Just(0u64),
        1u64..1_000_000,
        1_000_000u64..300_000_000,
        Just(2_000_000_000u64),
    ];
    prop_oneof![
        6 => (1u64..=5, dt.clone(), prop::bool::weighted(0.1), prop::bool::weighted(0.25))
            .prop_map(|(n, dt, back, lease)| Op::Take { n, dt, back, lease }),
        1 => (0u64..=4, dt).prop_map(|(frac, dt)| Op::Return { frac, dt }),
    ]
}

/// The textbook bucket: `credit` ns of time banked, at most `burst · T`.
struct Model {
    t: u128,
    credit: u128,
    clock: u64,
    /// Outstanding leases: id, tokens, when they run out.
    leases: Vec<(u64, u64, u64)>,
}

/// A lease's record is kept this long after it runs out, for its return.
const GRACE_NS: u64 = 5_000_000_000;

impl Model {
    fn new() -> Model {
        let t = u128::from(SPEC.interval_ns());
        Model {
            t,
            credit: u128::from(SPEC.burst) * t,
            clock: 0,
            leases: Vec::new(),
        }
    }

    fn advance(&mut self, to: u64) {
        if to > self.clock {
            let cap = u128::from(SPEC.burst) * self.t;
            self.credit = (self.credit + u128::from(to - self.clock)).min(cap);
            self.clock = to;
        }
    }

    fn take(&mut self, n: u64, at: u64) -> bool {
        // A take that could never fit is refused before it moves the
        // clock: refusals change nothing.
        if n > SPEC.burst {
            return false;
        }
        self.advance(at);
        self.forget_old_leases();
        let cost = u128::from(n) * self.t;
        if self.credit >= cost {
            self.credit -= cost;
            true
        } else {
            false
        }
    }

    fn forget_old_leases(&mut self) {
        let clock = self.clock;
        self.leases.retain(|(_, _, until)| until + GRACE_NS > clock);
    }

    fn give_back(&mut self, n: u64, at: u64) {
        self.advance(at);
        let cap = u128::from(SPEC.burst) * self.t;
        self.credit = (self.credit + u128::from(n) * self.t).min(cap);
    }
}

/// Runs `ops`, checking each answer against the model; returns the
/// admissions (rate-clock time, tokens; negative for tokens given back).
fn run(ops: &[Op]) -> Result<Vec<(u64, i128)>, TestCaseError> {
    let mut m = LeaseMachine::default();
    let mut model = Model::new();
    let mut now: u64 = 1_000_000_000;
    let mut admitted = Vec::new();
    let define = Command::DefineLimit {
        name: "r".into(),
        spec: SPEC,
        now_ns: now,
    };
    prop_assert!(m.apply(&define, 1, 0).reply.is_ok());
    model.clock = now;
    for (i, op) in ops.iter().enumerate() {
        let index = i as u64 + 2;
        match op {
            Op::Take { n, dt, back, lease } => {
                let at = if *back {
                    now.saturating_sub(*dt)
                } else {
                    now += dt;
                    now
                };
                let cmd = Command::Take {
                    name: "r".into(),
                    n: *n,
                    spec: None,
                    lease_ms: if *lease { 500 } else { 0 },
                    now_ns: at,
                };
                let reply = m.apply(&cmd, index, 0).reply;
                // The machine's clock never goes back: neither does the model's.
                let expected = model.take(*n, at.max(model.clock));
                match reply {
                    Ok(Reply::Taken {
                        n: k, lease: id, ..
                    }) => {
                        prop_assert!(expected, "admitted {} at {} where the model refuses", n, at);
                        prop_assert_eq!(k, *n);
                        admitted.push((m.rate_clock_ns(), i128::from(*n)));
                        if let Some(id) = id {
                            model.leases.push((id, *n, model.clock + 500_000_000));
                        }
                    }
                    Ok(Reply::TakeRefused { retry_after_ns }) => {
                        prop_assert!(!expected, "refused {} at {} where the model admits", n, at);
                        prop_assert!(retry_after_ns > 0);
                    }
                    Err(e) => {
                        prop_assert!(*n > SPEC.burst, "refused with {}", e);
                    }
                    Ok(other) => prop_assert!(false, "take answered {}", other),
                }
            }
            Op::Return { frac, dt } => {
                now += dt;
                if model.leases.is_empty() {
                    continue;
                }
                let (id, reserved, until) = model.leases.remove(0);
                let unused = reserved * frac / 4;
                let cmd = Command::ReturnTokens {
                    name: "r".into(),
                    lease: id,
                    unused,
                    now_ns: now,
                };
                let reply = m.apply(&cmd, index, 0).reply;
                // A lease whose grace has passed by the return's clock is
                // forgotten: nothing to credit.
                let kept = until + GRACE_NS > now.max(model.clock);
                let credited = if kept { unused } else { 0 };
                prop_assert_eq!(reply, Ok(Reply::Returned { credited }));
                model.give_back(credited, now);
                model.forget_old_leases();
                admitted.push((m.rate_clock_ns(), -i128::from(credited)));
            }
        }
    }
    Ok(admitted)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_machine_admits_exactly_what_a_token_bucket_admits(ops in prop::collection::vec(op(), 1..200)) {
        run(&ops)?;
    }

    #[test]
    fn no_span_of_the_rate_clock_admits_more_than_rate_times_span_plus_burst(
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let admitted = run(&ops)?;
        let t = i128::from(SPEC.interval_ns());
        for (i, (start, _)) in admitted.iter().enumerate() {
            let mut total = 0i128;
            for (at, n) in &admitted[i..] {
                total += n;
                let span = i128::from(at - start);
                prop_assert!(
                    total <= span / t + i128::from(SPEC.burst),
                    "{} tokens admitted over {} ns (bound {})",
                    total,
                    span,
                    span / t + i128::from(SPEC.burst)
                );
            }
        }
    }

    #[test]
    fn a_snapshot_keeps_every_bucket(ops in prop::collection::vec(op(), 1..60)) {
        let mut m = LeaseMachine::default();
        let mut now = 1u64;
        m.apply(&Command::DefineLimit { name: "r".into(), spec: SPEC, now_ns: now }, 1, 0);
        for (i, op) in ops.iter().enumerate() {
            if let Op::Take { n, dt, lease, .. } = op {
                now += dt;
                let cmd = Command::Take {
                    name: "r".into(),
                    n: *n,
                    spec: None,
                    lease_ms: if *lease { 500 } else { 0 },
                    now_ns: now,
                };
                m.apply(&cmd, i as u64 + 2, 0);
            }
        }
        let restored = LeaseMachine::from_snapshot(&m.to_snapshot()).expect("restores");
        prop_assert_eq!(restored.rate_limit("r"), m.rate_limit("r"));
        prop_assert_eq!(restored.rate_clock_ns(), m.rate_clock_ns());
    }
}

#[test]
fn conflicting_or_invalid_parameters_and_unknown_limits_are_refused_and_change_nothing() {
    let mut m = LeaseMachine::default();
    let take = |n: u64, spec: Option<LimitSpec>| Command::Take {
        name: "r".into(),
        n,
        spec,
        lease_ms: 0,
        now_ns: 5,
    };
    let code = |m: &mut LeaseMachine, cmd: Command| match m.apply(&cmd, 9, 0).reply {
        Err(e) => e.code(),
        Ok(r) => panic!("accepted: {r}"),
    };
    assert_eq!(code(&mut m, take(1, None)), "limit-not-found");
    for bad in [
        LimitSpec { rate: 0, ..SPEC },
        LimitSpec { per_ms: 0, ..SPEC },
        LimitSpec { burst: 0, ..SPEC },
        // One a day with a burst of 300,000: 821 years to refill, past
        // what the arrival time's u64 of ns holds.
        LimitSpec {
            rate: 1,
            per_ms: 86_400_000,
            burst: 300_000,
        },
    ] {
        assert_eq!(code(&mut m, take(1, Some(bad))), "invalid-argument");
    }
    assert_eq!(
        code(&mut m, take(SPEC.burst + 1, Some(SPEC))),
        "invalid-argument"
    );
    assert_eq!(m, LeaseMachine::default(), "refusals change nothing");
    assert!(m.apply(&take(1, Some(SPEC)), 10, 0).reply.is_ok());
    let before = m.clone();
    let other = LimitSpec { burst: 9, ..SPEC };
    assert_eq!(code(&mut m, take(1, Some(other))), "limit-conflict");
    assert_eq!(code(&mut m, take(0, None)), "invalid-argument");
    assert_eq!(m, before);
}

/// A lease's record went only with a later call on its own limit: a limit
/// used once kept its leases (and a cluster its memory) for good. Any rate
/// command now forgets every lease past its grace, whatever its limit.
#[test]
fn leases_past_their_grace_go_whatever_limit_the_next_call_is_for() {
    let mut m = LeaseMachine::default();
    let mut index = 1;
    let mut apply = |m: &mut LeaseMachine, cmd: Command| {
        index += 1;
        m.apply(&cmd, index, 0)
    };
    let take = |name: &str, lease_ms: u64, now_ns: u64| Command::Take {
        name: name.into(),
        n: 1,
        spec: Some(SPEC),
        lease_ms,
        now_ns,
    };
    for name in ["once/a", "once/b"] {
        let o = apply(&mut m, take(name, 100, 1_000));
        assert!(
            matches!(o.reply, Ok(Reply::Taken { lease: Some(_), .. })),
            "{o}"
        );
    }
    let leases = |m: &LeaseMachine, name: &str| m.rate_limit(name).unwrap().leases.len();
    // Within the grace: kept, for a return.
    apply(&mut m, take("busy", 0, 1_000 + 100_000_000 + GRACE_NS - 1));
    assert_eq!((leases(&m, "once/a"), leases(&m, "once/b")), (1, 1));
    // Past it: gone, though nothing used either limit again.
    apply(&mut m, take("busy", 0, 1_000 + 100_000_000 + GRACE_NS));
    assert_eq!((leases(&m, "once/a"), leases(&m, "once/b")), (0, 0));
    // And a snapshot of that state reads back the same.
    let back = LeaseMachine::from_snapshot(&m.to_snapshot()).unwrap();
    assert_eq!(back, m);
}
