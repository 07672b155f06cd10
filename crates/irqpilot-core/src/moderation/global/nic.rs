//! NIC coalescing as the moderator programs it: one [`CoalesceParams`] per queue, whole, RX and
//! TX alike (a queue's TX completions share its vector), and the comparison with what the
//! driver reads back.

use crate::moderation::knobs::Knob;
use crate::plan::CoalesceParams;

/// The most frames the moderator pairs with a delay (a driver's frame counter is often 8 or 16
/// bits wide; 1024 fits every one irqpilot knows).
pub(crate) const MAX_FRAMES: u32 = 1024;

/// `rx-usecs` / `tx-usecs` for a delay of `d` us: whole microseconds, at least 1 and at least
/// the driver's least real time (below it Intel's ITR drivers read a mode number).
pub(crate) fn programmed_usecs(d: f64, min_usecs: u32) -> u32 {
    (d.round().max(1.0) as u32).max(min_usecs)
}

/// A queue's TX completions as its driver had them (`own`), or an interrupt per completion
/// where there is no such setting to keep: `(tx-usecs, tx-frames, adaptive-tx)`.
fn own_tx(own: Option<&Knob>) -> (u32, u32, bool) {
    match own.and_then(knob_params) {
        Some(p) => (
            p.tx_usecs.unwrap_or(0),
            p.tx_max_frames.unwrap_or(1),
            p.use_adaptive_tx.unwrap_or(false),
        ),
        None => (0, 1, false),
    }
}

/// The lowest-latency setting: no RX delay, an interrupt per packet, adaptive RX moderation
/// off; TX completions as the driver had them (`own`: the driver's setting, `None` for an
/// interrupt per completion). Under adaptive TX moderation the driver moves `tx-usecs` and
/// `tx-frames` itself: they are left to it.
pub(crate) fn idle_params(own: Option<&Knob>) -> CoalesceParams {
    let (tx_usecs, tx_frames, adaptive_tx) = own_tx(own);
    CoalesceParams {
        rx_usecs: Some(0),
        rx_max_frames: Some(1),
        tx_usecs: (!adaptive_tx).then_some(tx_usecs),
        tx_max_frames: (!adaptive_tx).then_some(tx_frames),
        use_adaptive_rx: Some(false),
        use_adaptive_tx: Some(adaptive_tx),
    }
}

/// A delay of `usecs` with `frames` on both directions, adaptive moderation off; TX never
/// under the driver's own setting (`own`, see [`idle_params`]).
pub(crate) fn delay_params(usecs: u32, frames: u32, own: Option<&Knob>) -> CoalesceParams {
    let (tx_usecs, tx_frames, _) = own_tx(own);
    CoalesceParams {
        rx_usecs: Some(usecs),
        rx_max_frames: Some(frames),
        tx_usecs: Some(usecs.max(tx_usecs)),
        tx_max_frames: Some(frames.max(tx_frames)),
        use_adaptive_rx: Some(false),
        use_adaptive_tx: Some(false),
    }
}

/// Everything a NIC knob holds, as the action that puts it back.
pub(crate) fn knob_params(k: &Knob) -> Option<CoalesceParams> {
    match k {
        Knob::NicQueue {
            rx_usecs,
            rx_max_frames,
            adaptive_rx,
            tx_usecs,
            tx_max_frames,
            adaptive_tx,
            ..
        } => Some(CoalesceParams {
            rx_usecs: Some(*rx_usecs),
            rx_max_frames: Some(*rx_max_frames),
            tx_usecs: Some(*tx_usecs),
            tx_max_frames: Some(*tx_max_frames),
            use_adaptive_rx: Some(*adaptive_rx),
            use_adaptive_tx: Some(*adaptive_tx),
        }),
        _ => None,
    }
}

