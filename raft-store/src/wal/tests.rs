//! Power-loss tests of the write-ahead log on a simulated disk that keeps
//! written-but-unsynced bytes apart: after any crash, the log recovers
//! everything that was synced, and of what was written after the last sync
//! at most a prefix of whole records, never anything else.

use super::core::Core;
use super::disk::SimDir;
use super::format::{Encoded, LogImage};
use crate::machine::{Command, Mode, RequestId};
use crate::types::{Entry, LogId, Proposal};
use openraft::{CommittedLeaderId, EntryPayload, Vote};
use proptest::prelude::*;
use std::collections::BTreeMap;

pub(super) const SEGMENT: u64 = 4096;

pub(super) fn entry(term: u64, index: u64, meta: usize) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Normal(Proposal::single(
            index,
            Command::Acquire {
                session: 1,
                name: format!("l{index}"),
                request_id: RequestId(index as u128),
                mode: Mode::Exclusive,
                permits: None,
                wait_ms: None,
                metadata: vec![index as u8; meta],
            },
        )),
    }
}

/// The reference: what the log holds, by the plain rules of a Raft log.
#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    entries: BTreeMap<u64, LogId>,
    vote: Option<Vote<u64>>,
    committed: Option<LogId>,
    purged: Option<LogId>,
}

#[derive(Clone, Debug)]
enum Change {
    Entry(LogId),
    Vote(Vote<u64>),
    Committed(Option<LogId>),
    Truncate(u64),
    Purge(LogId),
}

impl Model {
    fn apply(&mut self, c: &Change) {
        match c {
            Change::Entry(id) => {
                if self.purged.is_some_and(|p| id.index <= p.index) {
                    return;
                }
                self.entries.retain(|i, _| *i < id.index);
                self.entries.insert(id.index, *id);
            }
            Change::Vote(v) => self.vote = Some(*v),
            Change::Committed(c) => self.committed = *c,
            Change::Truncate(since) => self.entries.retain(|i, _| i < since),
            Change::Purge(p) => {
                if self.purged.is_none_or(|q| q.index < p.index) {
                    self.purged = Some(*p);
                }
                self.entries.retain(|i, _| *i > p.index);
            }
        }
    }

    fn of(image: &LogImage) -> Model {
        Model {
            entries: image.entries.iter().map(|(i, e)| (*i, e.log_id)).collect(),
            vote: image.vote,
            committed: image.committed,
            purged: image.purged,
        }
    }

    fn last(&self) -> u64 {
        self.entries
            .keys()
            .next_back()
            .copied()
            .or(self.purged.map(|p| p.index))
            .unwrap_or(0)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Append {
        count: u64,
        back: u64,
        meta: usize,
    },
    NewTerm,
    Truncate {
        back: u64,
    },
    Purge {
        keep: u64,
    },
    Committed,
    Sync,
    WriteNoSync,
    Crash {
        tear: Option<usize>,
    },
    /// A power loss, then a flipped byte somewhere recovery can prove was
    /// durable: the log must refuse to open.
    Damage {
        segment: usize,
        at: u64,
    },
    /// The next write or sync fails with EIO (`sync`), or the disk is full
    /// from now on (`full`); the writer stops at the first failure, as the
    /// real one does, and the node restarts after a crash.
    Fail {
        sync: bool,
        full: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u64..5, 0u64..3, 0usize..900)
            .prop_map(|(count, back, meta)| Op::Append { count, back, meta }),
        1 => Just(Op::NewTerm),
        1 => (0u64..4).prop_map(|back| Op::Truncate { back }),
        1 => (0u64..4).prop_map(|keep| Op::Purge { keep }),
        1 => Just(Op::Committed),
        4 => Just(Op::Sync),
        2 => Just(Op::WriteNoSync),
        2 => prop::option::of(0usize..400).prop_map(|tear| Op::Crash { tear }),
        1 => (0usize..8, 0u64..1 << 20).prop_map(|(segment, at)| Op::Damage { segment, at }),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(sync, full)| Op::Fail { sync, full }),
    ]
}

