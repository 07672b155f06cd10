//! The ethtool ioctl's coalescing structures, encoded and decoded byte for byte.
//!
//! Layouts follow `include/uapi/linux/ethtool.h` as shipped with Linux 6.18 (the kernel this was
//! written on). Both structures are frozen ABI: `struct ethtool_coalesce` has had its 23 `__u32`
//! members since Linux 2.6 (netdev rejected growing it in 2020 because `ETHTOOL_GCOALESCE` carries
//! no length), and `struct ethtool_per_queue_op` dates from Linux 4.6 (commit ac2c7ad0e5d6,
//! "net/ethtool: introduce a new ioctl for per queue setting").
//!
//! ```text
//! struct ethtool_coalesce {            offset
//!     __u32 cmd;                           0   ETHTOOL_GCOALESCE (0x0e) / ETHTOOL_SCOALESCE (0x0f)
//!     __u32 rx_coalesce_usecs;             4   rx-usecs
//!     __u32 rx_max_coalesced_frames;       8   rx-frames
//!     __u32 rx_coalesce_usecs_irq;        12   rx-usecs-irq
//!     __u32 rx_max_coalesced_frames_irq;  16   rx-frames-irq
//!     __u32 tx_coalesce_usecs;            20   tx-usecs
//!     __u32 tx_max_coalesced_frames;      24   tx-frames
//!     __u32 tx_coalesce_usecs_irq;        28   tx-usecs-irq
//!     __u32 tx_max_coalesced_frames_irq;  32   tx-frames-irq
//!     __u32 stats_block_coalesce_usecs;   36   stats-block-usecs
//!     __u32 use_adaptive_rx_coalesce;     40   adaptive-rx
//!     __u32 use_adaptive_tx_coalesce;     44   adaptive-tx
//!     __u32 pkt_rate_low;                 48   pkt-rate-low
//!     __u32 rx_coalesce_usecs_low;        52   rx-usecs-low
//!     __u32 rx_max_coalesced_frames_low;  56   rx-frames-low
//!     __u32 tx_coalesce_usecs_low;        60   tx-usecs-low
//!     __u32 tx_max_coalesced_frames_low;  64   tx-frames-low
//!     __u32 pkt_rate_high;                68   pkt-rate-high
//!     __u32 rx_coalesce_usecs_high;       72   rx-usecs-high
//!     __u32 rx_max_coalesced_frames_high; 76   rx-frames-high
//!     __u32 tx_coalesce_usecs_high;       80   tx-usecs-high
//!     __u32 tx_max_coalesced_frames_high; 84   tx-frames-high
//!     __u32 rate_sample_interval;         88   sample-interval
//! };                                      92 bytes, 4-aligned
//!
//! struct ethtool_per_queue_op {
//!     __u32 cmd;                           0   ETHTOOL_PERQUEUE (0x4b)
//!     __u32 sub_command;                   4   ETHTOOL_GCOALESCE / ETHTOOL_SCOALESCE
//!     __u32 queue_mask[4096 / 32];         8   bit q of word q/32 selects queue q
//!     char  data[];                      520   one struct ethtool_coalesce per set bit,
//! };                                           lowest queue first
//! ```
//!
//! Byte order: the kernel moves these structures with `copy_{from,to}_user`, so every `__u32` is
//! in the host's native byte order; the encoders use `to_ne_bytes`/`from_ne_bytes` (little-endian
//! on x86-64 and arm64, where the tests pin exact bytes).

use irqpilot_core::CoalesceParams;

/// `SIOCETHTOOL` (`include/uapi/linux/sockios.h`): the ethtool ioctl on any socket.
pub const SIOCETHTOOL: u32 = 0x8946;
/// `ETHTOOL_GCOALESCE`: get coalescing parameters.
pub const ETHTOOL_GCOALESCE: u32 = 0x0000_000e;
/// `ETHTOOL_SCOALESCE`: set coalescing parameters.
pub const ETHTOOL_SCOALESCE: u32 = 0x0000_000f;
/// `ETHTOOL_PERQUEUE`: apply a sub-command to the queues in a mask.
pub const ETHTOOL_PERQUEUE: u32 = 0x0000_004b;
/// `MAX_NUM_QUEUE`: queues a per-queue mask can name.
pub const MAX_NUM_QUEUE: u32 = 4096;
/// `IFNAMSIZ`: interface name buffer, NUL included.
pub const IFNAMSIZ: usize = 16;
/// `sizeof(struct ethtool_coalesce)`.
pub const COALESCE_LEN: usize = 92;
/// Words of `queue_mask` (`__KERNEL_DIV_ROUND_UP(MAX_NUM_QUEUE, 32)`).
pub const QUEUE_MASK_WORDS: usize = (MAX_NUM_QUEUE as usize).div_ceil(32);
/// `offsetof(struct ethtool_per_queue_op, data)`.
pub const PER_QUEUE_HEADER_LEN: usize = 8 + 4 * QUEUE_MASK_WORDS;

