//! [`Writer`]: appends snapshots to a recording. Each sample is the difference from the
//! previous one, cell by cell, keeping only the cells that moved (most IRQs are delivered to one
//! CPU, so most cells of `/proc/interrupts` stand still from one second to the next). Samples
//! are gathered in blocks, each compressed as one zstd frame (with its checksum) and written as
//! soon as it holds 64 samples, spans 10 s, or reaches 1 MiB: a recorder killed without warning
//! loses at most the block in progress. A key point (layout, every IRQ's affinity, a full
//! sample) starts the first block and then one block every two minutes of recorded time, but
//! not before the differences since the last key point outweigh it, so key points never make up
//! much more than half of a file; a reader seeks by starting at the key point before the time
//! it wants.

use crate::error::RecordError;
use crate::layout::Layout;
use crate::wire::{
    BlockHeader, FLAG_KEY, FLAG_MACHINE, MAGIC, VERSION, put_i64, put_str, put_u64, tag,
};
use crate::{Affinity, Meta};
use irqpilot_core::{CpuSet, IrqNum, Machine, Snapshot};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// When blocks end and key points come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPolicy {
    /// Most samples in a block.
    pub max_samples: u32,
    /// Most recorded time a block spans, ns.
    pub max_span_ns: u64,
    /// Most uncompressed bytes in a block (a key point may exceed it alone).
    pub max_raw_bytes: usize,
    /// Least recorded time between key points, ns.
    pub key_every_ns: u64,
}

impl Default for BlockPolicy {
    fn default() -> Self {
        BlockPolicy {
            max_samples: 64,
            max_span_ns: 10_000_000_000,
            max_raw_bytes: 1 << 20,
            key_every_ns: 120_000_000_000,
        }
    }
}

/// What a writer has written so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Samples pushed.
    pub samples: u64,
    /// Key points written.
    pub keys: u64,
    /// Blocks written.
    pub blocks: u64,
    /// Bytes written, header included.
    pub bytes: u64,
    /// Uncompressed payload bytes.
    pub raw_bytes: u64,
}

#[derive(Debug, Default)]
struct Block {
    flags: u8,
    samples: u32,
    first_ns: u64,
    payload: Vec<u8>,
}

/// Appends samples to a recording (see the module documentation).
pub struct Writer<W: Write> {
    out: W,
    name: PathBuf,
    policy: BlockPolicy,
    compressor: zstd::bulk::Compressor<'static>,
    compressed: Vec<u8>,
    block: Block,
    layout: Option<Layout>,
    /// The previous sample's cells.
    last: Vec<u64>,
    rest: Vec<u64>,
    last_ns: u64,
    key_at_ns: u64,
    key_bytes: usize,
    bytes_since_key: usize,
    affinities: BTreeMap<IrqNum, Affinity>,
    stats: WriterStats,
}

impl<W: Write> std::fmt::Debug for Writer<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("name", &self.name)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// zstd level 1: the differences are already small, and a recorder must cost its sampler
/// little (on the generated 256-CPU server, level 3 made an hour 4% smaller, 10.75 MB
/// instead of 11.18 MB, for 8% more CPU per recorded sample).
const LEVEL: i32 = 1;

fn put_set(out: &mut Vec<u8>, s: Option<&CpuSet>) {
    match s {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            put_str(out, &s.to_string());
        }
    }
}

impl<W: Write> Writer<W> {
    /// Starts a recording on `out` (`name` is the file, for errors): the header with `meta`,
    /// then the machine's inventory.
    pub fn new(
        out: W,
        name: impl Into<PathBuf>,
        meta: &Meta,
        machine: &Machine,
    ) -> Result<Writer<W>, RecordError> {
        Writer::with_policy(out, name, meta, machine, BlockPolicy::default())
    }