/// Runs `ops` against a log on `disk`; returns the first violation.
fn run(disk: SimDir, ops: &[Op]) -> Result<(), String> {
    let (mut core, image, _) = Core::open(disk.clone(), SEGMENT).map_err(|e| e.to_string())?;
    assert_eq!(image, LogImage::default());
    let mut durable = Model::default();
    // Written after the last sync, in order; and queued, not yet written.
    let mut unsynced: Vec<Change> = Vec::new();
    let mut queued: Vec<(Encoded, Change)> = Vec::new();
    // What the writer would know: everything queued applied.
    let mut live = Model::default();
    let mut term = 1u64;
    // What recovery can prove durable, as of the last sync or open.
    let mut proven = core.provably_durable();
    // A fault is set for the next write or sync; a crash is due.
    let mut failing = false;
    let mut crash: Option<Option<usize>> = None;
    for (step, op) in ops.iter().enumerate() {
        let mut queue = |e: Encoded, c: Change, live: &mut Model| {
            live.apply(&c);
            queued.push((e, c));
        };
        match op {
            Op::Append { count, back, meta } => {
                let floor = live.purged.map_or(1, |p| p.index + 1);
                let start = (live.last() + 1).saturating_sub(*back).max(floor);
                for index in start..start + count {
                    let e = entry(term, index, *meta);
                    queue(
                        Encoded::entry(&e).unwrap(),
                        Change::Entry(e.log_id),
                        &mut live,
                    );
                }
            }
            Op::NewTerm => {
                term += 1;
                let v = Vote::new(term, 1);
                queue(Encoded::vote(&v).unwrap(), Change::Vote(v), &mut live);
            }
            Op::Truncate { back } => {
                let since = live.last().saturating_sub(*back).max(1);
                if live.purged.is_some_and(|p| since <= p.index) {
                    continue;
                }
                queue(
                    Encoded::truncate(since).unwrap(),
                    Change::Truncate(since),
                    &mut live,
                );
            }
            Op::Purge { keep } => {
                let upto = live.last().saturating_sub(*keep);
                let Some(id) = live.entries.get(&upto).copied() else {
                    continue;
                };
                queue(Encoded::purge(&id).unwrap(), Change::Purge(id), &mut live);
            }
            Op::Committed => {
                let c = live.entries.values().next_back().copied().or(live.purged);
                queue(
                    Encoded::committed(&c).unwrap(),
                    Change::Committed(c),
                    &mut live,
                );
            }
            Op::Sync | Op::WriteNoSync => {
                let records: Vec<Encoded> = queued.iter().map(|(e, _)| e.clone()).collect();
                let sync = matches!(op, Op::Sync);
                let result = core.write(&records).and_then(|_| {
                    if sync {
                        core.sync()?;
                        core.drop_purged()?;
                    }
                    Ok(())
                });
                unsynced.extend(queued.drain(..).map(|(_, c)| c));
                match result {
                    Ok(()) if sync => {
                        proven = core.provably_durable();
                        for c in unsynced.drain(..) {
                            durable.apply(&c);
                        }
                    }
                    Ok(()) => {}
                    // The writer takes nothing after a failure: the node
                    // stops, and starts again once the disk is fixed.
                    Err(_) if failing => {
                        crash = Some(None);
                    }
                    Err(e) => return Err(format!("step {step}: {e}")),
                }
            }
            Op::Fail { sync, full } => {
                failing = true;
                if *full {
                    disk.fill();
                } else if *sync {
                    disk.fail_next_sync();
                } else {
                    disk.fail_next_write();
                }
            }
            Op::Crash { tear } => crash = Some(*tear),
            Op::Damage { segment, at } => {
                let candidates: Vec<_> = proven.iter().filter(|(_, end)| *end > 16).collect();
                if candidates.is_empty() {
                    continue;
                }
                let (name, end) = candidates[segment % candidates.len()];
                let offset = 16 + at % (end - 16);
                disk.heal();
                disk.crash(None);
                flip(&disk, name, offset);
                return match Core::open(disk.clone(), SEGMENT) {
                    Err(e) if super::recover::Damage::find(&e).is_some() => Ok(()),
                    Err(e) => Err(format!("step {step}: {name}@{offset}: not a Damage: {e}")),
                    Ok((_, image, _)) => Err(format!(
                        "step {step}: a flipped byte at {name}@{offset} (durable to {end}) was read as {:?}",
                        Model::of(&image)
                    )),
                };
            }
        }
        if let Some(tear) = crash.take() {
            {
                failing = false;
                disk.heal();
                disk.crash(tear);
                let (reopened, image, _) =
                    Core::open(disk.clone(), SEGMENT).map_err(|e| format!("step {step}: {e}"))?;
                core = reopened;
                let got = Model::of(&image);
                // Whatever was synced, plus a prefix of what was written
                // after it: nothing lost, nothing invented.
                let mut candidate = durable.clone();
                let mut ok = candidate == got;
                for c in &unsynced {
                    candidate.apply(c);
                    ok |= candidate == got;
                }
                if !ok {
                    return Err(format!(
                        "step {step} ({op:?}): recovered {got:?}\nbut synced was {durable:?}\nwith {} unsynced changes",
                        unsynced.len()
                    ));
                }
                durable = got.clone();
                live = got;
                unsynced.clear();
                queued.clear();
                proven = core.provably_durable();
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256)
    ))]

    #[test]
    fn after_any_crash_the_log_has_everything_synced_and_nothing_invented(
        ops in prop::collection::vec(op(), 1..80)
    ) {
        if let Err(e) = run(SimDir::new(), &ops) {
            return Err(TestCaseError::fail(e));
        }
    }
}

