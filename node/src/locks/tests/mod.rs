//! The lock service on a replica without a cluster (`super::fake`): every
//! operation, the pipeline's steps, the wait loops and the lease driver,
//! each against a real state machine that a fake leader applies to.

mod lease;
mod ops;
mod pipeline;
mod streams;
mod waits;

use super::fake::FakeReplica;
use super::*;
use crate::auth::{Access, Caller, Rule};
use crate::limits::Limits;
use raftlock_proto::reason::Reason;
use raftlock_store::machine::{Grant, Mode, Origin, RequestId, Terms};
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh request id.
fn request() -> RequestId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    RequestId(u128::from(NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// The lock service on a fake leader, and a caller with every right.
struct Fixture {
    fake: Arc<FakeReplica>,
    locks: Locks,
    anyone: Arc<Caller>,
}

async fn fixture() -> Fixture {
    fixture_with(Limits::default()).await
}

/// The service on a fake leader whose lease driver has taken up its
/// leadership (before that it answers keep-alives as a follower would).
async fn fixture_with(limits: Limits) -> Fixture {
    let fake = FakeReplica::new(limits);
    let locks = Locks::start(fake.clone(), 1_000);
    while locks.leases.leading_term().is_none() {
        tokio::task::yield_now().await;
    }
    Fixture {
        fake,
        locks,
        anyone: Caller::unrestricted(),
    }
}

/// An identity with `allow` on names under `prefix`.
fn identity(name: &str, prefix: &str, allow: &[Access]) -> Caller {
    Caller::identity(
        name,
        vec![Rule {
            prefix: prefix.into(),
            allow: allow.to_vec(),
        }],
    )
}

fn acquire(session: SessionId, name: &str, wait: Option<Duration>) -> Acquire {
    Acquire {
        session,
        name: name.into(),
        request_id: request(),
        mode: Mode::Exclusive,
        permits: None,
        wait,
        metadata: Vec::new(),
        sequence: None,
        terms: Terms::default(),
    }
}

fn create(ttl_ms: u64) -> CreateSession {
    CreateSession {
        ttl_ms,
        client_name: "unit".into(),
        creation_key: None,
        origin: Origin::default(),
    }
}

impl Fixture {
    async fn session_as(&self, caller: &Caller) -> SessionId {
        self.locks.run(caller, create(10_000)).await.unwrap().0
    }

    async fn session(&self) -> SessionId {
        self.session_as(&self.anyone).await
    }

    /// Takes `name` for `session` at once, or panics.
    async fn hold(&self, session: SessionId, name: &str) -> Grant {
        match self
            .locks
            .run(&self.anyone, acquire(session, name, None))
            .await
        {
            Ok(Acquired::Granted(g)) => g,
            other => panic!("{name} not granted to {session}: {other:?}"),
        }
    }

    async fn release(&self, g: &Grant) -> Result<Vec<Grant>, NodeError> {
        let release = Release {
            session: g.session,
            name: g.name.clone(),
            token: g.token,
        };
        self.locks.run(&self.anyone, release).await
    }

    /// How many wait in `name`'s queue now.
    async fn waiters(&self, name: &str) -> usize {
        self.locks
            .describe(&self.anyone, name)
            .await
            .unwrap()
            .view
            .waiters
            .len()
    }

    /// Returns once `n` wait in `name`'s queue.
    async fn until_waiters(&self, name: &str, n: usize) {
        while self.waiters(name).await != n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn holders(&self, name: &str) -> Vec<Grant> {
        self.locks
            .describe(&self.anyone, name)
            .await
            .unwrap()
            .view
            .holders
    }
}

/// The reason of a refusal, or a panic naming what came instead.
fn reason_of<T: std::fmt::Debug>(r: Result<T, NodeError>) -> Reason {
    match r {
        Err(e) => e.reason(),
        Ok(v) => panic!("expected a refusal, got {v:?}"),
    }
}
