//! Recordings give back exactly what was recorded: every snapshot equal to the original, after
//! layout changes, counter resets, affinity changes and seeks; damaged or foreign files give
//! errors that name the file and byte, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use irqpilot_core::{CpuSet, IrqNum, Machine, MonoNs, Platform, RowLabel, Snapshot};
use irqpilot_linux::generate::large_server;
use irqpilot_record::{BlockPolicy, Meta, RecordError, Recording, ReplayPlatform, Speed, Writer};
use std::path::Path;

const SEC: u64 = 1_000_000_000;

/// A deterministic stream of changing snapshots of the generated 256-CPU server: every device
/// row gains interrupts on one CPU, stat ticks and softirqs move, every 7th sample one
/// counter resets.
fn samples(n: usize) -> (Machine, Vec<Snapshot>) {
    let (machine, mut snap) = large_server(3);
    let mut out = Vec::new();
    let mut x = 12345u64;
    for k in 0..n {
        snap.taken_at = MonoNs(1_000 * SEC + k as u64 * SEC);
        let rows = snap.interrupts.rows().len();
        for i in 0..rows {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if let Some(c) = snap.interrupts.counts_mut(i) {
                let n = c.len();
                c[(i + k / 10) % n] += (x >> 40) % 5000;
            }
        }
        if k % 7 == 6 {
            if let Some(c) = snap.interrupts.counts_mut(k % rows) {
                c[0] = 0;
            }
        }
        if let Some(st) = snap.stat.as_mut() {
            for (_, t) in st.per_cpu.iter_mut() {
                t.idle += 90;
                t.user += 7;
                if let Some(irq) = t.irq.as_mut() {
                    *irq += 1;
                }
            }
            for (k2, v) in st.other.iter_mut() {
                if k2 == "ctxt" {
                    let n: u64 = v.parse().unwrap_or(0);
                    *v = (n + 1234).to_string();
                }
            }
        }
        if let Some(s) = snap.softirqs.as_mut() {
            for (_, v) in s.rows.iter_mut() {
                let n = v.len();
                v[k % n] += 17;
            }
        }
        out.push(snap.clone());
    }
    (machine, out)
}

fn record(path: &Path, machine: &Machine, snaps: &[Snapshot], policy: BlockPolicy) {
    let mut meta = Meta::new("test", "/tmp/x", SEC);
    meta.start_mono_ns = snaps[0].taken_at.0;
    let f = std::fs::File::create(path).unwrap();
    let mut w = Writer::with_policy(f, path, &meta, machine, policy).unwrap();
    for s in snaps {
        w.push(s).unwrap();
    }
    w.finish().unwrap();
}

fn small_blocks() -> BlockPolicy {
    BlockPolicy {
        max_samples: 4,
        key_every_ns: 10 * SEC,
        ..BlockPolicy::default()
    }
}

#[test]
fn every_sample_comes_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.irqrec");
    let (machine, snaps) = samples(40);
    record(&path, &machine, &snaps, small_blocks());
    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.samples(), 40);
    assert!(rec.damage().is_none());
    assert_eq!(
        rec.span_ns(),
        Some((snaps[0].taken_at.0, snaps[39].taken_at.0))
    );
    assert_eq!(rec.meta().source, "test");
    let mut p = rec.player().unwrap();
    for (k, s) in snaps.iter().enumerate() {
        assert!(p.next_sample().unwrap(), "sample {k}");
        assert_eq!(p.snapshot(), s, "sample {k}");
    }
    assert!(!p.next_sample().unwrap());
    assert_eq!(p.machine(), &machine);
    // Only moving cells are stored: far below the raw counters' size.
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < 2_000_000, "{size} bytes for 40 samples");
}