/// The crash test can fail: a log whose fdatasync does nothing loses what
/// it acknowledged, and the same check says so.
#[test]
fn a_log_that_skips_its_fdatasync_is_caught() {
    let ops = [
        Op::Append {
            count: 3,
            back: 0,
            meta: 10,
        },
        Op::Sync,
        Op::Crash { tear: None },
    ];
    assert!(run(SimDir::new(), &ops).is_ok());
    let disk = SimDir::new();
    disk.break_syncs();
    let err = run(disk, &ops).expect_err("lost synced entries must be caught");
    assert!(err.contains("recovered"), "{err}");
}

/// The damage check can fail: a recovery that reads damage to durable
/// bytes as a torn tail keeps a shorter log, and the same check says so.
#[test]
fn a_recovery_that_reads_damage_as_a_torn_tail_is_caught() {
    let append = Op::Append {
        count: 3,
        back: 0,
        meta: 40,
    };
    let ops = [
        append.clone(),
        Op::Sync,
        append.clone(),
        Op::Sync,
        append,
        Op::Sync,
        Op::Damage {
            segment: 0,
            at: 100,
        },
    ];
    assert!(run(SimDir::new(), &ops).is_ok());
    super::recover::TEST_DAMAGE_AS_TORN.with(|c| c.set(true));
    let result = run(SimDir::new(), &ops);
    super::recover::TEST_DAMAGE_AS_TORN.with(|c| c.set(false));
    let err = result.expect_err("damage read as a torn tail must be caught");
    assert!(err.contains("was read as"), "{err}");
}

#[test]
fn segments_rotate_and_purged_ones_are_deleted() {
    let disk = SimDir::new();
    let (mut core, _, _) = Core::open(disk.clone(), SEGMENT).unwrap();
    for index in 1..=40 {
        core.write(&[Encoded::entry(&entry(1, index, 500)).unwrap()])
            .unwrap();
    }
    core.sync().unwrap();
    assert!(core.segments() > 3, "{} segments", core.segments());
    let before = core.segments();
    let upto = entry(1, 35, 0).log_id;
    core.write(&[Encoded::purge(&upto).unwrap()]).unwrap();
    core.sync().unwrap();
    assert!(core.drop_purged().unwrap() > 0);
    assert!(core.segments() < before);
    drop(core);
    let (_, image, report) = Core::open(disk, SEGMENT).unwrap();
    assert_eq!(report.stopped_at, None);
    assert_eq!(image.purged, Some(upto));
    assert_eq!(
        image.entries.keys().copied().collect::<Vec<_>>(),
        (36..=40).collect::<Vec<_>>()
    );
}

