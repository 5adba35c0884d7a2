//! Heap bytes the lease state machine takes per held lock, as the
//! `raftlock bench --workload scale` load leaves it: sessions that say
//! where they run, each holding its share of exclusive locks acquired
//! under exactly-once sequence numbers. Counts what the allocator hands
//! out, so the figure does not move with the machine's noise.
//!
//! ```text
//! cargo run --release -p raftlock-store --example machine_memory -- 100000 1000000
//! ```

use raftlock_store::machine::{Command, LeaseMachine, Mode, Origin, Reply, RequestId};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
/// What glibc's malloc takes for the same blocks: 8 bytes of header, rounded
/// up to 16, at least 32.
static FOOTPRINT: AtomicUsize = AtomicUsize::new(0);

fn chunk(size: usize) -> usize {
    ((size + 8 + 15) & !15).max(32)
}

// SAFETY: forwards to the system allocator and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        FOOTPRINT.fetch_add(chunk(layout.size()), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        FOOTPRINT.fetch_sub(chunk(layout.size()), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        FOOTPRINT.fetch_add(chunk(new_size), Ordering::Relaxed);
        FOOTPRINT.fetch_sub(chunk(layout.size()), Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn main() {
    let mut args = std::env::args().skip(1);
    let sessions: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let locks: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let mut m = LeaseMachine::default();
    let mut index = 0;
    let now = || {
        (
            LIVE.load(Ordering::Relaxed),
            FOOTPRINT.load(Ordering::Relaxed),
        )
    };
    let before = now();
    let mut ids = Vec::new();
    for s in 0..sessions {
        index += 1;
        let create = Command::CreateSessionAt {
            ttl_ms: 60_000,
            client_name: "scale-bench".into(),
            owner: String::new(),
            key: Some(u128::from(s) << 64 | 0x5ca1e),
            origin: Origin {
                host: "worker-17.example.internal".into(),
                pid: 4242,
            },
        };
        match m.apply(&create, index, 0).reply {
            Ok(Reply::SessionCreated { session, .. }) => ids.push(session),
            other => panic!("create: {other:?}"),
        }
    }
    let with_sessions = now();
    for i in 0..locks {
        index += 1;
        let slot = (i % sessions) as usize;
        let seq = i / sessions + 1;
        let acquire = Command::Sequenced {
            seq,
            acked_below: seq,
            command: Box::new(Command::Acquire {
                session: ids[slot],
                name: format!("scale/0/{i}"),
                request_id: RequestId(u128::from(i) << 32 | 7),
                mode: Mode::Exclusive,
                permits: None,
                wait_ms: None,
                metadata: vec![],
            }),
        };
        if let Err(e) = m.apply(&acquire, index, 0).reply {
            panic!("acquire: {e}");
        }
    }
    let end = now();
    let each = |a: usize, b: usize, n: u64| a.saturating_sub(b) as f64 / n as f64;
    println!("bytes requested (and what malloc takes for them):");
    println!(
        "  per session: {:.0} ({:.0})",
        each(with_sessions.0, before.0, sessions),
        each(with_sessions.1, before.1, sessions)
    );
    println!(
        "  per lock:    {:.0} ({:.0})",
        each(end.0, with_sessions.0, locks),
        each(end.1, with_sessions.1, locks)
    );
    let mib = |a: usize, b: usize| a.saturating_sub(b) as f64 / f64::from(1 << 20);
    println!(
        "  total:       {:.0} MiB ({:.0} MiB) for {sessions} sessions and {locks} locks",
        mib(end.0, before.0),
        mib(end.1, before.1)
    );
}
