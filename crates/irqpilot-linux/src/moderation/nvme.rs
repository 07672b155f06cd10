//! NVMe interrupt coalescing through the admin passthrough ioctl: Get/Set Features 08h
//! (Interrupt Coalescing) and 09h (Interrupt Vector Configuration).
//!
//! ```text
//! NVME_IOCTL_ADMIN_CMD = _IOWR('N', 0x41, struct nvme_admin_cmd)      include/uapi/linux/nvme_ioctl.h
//!                      = 0xC0484E41 (asm-generic ioctl encoding: dir 3 << 30 | 72 << 16 | 'N' << 8 | 0x41)
//!
//! struct nvme_passthru_cmd {        offset         (struct nvme_admin_cmd is the same structure)
//!     __u8  opcode;                     0   0x09 Set Features, 0x0a Get Features
//!     __u8  flags;                      1
//!     __u16 rsvd1;                      2
//!     __u32 nsid;                       4
//!     __u32 cdw2, cdw3;                 8, 12
//!     __u64 metadata;                  16   user pointer (unused here: 0)
//!     __u64 addr;                      24   user pointer (unused here: 0)
//!     __u32 metadata_len, data_len;    32, 36
//!     __u32 cdw10 .. cdw15;            40 .. 60  CDW10: FID bits 7:0 (+ SEL bits 10:8 on get,
//!                                                SV bit 31 on set); CDW11: the feature value
//!     __u32 timeout_ms;                64   0 = the driver's default
//!     __u32 result;                    68   completion dword 0, written by the kernel
//! };                                   72 bytes, 8-aligned
//!
//! Feature 08h CDW11: bits 7:0 THR aggregation threshold, 0's based (entries - 1);
//!                    bits 15:8 TIME aggregation time in 100 us units (0 = no delay).
//!   `nvme set-feature /dev/nvme0 -f 0x08 -v 0x0A03` = TIME 10 (1 ms), THR 3 (4 entries).
//! Feature 09h CDW11: bits 15:0 IV interrupt vector; bit 16 CD coalescing disable.
//!   Get Features 09h takes the vector in CDW11 and answers IV and CD in dword 0.
//! ```
//!
//! Sources: the NVMe base specification's Set Features descriptions as reproduced by Microsoft's
//! `nvme.h` reference (`NVME_CDW11_FEATURE_INTERRUPT_COALESCING`,
//! `NVME_CDW11_FEATURE_INTERRUPT_VECTOR_CONFIG`) and nvme-cli's decoders; see
//! `shared/research/moderation.md` section 5.3. Settings are written without SV (not saved):
//! a controller reset returns them to the saved values, and `irqpilot revert` restores the old
//! ones explicitly. The ioctl needs `CAP_SYS_ADMIN`.

use super::errno_apply_error;
use irqpilot_core::ApplyError;
use std::io;

/// `sizeof(struct nvme_passthru_cmd)`.
pub const PASSTHRU_LEN: usize = 72;
/// Admin opcode Set Features.
pub const OPC_SET_FEATURES: u8 = 0x09;
/// Admin opcode Get Features.
pub const OPC_GET_FEATURES: u8 = 0x0a;
/// Feature identifier: Interrupt Coalescing.
pub const FID_IRQ_COALESCING: u8 = 0x08;
/// Feature identifier: Interrupt Vector Configuration.
pub const FID_IRQ_VECTOR_CONFIG: u8 = 0x09;

/// `_IOC(dir, type, nr, size)` in the asm-generic encoding (x86, arm64, riscv, s390, ...).
#[cfg(not(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc64"
)))]
const fn iowr(ty: u8, nr: u8, size: usize) -> u32 {
    (3 << 30) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32
}

/// `_IOC` on powerpc/mips/sparc: 13 size bits, `_IOC_READ` 2 and `_IOC_WRITE` 4 from bit 29.
#[cfg(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc64"
))]
const fn iowr(ty: u8, nr: u8, size: usize) -> u32 {
    (6 << 29) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32
}

/// `NVME_IOCTL_ADMIN_CMD`.
pub const NVME_IOCTL_ADMIN_CMD: u32 = iowr(b'N', 0x41, PASSTHRU_LEN);

/// `struct nvme_passthru_cmd`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)] // Field names are the kernel's; see the table in the module docs.
pub struct PassthruCmd {
    pub opcode: u8,
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub metadata: u64,
    pub addr: u64,
    pub metadata_len: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    pub timeout_ms: u32,
    pub result: u32,
}

impl PassthruCmd {
    /// Get Features `fid` (current value, SEL 000b) with `cdw11` (the vector, for 09h).
    pub fn get_features(fid: u8, cdw11: u32) -> PassthruCmd {
        PassthruCmd {
            opcode: OPC_GET_FEATURES,
            cdw10: u32::from(fid),
            cdw11,
            ..Default::default()
        }
    }

