//! `raftlock bench` explains its figures with the servers' own counters:
//! every node reports its log fsyncs and the commands and entries it
//! proposed in `Status`, and a lock workload prints their change over the
//! run. Checked against a real cluster: the counters move with the load,
//! and the bench's figures agree with what the nodes report. The bench
//! can also start its own cluster and run a fixed number of ops.

use raftlock_tests::{run_bench, Cluster};

#[tokio::test]
async fn bench_reports_what_the_leader_proposed_and_fsynced() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    let leader = cluster.leader().await.expect("a leader");
    let addr = cluster.nodes()[(leader - 1) as usize].client_addr.clone();
    let before = client.node_status(&addr).await.unwrap();

    let json = run_bench(
        &[
            "--clients",
            "4",
            "--keys",
            "50",
            "--distribution",
            "zipfian",
            "--duration",
            "2s",
            "--runs",
            "1",
        ],
        &[("RAFTLOCK_ENDPOINTS", &cluster.endpoints().join(","))],
    )
    .await;
    let m = &json["median"];
    let s = &m["server"];
    let ops = m["ops"].as_u64().expect("ops");
    assert!(ops > 0, "{m}");
    assert_eq!(s["leader"].as_u64(), Some(leader), "{m}");
    let commands = s["commands"].as_u64().expect("commands");
    let entries = s["entries"].as_u64().expect("entries");
    // Each op is an acquire and a release. The counters are read as the
    // run stops: each of the 4 clients may finish one op after that (counted
    // as done, its commands not read), or have proposed part of one and,
    // once stopped, its session's close.
    assert!(
        commands + 2 * 4 >= 2 * ops && commands <= 2 * ops + 3 * 4,
        "{commands} commands for {ops} ops: {m}"
    );
    assert!(entries >= 1 && entries <= commands, "{m}");
    assert!(s["leader_fsyncs_per_sec"].as_f64().unwrap() > 0.0, "{m}");
    assert!(s["follower_fsyncs_per_sec"].as_f64().unwrap() > 0.0, "{m}");
    let stdout = json["stdout"].as_str().unwrap_or_default();
    assert!(
        stdout.contains(&format!("leader (node {leader}): {commands} commands")),
        "the table reports the counters:\n{stdout}"
    );

    // The node's own counters moved by at least as much.
    let after = client.node_status(&addr).await.unwrap();
    assert!(after.proposed_commands - before.proposed_commands >= commands);
    assert!(after.proposed_entries - before.proposed_entries >= entries);
    assert!(after.log_fsyncs > before.log_fsyncs);
    assert!(after.log_entries_flushed - before.log_entries_flushed >= entries);
    // Followers fsync too, but propose nothing.
    for n in cluster.nodes() {
        if n.id != leader {
            let f = client.node_status(&n.client_addr).await.unwrap();
            assert!(f.log_fsyncs > 0, "node {}: {f:?}", n.id);
            assert_eq!(f.proposed_entries, 0, "node {}: {f:?}", n.id);
        }
    }
}

#[tokio::test]
async fn bench_runs_an_op_count_on_a_cluster_it_starts() {
    let json = run_bench(
        &[
            "--start-cluster",
            "--clients",
            "3",
            "--ops",
            "120",
            "--runs",
            "2",
        ],
        &[],
    )
    .await;
    for run in json["runs"].as_array().expect("runs") {
        // Exactly the ops asked for, however long they took.
        assert_eq!(run["ops"].as_u64(), Some(120), "{run}");
        assert_eq!(run["errors"].as_u64(), Some(0), "{run}");
        assert!(run["ops_per_sec"].as_f64().unwrap() > 0.0, "{run}");
        assert!(
            run["server"]["commands"].as_u64().unwrap() >= 2 * 120 - 2 * 3,
            "{run}"
        );
    }
}
