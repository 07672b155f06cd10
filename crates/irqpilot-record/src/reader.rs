//! [`Recording`] (a file's header and block index) and [`Player`] (samples decoded in order,
//! with seeking). Opening reads only the block headers; a recording whose recorder was killed
//! mid-block ends at its last whole block, and the cut is reported in
//! [`Recording::damage`] rather than failing the whole file.

use crate::error::{FormatError, RecordError};
use crate::layout::Layout;
use crate::wire::{
    BLOCK_HEADER_LEN, BlockHeader, FLAG_KEY, FLAG_MACHINE, Input, MAGIC, VERSION, tag,
};
use crate::{Affinity, AffinityChange, Meta};
use irqpilot_core::{CpuSet, Irq, IrqNum, Machine, MonoNs, Snapshot};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Largest header and block payload accepted (a corrupt length stops here).
const MAX_META: u32 = 16 << 20;
const MAX_RAW: u32 = 1 << 30;

/// Where a block is and what its header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Offset of the block header in the file.
    pub offset: u64,
    /// The header.
    pub header: BlockHeader,
}

/// An opened recording: its header and the index of its blocks.
#[derive(Debug, Clone)]
pub struct Recording {
    path: PathBuf,
    meta: Meta,
    blocks: Vec<BlockInfo>,
    damage: Option<String>,
    samples: u64,
    span: Option<(u64, u64)>,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads as much of `buf` as the file has; returns the bytes read.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl Recording {
    /// Opens a recording and indexes its blocks.
    pub fn open(path: impl AsRef<Path>) -> Result<Recording, RecordError> {
        let path = path.as_ref().to_path_buf();
        let mut f = File::open(&path).map_err(io(&path))?;
        let len = f.metadata().map_err(io(&path))?.len();
        let mut head = [0u8; 16];
        let n = read_full(&mut f, &mut head).map_err(io(&path))?;
        if n < 8 || head[..8] != MAGIC {
            return Err(RecordError::NotARecording { path });
        }
        let bad = |offset: u64, message: &str| RecordError::Format {
            path: path.clone(),
            offset,
            message: message.to_string(),
        };
        if n < 16 {
            return Err(bad(8, "the header is cut short"));
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if version != VERSION {
            return Err(RecordError::Version {
                path,
                found: version,
                supported: VERSION,
            });
        }
        let meta_len = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
        if meta_len > MAX_META || 16 + u64::from(meta_len) > len {
            return Err(bad(12, "the header's length is beyond the file"));
        }
        let mut meta_bytes = vec![0u8; meta_len as usize];
        f.read_exact(&mut meta_bytes).map_err(io(&path))?;
        let meta: Meta = serde_json::from_slice(&meta_bytes)
            .map_err(|e| bad(16, &format!("header metadata: {e}")))?;
        let mut blocks = Vec::new();
        let mut damage = None;
        let mut offset = 16 + u64::from(meta_len);
        while offset < len {
            let mut h = [0u8; BLOCK_HEADER_LEN];
            f.seek(SeekFrom::Start(offset)).map_err(io(&path))?;
            let got = read_full(&mut f, &mut h).map_err(io(&path))?;
            if got < BLOCK_HEADER_LEN {
                damage = Some(format!(
                    "byte {offset}: the last block header is cut short (the recorder stopped while writing it)"
                ));
                break;
            }
            let Some(header) = BlockHeader::decode(&h) else {
                damage = Some(format!(
                    "byte {offset}: no block marker; the rest of the file ({} bytes) is ignored",
                    len - offset
                ));
                break;
            };
            let end = offset + BLOCK_HEADER_LEN as u64 + u64::from(header.compressed_len);
            if end > len {
                damage = Some(format!(
                    "byte {offset}: the last block is cut short ({} of {} bytes; the recorder stopped while writing it)",
                    len - offset - BLOCK_HEADER_LEN as u64,
                    header.compressed_len
                ));
                break;
            }
            if header.raw_len > MAX_RAW {
                damage = Some(format!(
                    "byte {offset}: a block claims {} bytes uncompressed; the rest is ignored",
                    header.raw_len
                ));
                break;
            }
            blocks.push(BlockInfo { offset, header });
            offset = end;
        }
        let samples = blocks.iter().map(|b| u64::from(b.header.samples)).sum();
        let mut rec = Recording {
            path,
            meta,
            blocks,
            damage,
            samples,
            span: None,
        };
        // A damaged last block is dropped like a cut one: the rest of the file still reads.
        loop {
            match rec.find_span() {
                Ok(span) => {
                    rec.span = span;
                    break;
                }
                Err(e) => {
                    let Some(i) = rec.blocks.iter().rposition(|b| b.header.samples > 0) else {
                        return Err(e);
                    };
                    rec.damage = Some(format!("{e}; the file is read up to that block"));
                    rec.blocks.truncate(i);
                    rec.samples = rec.blocks.iter().map(|b| u64::from(b.header.samples)).sum();
                }
            }
        }
        Ok(rec)
    }

    /// First and last sample times: the first from the index, the last by reading the last
    /// block that holds samples.
    fn find_span(&self) -> Result<Option<(u64, u64)>, RecordError> {
        let with_samples = |b: &&BlockInfo| b.header.samples > 0;
        let (Some(first), Some(last)) = (
            self.blocks.iter().find(with_samples),
            self.blocks.iter().rev().find(with_samples),
        ) else {
            return Ok(None);
        };
        let mut p = self.player_bare()?;
        let payload = p.load(last)?;
        let mut inp = Input::new(&payload);
        let mut t = last.header.first_ns;
        while !inp.is_empty() {
            let offset = inp.pos();
            if let Some(dt) = skip_record(&mut inp).map_err(|e| p.format(last, offset, e))? {
                t = t.wrapping_add(dt as u64);
            }
        }
        Ok(Some((first.header.first_ns, t)))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the recorder said about itself.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The blocks, in file order.
    pub fn blocks(&self) -> &[BlockInfo] {
        &self.blocks
    }

    /// Samples in the whole recording.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Monotonic times of the first and last samples, ns.
    pub fn span_ns(&self) -> Option<(u64, u64)> {
        self.span
    }

    /// Why the end of the file was not read, when it was not.
    pub fn damage(&self) -> Option<&str> {
        self.damage.as_deref()
    }

    fn player_bare(&self) -> Result<Player, RecordError> {
        let file = File::open(&self.path).map_err(io(&self.path))?;
        let decompressor = zstd::bulk::Decompressor::new().map_err(io(&self.path))?;
        Ok(Player {
            decompressor,
            path: self.path.clone(),
            file,
            blocks: self.blocks.clone(),
            next_block: 0,
            payload: Vec::new(),
            compressed: Vec::new(),
            pos: 0,
            block: None,
            last_ns: 0,
            layout: None,
            rest: Vec::new(),
            snapshot: Snapshot::default(),
            has_sample: false,
            machine: Machine::default(),
            changes: Vec::new(),
            samples_read: 0,
        })
    }

    /// A player at the start of the recording.
    pub fn player(&self) -> Result<Player, RecordError> {
        let mut p = self.player_bare()?;
        p.rewind()?;
        Ok(p)
    }
}

/// Skips one record; returns the time step when it was a sample.
fn skip_record(inp: &mut Input<'_>) -> Result<Option<i64>, FormatError> {
    match inp.u8("record tag")? {
        tag::MACHINE => {
            let n = inp.len("machine length", MAX_RAW as usize)?;
            inp.bytes(n, "machine")?;
            Ok(None)
        }
        tag::LAYOUT => Layout::decode(inp).map(|_| None),
        tag::KEY | tag::DELTA => {
            let dt = inp.i64("sample time")?;
            while inp.u64("cell gap")? != 0 {
                inp.i64("cell difference")?;
            }
            Ok(Some(dt))
        }
        tag::AFFINITY => {
            inp.u32("IRQ")?;
            get_set(inp)?;
            get_set(inp)?;
            Ok(None)
        }
        tag::AFFINITIES => {
            let n = inp.len("affinity count", 1 << 24)?;
            for _ in 0..n {
                inp.u32("IRQ")?;
                get_set(inp)?;
                get_set(inp)?;
            }
            Ok(None)
        }
        t => Err(FormatError::new(format!("unknown record tag {t}"))),
    }
}

fn get_set(inp: &mut Input<'_>) -> Result<Option<CpuSet>, FormatError> {
    match inp.u8("cpulist flag")? {
        0 => Ok(None),
        _ => {
            let s = inp.str("cpulist")?;
            CpuSet::parse_list(s)
                .map(Some)
                .map_err(|e| FormatError::new(format!("cpulist {s:?}: {e}")))
        }
    }
}

/// Decodes a recording's samples in order into one [`Snapshot`], keeping the machine's
/// inventory (with the affinity changes recorded so far) beside it.
pub struct Player {
    decompressor: zstd::bulk::Decompressor<'static>,
    path: PathBuf,
    file: File,
    blocks: Vec<BlockInfo>,
    next_block: usize,
    payload: Vec<u8>,
    compressed: Vec<u8>,
    pos: usize,
    block: Option<BlockInfo>,
    last_ns: u64,
    layout: Option<Layout>,
    /// Cells after the interrupt counts (those live in the snapshot itself).
    rest: Vec<u64>,
    snapshot: Snapshot,
    has_sample: bool,
    machine: Machine,
    changes: Vec<AffinityChange>,
    samples_read: u64,
}

impl std::fmt::Debug for Player {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Player")
            .field("path", &self.path)
            .field("next_block", &self.next_block)
            .field("samples_read", &self.samples_read)
            .finish_non_exhaustive()
    }
}

impl Player {
    fn format(&self, b: &BlockInfo, at: usize, e: FormatError) -> RecordError {
        RecordError::Format {
            path: self.path.clone(),
            offset: b.offset,
            message: format!("block at byte {}: {e} (payload byte {at})", b.offset),
        }
    }

    /// Reads and decompresses one block's payload.
    fn load(&mut self, b: &BlockInfo) -> Result<Vec<u8>, RecordError> {
        let path = self.path.clone();
        self.file
            .seek(SeekFrom::Start(b.offset + BLOCK_HEADER_LEN as u64))
            .map_err(io(&path))?;
        self.compressed.resize(b.header.compressed_len as usize, 0);
        self.file
            .read_exact(&mut self.compressed)
            .map_err(io(&path))?;
        let mut out = std::mem::take(&mut self.payload);
        out.clear();
        out.reserve(b.header.raw_len as usize);
        let got = self
            .decompressor
            .decompress_to_buffer(&self.compressed, &mut out);
        match got {
            Ok(n) if n == b.header.raw_len as usize => Ok(out),
            Ok(n) => Err(self.format(
                b,
                0,
                FormatError::new(format!(
                    "decompressed to {n} bytes, the header says {}",
                    b.header.raw_len
                )),
            )),
            Err(e) => Err(self.format(
                b,
                0,
                FormatError::new(format!("damaged compressed data: {e}")),
            )),
        }
    }

    /// Back to the first sample (nothing decoded yet).
    pub fn rewind(&mut self) -> Result<(), RecordError> {
        self.next_block = 0;
        self.block = None;
        self.payload.clear();
        self.pos = 0;
        self.layout = None;
        self.has_sample = false;
        self.machine = Machine::default();
        self.changes.clear();
        self.samples_read = 0;
        Ok(())
    }

    /// The machine's inventory as of the current sample (affinity changes applied).
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The current sample (empty before the first [`Player::next_sample`]).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Affinity changes recorded between the previous sample and the current one.
    pub fn changes(&self) -> &[AffinityChange] {
        &self.changes
    }

    /// Samples decoded since the start or the last seek.
    pub fn samples_read(&self) -> u64 {
        self.samples_read
    }

    /// Time of the current sample, ns (`None` before the first).
    pub fn time_ns(&self) -> Option<u64> {
        self.has_sample.then_some(self.snapshot.taken_at.0)
    }

    /// Loads the next block; false at the end.
    fn next_block(&mut self) -> Result<bool, RecordError> {
        let Some(b) = self.blocks.get(self.next_block).copied() else {
            return Ok(false);
        };
        self.next_block += 1;
        self.payload = self.load(&b)?;
        self.pos = 0;
        self.last_ns = b.header.first_ns;
        self.block = Some(b);
        Ok(true)
    }

    /// Time of the next sample, without reading it (`None` at the end).
    pub fn peek_time(&self) -> Result<Option<u64>, RecordError> {
        if let Some(b) = &self.block {
            let mut inp = Input::new(&self.payload);
            inp.bytes(self.pos, "position")
                .map_err(|e| self.format(b, self.pos, e))?;
            while !inp.is_empty() {
                let at = inp.pos();
                if let Some(dt) = skip_record(&mut inp).map_err(|e| self.format(b, at, e))? {
                    return Ok(Some(self.last_ns.wrapping_add(dt as u64)));
                }
            }
        }
        Ok(self.blocks[self.next_block.min(self.blocks.len())..]
            .iter()
            .find(|b| b.header.samples > 0)
            .map(|b| b.header.first_ns))
    }

    /// Decodes the next sample into [`Player::snapshot`]; false at the end of the recording.
    pub fn next_sample(&mut self) -> Result<bool, RecordError> {
        self.changes.clear();
        loop {
            while self.pos >= self.payload.len() {
                if !self.next_block()? {
                    return Ok(false);
                }
            }
            let Some(b) = self.block else {
                return Ok(false);
            };
            let payload = std::mem::take(&mut self.payload);
            let mut inp = Input::new(&payload);
            let r = inp
                .bytes(self.pos, "position")
                .and_then(|_| self.record(&mut inp));
            let at = inp.pos();
            self.pos = at;
            self.payload = payload;
            match r {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(e) => return Err(self.format(&b, at, e)),
            }
        }
    }

    /// Applies one record; true when it was a sample.
    fn record(&mut self, inp: &mut Input<'_>) -> Result<bool, FormatError> {
        match inp.u8("record tag")? {
            tag::MACHINE => {
                let n = inp.len("machine length", MAX_RAW as usize)?;
                let json = inp.bytes(n, "machine")?;
                self.machine = serde_json::from_slice(json)
                    .map_err(|e| FormatError::new(format!("machine inventory: {e}")))?;
                Ok(false)
            }
            tag::LAYOUT => {
                let l = Layout::decode(inp)?;
                l.skeleton(&mut self.snapshot);
                self.rest.clear();
                self.rest.resize(l.cells() - l.interrupt_cells(), 0);
                self.layout = Some(l);
                Ok(false)
            }
            t @ (tag::KEY | tag::DELTA) => {
                let Some(layout) = &self.layout else {
                    return Err(FormatError::new("a sample before any layout"));
                };
                let dt = inp.i64("sample time")?;
                let ni = layout.interrupt_cells();
                let counts = self.snapshot.interrupts.all_counts_mut();
                if t == tag::KEY {
                    counts.fill(0);
                    self.rest.fill(0);
                }
                let mut next = 0usize;
                let mut rest_moved = t == tag::KEY;
                loop {
                    let gap = inp.u64("cell gap")?;
                    if gap == 0 {
                        break;
                    }
                    let d = inp.i64("cell difference")? as u64;
                    let idx = usize::try_from(gap - 1)
                        .ok()
                        .and_then(|g| next.checked_add(g))
                        .ok_or_else(|| FormatError::new("cell index overflows"))?;
                    next = idx + 1;
                    let cell = if idx < ni {
                        counts.get_mut(idx)
                    } else {
                        rest_moved = true;
                        self.rest.get_mut(idx - ni)
                    };
                    let Some(cell) = cell else {
                        return Err(FormatError::new(format!(
                            "cell {idx} is beyond the layout's {} cells",
                            ni + self.rest.len()
                        )));
                    };
                    *cell = cell.wrapping_add(d);
                }
                if rest_moved {
                    layout.scatter_rest(&self.rest, &mut self.snapshot);
                }
                self.last_ns = self.last_ns.wrapping_add(dt as u64);
                self.snapshot.taken_at = MonoNs(self.last_ns);
                self.has_sample = true;
                self.samples_read += 1;
                Ok(true)
            }
            tag::AFFINITY => {
                let irq = IrqNum(inp.u32("IRQ")?);
                let a = Affinity {
                    requested: get_set(inp)?,
                    effective: get_set(inp)?,
                };
                self.set_affinity(irq, &a);
                self.changes.push(AffinityChange {
                    at_ns: self.last_ns,
                    irq,
                    affinity: a,
                });
                Ok(false)
            }
            tag::AFFINITIES => {
                let n = inp.len("affinity count", 1 << 24)?;
                for _ in 0..n {
                    let irq = IrqNum(inp.u32("IRQ")?);
                    let a = Affinity {
                        requested: get_set(inp)?,
                        effective: get_set(inp)?,
                    };
                    self.set_affinity(irq, &a);
                }
                Ok(false)
            }
            t => Err(FormatError::new(format!("unknown record tag {t}"))),
        }
    }

    fn set_affinity(&mut self, irq: IrqNum, a: &Affinity) {
        let i = self
            .machine
            .irqs
            .entry(irq)
            .or_insert_with(|| Irq::new(irq));
        i.requested.clone_from(&a.requested);
        i.effective.clone_from(&a.effective);
    }

    /// Moves to the last sample at or before `t_ns` (the first sample when `t_ns` is earlier),
    /// decoding from the key point before it. Returns false when the recording has no sample.
    pub fn seek(&mut self, t_ns: u64) -> Result<bool, RecordError> {
        let keys = |b: &&BlockInfo| b.header.flags & FLAG_KEY != 0 && b.header.samples > 0;
        let key = self
            .blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| keys(b) && b.header.first_ns <= t_ns)
            .map(|(i, _)| i)
            .next_back()
            .or_else(|| self.blocks.iter().position(|b| keys(&b)));
        let Some(key) = key else {
            return Ok(false);
        };
        self.rewind()?;
        // The inventory in force at the key point.
        if let Some(m) = self.blocks[..key]
            .iter()
            .rposition(|b| b.header.flags & FLAG_MACHINE != 0)
        {
            self.next_block = m;
            self.next_block()?;
            while self.pos < self.payload.len() {
                let payload = std::mem::take(&mut self.payload);
                let mut inp = Input::new(&payload);
                let r = inp
                    .bytes(self.pos, "position")
                    .and_then(|_| self.record(&mut inp));
                self.pos = inp.pos();
                self.payload = payload;
                let b = self.blocks[m];
                r.map_err(|e| self.format(&b, self.pos, e))?;
            }
        }
        self.next_block = key;
        self.block = None;
        self.payload.clear();
        self.pos = 0;
        if !self.next_sample()? {
            return Ok(false);
        }
        while self.peek_time()?.is_some_and(|t| t <= t_ns) {
            self.next_sample()?;
        }
        self.changes.clear();
        Ok(true)
    }
}