/// Flips the bits of the byte at `offset` of segment `name`, durably.
pub(super) fn flip(disk: &SimDir, name: &str, offset: u64) {
    use super::disk::{WalDir, WalFile};
    let mut f = disk.open(name).unwrap();
    let mut byte = [0u8];
    f.read_at(&mut byte, offset).unwrap();
    f.write_at(&[byte[0] ^ 0xff], offset).unwrap();
    f.sync_data().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A damaged segment (any bytes after a valid header, or any bytes at
    /// all) never panics recovery: it reads what it can, or says why not.
    #[test]
    fn recovery_never_panics_on_arbitrary_segment_bytes(
        body in prop::collection::vec(any::<u8>(), 0..2048),
        with_header in any::<bool>(),
        with_batch in any::<bool>(),
        synced_to in 0u64..4096,
    ) {
        use super::disk::{WalDir, WalFile};
        let disk = SimDir::new();
        let mut f = disk.create("0000000000000000.wal").unwrap();
        let mut bytes = Vec::new();
        if with_header {
            bytes.extend_from_slice(super::format::MAGIC);
            bytes.extend_from_slice(&super::format::WAL_VERSION.to_le_bytes());
            bytes.extend_from_slice(&[0; 4]);
        }
        if with_header && with_batch {
            // A valid batch header claiming the arbitrary body, so the
            // reader goes past the header check.
            let len = body.len() as u32;
            let mut h = [0u8; 32];
            h[..4].copy_from_slice(b"RLB\x02");
            h[8..16].copy_from_slice(&1u64.to_le_bytes());
            h[16..24].copy_from_slice(&synced_to.to_le_bytes());
            h[24..28].copy_from_slice(&len.to_le_bytes());
            h[28..32].copy_from_slice(&crc32c::crc32c(&body).to_le_bytes());
            let crc = crc32c::crc32c(&h[8..]);
            h[4..8].copy_from_slice(&crc.to_le_bytes());
            bytes.extend_from_slice(&h);
        }
        bytes.extend_from_slice(&body);
        f.write_at(&bytes, 0).unwrap();
        f.sync_data().unwrap();
        disk.sync().unwrap();
        if let Ok((mut core, _, _)) = Core::open(disk.clone(), SEGMENT) {
            // And the log it recovered takes new records.
            core.write(&[Encoded::entry(&entry(9, 1_000, 1)).unwrap()]).unwrap();
            core.sync().unwrap();
        }
    }
}

/// What `append_then` reported, and the durable point when it did.
pub(super) type Reports = std::sync::Arc<parking_lot::Mutex<Vec<(bool, Option<u64>)>>>;

pub(super) fn append(wal: &super::Wal, entries: Vec<Entry>, reports: &Reports) {
    let flushed = wal.flushed();
    let reports = reports.clone();
    wal.append_then(
        entries,
        Box::new(move |r| {
            let durable = flushed.borrow().map(|l| l.index);
            reports.lock().push((r.is_ok(), durable));
        }),
    )
    .unwrap();
}

/// Waits until `n` appends were answered.
pub(super) async fn answered(reports: &Reports, n: usize) -> Vec<(bool, Option<u64>)> {
    for _ in 0..500 {
        let r = reports.lock().clone();
        if r.len() >= n {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("appends unanswered: {:?}", reports.lock());
}

/// Waits until the writer thread has nothing queued and has let go of
/// the writer: a waiter is told its record is durable from inside the
/// writer thread's batch, a moment before the thread lets go, so an
/// append right after an awaited write may still find it busy.
async fn writer_idle(wal: &super::Wal) {
    for _ in 0..5000 {
        if wal.inner.queued.load(std::sync::atomic::Ordering::SeqCst) == 0
            && wal.inner.process.try_lock().is_some()
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("the writer thread stays busy");
}

pub(super) async fn flushed_reaches(wal: &super::Wal, index: u64) {
    let mut flushed = wal.flushed();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        flushed.wait_for(|f| f.is_some_and(|f| f.index >= index)),
    )
    .await
    .expect("the durable point reaches the append")
    .unwrap();
}

/// A leader's own entries are reported flushed before they are durable
/// (so openraft replicates them while the leader writes), and the
/// durable point then follows the sync; every other append (a follower's,
/// or a leader's copy of an older term's entries) is reported only once
/// durable.
#[tokio::test]
async fn only_a_leaders_own_appends_are_answered_before_they_are_durable() {
    use openraft::storage::RaftLogStorage;
    let (mut wal, _) = super::Wal::open_in(SimDir::new(), SEGMENT).unwrap();
    wal.flush_leader_appends_in_parallel(1);
    let reports: Reports = Default::default();

    // Follower of node 2 in term 1.
    wal.save_vote(&Vote::new_committed(1, 2)).await.unwrap();
    let e = |term: u64, leader: u64, index: u64| Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, leader), index),
        payload: EntryPayload::Blank,
    };
    append(&wal, vec![e(1, 2, 1), e(1, 2, 2)], &reports);
    flushed_reaches(&wal, 2).await;
    // Node 1 leads term 2: its own entries are answered at once.
    wal.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
    append(&wal, vec![e(2, 1, 3)], &reports);
    assert_eq!(reports.lock().len(), 2, "answered at once");
    flushed_reaches(&wal, 3).await;
    // An entry of an older term (its own, lost and sent back by a later
    // leader) is not "own" under the current vote.
    wal.save_vote(&Vote::new_committed(3, 1)).await.unwrap();
    append(&wal, vec![e(2, 1, 4)], &reports);
    flushed_reaches(&wal, 4).await;
    // A candidate's vote is not a leader's.
    wal.save_vote(&Vote::new(4, 1)).await.unwrap();
    append(&wal, vec![e(4, 1, 5)], &reports);
    flushed_reaches(&wal, 5).await;

    let reports = answered(&reports, 4).await;
    assert_eq!(
        reports,
        vec![
            (true, Some(2)), // follower: after durable
            (true, Some(2)), // leader's own: before its entry is durable
            (true, Some(4)),
            (true, Some(5)),
        ]
    );
    // Without the setting, nothing is answered early.
    let (mut plain, _) = super::Wal::open_in(SimDir::new(), SEGMENT).unwrap();
    plain.save_vote(&Vote::new_committed(1, 1)).await.unwrap();
    let r: Reports = Default::default();
    append(&plain, vec![e(1, 1, 1)], &r);
    assert_eq!(answered(&r, 1).await, vec![(true, Some(1))]);
}

