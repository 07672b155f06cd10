//! Emulated drivers behind [`EthtoolIo`] and [`NvmeIo`], for tests and demonstrations on
//! machines without the hardware. They decode the very bytes the real ioctls would carry and
//! answer as the kernel does (`net/ethtool/ioctl.c`, an NVMe controller's Get/Set Features),
//! so the encoders are exercised end to end. Each keeps a log of the requests it saw. Clones
//! share their state, so a test keeps one handle and gives another to the platform.

use super::ethtool::{
    COALESCE_LEN, ETHTOOL_GCOALESCE, ETHTOOL_PERQUEUE, ETHTOOL_SCOALESCE, EthtoolCoalesce,
    PER_QUEUE_HEADER_LEN, PerQueueCoalesce,
};
use super::ethtool_io::EthtoolIo;
use super::nvme::{
    FID_IRQ_COALESCING, FID_IRQ_VECTOR_CONFIG, NvmeIo, OPC_GET_FEATURES, OPC_SET_FEATURES,
    PASSTHRU_LEN, PassthruCmd,
};
use crate::channels::{ETHTOOL_GCHANNELS, ETHTOOL_SCHANNELS, EthtoolChannels};
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One emulated network interface.
#[derive(Clone, Debug, Default)]
pub struct FakeNic {
    /// Whether the driver implements `get_coalesce`/`set_coalesce` (else EOPNOTSUPP, like veth).
    pub coalesce: bool,
    /// The device-wide setting.
    pub device: EthtoolCoalesce,
    /// Per-queue settings when the driver implements per-queue ops (else EOPNOTSUPP).
    pub queues: Option<Vec<EthtoolCoalesce>>,
    /// errno every set fails with (e.g. EPERM for a non-root caller).
    pub fail_sets: Option<i32>,
    /// The driver rounds `rx-usecs` down to a multiple of this (hardware timer granularity).
    pub rx_usecs_step: Option<u32>,
    /// The driver's `supported_coalesce_params`, as a mask over the 22 members after `cmd`
    /// (bit i = [`EthtoolCoalesce::words`]`[i]`); `None` = all. A set with a non-zero member
    /// outside it fails with EOPNOTSUPP (`ethtool_set_coalesce_supported()`): e1000 supports
    /// only `rx-usecs`, mask `1`.
    pub supported: Option<u32>,
    /// Channel counts (`ethtool -l`); `None`: the driver has no channel ops (EOPNOTSUPP).
    pub channels: Option<EthtoolChannels>,
    /// The driver keeps a channel count rounded down to a multiple of this.
    pub channels_step: Option<u32>,
}

/// State of [`FakeEthtool`].
#[derive(Clone, Debug, Default)]
pub struct FakeEthtoolState {
    /// Interfaces by name; unknown names answer ENODEV.
    pub nics: BTreeMap<String, FakeNic>,
    /// Requests seen: `eth1 ETHTOOL_GCOALESCE`, `eth1 ETHTOOL_PERQUEUE/SCOALESCE [3]`, ...
    pub log: Vec<String>,
}

/// Emulated interfaces (clones share them).
#[derive(Clone, Debug, Default)]
pub struct FakeEthtool(Arc<Mutex<FakeEthtoolState>>);

impl FakeEthtool {
    /// Interfaces by name.
    pub fn new(nics: impl IntoIterator<Item = (String, FakeNic)>) -> FakeEthtool {
        FakeEthtool(Arc::new(Mutex::new(FakeEthtoolState {
            nics: nics.into_iter().collect(),
            log: Vec::new(),
        })))
    }

    /// The shared state.
    pub fn state(&self) -> MutexGuard<'_, FakeEthtoolState> {
        lock(&self.0)
    }

    /// The requests seen so far.
    pub fn log(&self) -> Vec<String> {
        self.state().log.clone()
    }
}

fn errno(n: i32) -> io::Error {
    io::Error::from_raw_os_error(n)
}

impl FakeNic {
    /// Whether the kernel lets a set with these members through to the driver.
    fn settable(&self, c: &EthtoolCoalesce) -> bool {
        let Some(mask) = self.supported else {
            return true;
        };
        c.words()
            .iter()
            .enumerate()
            .all(|(i, w)| *w == 0 || mask & (1 << i) != 0)
    }

    fn store(&self, c: EthtoolCoalesce) -> EthtoolCoalesce {
        match self.rx_usecs_step {
            Some(step) if step > 0 => EthtoolCoalesce {
                rx_coalesce_usecs: c.rx_coalesce_usecs / step * step,
                ..c
            },
            _ => c,
        }
    }
}

