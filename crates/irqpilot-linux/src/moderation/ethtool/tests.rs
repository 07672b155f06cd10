use super::*;
use std::mem::{offset_of, size_of};

/// A C mirror of the kernel's `struct ethtool_coalesce`, member for member as declared in
/// `include/uapi/linux/ethtool.h`; the compiler lays it out as a C compiler would.
#[repr(C)]
#[allow(dead_code)]
struct KernelCoalesce {
    cmd: u32,
    rx_coalesce_usecs: u32,
    rx_max_coalesced_frames: u32,
    rx_coalesce_usecs_irq: u32,
    rx_max_coalesced_frames_irq: u32,
    tx_coalesce_usecs: u32,
    tx_max_coalesced_frames: u32,
    tx_coalesce_usecs_irq: u32,
    tx_max_coalesced_frames_irq: u32,
    stats_block_coalesce_usecs: u32,
    use_adaptive_rx_coalesce: u32,
    use_adaptive_tx_coalesce: u32,
    pkt_rate_low: u32,
    rx_coalesce_usecs_low: u32,
    rx_max_coalesced_frames_low: u32,
    tx_coalesce_usecs_low: u32,
    tx_max_coalesced_frames_low: u32,
    pkt_rate_high: u32,
    rx_coalesce_usecs_high: u32,
    rx_max_coalesced_frames_high: u32,
    tx_coalesce_usecs_high: u32,
    tx_max_coalesced_frames_high: u32,
    rate_sample_interval: u32,
}

/// `struct ethtool_per_queue_op` without its flexible `data[]`, whose offset is the size.
#[repr(C)]
#[allow(dead_code)]
struct KernelPerQueueOp {
    cmd: u32,
    sub_command: u32,
    queue_mask: [u32; 128],
}

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn constants_match_the_uapi_headers() {
    assert_eq!(SIOCETHTOOL, 0x8946);
    assert_eq!(ETHTOOL_GCOALESCE, 0x0e);
    assert_eq!(ETHTOOL_SCOALESCE, 0x0f);
    assert_eq!(ETHTOOL_PERQUEUE, 0x4b);
    assert_eq!(MAX_NUM_QUEUE, 4096);
    assert_eq!(QUEUE_MASK_WORDS, 128);
    assert_eq!(IFNAMSIZ, 16);
}

#[test]
fn sizes_and_offsets_match_the_c_layout() {
    assert_eq!(size_of::<KernelCoalesce>(), COALESCE_LEN);
    assert_eq!(COALESCE_LEN, 92);
    assert_eq!(offset_of!(KernelCoalesce, rx_coalesce_usecs), 4);
    assert_eq!(offset_of!(KernelCoalesce, rx_max_coalesced_frames), 8);
    assert_eq!(offset_of!(KernelCoalesce, tx_coalesce_usecs), 20);
    assert_eq!(offset_of!(KernelCoalesce, tx_max_coalesced_frames), 24);
    assert_eq!(offset_of!(KernelCoalesce, use_adaptive_rx_coalesce), 40);
    assert_eq!(offset_of!(KernelCoalesce, use_adaptive_tx_coalesce), 44);
    assert_eq!(offset_of!(KernelCoalesce, rate_sample_interval), 88);
    assert_eq!(size_of::<KernelPerQueueOp>(), PER_QUEUE_HEADER_LEN);
    assert_eq!(PER_QUEUE_HEADER_LEN, 520);
    assert_eq!(offset_of!(KernelPerQueueOp, queue_mask), 8);
}

