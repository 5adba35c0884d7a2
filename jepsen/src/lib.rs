//! A Jepsen-style harness for raftlock: it runs real `raftlockd` clusters on
//! loopback IPs, drives concurrent workloads through the client library
//! while nemeses kill, pause, partition and reconfigure nodes and damage,
//! fill and slow their disks, records every operation, and checks the
//! history for the guarantees DESIGN.md promises (linearizable fenced
//! mutexes, token order, mutual exclusion under valid leases, single
//! leaders, semaphore bounds, durability, availability while a majority is
//! up, damaged logs refused).
#![deny(missing_docs)]

pub mod backend;
pub mod checker;
pub mod clients;
pub mod cluster;
pub mod disk;
pub mod faultfs;
pub mod history;
pub mod loopback;
pub mod matrix;
pub mod nemesis;
pub mod net;
pub mod report;
pub mod run;
pub mod workload;
