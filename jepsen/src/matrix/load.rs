//! The matrix's load: clients granting and releasing locks for as long as
//! the matrix runs, checking each token against every token acknowledged
//! before the request was sent, and recording when grants succeed so that
//! a window's longest unavailability can be read off.

use parking_lot::Mutex;
use raftlock_client::{Client, Options, Session};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Metadata per grant: makes entries big enough that segments rotate and
/// snapshots are taken within a few seconds of load.
const METADATA: usize = 900;

/// What every worker has seen.
#[derive(Default)]
struct Seen {
    /// The highest token acknowledged to any worker.
    max_acked: u64,
    /// Grants acknowledged.
    grants: u64,
    /// When each grant was acknowledged, in order.
    successes: Vec<Instant>,
    /// A token at or below one acknowledged before its request was sent.
    reissued: Vec<String>,
    /// Try-locks answered busy.
    busy: u64,
    /// The latest failures (at most [`KEPT_ERRORS`]), to say why grants
    /// stopped.
    errors: std::collections::VecDeque<String>,
}

const KEPT_ERRORS: usize = 6;

impl Seen {
    fn failed(&mut self, what: String) {
        if self.errors.len() == KEPT_ERRORS {
            self.errors.pop_front();
        }
        self.errors.push_back(what);
    }
}

/// The running load.
pub struct Load {
    seen: Arc<Mutex<Seen>>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// A lock taken once and held for the whole matrix: an acknowledged
    /// grant that a lost log entry would take away.
    held: Option<(Client, Session, raftlock_client::LockGuard)>,
}

fn options() -> Options {
    Options {
        deadline: Duration::from_secs(2),
        attempt_timeout: Duration::from_millis(500),
        ..Options::default()
    }
}

impl Load {
    /// Starts `workers` clients on `endpoints` and takes the held lock.
    pub async fn start(endpoints: Vec<String>, workers: usize) -> anyhow::Result<Load> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (stop, rx) = watch::channel(false);
        let mut tasks = Vec::new();
        for w in 0..workers {
            tasks.push(tokio::spawn(worker(
                endpoints.clone(),
                w,
                seen.clone(),
                rx.clone(),
            )));
        }
        let client = Client::connect_with(&endpoints, options()).await?;
        let session = client.session(Duration::from_secs(60)).await?;
        let guard = session
            .lock("matrix/held")
            .try_acquire()
            .await?
            .ok_or_else(|| anyhow::anyhow!("matrix/held is taken"))?;
        Ok(Load {
            seen,
            stop,
            tasks,
            held: Some((client, session, guard)),
        })
    }

    /// Grants acknowledged so far.
    pub fn grants(&self) -> u64 {
        self.seen.lock().grants
    }

    /// Why the workers are not granting: busy answers so far and the
    /// latest failures.
    pub fn why_stalled(&self) -> String {
        let seen = self.seen.lock();
        format!(
            "{} busy answers so far; latest failures: {}",
            seen.busy,
            seen.errors.iter().cloned().collect::<Vec<_>>().join(" | ")
        )
    }

    /// Tokens reissued so far (each a sentence).
    pub fn reissued(&self) -> Vec<String> {
        self.seen.lock().reissued.clone()
    }

    /// Waits up to `within` for `n` more grants than `after`.
    pub async fn wait_for_grants(&self, after: u64, n: u64, within: Duration) -> bool {
        let until = Instant::now() + within;
        while self.grants() < after + n {
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// The longest time between `from` and `to` with no grant
    /// acknowledged.
    pub fn longest_gap(&self, from: Instant, to: Instant) -> Duration {
        let seen = self.seen.lock();
        let mut last = from;
        let mut longest = Duration::ZERO;
        for t in seen.successes.iter().filter(|t| **t > from && **t <= to) {
            longest = longest.max(*t - last);
            last = *t;
        }
        longest.max(to.saturating_duration_since(last))
    }

    /// Whether the held lock is still held with the token it was granted
    /// (`None`: the cluster did not answer).
    pub async fn held_is_valid(&self) -> Option<Result<(), String>> {
        let (client, _, guard) = self.held.as_ref()?;
        let v = client.validate("matrix/held", guard.token()).await.ok()?;
        Some(if v.valid {
            Ok(())
        } else {
            Err(format!(
                "the grant of matrix/held with token {} was acknowledged and is gone (current token {})",
                guard.token(),
                v.current_token
            ))
        })
    }

    /// Tries for `within` to take and release a lock of its own with a new
    /// session on `endpoints` (the workers' sessions may be unknown to a
    /// log that lost them); a grant is judged as the workers' are.
    /// Whether one was made.
    pub async fn probe(&self, endpoints: &[String], within: Duration) -> bool {
        let seen = self.seen.clone();
        let attempt = async move {
            let client = Client::connect_with(endpoints, options()).await.ok()?;
            let session = client.session(Duration::from_secs(5)).await.ok()?;
            let before = seen.lock().max_acked;
            let guard = session
                .lock(format!("matrix/probe/{}", session.id()))
                .try_acquire()
                .await
                .ok()??;
            let token = guard.token();
            {
                let mut seen = seen.lock();
                if token <= before {
                    seen.reissued.push(format!(
                        "a new session's lock granted with token {token} after token {before} had been acknowledged"
                    ));
                }
                seen.max_acked = seen.max_acked.max(token);
            }
            let _ = guard.release().await;
            let _ = session.close().await;
            Some(())
        };
        tokio::time::timeout(within, attempt)
            .await
            .ok()
            .flatten()
            .is_some()
    }

    /// Stops the workers and releases the held lock.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        if let Some((_, session, guard)) = self.held.take() {
            let _ = guard.release().await;
            let _ = session.close().await;
        }
    }
}

