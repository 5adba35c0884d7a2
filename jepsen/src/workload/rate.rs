//! The rate-limit workload's steps (takes, blocks of tokens spent
//! locally) and the semaphore workload's resizes: the ops that count
//! rather than hold.

use super::{timed, OpSpec, Worker};
use crate::history::{Type, F};
use rand::Rng;
use serde_json::json;
use std::time::Duration;

/// Validity of the rate-limit workload's token leases.
pub const TOKEN_LEASE: Duration = Duration::from_millis(500);

impl Worker {
    /// What every rate-limit op records of the limit, for the checker.
    fn rate_value(&self) -> serde_json::Value {
        json!({
            "rate": crate::backend::RATE,
            "per_ms": crate::backend::RATE_PER.as_millis() as u64,
            "burst": crate::backend::BURST,
            "lease_ms": TOKEN_LEASE.as_millis() as u64,
        })
    }

    /// One token taken (at once, or waiting a little), or a block of
    /// tokens reserved and spent one by one until it runs out or its
    /// validity ends, each spend recorded when it happens.
    pub(super) async fn rate_step(&mut self, name: &str) {
        let spec = |f: F, value: serde_json::Value| OpSpec {
            process: self.process,
            f,
            lock: name.to_owned(),
            session: None,
            token: None,
            valid_until: None,
            value: Some(value),
        };
        // Traffic comes in bursts: every worker pauses through every
        // fourth second of the run, so the limit fills up and the next
        // second opens with a rush, which is where a burst too large shows.
        let second = super::monotonic_ns() / 1_000_000_000;
        if second % 4 == 3 {
            let next = (second + 1) * 1_000_000_000;
            tokio::time::sleep(Duration::from_nanos(next - super::monotonic_ns().min(next))).await;
            return;
        }
        let backend = self.backend.clone();
        if self.rng.gen_bool(0.2) {
            // Small blocks: the takers leave few tokens free at once.
            let n = self.rng.gen_range(1..=2u64);
            let mut v = self.rate_value();
            v["n"] = json!(n);
            let (block, retire) = timed(
                &self.rec,
                spec(F::Reserve, v),
                backend.reserve(name, n, TOKEN_LEASE),
                |b: &Option<Box<dyn crate::backend::TokenBlock>>, s| {
                    s.value = Some(json!({ "admitted": b.is_some() }));
                    Type::Ok
                },
            )
            .await;
            if retire {
                self.retire().await;
                return;
            }
            if let Some(Some(block)) = block {
                while block.try_spend() {
                    let s = spec(F::Spend, self.rate_value());
                    self.rec.record(Type::Invoke, &s, None);
                    self.rec.record(Type::Ok, &s, None);
                    tokio::time::sleep(Duration::from_millis(self.rng.gen_range(20..150))).await;
                }
                block.finish().await;
            }
            return;
        }
        let wait = self
            .rng
            .gen_bool(0.3)
            .then(|| Duration::from_millis(self.rng.gen_range(50..400)));
        let (res, retire) = timed(
            &self.rec,
            spec(F::Take, self.rate_value()),
            backend.take(name, wait),
            |r: &(bool, Duration), s| {
                s.value = Some(json!({ "admitted": r.0 }));
                Type::Ok
            },
        )
        .await;
        if retire {
            self.retire().await;
            return;
        }
        match res {
            Some((false, retry_after)) => {
                tokio::time::sleep(retry_after.min(Duration::from_millis(300))).await
            }
            Some((true, _)) => {
                tokio::time::sleep(Duration::from_millis(self.rng.gen_range(0..50))).await
            }
            None => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }

    /// Sets the semaphore's size to one of 2 ..= 4 permits while others
    /// hold and wait (never below the 2 a hold may ask for, which the
    /// server refuses).
    pub(super) async fn resize(&mut self, name: &str) {
        let permits: u32 = self.rng.gen_range(2..=4);
        let spec = OpSpec {
            process: self.process,
            f: F::Resize,
            lock: name.to_owned(),
            session: None,
            token: None,
            valid_until: None,
            value: Some(json!({ "permits": permits })),
        };
        let backend = self.backend.clone();
        let (_, retire) = timed(&self.rec, spec, backend.resize(name, permits), |_, _| {
            Type::Ok
        })
        .await;
        if retire {
            self.retire().await;
        }
    }
}