#[test]
fn layout_changes_and_affinities_survive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.irqrec");
    let (machine, mut snaps) = samples(12);
    // From sample 6 on, one IRQ is gone (freed) and its description changes on another.
    for s in snaps.iter_mut().skip(6) {
        let mut t = s.interrupts.clone();
        t.clear();
        t.header.clone_from(&s.interrupts.header);
        t.cpus.clone_from(&s.interrupts.cpus);
        for (i, r) in s.interrupts.rows().iter().enumerate() {
            if i == 3 {
                continue;
            }
            let tail = if i == 5 { "  replaced-device" } else { &r.tail };
            t.push_row(
                r.label.clone(),
                &r.lead,
                r.first_width,
                s.interrupts.counts(r),
                tail,
            );
        }
        s.interrupts = t;
    }
    let irq = *machine.irqs.keys().nth(40).unwrap();
    let mut meta = Meta::new("test", "/", SEC);
    meta.start_mono_ns = snaps[0].taken_at.0;
    let mut w = Writer::with_policy(
        std::fs::File::create(&path).unwrap(),
        &path,
        &meta,
        &machine,
        small_blocks(),
    )
    .unwrap();
    let to = CpuSet::parse_list("5").unwrap();
    for (k, s) in snaps.iter().enumerate() {
        w.push(s).unwrap();
        if k == 8 {
            w.affinity(irq, Some(&to), Some(&to)).unwrap();
        }
    }
    w.finish().unwrap();
    let rec = Recording::open(&path).unwrap();
    let mut p = rec.player().unwrap();
    for (k, s) in snaps.iter().enumerate() {
        assert!(p.next_sample().unwrap());
        assert_eq!(p.snapshot(), s, "sample {k}");
        if k == 9 {
            assert_eq!(p.changes().len(), 1);
            assert_eq!(p.changes()[0].irq, irq);
            assert_eq!(p.changes()[0].at_ns, snaps[8].taken_at.0);
        } else {
            assert!(p.changes().is_empty(), "sample {k}");
        }
    }
    assert_eq!(p.machine().irqs[&irq].effective.as_ref(), Some(&to));
    // Seeking past the change restores it from the key point; before it, the old affinity.
    p.seek(snaps[11].taken_at.0).unwrap();
    assert_eq!(p.snapshot(), &snaps[11]);
    assert_eq!(p.machine().irqs[&irq].effective.as_ref(), Some(&to));
    p.seek(snaps[2].taken_at.0).unwrap();
    assert_eq!(
        p.machine().irqs[&irq].effective,
        machine.irqs[&irq].effective
    );
}

#[test]
fn seek_lands_on_the_last_sample_at_or_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.irqrec");
    let (machine, snaps) = samples(30);
    record(&path, &machine, &snaps, small_blocks());
    let rec = Recording::open(&path).unwrap();
    assert!(
        rec.blocks()
            .iter()
            .filter(|b| b.header.flags & 1 != 0)
            .count()
            >= 3
    );
    let mut p = rec.player().unwrap();
    for k in [0usize, 1, 9, 10, 11, 17, 29, 22, 3] {
        assert!(p.seek(snaps[k].taken_at.0 + SEC / 2).unwrap());
        assert_eq!(p.snapshot(), &snaps[k], "seek to {k}");
        if k + 1 < snaps.len() {
            assert!(p.next_sample().unwrap());
            assert_eq!(p.snapshot(), &snaps[k + 1], "after seek to {k}");
        }
    }
    assert!(p.seek(0).unwrap());
    assert_eq!(p.snapshot(), &snaps[0]);
    assert!(p.seek(u64::MAX).unwrap());
    assert_eq!(p.snapshot(), &snaps[29]);
}

#[test]
fn replay_platform_follows_its_clock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.irqrec");
    let (machine, snaps) = samples(10);
    record(&path, &machine, &snaps, BlockPolicy::default());
    let rec = Recording::open(&path).unwrap();
    let mut r = ReplayPlatform::new(&rec, Speed::Max).unwrap();
    assert_eq!(r.machine().unwrap(), machine);
    let mut s = Snapshot::default();
    r.snapshot_into(&mut s).unwrap();
    assert_eq!(s, snaps[0]);
    // A clock 3.5 s on gives the sample at +3 s.
    r.sleep(3 * SEC + SEC / 2);
    r.snapshot_into(&mut s).unwrap();
    assert_eq!(s, snaps[3]);
    // No time passed: the next sample anyway, never the same one twice.
    r.snapshot_into(&mut s).unwrap();
    assert_eq!(s, snaps[4]);
    assert_eq!(r.now(), snaps[4].taken_at);
    r.seek(snaps[8].taken_at.0).unwrap();
    r.snapshot_into(&mut s).unwrap();
    assert_eq!(s, snaps[8]);
    r.snapshot_into(&mut s).unwrap();
    assert_eq!(s, snaps[9]);
    assert!(r.finished().unwrap());
    assert!(r.snapshot_into(&mut s).is_err());
}