async fn worker(
    endpoints: Vec<String>,
    w: usize,
    seen: Arc<Mutex<Seen>>,
    stop: watch::Receiver<bool>,
) {
    let metadata = vec![b'm'; METADATA];
    let mut session: Option<(Session, String)> = None;
    let mut client: Option<Client> = None;
    let mut orphaned = 0u64;
    while !*stop.borrow() {
        let Some(c) = &client else {
            client = Client::connect_with(&endpoints, options()).await.ok();
            if client.is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            continue;
        };
        let live = session.as_ref().is_some_and(|(s, _)| s.is_valid());
        if !live {
            // A session the client gave up on may still hold its lock on
            // the server until it expires: the next one takes its own.
            session = match c.session(Duration::from_secs(30)).await {
                Ok(s) => {
                    let name = format!("matrix/{w}/{}", s.id());
                    Some((s, name))
                }
                Err(e) => {
                    seen.lock().failed(format!("new session: {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    None
                }
            };
            continue;
        }
        let Some((s, name)) = &session else { continue };
        let before = seen.lock().max_acked;
        match s
            .lock(name.as_str())
            .metadata(metadata.clone())
            .try_acquire()
            .await
        {
            Ok(Some(guard)) => {
                let token = guard.token();
                {
                    let mut seen = seen.lock();
                    if token <= before {
                        let line = format!(
                            "{name} granted with token {token} after token {before} had been acknowledged"
                        );
                        seen.reissued.push(line);
                    }
                    seen.max_acked = seen.max_acked.max(token);
                    seen.grants += 1;
                    seen.successes.push(Instant::now());
                }
                if guard.release().await.is_err() {
                    // Still held, perhaps: the next try goes to another
                    // lock.
                    orphan(&mut session, &mut orphaned);
                }
            }
            Ok(None) => {
                seen.lock().busy += 1;
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => {
                seen.lock().failed(format!("{name}: {e}"));
                // The grant may have been made with its answer lost: the
                // session holds the lock through that request, and the
                // next try goes to another lock.
                orphan(&mut session, &mut orphaned);
                tokio::time::sleep(Duration::from_millis(20)).await
            }
        }
    }
    if let Some((s, _)) = session {
        let _ = s.close().await;
    }
}

/// Moves a worker off a lock its session may still hold; every 32 such
/// locks, off the session too, since a session's held locks are bounded.
fn orphan(session: &mut Option<(Session, String)>, orphaned: &mut u64) {
    *orphaned += 1;
    if orphaned.is_multiple_of(32) {
        if let Some((s, _)) = session.take() {
            tokio::spawn(async move {
                let _ = s.close().await;
            });
        }
    } else if let Some((_, n)) = session {
        let base = n.split('#').next().unwrap_or(n).to_owned();
        *n = format!("{base}#{orphaned}");
    }
}
