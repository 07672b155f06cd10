//! `watch` in-process: a heavy IRQ rotating between CPUs shows in every interval's imbalance
//! though cumulative counts look balanced, and sampling many times allocates nothing once warm
//! (a counting global allocator; this test binary's own).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use irqpilot::cli::Format;
use irqpilot::cmd::watch::Watcher;
use irqpilot_core::{IrqNum, Platform, RowLabel, Snapshot};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::tree::write_counters;
use serde_json::Value;
use std::path::Path;

mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        // Per thread, so tests running in parallel do not count each other's allocations.
        static ALLOCS: Cell<u64> = const { Cell::new(0) };
        static LIVE_BYTES: Cell<i64> = const { Cell::new(0) };
    }

    pub struct Counting;

    fn count(delta: i64) {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + u64::from(delta > 0)));
        let _ = LIVE_BYTES.try_with(|c| c.set(c.get() + delta));
    }

    // SAFETY: every call is forwarded unchanged to the system allocator.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count(layout.size() as i64);
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count(layout.size() as i64);
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count(new_size as i64 - layout.size() as i64);
            let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
            unsafe { System.realloc(ptr, layout, new_size) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            count(-(layout.size() as i64));
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    /// Allocations and net live bytes of this thread while running `f`.
    pub fn measure<T>(f: impl FnOnce() -> T) -> (u64, i64, T) {
        let (a, b) = (ALLOCS.with(Cell::get), LIVE_BYTES.with(Cell::get));
        let out = f();
        (
            ALLOCS.with(Cell::get) - a,
            LIVE_BYTES.with(Cell::get) - b,
            out,
        )
    }
}

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

/// A writable copy of the captured fixture, its platform and first snapshot.
fn fixture() -> (tempfile::TempDir, LinuxPlatform, Snapshot) {
    let dir = tempfile::tempdir().unwrap();
    common::copy_tree(&common::firecracker(), dir.path());
    let mut p = LinuxPlatform::with_root(dir.path());
    let snap = p.snapshot().unwrap();
    (dir, p, snap)
}

fn row_index(s: &Snapshot, irq: u32) -> usize {
    s.interrupts
        .rows()
        .iter()
        .position(|r| r.label == RowLabel::Irq(IrqNum(irq)))
        .unwrap()
}

/// Adds `n` interrupts of `irq` on column `cpu` and writes the counters to the tree.
fn fire(root: &Path, snap: &mut Snapshot, irq: u32, cpu: usize, n: u64) {
    let i = row_index(snap, irq);
    snap.interrupts.counts_mut(i).unwrap()[cpu] += n;
    write_counters(root, snap).unwrap();
}

#[test]
fn rotation_is_visible_interval_by_interval() {
    let (dir, mut p, mut snap) = fixture();
    let machine = p.machine().unwrap();
    let mut w = Watcher::new(&machine, Format::Json, 5);
    w.sample(&mut p).unwrap();
    let start = snap
        .interrupts
        .counts(&snap.interrupts.rows()[row_index(&snap, 36)])
        .to_vec();
    let mut imbalances = Vec::new();
    for k in 0..6usize {
        // virtio1-req.0 (IRQ 36) takes 5000 interrupts per interval, alternating CPUs.
        fire(dir.path(), &mut snap, 36, k % 2, 5000);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let line = w.sample(&mut p).unwrap().to_string();
        let v: Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(v["irqs"][0]["irq"], "36", "{line}");
        let on: Vec<&String> = v["irqs"][0]["per_cpu"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(on, [&(k % 2).to_string()], "{line}");
        imbalances.push(v["imbalance"].as_f64().unwrap());
    }
    // Every interval: all device interrupts on one of two housekeeping CPUs, max/mean = 2.
    assert!(
        imbalances.iter().all(|x| (x - 2.0).abs() < 1e-9),
        "{imbalances:?}"
    );
    // Cumulatively the IRQ looks perfectly balanced.
    let end = snap
        .interrupts
        .counts(&snap.interrupts.rows()[row_index(&snap, 36)]);
    assert_eq!(end[0] - start[0], end[1] - start[1]);
}

fn steady_state_allocations(
    format: Format,
    root: &Path,
    snap: &mut Snapshot,
    p: &mut LinuxPlatform,
) -> (u64, i64) {
    let machine = p.machine().unwrap();
    let mut w = Watcher::new(&machine, format, 10);
    let mut step = |w: &mut Watcher, k: usize, snap: &mut Snapshot| {
        // Counts move every interval, on every device IRQ row, on alternating CPUs.
        for irq in [36u32, 38, 39, 41, 42] {
            fire(root, snap, irq, k % 2, 100 + k as u64);
        }
        let (n, bytes, len) = counting::measure(|| w.sample(p).unwrap().len());
        assert!(len > 0 || k == 0);
        (n, bytes)
    };
    let (first, _) = step(&mut w, 0, snap);
    assert!(
        first > 0,
        "the counting allocator sees the first sample's buffers"
    );
    for k in 1..5 {
        step(&mut w, k, snap);
    }
    let (mut allocs, mut bytes) = (0, 0);
    for k in 5..205 {
        let (n, b) = step(&mut w, k, snap);
        allocs += n;
        bytes += b;
    }
    (allocs, bytes)
}

#[test]
fn watch_allocates_nothing_once_warm() {
    for format in [Format::Json, Format::Table] {
        let (dir, mut p, mut snap) = fixture();
        let (allocs, bytes) = steady_state_allocations(format, dir.path(), &mut snap, &mut p);
        assert_eq!((allocs, bytes), (0, 0), "{format:?}: 200 samples");
    }
}

#[test]
fn watch_on_the_generated_server_allocates_nothing_once_warm() {
    let (_dir, root) = common::generated(9);
    let mut p = LinuxPlatform::with_root(&root);
    let machine = p.machine().unwrap();
    let mut snap = p.snapshot().unwrap();
    let mut w = Watcher::new(&machine, Format::Json, 10);
    let busy: Vec<usize> = (0..snap.interrupts.rows().len()).step_by(7).collect();
    let mut total = 0;
    for k in 0..25u64 {
        for &i in &busy {
            if let Some(c) = snap.interrupts.counts_mut(i) {
                let n = c.len();
                c[(k as usize * 31 + i) % n] += 1 + k;
            }
        }
        write_counters(&root, &snap).unwrap();
        let (n, _, line) = counting::measure(|| w.sample(&mut p).unwrap().len());
        if k >= 5 {
            total += n;
            assert!(line > 1000);
        }
    }
    assert_eq!(total, 0);
}
