//! The Lock.Pipeline stream against real clusters: calls multiplexed on one
//! stream answer exactly as the unary calls do (grants, refusals, handoffs,
//! leader hints), a client with many sessions in flight on it keeps mutual
//! exclusion and token order, and a stream's calls count against the
//! connection's limit on concurrent requests.

use raftlock_client::Options;
use raftlock_proto::v1::lock_client::LockClient;
use raftlock_proto::v1::pipeline_request::Call;
use raftlock_proto::v1::pipeline_response::Result as Answer;
use raftlock_proto::v1::*;
use raftlock_tests::{http_get, raw, Access, Cluster};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

struct Stream {
    tx: mpsc::UnboundedSender<PipelineRequest>,
    answers: tonic::Streaming<PipelineResponse>,
    /// Answers read while waiting for another id.
    early: HashMap<u64, Answer>,
}

impl Stream {
    async fn open(addr: &str) -> Stream {
        let ch = Access::default().channel(addr).await.expect("connects");
        let (tx, rx) = mpsc::unbounded_channel();
        let answers = LockClient::new(ch)
            .pipeline(UnboundedReceiverStream::new(rx))
            .await
            .expect("pipeline opens")
            .into_inner();
        Stream {
            tx,
            answers,
            early: HashMap::new(),
        }
    }

    fn send(&self, id: u64, call: Option<Call>) {
        self.tx
            .send(PipelineRequest { id, call })
            .expect("stream open");
    }

    /// The answer to call `id`, whatever order answers come in.
    async fn answer(&mut self, id: u64) -> Answer {
        if let Some(a) = self.early.remove(&id) {
            return a;
        }
        loop {
            let r = tokio::time::timeout(Duration::from_secs(15), self.answers.message())
                .await
                .expect("an answer within 15 s")
                .expect("stream healthy")
                .expect("stream not ended");
            let a = r.result.expect("an answer has a result");
            if r.id == id {
                return a;
            }
            self.early.insert(r.id, a);
        }
    }
}

fn acquire(session: u64, name: &str, wait_ms: Option<u64>) -> Option<Call> {
    Some(Call::Acquire(AcquireRequest {
        session_id: session,
        name: name.into(),
        request_id: uuid::Uuid::now_v7().as_bytes().to_vec(),
        wait_timeout_ms: wait_ms,
        ..Default::default()
    }))
}

fn release(session: u64, name: &str, token: u64) -> Option<Call> {
    Some(Call::Release(ReleaseRequest {
        session_id: session,
        name: name.into(),
        token,
    }))
}

fn error(a: Answer) -> PipelineError {
    match a {
        Answer::Error(e) => e,
        other => panic!("expected an error answer, got {other:?}"),
    }
}

