use super::*;

const FILE: &str = r#"
    [roles.team-a]
    rules = [{ prefix = "team-a/", allow = ["read", "lock"] }]
    [roles.reader]
    rules = [{ prefix = "", allow = ["read"] }]
    [roles.root]
    rules = [{ prefix = "", allow = ["read", "lock", "admin"] }]
    [[identities]]
    name = "a"
    token_sha256 = "HASH_A"
    roles = ["team-a", "reader"]
    [[identities]]
    name = "ops"
    cert_cn = "ops.example"
    roles = ["root"]
"#;

fn auth() -> Authenticator {
    Authenticator::parse(&FILE.replace("HASH_A", &token_hash("secret-a"))).unwrap()
}

fn with_token(t: &str) -> Request<()> {
    let mut r = Request::new(());
    r.metadata_mut()
        .insert("authorization", format!("Bearer {t}").parse().unwrap());
    r
}

#[test]
fn tokens_map_to_identities_and_unknown_ones_are_refused() {
    let a = auth();
    let c = a.authenticate(&with_token("secret-a")).unwrap();
    assert_eq!(c.name(), "a");
    let e = a.authenticate(&with_token("nope")).unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    let e = a.authenticate(&Request::new(())).unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    assert!(e.message().contains("Bearer"));
}

#[test]
fn rules_are_per_prefix_and_per_right() {
    let c = auth().authenticate(&with_token("secret-a")).unwrap();
    assert!(c.may(Access::Lock, "team-a/x"));
    assert!(!c.may(Access::Lock, "team-b/x"));
    assert!(c.may(Access::Read, "team-b/x"));
    assert!(!c.may(Access::Admin, "team-a/x"));
    let e = c.check(Access::Lock, "team-b/x").unwrap_err();
    assert_eq!(e.reason(), raftlock_proto::reason::Reason::PermissionDenied);
    assert!(e.message().contains("\"team-a/\""), "{}", e.message());
    assert!(c.check_cluster_admin("change membership").is_err());
}

#[test]
fn disabled_auth_lets_everyone_do_everything() {
    let c = Authenticator::disabled()
        .authenticate(&Request::new(()))
        .unwrap();
    assert!(c.may(Access::Admin, "x") && c.check_cluster_admin("x").is_ok());
    assert_eq!(c.name(), "");
}

#[test]
fn bad_files_are_refused_with_a_reason() {
    assert!(
        Authenticator::parse("[[identities]]\nname = \"x\"\nroles = []\n")
            .unwrap_err()
            .contains("neither")
    );
    assert!(Authenticator::parse(
        "[[identities]]\nname = \"x\"\ntoken_sha256 = \"abc\"\nroles = []\n"
    )
    .unwrap_err()
    .contains("64 hex"));
    assert!(Authenticator::parse(
        "[[identities]]\nname = \"x\"\ncert_cn = \"x\"\nroles = [\"nope\"]\n"
    )
    .unwrap_err()
    .contains("unknown role"));
}
