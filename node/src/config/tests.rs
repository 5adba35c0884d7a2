//! Unit tests of configuration layering and validation.

use super::*;

#[test]
fn id_from_a_statefulset_host_name() {
    assert_eq!(id_from_hostname("raftlock-0").unwrap(), 1);
    assert_eq!(
        id_from_hostname("raftlock-12.raftlock-peer.ns.svc").unwrap(),
        13
    );
    assert!(id_from_hostname("raftlock").is_err());
}

/// The least a node needs: its id and data dir.
fn minimal() -> NodeArgs {
    NodeArgs {
        id: Some(1),
        data_dir: Some("/d".into()),
        ..Default::default()
    }
}

#[allow(clippy::result_large_err)]
#[test]
fn max_batch_commands_is_bounded_by_what_a_token_can_number() {
    // In a jail: other tests set RAFTLOCK_* variables in theirs, and
    // the environment is the process's.
    figment::Jail::expect_with(|_| {
        let with = |n| NodeArgs {
            max_batch_commands: Some(n),
            ..minimal()
        };
        assert_eq!(with(1).resolve().unwrap().max_batch_commands, 1);
        assert_eq!(with(65_536).resolve().unwrap().max_batch_commands, 65_536);
        assert!(with(0).resolve().is_err());
        assert!(with(65_537).resolve().is_err());
        assert_eq!(minimal().resolve().unwrap().max_batch_commands, 1024);
        Ok(())
    });
}

#[allow(clippy::result_large_err)]
#[test]
fn proposals_in_flight_is_bounded() {
    figment::Jail::expect_with(|_| {
        let with = |n| NodeArgs {
            proposals_in_flight: n,
            ..minimal()
        };
        assert_eq!(with(None).resolve().unwrap().proposals_in_flight, 2);
        assert_eq!(with(Some(64)).resolve().unwrap().proposals_in_flight, 64);
        assert!(with(Some(0)).resolve().is_err());
        assert!(with(Some(65)).resolve().is_err());
        Ok(())
    });
}

#[allow(clippy::result_large_err)]
#[test]
fn followers_sync_in_place_unless_told_to_use_the_writer_thread() {
    figment::Jail::expect_with(|jail| {
        let flush = |args: NodeArgs| args.resolve().unwrap().follower_flush;
        let flag = |f| NodeArgs {
            follower_flush: Some(f),
            ..minimal()
        };
        assert_eq!(flush(minimal()), FollowerFlush::Inline);
        assert_eq!(flush(flag(FollowerFlush::Thread)), FollowerFlush::Thread);
        jail.create_file(
            "c.toml",
            "id = 1\ndata_dir = \"/d\"\nfollower_flush = \"thread\"\n",
        )?;
        let file = NodeArgs {
            config: Some("c.toml".into()),
            ..Default::default()
        };
        assert_eq!(flush(file), FollowerFlush::Thread);
        jail.set_env("RAFTLOCK_FOLLOWER_FLUSH", "thread");
        assert_eq!(flush(minimal()), FollowerFlush::Thread);
        // The flag wins over the environment.
        assert_eq!(flush(flag(FollowerFlush::Inline)), FollowerFlush::Inline);
        jail.set_env("RAFTLOCK_FOLLOWER_FLUSH", "sometimes");
        assert!(minimal().resolve().is_err());
        Ok(())
    });
}

#[allow(clippy::result_large_err)]
#[test]
fn flags_win_over_file() {
    // In a jail: other tests set RAFTLOCK_* variables in theirs, and
    // the environment is the process's.
    figment::Jail::expect_with(|_| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "id = 3\ndata_dir = \"/d\"\nheartbeat_ms = 50\n").unwrap();
        let args = NodeArgs {
            config: Some(path),
            heartbeat_ms: Some(60),
            ..Default::default()
        };
        let c = args.resolve().unwrap();
        assert_eq!((c.id, c.heartbeat.as_millis()), (3, 60));
        let bad = NodeArgs {
            id: Some(1),
            data_dir: Some("/d".into()),
            heartbeat_ms: Some(300),
            election_timeout_ms: Some(500),
            ..Default::default()
        };
        assert!(bad.resolve().is_err());
        Ok(())
    });
}

// figment's Jail fixes the closure's error type.
#[allow(clippy::result_large_err)]
#[test]
fn each_layer_wins_over_the_one_before_and_says_so() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "c.toml",
            "id = 3\ndata_dir = \"/d\"\nheartbeat_ms = 50\nsnapshot_every = 7\n[limits]\nmax_wait_ms = 1000\n",
        )?;
        jail.set_env("RAFTLOCK_HEARTBEAT_MS", 70);
        jail.set_env("RAFTLOCK_MAX_WAIT_MS", 2000);
        jail.set_env("RAFTLOCK_ENDPOINTS", "not a setting of the server");
        let args = NodeArgs {
            config: Some("c.toml".into()),
            election_timeout_ms: Some(900),
            limits: crate::limits::LimitArgs {
                max_wait_ms: Some(3000),
                ..Default::default()
            },
            ..Default::default()
        };
        let c = args.resolve().expect("valid");
        assert_eq!(c.id, 3);
        assert_eq!(c.snapshot_every, 7, "file over default");
        assert_eq!(c.heartbeat.as_millis(), 70, "environment over file");
        assert_eq!(c.election_timeout.as_millis(), 900, "flag over default");
        assert_eq!(
            c.limits.max_wait_ms, 3000,
            "flag over environment over file"
        );
        let printed = args.print_config().expect("prints");
        for line in [
            "id = 3  # config file c.toml",
            "heartbeat_ms = 70  # environment RAFTLOCK_HEARTBEAT_MS",
            "election_timeout_ms = 900  # flag --election-timeout-ms",
            "listen_client = \"127.0.0.1:7000\"  # default",
            "max_wait_ms = 3000  # flag --max-wait-ms",
            "# auth_file: not set",
            "[limits]",
        ] {
            assert!(
                printed.lines().any(|l| l == line),
                "{line:?} missing in:\n{printed}"
            );
        }
        Ok(())
    });
}

#[allow(clippy::result_large_err)]
#[test]
fn unknown_keys_and_wrong_types_are_refused_with_their_source() {
    figment::Jail::expect_with(|jail| {
        jail.create_file("c.toml", "id = 1\ndata_dir = \"/d\"\nheartbeat = 5\n")?;
        let args = NodeArgs {
            config: Some("c.toml".into()),
            ..Default::default()
        };
        let e = args.resolve().unwrap_err().to_string();
        assert!(e.contains("heartbeat") && e.contains("c.toml"), "{e}");
        jail.create_file("c.toml", "id = 1\ndata_dir = \"/d\"\n")?;
        jail.set_env("RAFTLOCK_HEARTBEAT_MS", "often");
        let e = args.resolve().unwrap_err().to_string();
        assert!(
            e.contains("RAFTLOCK_HEARTBEAT_MS") || e.contains("environment"),
            "{e}"
        );
        Ok(())
    });
}

#[allow(clippy::result_large_err)]
#[test]
fn a_config_file_named_but_missing_is_an_error() {
    // In a jail: other tests set RAFTLOCK_* variables in theirs, and
    // the environment is the process's.
    figment::Jail::expect_with(|_| {
        let args = NodeArgs {
            config: Some("/nonexistent/raftlock.toml".into()),
            ..Default::default()
        };
        assert!(matches!(args.resolve(), Err(ConfigError::File { .. })));
        Ok(())
    });
}