/// Why bytes are not a well-formed ethtool structure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The buffer is shorter than the structure.
    #[error("{what}: {len} bytes, need {need}")]
    Short {
        /// Which structure.
        what: &'static str,
        /// Bytes given.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A queue index the per-queue mask cannot hold.
    #[error("queue {0} is beyond MAX_NUM_QUEUE ({MAX_NUM_QUEUE})")]
    QueueOutOfRange(u32),
}

/// `struct ethtool_coalesce` without its `cmd` word (which the encoder takes separately).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)] // Field names are the kernel's; see the table in the module docs.
pub struct EthtoolCoalesce {
    pub rx_coalesce_usecs: u32,
    pub rx_max_coalesced_frames: u32,
    pub rx_coalesce_usecs_irq: u32,
    pub rx_max_coalesced_frames_irq: u32,
    pub tx_coalesce_usecs: u32,
    pub tx_max_coalesced_frames: u32,
    pub tx_coalesce_usecs_irq: u32,
    pub tx_max_coalesced_frames_irq: u32,
    pub stats_block_coalesce_usecs: u32,
    pub use_adaptive_rx_coalesce: u32,
    pub use_adaptive_tx_coalesce: u32,
    pub pkt_rate_low: u32,
    pub rx_coalesce_usecs_low: u32,
    pub rx_max_coalesced_frames_low: u32,
    pub tx_coalesce_usecs_low: u32,
    pub tx_max_coalesced_frames_low: u32,
    pub pkt_rate_high: u32,
    pub rx_coalesce_usecs_high: u32,
    pub rx_max_coalesced_frames_high: u32,
    pub tx_coalesce_usecs_high: u32,
    pub tx_max_coalesced_frames_high: u32,
    pub rate_sample_interval: u32,
}

fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_ne_bytes(w)
}

fn need(what: &'static str, bytes: &[u8], need: usize) -> Result<(), WireError> {
    if bytes.len() < need {
        return Err(WireError::Short {
            what,
            len: bytes.len(),
            need,
        });
    }
    Ok(())
}

impl EthtoolCoalesce {
    /// The 22 members after `cmd`, in declaration order.
    pub fn words(&self) -> [u32; 22] {
        [
            self.rx_coalesce_usecs,
            self.rx_max_coalesced_frames,
            self.rx_coalesce_usecs_irq,
            self.rx_max_coalesced_frames_irq,
            self.tx_coalesce_usecs,
            self.tx_max_coalesced_frames,
            self.tx_coalesce_usecs_irq,
            self.tx_max_coalesced_frames_irq,
            self.stats_block_coalesce_usecs,
            self.use_adaptive_rx_coalesce,
            self.use_adaptive_tx_coalesce,
            self.pkt_rate_low,
            self.rx_coalesce_usecs_low,
            self.rx_max_coalesced_frames_low,
            self.tx_coalesce_usecs_low,
            self.tx_max_coalesced_frames_low,
            self.pkt_rate_high,
            self.rx_coalesce_usecs_high,
            self.rx_max_coalesced_frames_high,
            self.tx_coalesce_usecs_high,
            self.tx_max_coalesced_frames_high,
            self.rate_sample_interval,
        ]
    }