    /// Set Features `fid` to `cdw11`, not saved (SV clear).
    pub fn set_features(fid: u8, cdw11: u32) -> PassthruCmd {
        PassthruCmd {
            opcode: OPC_SET_FEATURES,
            cdw10: u32::from(fid),
            cdw11,
            ..Default::default()
        }
    }

    /// Whether the command carries a user buffer (data or metadata pointer or length).
    pub fn has_buffers(&self) -> bool {
        self.addr != 0 || self.metadata != 0 || self.data_len != 0 || self.metadata_len != 0
    }

    /// The 72 bytes, native byte order (the kernel copies the structure as it is in memory).
    pub fn encode(&self) -> [u8; PASSTHRU_LEN] {
        let mut b = [0u8; PASSTHRU_LEN];
        b[0] = self.opcode;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.rsvd1.to_ne_bytes());
        let words32 = [
            (4, self.nsid),
            (8, self.cdw2),
            (12, self.cdw3),
            (32, self.metadata_len),
            (36, self.data_len),
            (40, self.cdw10),
            (44, self.cdw11),
            (48, self.cdw12),
            (52, self.cdw13),
            (56, self.cdw14),
            (60, self.cdw15),
            (64, self.timeout_ms),
            (68, self.result),
        ];
        for (at, v) in words32 {
            b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        }
        b[16..24].copy_from_slice(&self.metadata.to_ne_bytes());
        b[24..32].copy_from_slice(&self.addr.to_ne_bytes());
        b
    }

    /// Decodes the 72 bytes.
    pub fn decode(b: &[u8; PASSTHRU_LEN]) -> PassthruCmd {
        let u32_at = |at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let u64_at = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_ne_bytes(w)
        };
        PassthruCmd {
            opcode: b[0],
            flags: b[1],
            rsvd1: u16::from_ne_bytes([b[2], b[3]]),
            nsid: u32_at(4),
            cdw2: u32_at(8),
            cdw3: u32_at(12),
            metadata: u64_at(16),
            addr: u64_at(24),
            metadata_len: u32_at(32),
            data_len: u32_at(36),
            cdw10: u32_at(40),
            cdw11: u32_at(44),
            cdw12: u32_at(48),
            cdw13: u32_at(52),
            cdw14: u32_at(56),
            cdw15: u32_at(60),
            timeout_ms: u32_at(64),
            result: u32_at(68),
        }
    }
}

/// Feature 08h: aggregation time and threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IrqCoalescing {
    /// Aggregation time, 100 us units (0 = no delay).
    pub time_100us: u8,
    /// Aggregation threshold in completion entries, 1-256 (the field is 0's based).
    pub threshold: u16,
}

impl IrqCoalescing {
    /// CDW11; `None` when the threshold is outside 1-256.
    pub fn cdw11(&self) -> Option<u32> {
        if !(1..=256).contains(&self.threshold) {
            return None;
        }
        Some(u32::from(self.threshold - 1) | (u32::from(self.time_100us) << 8))
    }

    /// From CDW11 or a Get Features dword 0 (bits above 15 are reserved and ignored).
    pub fn from_cdw11(v: u32) -> IrqCoalescing {
        IrqCoalescing {
            time_100us: ((v >> 8) & 0xff) as u8,
            threshold: (v & 0xff) as u16 + 1,
        }
    }
}

/// Feature 09h: one vector's coalescing switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IrqVectorConfig {
    /// Interrupt vector (IV).
    pub vector: u16,
    /// Coalescing Disable (CD): feature 08h does not apply to this vector.
    pub coalescing_disabled: bool,
}

impl IrqVectorConfig {
    /// CDW11.
    pub fn cdw11(&self) -> u32 {
        u32::from(self.vector) | (u32::from(self.coalescing_disabled) << 16)
    }

    /// From CDW11 or a Get Features dword 0.
    pub fn from_cdw11(v: u32) -> IrqVectorConfig {
        IrqVectorConfig {
            vector: (v & 0xffff) as u16,
            coalescing_disabled: v & (1 << 16) != 0,
        }
    }
}

/// One admin command. Implementations: [`super::nvme_dev::DevNvme`] (the kernel, through
/// `/dev/nvmeN` under a root) and [`super::fake::FakeNvme`] (an emulated controller).
pub trait NvmeIo: std::fmt::Debug {
    /// Submits `cmd` (a `struct nvme_passthru_cmd`) to `controller` (`nvme0`); the kernel
    /// writes completion dword 0 into its `result`. Returns the NVMe status (0 = success): the
    /// ioctl's positive return value.
    fn admin(&mut self, controller: &str, cmd: &mut [u8; PASSTHRU_LEN]) -> io::Result<u32>;
}

