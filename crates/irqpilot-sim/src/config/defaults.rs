//! The default of every scenario key that has one. Sources: `shared/research/costmodel.md`
//! section 3 (simulator defaults) unless the key's doc in `schema.rs` names another.

use super::choices::{ItrRegister, NicModeration, NvmeModeration, PlatformKind};

pub(super) fn d_duration() -> u64 {
    1000
}
pub(super) fn d_one_u32() -> u32 {
    1
}
pub(super) fn d_true() -> bool {
    true
}

pub(super) fn d_vectors() -> u32 {
    200
}

pub(super) fn d_ring() -> u32 {
    1024
}
pub(super) fn d_mtu() -> u32 {
    1500
}
pub(super) fn d_nic_mod() -> NicModeration {
    NicModeration::Dim
}
pub(super) fn d_rx_usecs() -> u32 {
    3
}
pub(super) fn d_rx_frames() -> u32 {
    32
}
pub(super) fn d_aim() -> u8 {
    1
}
pub(super) fn d_tx_usecs() -> u32 {
    16
}
pub(super) fn d_tx_frames() -> u32 {
    32
}
pub(super) fn d_itr() -> ItrRegister {
    ItrRegister::Em
}

pub(super) fn d_nvme() -> String {
    "nvme".into()
}
pub(super) fn d_nvme_lat() -> f64 {
    75.0
}
pub(super) fn d_nvme_mod() -> NvmeModeration {
    NvmeModeration::None
}

pub(super) fn d_train() -> u32 {
    64
}
pub(super) fn d_window() -> f64 {
    6.0
}
pub(super) fn d_chunk() -> f64 {
    3.0
}
pub(super) fn d_small() -> u32 {
    128
}
pub(super) fn d_service() -> f64 {
    2.0
}
pub(super) fn d_wire() -> f64 {
    10.0
}
pub(super) fn d_block() -> u32 {
    4
}

pub(super) fn d_rotate_ms() -> u64 {
    20
}

/// Resolution of the report's time series, ms.
pub(super) const SERIES_MS: u64 = 10;

/// `[costs]`: what each value stands for is in `schema::Costs`.
pub(super) mod costs {
    pub(in crate::config) const HARDIRQ_US: f64 = 1.0;
    pub(in crate::config) const INDIRECT_US: f64 = 1.0;
    pub(in crate::config) const INDIRECT_FULL_GAP_US: f64 = 100.0;
    pub(in crate::config) const NAPI_POLL_US: f64 = 0.5;
    pub(in crate::config) const RX_PACKET_NS: f64 = 210.0;
    pub(in crate::config) const RX_COPY_NS_PER_BYTE: f64 = 0.15;
    pub(in crate::config) const TX_COMPLETION_NS: f64 = 50.0;
    pub(in crate::config) const NVME_CQE_US: f64 = 0.2;
    pub(in crate::config) const NVME_IO_APP_US: f64 = 1.0;
    pub(in crate::config) const NAPI_WEIGHT: u32 = 64;
    pub(in crate::config) const NETDEV_BUDGET: u32 = 300;
    pub(in crate::config) const NETDEV_BUDGET_US: f64 = 2000.0;
    pub(in crate::config) const MASK_UNMASK_US: f64 = 1.8;
    pub(in crate::config) const MIGRATION_PENALTY_US: f64 = 10.0;
    pub(in crate::config) const REMOTE_NODE_PENALTY_US: f64 = 0.5;
    pub(in crate::config) const MIGRATION_COLD_INTERRUPTS: u32 = 100;
    pub(in crate::config) const MIGRATION_COLD_FACTOR: f64 = 2.0;
    pub(in crate::config) const REMOTE_NODE_PACKET_FACTOR: f64 = 1.0;
    pub(in crate::config) const SMT_SLOWDOWN: f64 = 1.0;
    pub(in crate::config) const WAKEUP_IPI_US: f64 = 1.5;
    pub(in crate::config) const REMOTE_CACHE_US: f64 = 0.3;
    pub(in crate::config) const REMOTE_NODE_APP_US: f64 = 1.0;
    pub(in crate::config) const RX_DRIVER_NS: f64 = 42.0;
}

/// `[platform]`: what each value stands for is in `schema::PlatformCfg`.
pub(super) mod platform {
    use super::PlatformKind;

    pub(in crate::config) const KIND: PlatformKind = PlatformKind::Limited;
    pub(in crate::config) const LIMITED_KNEE_PER_SEC: f64 = 2_000_000.0;
    pub(in crate::config) const HEALTHY_KNEE_PER_SEC: f64 = 25_000_000.0;
    pub(in crate::config) const GAMMA: f64 = 1.0;
    pub(in crate::config) const MIN_EFFICIENCY: f64 = 0.1;
    pub(in crate::config) const MSI_LATENCY_US: f64 = 1.0;
    pub(in crate::config) const RATE_WINDOW_US: f64 = 100.0;
}