/// Each member lands at its C offset: member k (after cmd) gets the value 0x1000 + k, and the
/// bytes at `offset_of!` in the C mirror must hold it.
#[test]
fn every_member_at_its_c_offset() {
    let mut words = [0u32; 22];
    for (k, w) in words.iter_mut().enumerate() {
        *w = 0x1000 + k as u32;
    }
    let c = EthtoolCoalesce::from_words(words);
    let bytes = c.encode(ETHTOOL_SCOALESCE);
    let at = |off: usize| u32::from_ne_bytes(bytes[off..off + 4].try_into().unwrap());
    assert_eq!(at(offset_of!(KernelCoalesce, cmd)), ETHTOOL_SCOALESCE);
    assert_eq!(at(offset_of!(KernelCoalesce, rx_coalesce_usecs)), 0x1000);
    assert_eq!(
        at(offset_of!(KernelCoalesce, rx_max_coalesced_frames)),
        0x1001
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, rx_coalesce_usecs_irq)),
        0x1002
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, rx_max_coalesced_frames_irq)),
        0x1003
    );
    assert_eq!(at(offset_of!(KernelCoalesce, tx_coalesce_usecs)), 0x1004);
    assert_eq!(
        at(offset_of!(KernelCoalesce, tx_max_coalesced_frames)),
        0x1005
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, tx_coalesce_usecs_irq)),
        0x1006
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, tx_max_coalesced_frames_irq)),
        0x1007
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, stats_block_coalesce_usecs)),
        0x1008
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, use_adaptive_rx_coalesce)),
        0x1009
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, use_adaptive_tx_coalesce)),
        0x100a
    );
    assert_eq!(at(offset_of!(KernelCoalesce, pkt_rate_low)), 0x100b);
    assert_eq!(
        at(offset_of!(KernelCoalesce, rx_coalesce_usecs_low)),
        0x100c
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, rx_max_coalesced_frames_low)),
        0x100d
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, tx_coalesce_usecs_low)),
        0x100e
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, tx_max_coalesced_frames_low)),
        0x100f
    );
    assert_eq!(at(offset_of!(KernelCoalesce, pkt_rate_high)), 0x1010);
    assert_eq!(
        at(offset_of!(KernelCoalesce, rx_coalesce_usecs_high)),
        0x1011
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, rx_max_coalesced_frames_high)),
        0x1012
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, tx_coalesce_usecs_high)),
        0x1013
    );
    assert_eq!(
        at(offset_of!(KernelCoalesce, tx_max_coalesced_frames_high)),
        0x1014
    );
    assert_eq!(at(offset_of!(KernelCoalesce, rate_sample_interval)), 0x1015);
    let (cmd, back) = EthtoolCoalesce::decode(&bytes).unwrap();
    assert_eq!((cmd, back), (ETHTOOL_SCOALESCE, c));
}

/// `ethtool -C dev rx-usecs 8 rx-frames 32 tx-usecs 16 adaptive-rx on sample-interval 5` as the
/// ioctl carries it on a little-endian host.
#[cfg(target_endian = "little")]
#[test]
fn scoalesce_bytes_little_endian() {
    let c = EthtoolCoalesce {
        rx_coalesce_usecs: 8,
        rx_max_coalesced_frames: 32,
        tx_coalesce_usecs: 16,
        use_adaptive_rx_coalesce: 1,
        rate_sample_interval: 5,
        ..Default::default()
    };
    let want = hex(
        "0f000000 08000000 20000000 00000000 00000000 10000000 00000000 00000000
         00000000 00000000 01000000 00000000 00000000 00000000 00000000 00000000
         00000000 00000000 00000000 00000000 00000000 00000000 05000000",
    );
    assert_eq!(want.len(), 92);
    assert_eq!(c.encode(ETHTOOL_SCOALESCE).to_vec(), want);
    assert_eq!(
        EthtoolCoalesce::decode(&want).unwrap(),
        (ETHTOOL_SCOALESCE, c)
    );
}