    /// The structure from its 22 members after `cmd`, in declaration order.
    pub fn from_words(w: [u32; 22]) -> EthtoolCoalesce {
        EthtoolCoalesce {
            rx_coalesce_usecs: w[0],
            rx_max_coalesced_frames: w[1],
            rx_coalesce_usecs_irq: w[2],
            rx_max_coalesced_frames_irq: w[3],
            tx_coalesce_usecs: w[4],
            tx_max_coalesced_frames: w[5],
            tx_coalesce_usecs_irq: w[6],
            tx_max_coalesced_frames_irq: w[7],
            stats_block_coalesce_usecs: w[8],
            use_adaptive_rx_coalesce: w[9],
            use_adaptive_tx_coalesce: w[10],
            pkt_rate_low: w[11],
            rx_coalesce_usecs_low: w[12],
            rx_max_coalesced_frames_low: w[13],
            tx_coalesce_usecs_low: w[14],
            tx_max_coalesced_frames_low: w[15],
            pkt_rate_high: w[16],
            rx_coalesce_usecs_high: w[17],
            rx_max_coalesced_frames_high: w[18],
            tx_coalesce_usecs_high: w[19],
            tx_max_coalesced_frames_high: w[20],
            rate_sample_interval: w[21],
        }
    }

    /// Writes the structure with `cmd` into `out[..92]`.
    pub fn encode_into(&self, cmd: u32, out: &mut [u8]) -> Result<(), WireError> {
        need("struct ethtool_coalesce", out, COALESCE_LEN)?;
        out[0..4].copy_from_slice(&cmd.to_ne_bytes());
        for (i, w) in self.words().iter().enumerate() {
            let at = 4 + 4 * i;
            out[at..at + 4].copy_from_slice(&w.to_ne_bytes());
        }
        Ok(())
    }

    /// The 92 bytes of the structure with `cmd`.
    pub fn encode(&self, cmd: u32) -> [u8; COALESCE_LEN] {
        let mut out = [0u8; COALESCE_LEN];
        // Cannot fail: the array is exactly the structure's size.
        let _ = self.encode_into(cmd, &mut out);
        out
    }

    /// Reads `(cmd, structure)` from the first 92 bytes.
    pub fn decode(bytes: &[u8]) -> Result<(u32, EthtoolCoalesce), WireError> {
        need("struct ethtool_coalesce", bytes, COALESCE_LEN)?;
        let mut w = [0u32; 22];
        for (i, slot) in w.iter_mut().enumerate() {
            *slot = read_u32(bytes, 4 + 4 * i);
        }
        Ok((read_u32(bytes, 0), EthtoolCoalesce::from_words(w)))
    }

    /// Whether every field `p` names already has the asked value.
    pub fn satisfies(&self, p: &CoalesceParams) -> bool {
        self.project(p) == *p
    }

    /// The current values of exactly the fields `p` names (the "old" side of a change).
    pub fn project(&self, p: &CoalesceParams) -> CoalesceParams {
        CoalesceParams {
            rx_usecs: p.rx_usecs.map(|_| self.rx_coalesce_usecs),
            rx_max_frames: p.rx_max_frames.map(|_| self.rx_max_coalesced_frames),
            tx_usecs: p.tx_usecs.map(|_| self.tx_coalesce_usecs),
            tx_max_frames: p.tx_max_frames.map(|_| self.tx_max_coalesced_frames),
            use_adaptive_rx: p
                .use_adaptive_rx
                .map(|_| self.use_adaptive_rx_coalesce != 0),
            use_adaptive_tx: p
                .use_adaptive_tx
                .map(|_| self.use_adaptive_tx_coalesce != 0),
        }
    }

    /// This structure with the fields `p` names replaced (read-modify-write: the rest is kept).
    pub fn with(&self, p: &CoalesceParams) -> EthtoolCoalesce {
        let mut c = *self;
        if let Some(v) = p.rx_usecs {
            c.rx_coalesce_usecs = v;
        }
        if let Some(v) = p.rx_max_frames {
            c.rx_max_coalesced_frames = v;
        }
        if let Some(v) = p.tx_usecs {
            c.tx_coalesce_usecs = v;
        }
        if let Some(v) = p.tx_max_frames {
            c.tx_max_coalesced_frames = v;
        }
        if let Some(v) = p.use_adaptive_rx {
            c.use_adaptive_rx_coalesce = u32::from(v);
        }
        if let Some(v) = p.use_adaptive_tx {
            c.use_adaptive_tx_coalesce = u32::from(v);
        }
        c
    }
}

/// `queue_mask` of `struct ethtool_per_queue_op`.
#[derive(Clone, PartialEq, Eq)]
pub struct QueueMask([u32; QUEUE_MASK_WORDS]);