#[tokio::test]
async fn pipelined_calls_answer_as_unary_calls_do() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(5)).await;
    cluster.wait_for_followers(Duration::from_secs(10)).await;
    let addr = cluster.endpoints()[(leader - 1) as usize].clone();
    let follower = cluster.endpoints()[(leader % 3) as usize].clone();
    let s1 = raw::silent_session(&addr, 20_000).await;
    let s2 = raw::silent_session(&addr, 20_000).await;
    let mut p = Stream::open(&addr).await;

    p.send(1, acquire(s1, "pipe/a", None));
    let Answer::Acquire(first) = p.answer(1).await else {
        panic!("acquire answered with something else")
    };
    assert!(first.acquired);
    let t1 = first.grant.as_ref().unwrap().token;

    // A try-lock on a held lock names the holder, as the unary call does.
    p.send(2, acquire(s2, "pipe/a", None));
    let Answer::Acquire(busy) = p.answer(2).await else {
        panic!("acquire answered with something else")
    };
    assert!(!busy.acquired);
    assert_eq!(busy.holders[0].session_id, s1);

    // Refusals carry the unary call's code and message.
    let unary = raw::release(&addr, s2, "pipe/a", t1).await.unwrap_err();
    p.send(3, release(s2, "pipe/a", t1));
    let e = error(p.answer(3).await);
    assert_eq!(e.code, unary.code() as i32, "{e:?} vs {unary:?}");
    assert_eq!(e.message, unary.message());
    let unknown = 987_654_321;
    let unary = raw::acquire(&addr, unknown, "pipe/b", None)
        .await
        .unwrap_err();
    p.send(4, acquire(unknown, "pipe/b", None));
    let e = error(p.answer(4).await);
    assert_eq!(e.code, unary.code() as i32, "{e:?} vs {unary:?}");
    assert_eq!(e.message, unary.message());
    let unary = raw::acquire(&addr, s1, "", None).await.unwrap_err();
    p.send(5, acquire(s1, "", None));
    let e = error(p.answer(5).await);
    assert_eq!(e.code, unary.code() as i32);
    assert_eq!(e.message, unary.message());
    p.send(6, None);
    assert_eq!(
        error(p.answer(6).await).code,
        tonic::Code::InvalidArgument as i32
    );

    // A waiter queued on the stream is granted by a release sent on the
    // same stream, in the same entry: both answers come, the grant with a
    // larger token.
    p.send(7, acquire(s2, "pipe/a", Some(10_000)));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let d = raw::describe(&addr, "pipe/a").await.unwrap();
        if !d.waiters.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "waiter never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    p.send(8, release(s1, "pipe/a", t1));
    let Answer::Release(rel) = p.answer(8).await else {
        panic!("release answered with something else")
    };
    assert_eq!(rel.granted.len(), 1);
    assert_eq!(rel.granted[0].session_id, s2);
    let Answer::Acquire(handed) = p.answer(7).await else {
        panic!("acquire answered with something else")
    };
    let t2 = handed.grant.as_ref().unwrap().token;
    assert!(t2 > t1, "handoff token {t2} after {t1}");
    assert_eq!(rel.granted[0].token, t2);

    // A follower answers UNAVAILABLE with the leader's address, as the
    // unary call's metadata does.
    let unary = raw::acquire(&follower, s1, "pipe/c", None)
        .await
        .unwrap_err();
    let hint = unary
        .metadata()
        .get(raftlock_proto::LEADER_METADATA_KEY)
        .and_then(|v| v.to_str().ok())
        .unwrap()
        .to_owned();
    let mut f = Stream::open(&follower).await;
    f.send(1, acquire(s1, "pipe/c", None));
    let e = error(f.answer(1).await);
    assert_eq!(e.code, tonic::Code::Unavailable as i32);
    assert_eq!(e.leader, hint);
    assert_eq!(e.leader, addr);
}