impl EthtoolIo for FakeEthtool {
    fn ethtool(&mut self, ifname: &str, data: &mut [u8]) -> io::Result<()> {
        let word = |at: usize| {
            data.get(at..at + 4)
                .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
        };
        let cmd = word(0).ok_or_else(|| errno(libc::EFAULT))?;
        let mut guard = self.state();
        let st = &mut *guard;
        let Some(nic) = st.nics.get_mut(ifname) else {
            st.log.push(format!("{ifname} ENODEV"));
            return Err(errno(libc::ENODEV));
        };
        match cmd {
            ETHTOOL_GCOALESCE | ETHTOOL_SCOALESCE => {
                let name = if cmd == ETHTOOL_GCOALESCE {
                    "GCOALESCE"
                } else {
                    "SCOALESCE"
                };
                st.log.push(format!("{ifname} ETHTOOL_{name}"));
                if !nic.coalesce {
                    return Err(errno(libc::EOPNOTSUPP));
                }
                if data.len() < COALESCE_LEN {
                    return Err(errno(libc::EFAULT));
                }
                if cmd == ETHTOOL_GCOALESCE {
                    nic.device
                        .encode_into(ETHTOOL_GCOALESCE, data)
                        .map_err(|_| errno(libc::EFAULT))
                } else {
                    if let Some(e) = nic.fail_sets {
                        return Err(errno(e));
                    }
                    let (_, c) = EthtoolCoalesce::decode(data).map_err(|_| errno(libc::EFAULT))?;
                    if !nic.settable(&c) {
                        return Err(errno(libc::EOPNOTSUPP));
                    }
                    nic.device = nic.store(c);
                    Ok(())
                }
            }
            ETHTOOL_PERQUEUE => {
                if data.len() < PER_QUEUE_HEADER_LEN {
                    return Err(errno(libc::EFAULT));
                }
                let (_, op) = PerQueueCoalesce::decode(data).map_err(|_| errno(libc::EFAULT))?;
                let name = match op.sub_command {
                    ETHTOOL_GCOALESCE => "GCOALESCE",
                    ETHTOOL_SCOALESCE => "SCOALESCE",
                    _ => return Err(errno(libc::EOPNOTSUPP)),
                };
                let queues = op.mask.queues();
                st.log
                    .push(format!("{ifname} ETHTOOL_PERQUEUE/{name} {queues:?}"));
                let store = nic.clone();
                let Some(per_queue) = nic.queues.as_mut() else {
                    return Err(errno(libc::EOPNOTSUPP));
                };
                if queues.iter().any(|&q| q as usize >= per_queue.len()) {
                    return Err(errno(libc::EINVAL));
                }
                if op.sub_command == ETHTOOL_GCOALESCE {
                    for (i, q) in queues.iter().enumerate() {
                        let at = PER_QUEUE_HEADER_LEN + i * COALESCE_LEN;
                        per_queue[*q as usize]
                            .encode_into(ETHTOOL_GCOALESCE, &mut data[at..])
                            .map_err(|_| errno(libc::EFAULT))?;
                    }
                } else {
                    if let Some(e) = nic.fail_sets {
                        return Err(errno(e));
                    }
                    if !op.entries.iter().all(|c| store.settable(c)) {
                        return Err(errno(libc::EOPNOTSUPP));
                    }
                    for (q, c) in queues.iter().zip(&op.entries) {
                        per_queue[*q as usize] = store.store(*c);
                    }
                }
                Ok(())
            }
            ETHTOOL_GCHANNELS | ETHTOOL_SCHANNELS => {
                let set = cmd == ETHTOOL_SCHANNELS;
                st.log.push(format!(
                    "{ifname} ETHTOOL_{}CHANNELS",
                    if set { "S" } else { "G" }
                ));
                let Some(have) = nic.channels else {
                    return Err(errno(libc::EOPNOTSUPP));
                };
                let want = EthtoolChannels::from_bytes(data).ok_or_else(|| errno(libc::EFAULT))?;
                let reply = if set {
                    if let Some(e) = nic.fail_sets {
                        return Err(errno(e));
                    }
                    // ethtool_set_channels(): nothing above the maxima, at least one RX and TX.
                    if want.combined_count > have.max_combined
                        || want.rx_count > have.max_rx
                        || want.tx_count > have.max_tx
                        || want.combined_count + want.rx_count == 0
                    {
                        return Err(errno(libc::EINVAL));
                    }
                    let round = |n: u32| match nic.channels_step {
                        Some(step) if step > 0 => (n / step * step).max(step.min(n)),
                        _ => n,
                    };
                    let kept = EthtoolChannels {
                        combined_count: round(want.combined_count),
                        rx_count: round(want.rx_count),
                        tx_count: round(want.tx_count),
                        ..have
                    };
                    nic.channels = Some(kept);
                    kept
                } else {
                    have
                };
                let bytes = EthtoolChannels { cmd, ..reply }.to_bytes();
                data.get_mut(..bytes.len())
                    .ok_or_else(|| errno(libc::EFAULT))?
                    .copy_from_slice(&bytes);
                Ok(())
            }
            other => {
                st.log.push(format!("{ifname} cmd {other:#x}"));
                Err(errno(libc::EOPNOTSUPP))
            }
        }
    }
}

