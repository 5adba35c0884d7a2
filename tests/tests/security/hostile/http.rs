//! Hostile input on the HTTP/JSON API: bodies that are not JSON, wrong
//! types, unknown fields, huge bodies, bad names and sizes, missing or
//! wrong credentials. Each gets a precise 4xx with a reason, writes nothing
//! to the log, and leaves the cluster as it was.

use super::fixtures::*;
use raftlock_tests::{http_call, HttpAnswer};

/// One hostile HTTP call and the answer it must get.
struct Case {
    input: &'static str,
    path: &'static str,
    body: String,
    headers: Vec<(&'static str, String)>,
    status: u16,
    reason: &'static str,
}

fn case(
    input: &'static str,
    path: &'static str,
    body: impl Into<String>,
    status: u16,
    reason: &'static str,
) -> Case {
    Case {
        input,
        path,
        body: body.into(),
        headers: vec![],
        status,
        reason,
    }
}

impl Case {
    fn header(mut self, name: &'static str, value: &str) -> Case {
        self.headers.push((name, value.to_owned()));
        self
    }
}

async fn send(addr: &str, c: &Case) -> HttpAnswer {
    let headers: Vec<(&str, &str)> = c.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    http_call(addr, "POST", c.path, &headers, &c.body)
        .await
        .unwrap_or_else(|e| panic!("{} ({}): {e}", c.input, c.path))
}

/// Sends every case to `addr` and checks its status and reason, printing
/// the `OBSERVED` rows docs/security.md is made from.
async fn refuse_all(addr: &str, cases: &[Case], token: Option<&str>) {
    for c in cases {
        let mut c_headers = c.headers.clone();
        if let Some(t) = token {
            if !c_headers.iter().any(|(k, _)| *k == "authorization") {
                c_headers.push(("authorization", format!("Bearer {t}")));
            }
        }
        let with = Case {
            input: c.input,
            path: c.path,
            body: c.body.clone(),
            headers: c_headers,
            status: c.status,
            reason: c.reason,
        };
        let a = send(addr, &with).await;
        let body: serde_json::Value = serde_json::from_str(&a.body).unwrap_or_default();
        let message = body["message"].as_str().unwrap_or_default();
        println!(
            "OBSERVED | {} | client port, HTTP POST {} | {} {}: {} |",
            c.input,
            c.path,
            a.status,
            body["reason"].as_str().unwrap_or("-"),
            message.chars().take(140).collect::<String>()
        );
        assert_eq!(a.status, c.status, "{} ({}): {a:?}", c.input, c.path);
        assert_eq!(body["reason"], c.reason, "{} ({}): {a:?}", c.input, c.path);
        assert!(
            !message.is_empty(),
            "{}: a refusal says what was wrong: {a:?}",
            c.input
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_http_input_gets_a_precise_4xx_and_changes_nothing() {
    let cluster = Cluster::start(3).await;
    let b = baseline(&cluster).await;
    let leader = b.leader_addr.clone();
    let before = applied(&Access::default(), &leader).await;
    let s = b.session;
    let rid = "AAAAAAAAAAAAAAAAAAAAAA=="; // 16 zero bytes
    let cases = [
        case(
            "body is not JSON",
            "/v1/lock/acquire",
            "{not json",
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "body is a JSON array",
            "/v1/lock/acquire",
            "[1, 2]",
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "sessionId is a word",
            "/v1/lock/acquire",
            r#"{"sessionId": "seven"}"#,
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "sessionId is negative",
            "/v1/lock/acquire",
            r#"{"sessionId": -1}"#,
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "sessionId above u64::MAX",
            "/v1/lock/acquire",
            r#"{"sessionId": "18446744073709551616"}"#,
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "name is a number",
            "/v1/lock/acquire",
            r#"{"name": 5}"#,
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "unknown field",
            "/v1/lock/acquire",
            r#"{"sessionId": "1", "lease": 5}"#,
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "requestId is not base64",
            "/v1/lock/acquire",
            format!(r#"{{"sessionId": "{s}", "name": "h/x", "requestId": "%%%"}}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "requestId of 3 bytes",
            "/v1/lock/acquire",
            format!(r#"{{"sessionId": "{s}", "name": "h/x", "requestId": "AAAA"}}"#),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "mode is not a mode",
            "/v1/lock/acquire",
            r#"{"mode": "LOCK_MODE_BOTH"}"#,
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "lock name empty",
            "/v1/lock/acquire",
            format!(r#"{{"sessionId": "{s}", "name": "", "requestId": "{rid}"}}"#),
            400,
            "INVALID_NAME",
        ),
        case(
            "lock name 513 bytes",
            "/v1/lock/describe",
            format!(r#"{{"name": "{}"}}"#, "n".repeat(513)),
            400,
            "INVALID_NAME",
        ),
        case(
            "lock name with a control character",
            "/v1/lock/acquire",
            format!(r#"{{"sessionId": "{s}", "name": "a\nb", "requestId": "{rid}"}}"#),
            400,
            "INVALID_NAME",
        ),
        case(
            "metadata 4097 bytes",
            "/v1/lock/acquire",
            format!(
                r#"{{"sessionId": "{s}", "name": "h/m", "requestId": "{rid}", "metadata": "{}"}}"#,
                "A".repeat(5464)
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "session TTL 0",
            "/v1/session/create",
            r#"{"ttlMs": 0}"#,
            400,
            "TTL_OUT_OF_RANGE",
        ),
        case(
            "waitTimeoutMs above the limit",
            "/v1/lock/acquire",
            format!(
                r#"{{"sessionId": "{s}", "name": "h/w", "requestId": "{rid}", "waitTimeoutMs": "3600001"}}"#
            ),
            400,
            "INVALID_ARGUMENT",
        ),
        case(
            "body 70000 bytes, over --max-request-bytes 65536",
            "/v1/lock/acquire",
            format!(r#"{{"name": "{}"}}"#, "n".repeat(70_000)),
            413,
            "LIMIT_EXCEEDED",
        ),
        case(
            "a call that does not exist",
            "/v1/lock/steal",
            "{}",
            404,
            "",
        ),
    ];
    refuse_all(&leader, &cases, None).await;
    let written = applied(&Access::default(), &leader).await - before;
    println!("INFO the refused HTTP calls wrote {written} log entries");
    assert_eq!(written, 0, "bad HTTP input is refused before the log");
    // Refused by the state machine (an entry each), as over gRPC.
    refuse_all(
        &leader,
        &[
            case(
                "unknown session",
                "/v1/lock/acquire",
                format!(r#"{{"sessionId": "999999", "name": "h/s", "requestId": "{rid}"}}"#),
                404,
                "SESSION_NOT_FOUND",
            ),
            case(
                "release with a wrong token",
                "/v1/lock/release",
                format!(r#"{{"sessionId": "{s}", "name": "{SENTINEL}", "token": "1"}}"#),
                409,
                "STALE_TOKEN",
            ),
        ],
        None,
    )
    .await;
    assert_intact(&cluster, &b, "bad HTTP input").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_calls_without_the_right_credentials_are_refused() {
    // sha256 of "root-token" and "teamc-token", as in credentials.rs.
    let auth = r#"
        [roles.root]
        rules = [{ prefix = "", allow = ["read", "lock", "admin"] }]
        [roles.team-c]
        rules = [{ prefix = "team-c/", allow = ["read", "lock"] }]
        [[identities]]
        name = "root"
        token_sha256 = "2cff60a244379d429c1877c36ee7f37da39ad06073d31b8d90fccd15376f2adf"
        roles = ["root"]
        [[identities]]
        name = "team-c"
        token_sha256 = "1a39d7a80c2add76c80af3ba4fa6a1c091bd12d4d97e9baccbe5619c55b3d69f"
        roles = ["team-c"]
    "#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("auth.toml");
    std::fs::write(&path, auth).unwrap();
    let root = Access {
        ca_pem: None,
        token: Some("root-token".into()),
    };
    let cluster = Cluster::start_secure(3, &["--auth-file", path.to_str().unwrap()], root).await;
    let b = baseline(&cluster).await;
    let leader = b.leader_addr.clone();
    let create = r#"{"ttlMs": 10000}"#;
    refuse_all(
        &leader,
        &[
            case(
                "no authorization header",
                "/v1/session/create",
                create,
                401,
                "UNAUTHENTICATED",
            ),
            case(
                "unknown bearer token",
                "/v1/session/create",
                create,
                401,
                "UNAUTHENTICATED",
            )
            .header("authorization", "Bearer nobody"),
            case(
                "authorization not a bearer token",
                "/v1/session/create",
                create,
                401,
                "UNAUTHENTICATED",
            )
            .header("authorization", "Basic cm9vdDpyb290"),
            case(
                "team-c reads outside its prefix",
                "/v1/lock/describe",
                format!(r#"{{"name": "{SENTINEL}"}}"#),
                403,
                "PERMISSION_DENIED",
            )
            .header("authorization", "Bearer teamc-token"),
            case(
                "team-c uses root's session",
                "/v1/lock/release",
                format!(
                    r#"{{"sessionId": "{}", "name": "team-c/x", "token": "1"}}"#,
                    b.session
                ),
                403,
                "PERMISSION_DENIED",
            )
            .header("authorization", "Bearer teamc-token"),
            case(
                "team-c force-releases",
                "/v1/lock/force-release",
                r#"{"name": "team-c/x"}"#,
                403,
                "PERMISSION_DENIED",
            )
            .header("authorization", "Bearer teamc-token"),
        ],
        None,
    )
    .await;
    // The right token works over HTTP as over gRPC.
    let a = http_call(
        &leader,
        "POST",
        "/v1/session/create",
        &[("authorization", "Bearer teamc-token")],
        create,
    )
    .await
    .unwrap();
    assert_eq!(a.status, 200, "{a:?}");
    assert_intact(&cluster, &b, "HTTP credentials").await;
}
