//! The proposals that end what ran out: sessions, waits, capped holds and
//! lock-delays. Each is proposed only by the leader's driver, and its
//! deadline is dropped only once the proposal committed, so a failed one is
//! tried again at the next tick.

use super::LeaseDriver;
use raftlock_store::machine::{Command, FencingToken, RequestId, SessionId};
use raftlock_store::planted::{planted, Bug};
use tokio::time::Instant;
use tracing::{info, warn};

impl LeaseDriver {
    /// Ends the holds whose cap ran out.
    pub(super) async fn end_holds(&self, now: Instant) {
        let due: Vec<((SessionId, String), FencingToken)> = {
            let d = self.lock();
            d.holds
                .due(now)
                .map(|(k, token)| (k.clone(), *token))
                .collect()
        };
        for ((session, name), token) in due {
            info!(node = self.replica.id(), lock = %name, session, token, "hold cap ran out: releasing");
            let res = self
                .replica
                .propose(Command::EndHold {
                    name: name.clone(),
                    session,
                    token,
                })
                .await;
            if let Err(e) = res {
                warn!(node = self.replica.id(), error = %e, lock = %name, session, "hold cap release failed");
                continue;
            }
            metrics::counter!("raftlock_hold_caps_expired_total").increment(1);
            let mut d = self.lock();
            if d.holds.get(&(session, name.clone())).map(|h| h.1) == Some(token) {
                d.holds.remove(&(session, name));
            }
        }
    }

    /// Ends the lock-delays whose time ran out.
    pub(super) async fn end_lock_delays(&self, now: Instant) {
        let due: Vec<(String, u64)> = {
            let d = self.lock();
            d.delays
                .due(now)
                .map(|(name, started)| (name.clone(), *started))
                .collect()
        };
        for (name, started) in due {
            let res = self
                .replica
                .propose(Command::EndLockDelayAt {
                    name: name.clone(),
                    started,
                })
                .await;
            match res {
                Ok(_) => {
                    info!(node = self.replica.id(), lock = %name, started, "lock-delay ended");
                    let mut d = self.lock();
                    // A delay started since is another one: kept.
                    if d.delays.get(&name).is_some_and(|(_, s)| *s == started) {
                        d.delays.remove(&name);
                    }
                }
                Err(e) => {
                    warn!(node = self.replica.id(), error = %e, lock = %name, "lock-delay end failed")
                }
            }
        }
    }

    pub(super) async fn expire_sessions(&self, now: Instant) {
        let due = self.lock().sessions.any_due(now);
        if !due {
            return;
        }
        let round = Instant::now();
        let confirmed = if planted(Bug::UnconfirmedExpiry) {
            Ok(())
        } else {
            self.replica.confirmed_after(round).await
        };
        if let Err(e) = confirmed {
            warn!(node = self.replica.id(), error = %e, "not expiring sessions: leadership not confirmed");
            return;
        }
        let mut ids: Vec<SessionId> = {
            let d = self.lock();
            d.sessions.due(round).map(|(id, _)| *id).collect()
        };
        if ids.is_empty() {
            return;
        }
        ids.sort_unstable();
        info!(node = self.replica.id(), sessions = ?ids, "expiring sessions whose TTL passed without keep-alive");
        match self
            .replica
            .propose(Command::ExpireSessions {
                sessions: ids.clone(),
            })
            .await
        {
            Ok(_) => {
                let mut d = self.lock();
                for id in ids {
                    d.sessions.remove(&id);
                }
            }
            Err(e) => warn!(node = self.replica.id(), error = %e, "expiry proposal failed"),
        }
    }

    pub(super) async fn cancel_waits(&self, now: Instant) {
        let due: Vec<((SessionId, String), RequestId)> = {
            let d = self.lock();
            d.waits.due(now).map(|(k, r)| (k.clone(), *r)).collect()
        };
        for ((session, name), request_id) in due {
            // Ended meanwhile: by the cancel of another lock of its set,
            // or by its grant.
            if self.lock().waits.get(&(session, name.clone())).is_none() {
                continue;
            }
            let res = self
                .replica
                .propose(Command::CancelWait {
                    session,
                    name: name.clone(),
                    request_id,
                })
                .await;
            if let Err(e) = res {
                warn!(node = self.replica.id(), error = %e, lock = %name, session, "wait cancel failed");
                continue;
            }
            self.lock().waits.remove(&(session, name));
        }
    }
}
