//! Damage and failure on the simulated disk, case by case: damage that
//! later batches prove durable, a gap, damage in an earlier segment, a torn
//! tail, restarts that reuse the segment, a format 1 log, a failed sync.
//! The random runs are in `tests.rs`.

use super::core::Core;
use super::disk::SimDir;
use super::format::Encoded;
use super::tests::{answered, append, entry, flip, flushed_reaches, Reports, SEGMENT};

/// Writes entries 1..=n, one synced batch each.
fn synced_batches(disk: &SimDir, n: u64) -> Core<SimDir> {
    let (mut core, _, _) = Core::open(disk.clone(), 1 << 20).unwrap();
    for index in 1..=n {
        core.write(&[Encoded::entry(&entry(1, index, 20)).unwrap()])
            .unwrap();
        core.sync().unwrap();
    }
    core
}

#[test]
fn a_damaged_batch_that_later_batches_prove_durable_is_refused() {
    let disk = SimDir::new();
    let core = synced_batches(&disk, 5);
    // Each batch here is a 32-byte header and one record: find the third.
    let (name, proven) = core.provably_durable().pop().unwrap();
    drop(core);
    let batch = |i: u64| {
        use super::disk::{WalDir, WalFile};
        let mut f = disk.open(&name).unwrap();
        let mut at = 16u64;
        for _ in 0..i {
            let mut h = [0u8; 32];
            f.read_at(&mut h, at).unwrap();
            let len = u32::from_le_bytes(h[24..28].try_into().unwrap()) as u64;
            at += (32 + len).div_ceil(8) * 8;
        }
        at
    };
    // Batch 0 is the checkpoint; batch 3 holds entry 3.
    let third = batch(3);
    assert!(third + 40 < proven, "{third} {proven}");
    flip(&disk, &name, third + 40);
    let err = Core::open(disk.clone(), 1 << 20).err().expect("refused");
    let damage = super::recover::Damage::find(&err).expect("a Damage error");
    assert_eq!(damage.offset, third);
    assert_eq!(damage.last_good_index, Some(2));
    assert!(err.to_string().contains(&name), "{err}");
    assert!(err.to_string().contains("index 2"), "{err}");
    // Refused without writing: the damage is still there to inspect.
    assert!(Core::open(disk, 1 << 20).is_err());
}

#[test]
fn a_torn_last_batch_is_dropped_and_writing_goes_on_in_the_same_segment() {
    let disk = SimDir::new();
    let mut core = synced_batches(&disk, 3);
    core.write(&[Encoded::entry(&entry(1, 4, 300)).unwrap()])
        .unwrap();
    drop(core);
    disk.crash(Some(100));
    let (mut core, image, report) = Core::open(disk.clone(), 1 << 20).unwrap();
    assert!(report.stopped_at.is_some());
    assert!(report.torn_bytes > 0);
    assert_eq!(image.entries.len(), 3);
    core.write(&[Encoded::entry(&entry(2, 4, 1)).unwrap()])
        .unwrap();
    core.sync().unwrap();
    assert_eq!(core.segments(), 1);
    drop(core);
    let (_, image, report) = Core::open(disk, 1 << 20).unwrap();
    assert_eq!(report.stopped_at, None, "the torn tail was zeroed");
    assert_eq!(image.entries.len(), 4);
    assert_eq!(image.entries[&4].log_id.leader_id.term, 2);
}

/// Entries 1..=20 of 500 bytes, synced one by one, over several 4 KiB
/// segments: what recovery can prove durable in each.
fn several_segments(disk: &SimDir) -> Vec<(String, u64)> {
    let (mut core, _, _) = Core::open(disk.clone(), SEGMENT).unwrap();
    for index in 1..=20 {
        core.write(&[Encoded::entry(&entry(1, index, 500)).unwrap()])
            .unwrap();
        core.sync().unwrap();
    }
    core.provably_durable()
}

#[test]
fn damage_in_an_earlier_segment_is_refused_even_at_its_end() {
    let disk = SimDir::new();
    let segments = several_segments(&disk);
    assert!(segments.len() > 2);
    // The last byte of the first segment's last batch.
    let (name, end) = segments[0].clone();
    flip(&disk, &name, end - 9);
    let err = Core::open(disk, SEGMENT).err().expect("refused");
    assert!(super::recover::Damage::find(&err).is_some(), "{err}");
    assert!(err.to_string().contains("not in the last segment"), "{err}");
}

