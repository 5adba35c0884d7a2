//! The fenced workload's frozen holder: a client that takes a lock and
//! then stops renewing it, as a GC pause or a stopped VM would, and writes
//! afterwards with its stale token.

use super::{granted, timed, Worker, FROZEN_TTL};
use crate::backend::OpError;
use crate::history::{Type, F};
use serde_json::json;
use std::time::{Duration, Instant};

impl Worker {
    /// The GC-pause case: take the lock with a session nobody renews, stay
    /// frozen past its TTL, then write with the old token as if nothing
    /// happened.
    pub(super) async fn frozen_holder(&mut self, name: &str) {
        let Ok(frozen) = self.backend.frozen_session(FROZEN_TTL).await else {
            return;
        };
        let rec = self.rec.clone();
        let sid = frozen.id();
        let spec = self.spec(F::Acquire, name, sid);
        let (res, retire) = timed(
            &rec,
            spec,
            // A short wait: the locks are rarely free, and the session,
            // never renewed, must still be alive when it is granted.
            frozen.acquire(name, None, 1, FROZEN_TTL / 2),
            granted,
        )
        .await;
        if retire {
            self.retire().await;
            return;
        }
        let Some(Some(token)) = res else { return };
        // The deadline a client would have computed; it passes while frozen.
        let deadline = frozen.lease_deadline();
        tokio::time::sleep(FROZEN_TTL + Duration::from_secs(1)).await;
        // On waking, a renewal sent by hand: the server must not call a
        // session alive whose lock it may already have handed on.
        let mut k = self.spec(F::KeepAlive, name, sid);
        k.token = Some(token);
        k.valid_until = Some(deadline);
        let sent = Instant::now();
        self.rec.record(Type::Invoke, &k, None);
        match frozen.keep_alive().await {
            Ok(()) => {
                self.rec.record(Type::Ok, &k, None);
                // An acknowledged renewal promises the session (and so its
                // lock) until at least its send time + TTL − margin: a
                // Validate before then must find the token still held.
                let promised =
                    sent + FROZEN_TTL - (FROZEN_TTL / 10).max(Duration::from_millis(100));
                self.validate(name, sid, token, Some(promised)).await;
            }
            Err(OpError::Fail(e)) => self.rec.record(Type::Fail, &k, Some(e)),
            Err(OpError::Unknown(e)) => self.rec.record(Type::Info, &k, Some(e)),
        }
        self.seq += 1;
        let mut w = self.spec(F::Write, name, sid);
        w.token = Some(token);
        // Its lease lapsed while it was frozen; the write is what a paused
        // process does on waking.
        w.valid_until = Some(deadline);
        w.value = Some(json!({ "seq": self.seq, "frozen": true }));
        let regs = self.registers.clone();
        let n2 = name.to_owned();
        timed(
            &rec,
            w,
            async move { regs.write(&n2, token).map_err(OpError::Fail) },
            |_, _| Type::Ok,
        )
        .await;
        let mut r = self.spec(F::Release, name, sid);
        r.token = Some(token);
        r.valid_until = Some(deadline);
        let retire = timed(&rec, r, frozen.release(name, token), |_, _| Type::Ok)
            .await
            .1;
        if retire {
            self.retire().await;
        }
    }
}