/// A truncated suffix is no longer durable log: the point moves back to
/// the new end (the state machine must not wait on entries that are gone).
#[tokio::test]
async fn the_durable_point_goes_back_with_a_truncation() {
    use openraft::storage::RaftLogStorage;
    let (mut wal, _) = super::Wal::open_in(SimDir::new(), SEGMENT).unwrap();
    let reports: Reports = Default::default();
    append(&wal, (1..=5).map(|i| entry(1, i, 8)).collect(), &reports);
    flushed_reaches(&wal, 5).await;
    wal.truncate(LogId::new(CommittedLeaderId::new(1, 1), 3))
        .await
        .unwrap();
    assert_eq!(wal.flushed().borrow().map(|l| l.index), Some(2));
}

/// A follower's appends are written and synced on the appending thread
/// when the writer thread is idle, reported only once durable, and
/// survive a power loss; a leader's own appends, appends of many commands,
/// and any append that finds the writer busy go to the writer thread,
/// behind what it already holds.
#[tokio::test]
async fn a_followers_appends_are_synced_in_place_when_the_writer_is_idle() {
    use openraft::storage::RaftLogStorage;
    let disk = SimDir::new();
    let (mut wal, _) = super::Wal::open_in(disk.clone(), SEGMENT).unwrap();
    wal.flush_follower_appends_inline(1, std::time::Duration::from_secs(1));
    let e = |term: u64, leader: u64, index: u64| Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, leader), index),
        payload: EntryPayload::Blank,
    };
    // Which thread reported each append, and the durable point then.
    type Seen = std::sync::Arc<parking_lot::Mutex<Vec<(bool, Option<u64>)>>>;
    let seen: Seen = Default::default();
    let appender = wal.clone();
    let append_noting_thread = |entries: Vec<Entry>| {
        let (flushed, seen) = (appender.flushed(), seen.clone());
        appender
            .append_then(
                entries,
                Box::new(move |r| {
                    r.unwrap();
                    let on_writer = std::thread::current().name() == Some("raftlock-wal");
                    seen.lock()
                        .push((on_writer, flushed.borrow().map(|l| l.index)));
                }),
            )
            .unwrap();
    };

    // Follower of node 2: written here, durable when reported.
    wal.save_vote(&Vote::new_committed(1, 2)).await.unwrap();
    writer_idle(&wal).await;
    append_noting_thread(vec![e(1, 2, 1), e(1, 2, 2)]);
    assert_eq!(*seen.lock(), vec![(false, Some(2))]);

    // The writer busy (its lock held): the append queues behind it.
    let busy = wal.inner.process.lock();
    append_noting_thread(vec![e(1, 2, 3)]);
    assert_eq!(seen.lock().len(), 1, "not written past a busy writer");
    drop(busy);
    flushed_reaches(&wal, 3).await;
    // The writer thread has taken it; the next append is written here again.
    writer_idle(&wal).await;
    append_noting_thread(vec![e(1, 2, 4)]);
    // Five commands (a loaded cluster): the writer thread syncs them, so
    // that the apply this append unblocks overlaps the sync.
    let mut loaded = entry(1, 5, 8);
    loaded.log_id = LogId::new(CommittedLeaderId::new(1, 2), 5);
    if let EntryPayload::Normal(p) = &mut loaded.payload {
        let one = p.commands[0].clone();
        p.commands = vec![one; 5].into();
    }
    append_noting_thread(vec![loaded]);
    flushed_reaches(&wal, 5).await;

    // Node 1 leads term 2: its own entries go to the writer thread.
    wal.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
    append_noting_thread(vec![e(2, 1, 6)]);
    flushed_reaches(&wal, 6).await;
    for _ in 0..500 {
        if seen.lock().len() == 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert_eq!(
        *seen.lock(),
        vec![
            (false, Some(2)),
            (true, Some(3)),
            (false, Some(4)),
            (true, Some(5)),
            (true, Some(6))
        ]
    );

    // Everything reported survives a power loss, in order.
    drop((wal, appender));
    disk.crash(None);
    let (reopened, _) = super::Wal::open_in(disk, SEGMENT).unwrap();
    let image = reopened.snapshot_image();
    assert_eq!(
        image.entries.keys().copied().collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5, 6]
    );
}