/// Why an admin command failed.
#[derive(Debug, thiserror::Error)]
pub enum NvmeFailure {
    /// The ioctl (or opening the device) failed.
    #[error("{0}")]
    Os(#[source] io::Error),
    /// The controller completed the command with an error status.
    #[error("NVMe status {0:#06x} ({name})", name = status_name(*.0))]
    Status(u32),
}

/// A failed feature command, naming the controller and the command.
#[derive(Debug, thiserror::Error)]
#[error("{controller}: {op}: {failure}")]
pub struct NvmeError {
    /// Controller (`nvme0`).
    pub controller: String,
    /// E.g. `Get Features 08h`.
    pub op: String,
    /// What went wrong.
    pub failure: NvmeFailure,
}

/// Status Code Type and Status Code of a status field (`(sct, sc)`).
fn sct_sc(status: u32) -> (u32, u32) {
    ((status >> 8) & 0x7, status & 0xff)
}

/// A short name for the statuses feature commands produce.
pub fn status_name(status: u32) -> &'static str {
    match sct_sc(status) {
        (0, 0x01) => "Invalid Command Opcode",
        (0, 0x02) => "Invalid Field in Command",
        (0, 0x06) => "Internal Error",
        (1, 0x0d) => "Feature Identifier Not Saveable",
        (1, 0x0e) => "Feature Not Changeable",
        _ => "see the NVMe specification",
    }
}

impl NvmeError {
    /// The refusal as the variant callers branch on. A controller answers Invalid Field for
    /// a feature it lacks (on a get) and for a value it refuses (on a set).
    pub fn apply_error(&self) -> ApplyError {
        match &self.failure {
            NvmeFailure::Os(e) => errno_apply_error(e, &self.to_string()),
            NvmeFailure::Status(s) => match sct_sc(*s) {
                (0, 0x01) | (1, 0x0e) => ApplyError::Unsupported,
                (0, 0x02) if self.op.starts_with("Get") => ApplyError::Unsupported,
                (0, 0x02) => ApplyError::Invalid,
                _ => ApplyError::Other {
                    message: self.to_string(),
                },
            },
        }
    }
}

fn run(
    io: &mut dyn NvmeIo,
    controller: &str,
    op: String,
    cmd: PassthruCmd,
) -> Result<u32, NvmeError> {
    let mut buf = cmd.encode();
    let fail = |failure| NvmeError {
        controller: controller.to_string(),
        op: op.clone(),
        failure,
    };
    match io.admin(controller, &mut buf) {
        Ok(0) => Ok(PassthruCmd::decode(&buf).result),
        Ok(status) => Err(fail(NvmeFailure::Status(status))),
        Err(e) => Err(fail(NvmeFailure::Os(e))),
    }
}

/// Get Features 08h.
pub fn get_irq_coalescing(
    io: &mut dyn NvmeIo,
    controller: &str,
) -> Result<IrqCoalescing, NvmeError> {
    let cmd = PassthruCmd::get_features(FID_IRQ_COALESCING, 0);
    let dw0 = run(io, controller, "Get Features 08h".into(), cmd)?;
    Ok(IrqCoalescing::from_cdw11(dw0))
}

/// Set Features 08h.
pub fn set_irq_coalescing(
    io: &mut dyn NvmeIo,
    controller: &str,
    value: IrqCoalescing,
) -> Result<(), NvmeError> {
    let op = "Set Features 08h".to_string();
    let Some(cdw11) = value.cdw11() else {
        return Err(NvmeError {
            controller: controller.to_string(),
            op,
            failure: NvmeFailure::Os(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("threshold {} outside 1-256", value.threshold),
            )),
        });
    };
    run(
        io,
        controller,
        op,
        PassthruCmd::set_features(FID_IRQ_COALESCING, cdw11),
    )
    .map(|_| ())
}

/// Get Features 09h for `vector`.
pub fn get_vector_config(
    io: &mut dyn NvmeIo,
    controller: &str,
    vector: u16,
) -> Result<IrqVectorConfig, NvmeError> {
    let cmd = PassthruCmd::get_features(FID_IRQ_VECTOR_CONFIG, u32::from(vector));
    let op = format!("Get Features 09h vector {vector}");
    Ok(IrqVectorConfig::from_cdw11(run(io, controller, op, cmd)?))
}

/// Set Features 09h.
pub fn set_vector_config(
    io: &mut dyn NvmeIo,
    controller: &str,
    value: IrqVectorConfig,
) -> Result<(), NvmeError> {
    let cmd = PassthruCmd::set_features(FID_IRQ_VECTOR_CONFIG, value.cdw11());
    let op = format!("Set Features 09h vector {}", value.vector);
    run(io, controller, op, cmd).map(|_| ())
}

#[cfg(test)]
mod tests;
