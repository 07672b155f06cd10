//! The bytes of a recording: the file header, the block header, and the primitives records are
//! built from (LEB128 varints, zigzag signed deltas, length-prefixed strings). The layout is
//! specified in `docs/recording.md`; this module is its only implementation.

use crate::error::FormatError;

/// First 8 bytes of every recording. The high first byte keeps text tools from taking it for
/// text; the line ending catches transfers that rewrite newlines.
pub const MAGIC: [u8; 8] = *b"\x89IRQREC\n";

/// The format version this crate writes and reads.
pub const VERSION: u32 = 1;

/// Start of every block header.
pub const BLOCK_MAGIC: [u8; 4] = *b"IRQB";

/// Size of a block header: magic, flags, 3 reserved bytes, compressed length, uncompressed
/// length, sample count, time of the first sample.
pub const BLOCK_HEADER_LEN: usize = 4 + 1 + 3 + 4 + 4 + 4 + 8;

/// Block flag: the block begins with the state a reader needs to start there (layout,
/// affinities, a full sample).
pub const FLAG_KEY: u8 = 1;
/// Block flag: the block begins with the machine's inventory.
pub const FLAG_MACHINE: u8 = 2;

/// Record tags inside a block's decompressed payload.
pub mod tag {
    /// The machine's inventory, JSON.
    pub const MACHINE: u8 = 1;
    /// Which rows and columns the cells of a sample are.
    pub const LAYOUT: u8 = 2;
    /// A sample whose cells are differences from the previous sample.
    pub const DELTA: u8 = 3;
    /// A sample whose cells are absolute (differences from zero): a reader may start here.
    pub const KEY: u8 = 4;
    /// One IRQ's affinity changed.
    pub const AFFINITY: u8 = 5;
    /// Every IRQ's affinity (at a key point).
    pub const AFFINITIES: u8 = 6;
}

/// The fixed header in front of each block's compressed payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// [`FLAG_KEY`], [`FLAG_MACHINE`].
    pub flags: u8,
    /// Bytes of the zstd frame that follows.
    pub compressed_len: u32,
    /// Bytes of the payload once decompressed.
    pub raw_len: u32,
    /// Samples in the block.
    pub samples: u32,
    /// Monotonic time of the block's first sample, ns (0 when it has none).
    pub first_ns: u64,
}

impl BlockHeader {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; BLOCK_HEADER_LEN] {
        let mut b = [0u8; BLOCK_HEADER_LEN];
        b[0..4].copy_from_slice(&BLOCK_MAGIC);
        b[4] = self.flags;
        b[8..12].copy_from_slice(&self.compressed_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.raw_len.to_le_bytes());
        b[16..20].copy_from_slice(&self.samples.to_le_bytes());
        b[20..28].copy_from_slice(&self.first_ns.to_le_bytes());
        b
    }

    /// Parses a header; `None` when the magic is wrong.
    pub fn decode(b: &[u8; BLOCK_HEADER_LEN]) -> Option<BlockHeader> {
        if b[0..4] != BLOCK_MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut t = [0u8; 8];
        t.copy_from_slice(&b[20..28]);
        Some(BlockHeader {
            flags: b[4],
            compressed_len: u32_at(8),
            raw_len: u32_at(12),
            samples: u32_at(16),
            first_ns: u64::from_le_bytes(t),
        })
    }
}

/// Appends `v` as an unsigned LEB128 varint.
#[inline]
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a signed value zigzag-encoded (small magnitudes of either sign stay short).
#[inline]
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_u64(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Appends a length-prefixed UTF-8 string.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A cursor over a decompressed payload. Every read names what it expected when the bytes end
/// or do not fit.
#[derive(Debug)]
pub struct Input<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Input<'a> {
        Input { buf, pos: 0 }
    }

    /// Offset of the next byte.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn err(&self, what: &str) -> FormatError {
        FormatError::new(format!("payload byte {}: {what}", self.pos))
    }

    /// One byte.
    pub fn u8(&mut self, what: &str) -> Result<u8, FormatError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| self.err(&format!("ends before {what}")))?;
        self.pos += 1;
        Ok(b)
    }

    /// An unsigned varint.
    #[inline]
    pub fn u64(&mut self, what: &str) -> Result<u64, FormatError> {
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.err(&format!("ends inside {what}")));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(self.err(&format!("{what}: varint longer than 64 bits")));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(self.err(&format!("{what}: varint longer than 64 bits")));
            }
        }
    }

    /// A zigzag-encoded signed varint.
    #[inline]
    pub fn i64(&mut self, what: &str) -> Result<i64, FormatError> {
        let u = self.u64(what)?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    /// A varint that must fit `usize` and be at most `max` (a count or length; the bound keeps
    /// a corrupt value from asking for gigabytes).
    pub fn len(&mut self, what: &str, max: usize) -> Result<usize, FormatError> {
        let v = self.u64(what)?;
        usize::try_from(v)
            .ok()
            .filter(|v| *v <= max)
            .ok_or_else(|| self.err(&format!("{what} {v} is larger than {max}")))
    }

    /// A varint that must fit `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, FormatError> {
        let v = self.u64(what)?;
        u32::try_from(v).map_err(|_| self.err(&format!("{what} {v} does not fit 32 bits")))
    }

    /// Raw bytes.
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], FormatError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| self.err(&format!("ends inside {what}")))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// A length-prefixed UTF-8 string.
    pub fn str(&mut self, what: &str) -> Result<&'a str, FormatError> {
        let n = self.len(what, self.buf.len())?;
        let b = self.bytes(n, what)?;
        std::str::from_utf8(b).map_err(|_| self.err(&format!("{what} is not UTF-8")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        let values = [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ];
        let mut out = Vec::new();
        for v in values {
            put_u64(&mut out, v);
        }
        for v in [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX] {
            put_i64(&mut out, v);
        }
        let mut inp = Input::new(&out);
        for v in values {
            assert_eq!(inp.u64("v").unwrap(), v);
        }
        for v in [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX] {
            assert_eq!(inp.i64("v").unwrap(), v);
        }
        assert!(inp.is_empty());
        assert!(
            inp.u64("more")
                .unwrap_err()
                .to_string()
                .contains("ends inside more")
        );
    }

    #[test]
    fn overlong_varint_is_an_error() {
        let bytes = [0xffu8; 11];
        assert!(Input::new(&bytes).u64("x").is_err());
        let mut out = Vec::new();
        put_u64(&mut out, 1 << 40);
        assert!(Input::new(&out).len("count", 1000).is_err());
    }

    #[test]
    fn block_header_round_trip() {
        let h = BlockHeader {
            flags: FLAG_KEY | FLAG_MACHINE,
            compressed_len: 12345,
            raw_len: 54321,
            samples: 7,
            first_ns: 1 << 50,
        };
        assert_eq!(BlockHeader::decode(&h.encode()), Some(h));
        let mut bad = h.encode();
        bad[0] = b'X';
        assert_eq!(BlockHeader::decode(&bad), None);
    }
}