#[test]
fn a_lost_batch_in_the_middle_is_refused_as_a_gap() {
    use super::disk::{WalDir, WalFile};
    let disk = SimDir::new();
    let segments = several_segments(&disk);
    // Zero the second segment's batches after its checkpoint: the third
    // segment then starts with a batch number the second never reached.
    let (name, end) = segments[1].clone();
    let mut f = disk.open(&name).unwrap();
    let mut h = [0u8; 32];
    f.read_at(&mut h, 16).unwrap();
    let first =
        16 + (32 + u32::from_le_bytes(h[24..28].try_into().unwrap()) as u64).div_ceil(8) * 8;
    f.write_at(&vec![0; (end - first) as usize], first).unwrap();
    f.sync_data().unwrap();
    let err = Core::open(disk, SEGMENT).err().expect("refused");
    assert!(err.to_string().contains("a gap"), "{err}");
}

#[test]
fn restarts_go_on_in_the_same_segment() {
    let disk = SimDir::new();
    for round in 1..=20u64 {
        let (mut core, image, _) = Core::open(disk.clone(), 1 << 20).unwrap();
        assert_eq!(image.entries.len() as u64, round - 1);
        core.write(&[Encoded::entry(&entry(1, round, 10)).unwrap()])
            .unwrap();
        core.sync().unwrap();
        assert_eq!(core.segments(), 1);
    }
    use super::disk::WalDir;
    let segments = disk.list().unwrap();
    let segments: Vec<_> = segments.iter().filter(|n| n.ends_with(".wal")).collect();
    assert_eq!(segments.len(), 1, "{segments:?}");
}

/// A format 1 log (records back to back, no batches) as a release before
/// batches wrote it: entries 1..=n in one segment.
fn v1_segment(disk: &SimDir, n: u64) {
    use super::disk::{WalDir, WalFile};
    let mut bytes = Vec::new();
    bytes.extend_from_slice(super::format::MAGIC);
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend(Encoded::committed(&None).unwrap().bytes);
    for index in 1..=n {
        bytes.extend(Encoded::entry(&entry(1, index, 20)).unwrap().bytes);
    }
    let mut f = disk.create("0000000000000000.wal").unwrap();
    f.set_len(1 << 20).unwrap();
    f.write_at(&bytes, 0).unwrap();
    f.sync_data().unwrap();
    disk.sync().unwrap();
}

#[test]
fn a_format_1_log_is_read_and_continued_in_a_format_2_segment() {
    let disk = SimDir::new();
    v1_segment(&disk, 4);
    let (mut core, image, report) = Core::open(disk.clone(), 1 << 20).unwrap();
    assert_eq!(report.v1_segments, 1);
    assert_eq!(image.entries.len(), 4);
    assert_eq!(core.segments(), 2);
    core.write(&[Encoded::entry(&entry(2, 5, 1)).unwrap()])
        .unwrap();
    core.sync().unwrap();
    drop(core);
    let (core, image, _) = Core::open(disk, 1 << 20).unwrap();
    assert_eq!(image.entries.len(), 5);
    assert_eq!(core.segments(), 2, "the format 2 segment is reused");
}

/// A failed `fdatasync` is never retried: the append it covered is
/// answered with the error, every later write is refused without touching
/// the disk, the node is told, and a restart finds what was synced before.
#[tokio::test]
async fn after_a_failed_sync_the_log_takes_no_write_and_says_why() {
    let disk = SimDir::new();
    let (wal, _) = super::Wal::open_in(disk.clone(), SEGMENT).unwrap();
    let reports: Reports = Default::default();
    append(&wal, (1..=2).map(|i| entry(1, i, 8)).collect(), &reports);
    flushed_reaches(&wal, 2).await;
    assert!(wal.failed().borrow().is_none());
    disk.fail_next_sync();
    append(&wal, vec![entry(1, 3, 8)], &reports);
    let r = answered(&reports, 2).await;
    assert!(
        !r[1].0,
        "an append whose sync failed was answered as durable"
    );
    let syncs = disk.syncs();
    append(&wal, vec![entry(1, 4, 8)], &reports);
    let r = answered(&reports, 3).await;
    assert!(
        !r[2].0,
        "an append after a failed sync was answered as durable"
    );
    assert!(wal.sync().await.is_err());
    assert_eq!(
        disk.syncs(),
        syncs,
        "a sync was tried again after one failed"
    );
    let why = wal
        .failed()
        .borrow()
        .clone()
        .expect("the failure is reported");
    assert!(why.contains("Input/output error"), "{why}");
    drop(wal);
    disk.heal();
    disk.crash(None);
    let (_, image, _) = Core::open(disk, SEGMENT).unwrap();
    assert_eq!(
        image.entries.keys().copied().collect::<Vec<_>>(),
        vec![1, 2]
    );
}

