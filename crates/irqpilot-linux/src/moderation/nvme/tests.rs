use super::*;
use std::mem::{align_of, offset_of, size_of};

/// A C mirror of `struct nvme_passthru_cmd` (`include/uapi/linux/nvme_ioctl.h`).
#[repr(C)]
#[allow(dead_code)]
struct KernelPassthru {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

#[test]
fn layout_matches_the_c_structure() {
    assert_eq!(size_of::<KernelPassthru>(), PASSTHRU_LEN);
    assert_eq!(PASSTHRU_LEN, 72);
    assert_eq!(align_of::<KernelPassthru>(), 8);
    assert_eq!(offset_of!(KernelPassthru, nsid), 4);
    assert_eq!(offset_of!(KernelPassthru, metadata), 16);
    assert_eq!(offset_of!(KernelPassthru, addr), 24);
    assert_eq!(offset_of!(KernelPassthru, metadata_len), 32);
    assert_eq!(offset_of!(KernelPassthru, data_len), 36);
    assert_eq!(offset_of!(KernelPassthru, cdw10), 40);
    assert_eq!(offset_of!(KernelPassthru, cdw11), 44);
    assert_eq!(offset_of!(KernelPassthru, cdw15), 60);
    assert_eq!(offset_of!(KernelPassthru, timeout_ms), 64);
    assert_eq!(offset_of!(KernelPassthru, result), 68);
}

#[cfg(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
))]
#[test]
fn ioctl_number() {
    // _IOWR('N', 0x41, struct nvme_admin_cmd) as nvme-cli and the kernel headers compute it.
    assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
}

/// Every member at its C offset: distinct values, read back through `offset_of!`.
#[test]
fn every_member_at_its_c_offset() {
    let c = PassthruCmd {
        opcode: 0x11,
        flags: 0x22,
        rsvd1: 0x3344,
        nsid: 0x0102_0304,
        cdw2: 2,
        cdw3: 3,
        metadata: 0x1122_3344_5566_7788,
        addr: 0x99aa_bbcc_ddee_ff00,
        metadata_len: 0x30,
        data_len: 0x40,
        cdw10: 10,
        cdw11: 11,
        cdw12: 12,
        cdw13: 13,
        cdw14: 14,
        cdw15: 15,
        timeout_ms: 5000,
        result: 0xdead_beef,
    };
    let b = c.encode();
    let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
    assert_eq!(b[offset_of!(KernelPassthru, opcode)], 0x11);
    assert_eq!(b[offset_of!(KernelPassthru, flags)], 0x22);
    let r = offset_of!(KernelPassthru, rsvd1);
    assert_eq!(u16::from_ne_bytes([b[r], b[r + 1]]), 0x3344);
    assert_eq!(u32_at(offset_of!(KernelPassthru, nsid)), 0x0102_0304);
    assert_eq!(u32_at(offset_of!(KernelPassthru, cdw2)), 2);
    assert_eq!(u32_at(offset_of!(KernelPassthru, cdw3)), 3);
    assert_eq!(
        u64_at(offset_of!(KernelPassthru, metadata)),
        0x1122_3344_5566_7788
    );
    assert_eq!(
        u64_at(offset_of!(KernelPassthru, addr)),
        0x99aa_bbcc_ddee_ff00
    );
    assert_eq!(u32_at(offset_of!(KernelPassthru, metadata_len)), 0x30);
    assert_eq!(u32_at(offset_of!(KernelPassthru, data_len)), 0x40);
    assert_eq!(u32_at(offset_of!(KernelPassthru, cdw10)), 10);
    assert_eq!(u32_at(offset_of!(KernelPassthru, cdw11)), 11);
    assert_eq!(u32_at(offset_of!(KernelPassthru, cdw12)), 12);
    assert_eq!(u32_at(offset_of!(KernelPassthru, cdw13)), 13);
    assert_eq!(u32_at(offset_of!(KernelPassthru, cdw14)), 14);
    assert_eq!(u32_at(offset_of!(KernelPassthru, cdw15)), 15);
    assert_eq!(u32_at(offset_of!(KernelPassthru, timeout_ms)), 5000);
    assert_eq!(u32_at(offset_of!(KernelPassthru, result)), 0xdead_beef);
    assert_eq!(PassthruCmd::decode(&b), c);
}