impl Default for QueueMask {
    fn default() -> Self {
        QueueMask([0; QUEUE_MASK_WORDS])
    }
}

impl std::fmt::Debug for QueueMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.queues()).finish()
    }
}

impl QueueMask {
    /// A mask selecting `queues`.
    pub fn of(queues: &[u32]) -> Result<QueueMask, WireError> {
        let mut m = QueueMask::default();
        for &q in queues {
            m.set(q)?;
        }
        Ok(m)
    }

    /// Selects queue `q` (bit `q % 32` of word `q / 32`, as the kernel's `for_each_set_bit`).
    pub fn set(&mut self, q: u32) -> Result<(), WireError> {
        if q >= MAX_NUM_QUEUE {
            return Err(WireError::QueueOutOfRange(q));
        }
        self.0[(q / 32) as usize] |= 1 << (q % 32);
        Ok(())
    }

    /// Selected queues, lowest first (the order of the entries in `data`).
    pub fn queues(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for (i, w) in self.0.iter().enumerate() {
            for b in 0..32 {
                if w & (1 << b) != 0 {
                    out.push(i as u32 * 32 + b);
                }
            }
        }
        out
    }

    /// Number of selected queues (`bitmap_weight`).
    pub fn count(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The mask's words.
    pub fn words(&self) -> &[u32; QUEUE_MASK_WORDS] {
        &self.0
    }
}

/// A decoded `struct ethtool_per_queue_op` carrying coalescing entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerQueueCoalesce {
    /// `ETHTOOL_GCOALESCE` or `ETHTOOL_SCOALESCE`.
    pub sub_command: u32,
    /// Selected queues.
    pub mask: QueueMask,
    /// One entry per selected queue, lowest queue first.
    pub entries: Vec<EthtoolCoalesce>,
}

impl PerQueueCoalesce {
    /// Buffer length for a request selecting `queues` queues.
    pub fn len_for(queues: usize) -> usize {
        PER_QUEUE_HEADER_LEN + queues * COALESCE_LEN
    }

    /// Encodes the request. `entries` are written in mask order (each with `cmd` =
    /// `sub_command`); for a get, pass default entries: the kernel overwrites them. An entry list
    /// shorter than the mask is padded with zeroed structures.
    pub fn encode(&self) -> Vec<u8> {
        let n = self.mask.count();
        let mut out = vec![0u8; Self::len_for(n)];
        out[0..4].copy_from_slice(&ETHTOOL_PERQUEUE.to_ne_bytes());
        out[4..8].copy_from_slice(&self.sub_command.to_ne_bytes());
        for (i, w) in self.mask.words().iter().enumerate() {
            let at = 8 + 4 * i;
            out[at..at + 4].copy_from_slice(&w.to_ne_bytes());
        }
        for i in 0..n {
            let at = PER_QUEUE_HEADER_LEN + i * COALESCE_LEN;
            let entry = self.entries.get(i).copied().unwrap_or_default();
            // Cannot fail: `out` was sized for `n` entries.
            let _ = entry.encode_into(self.sub_command, &mut out[at..at + COALESCE_LEN]);
        }
        out
    }

    /// Decodes a buffer (after the kernel filled it for a get). Returns the `cmd` word too.
    pub fn decode(bytes: &[u8]) -> Result<(u32, PerQueueCoalesce), WireError> {
        need("struct ethtool_per_queue_op", bytes, PER_QUEUE_HEADER_LEN)?;
        let cmd = read_u32(bytes, 0);
        let sub_command = read_u32(bytes, 4);
        let mut words = [0u32; QUEUE_MASK_WORDS];
        for (i, w) in words.iter_mut().enumerate() {
            *w = read_u32(bytes, 8 + 4 * i);
        }
        let mask = QueueMask(words);
        let n = mask.count();
        need("struct ethtool_per_queue_op data", bytes, Self::len_for(n))?;
        let mut entries = Vec::with_capacity(n);
        for i in 0..n {
            let at = PER_QUEUE_HEADER_LEN + i * COALESCE_LEN;
            entries.push(EthtoolCoalesce::decode(&bytes[at..])?.1);
        }
        Ok((
            cmd,
            PerQueueCoalesce {
                sub_command,
                mask,
                entries,
            },
        ))
    }
}

#[cfg(test)]
mod tests;
