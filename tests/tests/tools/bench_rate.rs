//! `raftlock bench --workload ratelimit` reports the tokens a cluster
//! admits per second, one take at a time and in blocks of token leases,
//! and the limit's own count agrees with the bench's.

use raftlock_tests::{run_bench, Cluster};

#[tokio::test]
async fn the_ratelimit_bench_counts_what_the_limit_admitted() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client().await;
    for block in ["0", "50"] {
        let json = run_bench(
            &[
                "--workload",
                "ratelimit",
                "--clients",
                "4",
                "--block",
                block,
                "--duration",
                "1s",
                "--runs",
                "1",
            ],
            &[("RAFTLOCK_ENDPOINTS", &cluster.endpoints().join(","))],
        )
        .await;
        let m = &json["median"];
        let ops = m["ops"].as_u64().expect("ops");
        assert!(ops > 0, "{m}");
        assert_eq!(m["errors"].as_u64(), Some(0), "{m}");
        // The bench's limit, whose count is what it admitted (blocks count
        // whole, less what they gave back).
        let name = format!("bench/rate/4x{block}/1");
        let info = client.rate_limit(&name).describe().await.unwrap();
        if block == "0" {
            assert!(
                info.admitted >= ops && info.admitted <= ops + 4,
                "{info:?} for {ops}"
            );
        } else {
            assert!(info.admitted >= ops, "{info:?} for {ops}");
            // Blocks count whole when taken: at most 4 × 50 tokens left
            // over, given back as each worker stopped.
            assert!(info.admitted <= ops + 4 * 50, "{info:?} for {ops}");
        }
    }
}