/// Opens the log on `disk` and expects it refused as ending early.
fn ends_early(disk: SimDir) -> String {
    let err = Core::open(disk, SEGMENT).err().expect("refused");
    let damage = super::recover::Damage::find(&err).expect("a Damage error");
    assert!(damage.ends_early, "{err}");
    err.to_string()
}

#[test]
fn a_log_that_lost_its_newest_segment_header_its_newest_segment_or_every_segment_ends_early() {
    use super::disk::{WalDir, WalFile};
    // The newest segment's first 4 KiB zeroed: its header reads as one a
    // crash left unborn, which the end record rules out.
    let disk = SimDir::new();
    let segments = several_segments(&disk);
    let (newest, _) = segments.last().cloned().unwrap();
    let mut f = disk.open(&newest).unwrap();
    f.write_at(&[0; 4096], 0).unwrap();
    f.sync_data().unwrap();
    let err = ends_early(disk);
    assert!(err.contains(&newest), "{err}");

    let disk = SimDir::new();
    let segments = several_segments(&disk);
    disk.remove(&segments.last().unwrap().0).unwrap();
    ends_early(disk);

    let disk = SimDir::new();
    for (name, _) in several_segments(&disk) {
        disk.remove(&name).unwrap();
    }
    let err = ends_early(disk);
    assert!(err.contains("no segment at all"), "{err}");
}

#[test]
fn a_crash_while_a_segment_starts_does_not_end_the_log_early() {
    use super::disk::WalDir;
    let disk = SimDir::new();
    let segments = several_segments(&disk);
    // The next segment created, its header never synced: as if a crash
    // came in the middle of a rotation.
    let next = format!(
        "{:016x}.wal",
        u64::from_str_radix(segments.last().unwrap().0.trim_end_matches(".wal"), 16).unwrap() + 1
    );
    disk.create(&next).unwrap();
    let (_, image, _) = Core::open(disk, SEGMENT).unwrap();
    assert_eq!(image.entries.len(), 20);
}

/// Zeros from `offset` of segment `name` to its end, as a lost block or a
/// file system that lost the file's tail leaves it.
fn zero_from(disk: &SimDir, name: &str, offset: u64) {
    use super::disk::{WalDir, WalFile};
    let mut f = disk.open(name).unwrap();
    f.write_at(&vec![0u8; 4096], offset).unwrap();
    f.sync_data().unwrap();
}

#[test]
fn a_lost_last_synced_batch_ends_the_log_early_by_the_synced_hint() {
    let disk = SimDir::new();
    let core = synced_batches(&disk, 5);
    let (name, _) = core.provably_durable().pop().unwrap();
    drop(core);
    // The last batch (entry 5) is synced and followed by nothing that says
    // so: only the hint written after its sync tells its loss from a torn
    // write.
    let offsets = {
        use super::disk::{WalDir, WalFile};
        let mut f = disk.open(&name).unwrap();
        let mut at = 16u64;
        let mut all = Vec::new();
        for _ in 0..6 {
            all.push(at);
            let mut h = [0u8; 32];
            f.read_at(&mut h, at).unwrap();
            let len = u32::from_le_bytes(h[24..28].try_into().unwrap()) as u64;
            at += (32 + len).div_ceil(8) * 8;
        }
        all
    };
    zero_from(&disk, &name, offsets[5]);
    let text = ends_early(disk);
    assert!(text.contains("wal/synced"), "{text}");
}

#[test]
fn a_batch_written_after_the_last_sync_is_still_a_torn_tail_beside_the_hint() {
    let disk = SimDir::new();
    let mut core = synced_batches(&disk, 3);
    core.write(&[Encoded::entry(&entry(1, 4, 300)).unwrap()])
        .unwrap();
    drop(core);
    // The hint survives (it is made durable here, as a process crash
    // keeps it in the page cache), the unsynced batch is torn.
    {
        use super::disk::{WalDir, WalFile};
        let mut f = disk.open(super::format::SYNCED_HINT).unwrap();
        f.sync_data().unwrap();
        disk.sync().unwrap();
    }
    disk.crash(Some(100));
    let (_, image, report) = Core::open(disk, 1 << 20).unwrap();
    assert!(report.torn_bytes > 0);
    assert_eq!(image.entries.len(), 3);
}