/// `ethtool --per-queue dev queue_mask ... --show-coalesce` for queues 0, 33 and 4095.
#[cfg(target_endian = "little")]
#[test]
fn per_queue_get_bytes_little_endian() {
    let op = PerQueueCoalesce {
        sub_command: ETHTOOL_GCOALESCE,
        mask: QueueMask::of(&[33, 0, 4095]).unwrap(),
        entries: Vec::new(),
    };
    let b = op.encode();
    assert_eq!(b.len(), 520 + 3 * 92);
    assert_eq!(&b[0..4], &[0x4b, 0, 0, 0]);
    assert_eq!(&b[4..8], &[0x0e, 0, 0, 0]);
    assert_eq!(&b[8..12], &[0x01, 0, 0, 0], "queue 0: word 0 bit 0");
    assert_eq!(&b[12..16], &[0x02, 0, 0, 0], "queue 33: word 1 bit 1");
    assert!(b[16..516].iter().all(|&x| x == 0), "words 2..126 clear");
    assert_eq!(
        &b[516..520],
        &[0, 0, 0, 0x80],
        "queue 4095: word 127 bit 31"
    );
    for i in 0..3 {
        let at = 520 + 92 * i;
        assert_eq!(&b[at..at + 4], &[0x0e, 0, 0, 0], "entry {i} cmd");
        assert!(b[at + 4..at + 92].iter().all(|&x| x == 0));
    }
}

#[test]
fn per_queue_round_trip_keeps_entry_order() {
    let a = EthtoolCoalesce {
        rx_coalesce_usecs: 3,
        ..Default::default()
    };
    let z = EthtoolCoalesce {
        rx_coalesce_usecs: 50,
        rx_max_coalesced_frames: 64,
        ..Default::default()
    };
    let op = PerQueueCoalesce {
        sub_command: ETHTOOL_SCOALESCE,
        mask: QueueMask::of(&[7, 2]).unwrap(),
        entries: vec![a, z],
    };
    let b = op.encode();
    // Queue 2 is the lowest set bit, so it owns the first entry.
    let first = u32::from_ne_bytes(b[524..528].try_into().unwrap());
    assert_eq!(first, 3);
    let (cmd, back) = PerQueueCoalesce::decode(&b).unwrap();
    assert_eq!(cmd, ETHTOOL_PERQUEUE);
    assert_eq!(back, op);
    assert_eq!(back.mask.queues(), vec![2, 7]);
}

#[test]
fn malformed_inputs_are_errors_not_panics() {
    assert!(matches!(
        EthtoolCoalesce::decode(&[0u8; 91]),
        Err(WireError::Short { need: 92, .. })
    ));
    assert_eq!(
        QueueMask::of(&[4096]),
        Err(WireError::QueueOutOfRange(4096))
    );
    // A header whose mask promises more entries than the buffer has.
    let mut b = PerQueueCoalesce {
        sub_command: ETHTOOL_GCOALESCE,
        mask: QueueMask::of(&[1, 2]).unwrap(),
        entries: vec![],
    }
    .encode();
    b.truncate(520 + 92);
    assert!(matches!(
        PerQueueCoalesce::decode(&b),
        Err(WireError::Short { need: 704, .. })
    ));
    assert!(PerQueueCoalesce::decode(&[0u8; 100]).is_err());
    let mut out = [0u8; 10];
    assert!(EthtoolCoalesce::default().encode_into(1, &mut out).is_err());
}

#[test]
fn read_modify_write_touches_only_named_fields() {
    let cur = EthtoolCoalesce {
        rx_coalesce_usecs: 8,
        rx_max_coalesced_frames: 128,
        tx_coalesce_usecs: 8,
        use_adaptive_rx_coalesce: 1,
        pkt_rate_high: 123,
        ..Default::default()
    };
    let p = CoalesceParams {
        rx_usecs: Some(50),
        use_adaptive_rx: Some(false),
        ..Default::default()
    };
    let new = cur.with(&p);
    assert_eq!(new.rx_coalesce_usecs, 50);
    assert_eq!(new.use_adaptive_rx_coalesce, 0);
    assert_eq!(new.rx_max_coalesced_frames, 128);
    assert_eq!(new.tx_coalesce_usecs, 8);
    assert_eq!(new.pkt_rate_high, 123);
    assert!(!cur.satisfies(&p));
    assert!(new.satisfies(&p));
    assert_eq!(
        cur.project(&p),
        CoalesceParams {
            rx_usecs: Some(8),
            use_adaptive_rx: Some(true),
            ..Default::default()
        }
    );
    assert!(cur.satisfies(&CoalesceParams::default()));
}