/// One emulated NVMe controller.
#[derive(Clone, Debug, Default)]
pub struct FakeController {
    /// Feature 08h CDW11 (bits 15:0).
    pub coalescing: u32,
    /// Feature 09h per vector: Coalescing Disable. Vectors absent here answer Invalid Field.
    pub vectors: BTreeMap<u16, bool>,
    /// Status every Set Features completes with (e.g. 0x010e Feature Not Changeable).
    pub set_status: Option<u32>,
    /// errno every command fails with (e.g. EACCES without CAP_SYS_ADMIN).
    pub errno: Option<i32>,
}

/// State of [`FakeNvme`].
#[derive(Clone, Debug, Default)]
pub struct FakeNvmeState {
    /// Controllers by name; unknown names answer ENOENT (no `/dev/nvmeN`).
    pub controllers: BTreeMap<String, FakeController>,
    /// Commands seen: `nvme0 get 08h cdw11=0x0`, `nvme0 set 08h cdw11=0xa03`, ...
    pub log: Vec<String>,
}

/// Emulated controllers (clones share them).
#[derive(Clone, Debug, Default)]
pub struct FakeNvme(Arc<Mutex<FakeNvmeState>>);

impl FakeNvme {
    /// Controllers by name.
    pub fn new(controllers: impl IntoIterator<Item = (String, FakeController)>) -> FakeNvme {
        FakeNvme(Arc::new(Mutex::new(FakeNvmeState {
            controllers: controllers.into_iter().collect(),
            log: Vec::new(),
        })))
    }

    /// The shared state.
    pub fn state(&self) -> MutexGuard<'_, FakeNvmeState> {
        lock(&self.0)
    }

    /// The commands seen so far.
    pub fn log(&self) -> Vec<String> {
        self.state().log.clone()
    }
}

/// NVMe status: Invalid Field in Command with Do Not Retry.
const INVALID_FIELD: u32 = 0x4002;

impl NvmeIo for FakeNvme {
    fn admin(&mut self, controller: &str, cmd: &mut [u8; PASSTHRU_LEN]) -> io::Result<u32> {
        let mut guard = self.state();
        let st = &mut *guard;
        let Some(c) = st.controllers.get_mut(controller) else {
            return Err(errno(libc::ENOENT));
        };
        let mut d = PassthruCmd::decode(cmd);
        let fid = (d.cdw10 & 0xff) as u8;
        let verb = match d.opcode {
            OPC_GET_FEATURES => "get",
            OPC_SET_FEATURES => "set",
            _ => "opcode",
        };
        st.log.push(format!(
            "{controller} {verb} {fid:02x}h cdw11={:#x}",
            d.cdw11
        ));
        if let Some(e) = c.errno {
            return Err(errno(e));
        }
        let status = match (d.opcode, fid) {
            (OPC_GET_FEATURES, FID_IRQ_COALESCING) => {
                d.result = c.coalescing;
                0
            }
            (OPC_GET_FEATURES, FID_IRQ_VECTOR_CONFIG) => {
                let iv = (d.cdw11 & 0xffff) as u16;
                match c.vectors.get(&iv) {
                    Some(&cd) => {
                        d.result = u32::from(iv) | (u32::from(cd) << 16);
                        0
                    }
                    None => INVALID_FIELD,
                }
            }
            (OPC_SET_FEATURES, _) if c.set_status.is_some() => c.set_status.unwrap_or(0),
            (OPC_SET_FEATURES, FID_IRQ_COALESCING) => {
                c.coalescing = d.cdw11 & 0xffff;
                0
            }
            (OPC_SET_FEATURES, FID_IRQ_VECTOR_CONFIG) => {
                let iv = (d.cdw11 & 0xffff) as u16;
                match c.vectors.get_mut(&iv) {
                    Some(cd) => {
                        *cd = d.cdw11 & (1 << 16) != 0;
                        0
                    }
                    None => INVALID_FIELD,
                }
            }
            (OPC_GET_FEATURES | OPC_SET_FEATURES, _) => INVALID_FIELD,
            _ => 0x4001,
        };
        *cmd = d.encode();
        Ok(status)
    }
}