    /// [`Writer::new`] with explicit block boundaries (tests, benchmarks).
    pub fn with_policy(
        out: W,
        name: impl Into<PathBuf>,
        meta: &Meta,
        machine: &Machine,
        policy: BlockPolicy,
    ) -> Result<Writer<W>, RecordError> {
        let name = name.into();
        let compressor = zstd::bulk::Compressor::new(LEVEL).map_err(|source| RecordError::Io {
            path: name.clone(),
            source,
        })?;
        let mut w = Writer {
            out,
            name,
            policy,
            compressor,
            compressed: Vec::new(),
            block: Block::default(),
            layout: None,
            last: Vec::new(),
            rest: Vec::new(),
            last_ns: 0,
            key_at_ns: 0,
            key_bytes: 0,
            bytes_since_key: 0,
            affinities: BTreeMap::new(),
            stats: WriterStats::default(),
        };
        let meta_json = serde_json::to_vec(meta).map_err(|e| w.format_error(e.to_string()))?;
        let mut head = Vec::with_capacity(16 + meta_json.len());
        head.extend_from_slice(&MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&(meta_json.len() as u32).to_le_bytes());
        head.extend_from_slice(&meta_json);
        w.write_all(&head)?;
        w.machine(machine)?;
        Ok(w)
    }