/// `nvme set-feature /dev/nvme0 -f 0x08 -v 0x0A03`: TIME 10 (1 ms), THR 3 (4 entries).
#[test]
fn feature_08h_cdw11() {
    let v = IrqCoalescing {
        time_100us: 10,
        threshold: 4,
    };
    assert_eq!(v.cdw11(), Some(0x0A03));
    assert_eq!(IrqCoalescing::from_cdw11(0x0A03), v);
    // Reset value 0: no delay, threshold field 0 = 1 entry.
    assert_eq!(
        IrqCoalescing::from_cdw11(0),
        IrqCoalescing {
            time_100us: 0,
            threshold: 1
        }
    );
    // The extremes: 25.5 ms and 256 entries.
    let max = IrqCoalescing {
        time_100us: 255,
        threshold: 256,
    };
    assert_eq!(max.cdw11(), Some(0xFFFF));
    assert_eq!(IrqCoalescing::from_cdw11(0xFFFF_FFFF), max);
    for bad in [0, 257] {
        let v = IrqCoalescing {
            time_100us: 1,
            threshold: bad,
        };
        assert_eq!(v.cdw11(), None, "threshold {bad}");
    }
}

/// `nvme set-feature -f 0x09 -v 0x10005`: vector 5, Coalescing Disable.
#[test]
fn feature_09h_cdw11() {
    let v = IrqVectorConfig {
        vector: 5,
        coalescing_disabled: true,
    };
    assert_eq!(v.cdw11(), 0x0001_0005);
    assert_eq!(IrqVectorConfig::from_cdw11(0x0001_0005), v);
    let on = IrqVectorConfig {
        vector: 0xffff,
        coalescing_disabled: false,
    };
    assert_eq!(on.cdw11(), 0xffff);
    assert_eq!(IrqVectorConfig::from_cdw11(0xfffe_ffff), on);
}

#[cfg(target_endian = "little")]
#[test]
fn set_features_08h_bytes_little_endian() {
    let b = PassthruCmd::set_features(FID_IRQ_COALESCING, 0x0A03).encode();
    let mut want = [0u8; 72];
    want[0] = 0x09; // opcode: Set Features
    want[40] = 0x08; // CDW10: FID 08h, SV clear
    want[44] = 0x03; // CDW11 bits 7:0: THR 3
    want[45] = 0x0A; // CDW11 bits 15:8: TIME 10
    assert_eq!(b, want);
    let g = PassthruCmd::get_features(FID_IRQ_VECTOR_CONFIG, 7).encode();
    let mut want = [0u8; 72];
    want[0] = 0x0a; // Get Features
    want[40] = 0x09; // FID 09h, SEL 000b (current)
    want[44] = 0x07; // the vector asked about
    assert_eq!(g, want);
}

#[test]
fn statuses_map_to_refusals() {
    let e = |op: &str, status| NvmeError {
        controller: "nvme0".into(),
        op: op.into(),
        failure: NvmeFailure::Status(status),
    };
    assert_eq!(
        e("Get Features 08h", 0x4002).apply_error(),
        ApplyError::Unsupported
    );
    assert_eq!(
        e("Set Features 08h", 0x4002).apply_error(),
        ApplyError::Invalid
    );
    assert_eq!(
        e("Set Features 08h", 0x010e).apply_error(),
        ApplyError::Unsupported
    );
    match e("Set Features 08h", 0x0006).apply_error() {
        ApplyError::Other { message } => {
            assert!(
                message.contains("nvme0") && message.contains("Internal Error"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    let os = NvmeError {
        controller: "nvme1".into(),
        op: "Get Features 08h".into(),
        failure: NvmeFailure::Os(io::Error::from_raw_os_error(libc::EACCES)),
    };
    assert_eq!(os.apply_error(), ApplyError::PermissionDenied);
    assert!(os.to_string().starts_with("nvme1: Get Features 08h: "));
}