#[tokio::test(flavor = "multi_thread")]
async fn many_sessions_on_one_client_keep_exclusion_and_token_order() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    assert!(client.options().pipeline, "pipelining is the default");
    // (lock, token) in the order grants were observed while held: the
    // server's exclusion makes that the grant order of each lock.
    let granted: Arc<Mutex<Vec<(usize, u64)>>> = Arc::default();
    let holding: Arc<Mutex<HashMap<usize, u64>>> = Arc::default();
    let mut tasks = Vec::new();
    for w in 0..24 {
        let session = client.session(Duration::from_secs(10)).await.unwrap();
        let (granted, holding) = (granted.clone(), holding.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..8 {
                let lock = (w + i) % 3;
                let g = session
                    .lock(format!("pipe/many/{lock}"))
                    .timeout(Duration::from_secs(20))
                    .acquire()
                    .await
                    .expect("acquired");
                {
                    let mut h = holding.lock().unwrap();
                    assert!(
                        h.insert(lock, session.id()).is_none(),
                        "two holders of lock {lock}"
                    );
                    granted.lock().unwrap().push((lock, g.token()));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
                holding.lock().unwrap().remove(&lock);
                g.release().await.expect("released");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let granted = granted.lock().unwrap().clone();
    assert_eq!(granted.len(), 24 * 8);
    for lock in 0..3 {
        let tokens: Vec<u64> = granted
            .iter()
            .filter(|(l, _)| *l == lock)
            .map(|(_, t)| *t)
            .collect();
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "tokens of lock {lock} increase in grant order: {tokens:?}"
        );
    }
    // The calls went over a pipeline: the leader opened one for this client
    // and counted its calls under their own methods.
    let leader = cluster.wait_for_leader(Duration::from_secs(5)).await;
    let metrics_addr = cluster.nodes()[(leader - 1) as usize]
        .metrics_addr
        .clone()
        .expect("a metrics listener");
    let (_, text) = http_get(&metrics_addr, "/metrics").await.unwrap();
    let count = |method: &str| -> f64 {
        text.lines()
            .filter(|l| {
                l.starts_with("raftlock_grpc_requests_total{")
                    && l.contains(&format!("method=\"{method}\""))
                    && l.contains("code=\"Ok\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    // The stream is still open: it has started, and counts as handled
    // when it ends.
    let pipelines_started: f64 = text
        .lines()
        .filter(|l| {
            l.starts_with("grpc_server_started_total{")
                && l.contains("grpc_method=\"Pipeline\"")
                && l.contains("grpc_type=\"bidi_stream\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(pipelines_started >= 1.0, "{text}");
    assert!(count("Lock/Acquire") >= (24 * 8) as f64, "{text}");
}

#[tokio::test]
async fn unary_clients_still_work_and_never_open_a_pipeline() {
    let cluster = Cluster::start(3).await;
    let client = raftlock_client::Client::connect_with(
        cluster.endpoints(),
        Options {
            pipeline: false,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let s = client.session(Duration::from_secs(10)).await.unwrap();
    for _ in 0..5 {
        s.lock("unary/x")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    let leader = cluster.wait_for_leader(Duration::from_secs(5)).await;
    let metrics_addr = cluster.nodes()[(leader - 1) as usize]
        .metrics_addr
        .clone()
        .expect("a metrics listener");
    let (_, text) = http_get(&metrics_addr, "/metrics").await.unwrap();
    assert!(
        !text.contains("method=\"Lock/Pipeline\""),
        "a unary client opened a pipeline: {text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_on_a_stream_count_against_the_connection_limit() {
    let cluster = Cluster::start_with(3, &["--max-concurrent-requests-per-connection", "4"]).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(5)).await;
    cluster.wait_for_followers(Duration::from_secs(10)).await;
    let addr = cluster.endpoints()[(leader - 1) as usize].clone();
    let holder = raw::silent_session(&addr, 20_000).await;
    assert!(
        raw::acquire(&addr, holder, "limit/busy", None)
            .await
            .unwrap()
            .acquired
    );
    // Sessions first: the eight calls must all arrive within the first
    // one's 3 s wait, which eight session commits on the way could outlast.
    let mut sessions = Vec::new();
    for _ in 1..=8u64 {
        sessions.push(raw::silent_session(&addr, 20_000).await);
    }
    let mut p = Stream::open(&addr).await;
    let started = Instant::now();
    for (id, s) in (1..=8u64).zip(sessions) {
        p.send(id, acquire(s, "limit/busy", Some(3_000)));
    }
    let (mut refused, mut timed_out) = (0, 0);
    for id in 1..=8u64 {
        match p.answer(id).await {
            Answer::Error(e) if e.code == tonic::Code::ResourceExhausted as i32 => {
                assert!(e.message.contains("concurrent requests"), "{e:?}");
                refused += 1;
            }
            Answer::Error(e) if e.code == tonic::Code::DeadlineExceeded as i32 => timed_out += 1,
            other => panic!("call {id}: {other:?}"),
        }
    }
    assert_eq!(
        (refused, timed_out),
        (4, 4),
        "four calls run, four are refused"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}