/// Whether the knob already holds `p`. A driver without frame counts (e1000, igb, ice, i40e)
/// reads 0 frames after every set; a driver without TX moderation reads 0 TX usecs: neither is
/// a difference to act on.
pub(crate) fn holds(k: &Knob, p: &CoalesceParams) -> bool {
    let Some(cur) = knob_params(k) else {
        return false;
    };
    let same = |want: Option<u32>, have: Option<u32>, zero_ok: bool| match (want, have) {
        (None, _) => true,
        (Some(w), Some(h)) => w == h || (zero_ok && h == 0),
        (Some(_), None) => false,
    };
    same(p.rx_usecs, cur.rx_usecs, false)
        && same(p.rx_max_frames, cur.rx_max_frames, true)
        && same(p.tx_usecs, cur.tx_usecs, true)
        && same(p.tx_max_frames, cur.tx_max_frames, true)
        && p.use_adaptive_rx
            .is_none_or(|w| Some(w) == cur.use_adaptive_rx)
        && p.use_adaptive_tx
            .is_none_or(|w| Some(w) == cur.use_adaptive_tx)
}

/// The stricter of two settings for one device-wide knob: the longer delays, the larger frame
/// counts; adaptive moderation on only if both want it.
pub(crate) fn stricter(a: &CoalesceParams, b: &CoalesceParams) -> CoalesceParams {
    let max = |x: Option<u32>, y: Option<u32>| x.max(y);
    let and = |x: Option<bool>, y: Option<bool>| match (x, y) {
        (Some(x), Some(y)) => Some(x && y),
        (x, y) => x.or(y),
    };
    CoalesceParams {
        rx_usecs: max(a.rx_usecs, b.rx_usecs),
        rx_max_frames: max(a.rx_max_frames, b.rx_max_frames),
        tx_usecs: max(a.tx_usecs, b.tx_usecs),
        tx_max_frames: max(a.tx_max_frames, b.tx_max_frames),
        use_adaptive_rx: and(a.use_adaptive_rx, b.use_adaptive_rx),
        use_adaptive_tx: and(a.use_adaptive_tx, b.use_adaptive_tx),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knob(rx: u32, rx_frames: u32, tx: u32, tx_frames: u32) -> Knob {
        Knob::NicQueue {
            device: "eth0".into(),
            queue: 0,
            per_queue: true,
            rx_usecs: rx,
            rx_max_frames: rx_frames,
            adaptive_rx: false,
            tx_usecs: tx,
            tx_max_frames: tx_frames,
            adaptive_tx: false,
            min_usecs: 1,
        }
    }

    #[test]
    fn what_counts_as_held() {
        assert!(holds(&knob(0, 1, 0, 1), &idle_params(None)));
        // e1000: rx-usecs only, everything else reads 0.
        assert!(holds(&knob(0, 0, 0, 0), &idle_params(None)));
        assert!(holds(&knob(40, 0, 0, 0), &delay_params(40, 64, None)));
        assert!(!holds(&knob(3, 32, 16, 32), &idle_params(None)));
        assert!(!holds(&knob(40, 64, 16, 32), &delay_params(40, 64, None)));
        // TX as the driver had it: only RX moves.
        let own = knob(3, 32, 16, 32);
        assert!(holds(&knob(0, 1, 16, 32), &idle_params(Some(&own))));
        assert!(!holds(&knob(0, 1, 0, 1), &idle_params(Some(&own))));
        assert!(holds(
            &knob(40, 64, 40, 64),
            &delay_params(40, 64, Some(&own))
        ));
        assert_eq!(delay_params(5, 2, Some(&own)).tx_usecs, Some(16));
        assert_eq!(delay_params(5, 2, Some(&own)).tx_max_frames, Some(32));
    }

    #[test]
    fn stricter_takes_the_longer_delay() {
        let s = stricter(&delay_params(10, 64, None), &idle_params(None));
        assert_eq!(s, delay_params(10, 64, None));
        assert_eq!(programmed_usecs(0.4, 1), 1);
        assert_eq!(programmed_usecs(4.0, 10), 10);
    }
}
