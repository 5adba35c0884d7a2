//! The tools: `raftlockd dev`, the `raftlock` CLI and `raftlock bench`.
//!
//! One test binary per area; each module is one topic.

mod bench_counters;
mod bench_failover;
mod bench_rate;
mod bench_scale;
mod bench_soak;
mod cli;
mod dev_cluster;