#[test]
fn a_cut_file_reads_up_to_its_last_whole_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.irqrec");
    let (machine, snaps) = samples(20);
    record(&path, &machine, &snaps, small_blocks());
    let bytes = std::fs::read(&path).unwrap();
    let rec = Recording::open(&path).unwrap();
    let last = *rec.blocks().last().unwrap();
    let whole = 20 - u64::from(last.header.samples);
    assert!(whole >= 12);
    let last = last.offset as usize;
    for cut in [last + 3, last + 40, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let rec = Recording::open(&path).unwrap();
        assert!(
            rec.damage().unwrap().contains("cut short"),
            "{:?}",
            rec.damage()
        );
        assert_eq!(rec.samples(), whole);
        let mut p = rec.player().unwrap();
        let mut n = 0;
        while p.next_sample().unwrap() {
            assert_eq!(p.snapshot(), &snaps[n]);
            n += 1;
        }
        assert_eq!(n as u64, whole);
    }
}

#[test]
fn foreign_and_damaged_files_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.irqrec");
    std::fs::write(&path, "           CPU0\n  0:  1  timer\n").unwrap();
    let e = Recording::open(&path).unwrap_err();
    assert!(matches!(e, RecordError::NotARecording { .. }), "{e}");
    assert!(e.to_string().contains("f.irqrec"));

    let (machine, snaps) = samples(16);
    record(&path, &machine, &snaps, small_blocks());
    let good = std::fs::read(&path).unwrap();
    let mut v2 = good.clone();
    v2[8] = 2;
    std::fs::write(&path, &v2).unwrap();
    let e = Recording::open(&path).unwrap_err();
    assert!(e.to_string().contains("version 2"), "{e}");

    // A flipped byte inside a compressed block: the checksum catches it, the error names the
    // block's offset; nothing panics.
    let rec = {
        std::fs::write(&path, &good).unwrap();
        Recording::open(&path).unwrap()
    };
    let b = rec.blocks()[2];
    let mut bad = good.clone();
    let at = b.offset as usize + 28 + b.header.compressed_len as usize / 2;
    bad[at] ^= 0x5a;
    std::fs::write(&path, &bad).unwrap();
    let rec = Recording::open(&path).unwrap();
    let mut p = rec.player().unwrap();
    let err = loop {
        match p.next_sample() {
            Ok(true) => {}
            Ok(false) => panic!("damage not noticed"),
            Err(e) => break e,
        }
    };
    assert!(
        err.to_string().contains(&format!("byte {}", b.offset)),
        "{err}"
    );

    // The same damage in the last block: dropped like a cut one, the rest reads.
    let lastb = *rec.blocks().last().unwrap();
    let mut bad = good.clone();
    bad[lastb.offset as usize + 28 + lastb.header.compressed_len as usize / 2] ^= 0x5a;
    std::fs::write(&path, &bad).unwrap();
    let cut = Recording::open(&path).unwrap();
    assert!(
        cut.damage().unwrap().contains("checksum"),
        "{:?}",
        cut.damage()
    );
    assert_eq!(cut.samples(), 16 - u64::from(lastb.header.samples));

    // Garbage where a block header should be: the blocks before it still read.
    let mut tail = good.clone();
    let third = rec.blocks()[3].offset as usize;
    tail[third] = b'X';
    std::fs::write(&path, &tail).unwrap();
    let rec = Recording::open(&path).unwrap();
    assert!(rec.damage().unwrap().contains("no block marker"));
    assert_eq!(rec.blocks().len(), 3);
}

#[test]
fn empty_recording_has_no_samples() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.irqrec");
    let w = Writer::new(
        std::fs::File::create(&path).unwrap(),
        &path,
        &Meta::new("test", "/", SEC),
        &Machine::default(),
    )
    .unwrap();
    w.finish().unwrap();
    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.samples(), 0);
    assert_eq!(rec.span_ns(), None);
    let mut p = rec.player().unwrap();
    assert!(!p.next_sample().unwrap());
    assert!(!p.seek(0).unwrap());
    assert!(ReplayPlatform::new(&rec, Speed::Max).is_ok());
}

#[test]
fn wall_time_of_a_sample() {
    let mut m = Meta::new("x", "/", SEC);
    m.created_unix_ns = 1_700_000_000 * SEC;
    m.start_mono_ns = 50 * SEC;
    assert_eq!(m.wall_ns(53 * SEC), 1_700_000_003 * SEC);
    assert_eq!(m.wall_ns(0), 1_699_999_950 * SEC);
    let _ = RowLabel::Irq(IrqNum(0));
}