    fn format_error(&self, message: String) -> RecordError {
        RecordError::Format {
            path: self.name.clone(),
            offset: self.stats.bytes,
            message,
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), RecordError> {
        self.out
            .write_all(bytes)
            .map_err(|source| RecordError::Io {
                path: self.name.clone(),
                source,
            })?;
        self.stats.bytes += bytes.len() as u64;
        Ok(())
    }

    /// What has been written so far.
    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    /// Records a new inventory of the machine (after IRQs came or went): it ends the current
    /// block, and the next sample is a key point.
    pub fn machine(&mut self, machine: &Machine) -> Result<(), RecordError> {
        self.flush()?;
        let json = serde_json::to_vec(machine).map_err(|e| self.format_error(e.to_string()))?;
        self.block.flags = FLAG_MACHINE;
        self.block.payload.push(tag::MACHINE);
        put_u64(&mut self.block.payload, json.len() as u64);
        self.block.payload.extend_from_slice(&json);
        self.flush()?;
        self.affinities = Affinity::all(machine);
        self.layout = None;
        Ok(())
    }

    /// Records that an IRQ's affinity changed (read after the sample that showed it).
    pub fn affinity(
        &mut self,
        irq: IrqNum,
        requested: Option<&CpuSet>,
        effective: Option<&CpuSet>,
    ) -> Result<(), RecordError> {
        let a = Affinity {
            requested: requested.cloned(),
            effective: effective.cloned(),
        };
        if self.affinities.get(&irq) == Some(&a) {
            return Ok(());
        }
        let p = &mut self.block.payload;
        p.push(tag::AFFINITY);
        put_u64(p, u64::from(irq.0));
        put_set(p, requested);
        put_set(p, effective);
        self.affinities.insert(irq, a);
        Ok(())
    }

    /// Appends a sample.
    pub fn push(&mut self, snap: &Snapshot) -> Result<(), RecordError> {
        let t = snap.taken_at.0;
        let layout_ok = self.layout.as_ref().is_some_and(|l| l.matches(snap));
        let key_due = t.saturating_sub(self.key_at_ns) >= self.policy.key_every_ns
            && self.bytes_since_key >= self.key_bytes;
        if !layout_ok || key_due {
            self.flush()?;
            self.start_key(snap);
        }
        let key = self.block.flags & FLAG_KEY != 0 && self.block.samples == 0;
        if self.block.samples == 0 {
            self.block.first_ns = t;
            self.last_ns = t;
        }
        let before = self.block.payload.len();
        let p = &mut self.block.payload;
        p.push(if key { tag::KEY } else { tag::DELTA });
        put_i64(p, t.wrapping_sub(self.last_ns) as i64);
        self.last_ns = t;
        if key {
            self.last.clear();
            let cells = self.layout.as_ref().map_or(0, Layout::cells);
            self.last.resize(cells, 0);
        }
        let layout = self.layout.as_ref();
        let ni = layout.map_or(0, Layout::interrupt_cells);
        let mut next = 0usize;
        let split = ni.min(self.last.len());
        let (head, tail) = self.last.split_at_mut(split);
        diff(snap.interrupts.all_counts(), head, 0, &mut next, p);
        if let Some(l) = layout {
            l.gather_rest(snap, &mut self.rest);
        }
        diff(&self.rest, tail, ni, &mut next, p);
        // End of the sample's cells.
        p.push(0);
        let used = self.block.payload.len() - before;
        if key {
            self.key_bytes = used;
            self.bytes_since_key = 0;
        } else {
            self.bytes_since_key += used;
        }
        self.block.samples += 1;
        self.stats.samples += 1;
        let b = &self.block;
        if b.samples >= self.policy.max_samples
            || t.saturating_sub(b.first_ns) >= self.policy.max_span_ns
            || b.payload.len() >= self.policy.max_raw_bytes
        {
            self.flush()?;
        }
        Ok(())
    }

    fn start_key(&mut self, snap: &Snapshot) {
        let layout = Layout::of(snap);
        let p = &mut self.block.payload;
        self.block.flags |= FLAG_KEY;
        p.push(tag::LAYOUT);
        layout.encode(p);
        p.push(tag::AFFINITIES);
        put_u64(p, self.affinities.len() as u64);
        for (irq, a) in &self.affinities {
            put_u64(p, u64::from(irq.0));
            put_set(p, a.requested.as_ref());
            put_set(p, a.effective.as_ref());
        }
        self.layout = Some(layout);
        self.key_at_ns = snap.taken_at.0;
        self.stats.keys += 1;
    }

    /// Compresses and writes the block in progress, if it holds anything, and flushes the
    /// output.
    pub fn flush(&mut self) -> Result<(), RecordError> {
        if self.block.payload.is_empty() {
            return Ok(());
        }
        let raw = self.block.payload.len();
        self.compressed.clear();
        self.compressed
            .reserve(zstd::zstd_safe::compress_bound(raw));
        self.compressor
            .include_checksum(true)
            .and_then(|()| {
                self.compressor
                    .compress_to_buffer(&self.block.payload, &mut self.compressed)
            })
            .map_err(|source| RecordError::Io {
                path: self.name.clone(),
                source,
            })?;
        let header = BlockHeader {
            flags: self.block.flags,
            compressed_len: u32::try_from(self.compressed.len())
                .map_err(|_| self.format_error("block over 4 GiB".into()))?,
            raw_len: u32::try_from(raw)
                .map_err(|_| self.format_error("block over 4 GiB".into()))?,
            samples: self.block.samples,
            first_ns: self.block.first_ns,
        };
        let compressed = std::mem::take(&mut self.compressed);
        let written = self
            .write_all(&header.encode())
            .and_then(|()| self.write_all(&compressed));
        self.compressed = compressed;
        written?;
        self.out.flush().map_err(|source| RecordError::Io {
            path: self.name.clone(),
            source,
        })?;
        self.stats.blocks += 1;
        self.stats.raw_bytes += raw as u64;
        self.block.payload.clear();
        self.block.flags = 0;
        self.block.samples = 0;
        self.block.first_ns = 0;
        Ok(())
    }

    /// Writes what is pending and returns the output.
    pub fn finish(mut self) -> Result<W, RecordError> {
        self.flush()?;
        Ok(self.out)
    }
}

/// Appends the cells of `cur` that differ from `last` as (gap + 1, difference) pairs, and
/// updates `last`. `base` is the index of `cur[0]` among the sample's cells; `next` the index
/// after the last cell written. Equal runs are skipped 16 cells at a time.
#[inline]
fn diff(cur: &[u64], last: &mut [u64], base: usize, next: &mut usize, out: &mut Vec<u8>) {
    const RUN: usize = 16;
    let n = cur.len().min(last.len());
    let mut i = 0;
    while i < n {
        let end = (i + RUN).min(n);
        // XOR-fold rather than a memcmp call: short runs, and it vectorises.
        let moved = cur[i..end]
            .iter()
            .zip(&last[i..end])
            .fold(0u64, |acc, (c, l)| acc | (c ^ l));
        if moved == 0 {
            i = end;
            continue;
        }
        for j in i..end {
            let (c, l) = (cur[j], last[j]);
            if c != l {
                let idx = base + j;
                put_u64(out, (idx - *next) as u64 + 1);
                put_i64(out, c.wrapping_sub(l) as i64);
                *next = idx + 1;
                last[j] = c;
            }
        }
        i = end;
    }
}
