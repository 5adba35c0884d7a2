//! `raftlock bench --http`: the lock workloads' loop (acquire, hold,
//! release) over the HTTP/JSON API instead of gRPC, one HTTP/1.1
//! connection per worker to the leader, so the two paths can be compared on
//! the same cluster (`NEW_BENCH_ARGS=--http client/bench/compare.sh`).

use super::Worker;
use anyhow::Context;
use base64::Engine;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    addr: String,
    sender: SendRequest<Full<Bytes>>,
}

impl Conn {
    async fn open(addr: &str) -> anyhow::Result<Conn> {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot reach {addr}"))?;
        tcp.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        tokio::spawn(conn);
        Ok(Conn {
            addr: addr.to_owned(),
            sender,
        })
    }

    /// POSTs `body` to `path`; the JSON answer, or the refusal's reason as
    /// the error.
    async fn call(&mut self, path: &str, body: Value) -> anyhow::Result<Value> {
        let req = hyper::Request::post(path)
            .header(hyper::header::HOST, &self.addr)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))?;
        self.sender.ready().await?;
        let res = self.sender.send_request(req).await?;
        let status = res.status();
        let bytes = res.into_body().collect().await?.to_bytes();
        let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        if !status.is_success() {
            anyhow::bail!(
                "{path}: {status} {}: {}",
                v["reason"].as_str().unwrap_or("?"),
                v["message"].as_str().unwrap_or("")
            );
        }
        Ok(v)
    }
}

fn request_id(rng: &mut impl Rng) -> String {
    base64::engine::general_purpose::STANDARD.encode(rng.gen::<[u8; 16]>())
}

/// Runs `w`'s loop against the leader at `addr` with a session of `ttl`,
/// renewed on a connection of its own; the latency of each acquire +
/// release, errors, and whether the session was lost.
pub(super) async fn run(w: Worker, addr: String, ttl: Duration) -> (Histogram<u64>, u64, u64) {
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
    let mut errors = 0u64;
    let session = async {
        let mut c = Conn::open(&addr).await?;
        let s = c
            .call(
                "/v1/session/create",
                json!({"ttlMs": ttl.as_millis() as u64, "clientName": format!("bench-http-{}", w.id)}),
            )
            .await?;
        let id = s["sessionId"].as_str().context("no sessionId")?.to_owned();
        anyhow::Ok((c, id))
    }
    .await;
    let (mut c, session) = match session {
        Ok(s) => s,
        Err(e) => {
            eprintln!("worker {}: {e:#}", w.id);
            return (h, 1, 1);
        }
    };
    let renewals = {
        let (addr, session, stop) = (addr.clone(), session.clone(), w.stop.clone());
        tokio::spawn(async move {
            let mut lost = 0;
            let Ok(mut c) = Conn::open(&addr).await else {
                return 1;
            };
            while !stop.load(Ordering::SeqCst) {
                let next = Instant::now() + ttl / 3;
                while Instant::now() < next && !stop.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                if c.call("/v1/session/keepalive", json!({ "sessionId": session }))
                    .await
                    .is_err()
                {
                    lost = 1;
                }
            }
            lost
        })
    };
    let mut rng = rand::rngs::StdRng::from_entropy();
    while !w.stop.load(Ordering::SeqCst) {
        if let Some(left) = &w.budget {
            if left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_err()
            {
                break;
            }
        }
        let name = format!("{}/{}", w.prefix, w.keys.pick(&mut rng));
        let t = Instant::now();
        let res = async {
            let g = c
                .call(
                    "/v1/lock/acquire",
                    json!({"sessionId": session, "name": name, "requestId": request_id(&mut rng), "waitTimeoutMs": 30_000}),
                )
                .await?;
            let token = g["grant"]["token"].clone();
            if let Some(hold) = w.hold {
                tokio::time::sleep(hold).await;
            }
            c.call(
                "/v1/lock/release",
                json!({"sessionId": session, "name": name, "token": token}),
            )
            .await
        }
        .await;
        match res {
            Ok(_) => {
                let _ = h.record(t.elapsed().as_micros().max(1) as u64);
            }
            Err(e) => {
                errors += 1;
                if errors <= 3 {
                    eprintln!("worker {}: {e:#}", w.id);
                }
            }
        }
    }
    let lost = renewals.await.unwrap_or(1);
    let _ = c
        .call("/v1/session/close", json!({ "sessionId": session }))
        .await;
    (h, errors, lost)
}