/// On a disk whose syncs are slow, a follower's appends go to the writer
/// thread: the appending thread (openraft's core) must stay free to hear
/// its leader, or its election timer runs out while it syncs.
#[tokio::test]
async fn a_followers_appends_leave_the_core_free_while_syncs_are_slow() {
    use openraft::storage::RaftLogStorage;
    use std::time::{Duration, Instant};
    let slow = Duration::from_millis(80);
    let (mut wal, _) =
        super::Wal::open_in(super::disk::SlowSyncDir::new(SimDir::new(), slow), SEGMENT).unwrap();
    wal.flush_follower_appends_inline(1, Duration::from_millis(20));
    let e = |index: u64| Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 2), index),
        payload: EntryPayload::Blank,
    };
    // The vote's sync is the first slow one the log sees.
    wal.save_vote(&Vote::new_committed(1, 2)).await.unwrap();
    writer_idle(&wal).await;
    let started = Instant::now();
    wal.append_then(vec![e(1)], Box::new(|r| r.unwrap()))
        .unwrap();
    assert!(
        started.elapsed() < slow / 2,
        "an append blocked its caller for {:?} on a slow disk",
        started.elapsed()
    );
    flushed_reaches(&wal, 1).await;
    assert!(!wal.syncs_are_quick());
}
