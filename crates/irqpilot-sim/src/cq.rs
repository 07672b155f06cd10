//! Completion queues (an RX ring, a TX completion ring, an NVMe CQ) and the device-side
//! moderation that decides when a queue's vector raises an interrupt.
//!
//! Entries are added in *landing batches*: `count` entries that land (become visible to the host)
//! at `t0, t0 + spacing, ...`. A train of packets or a group of I/Os is one batch, so the simulator
//! does arithmetic per batch instead of an event per packet, yet still knows when the k-th entry
//! landed (frame thresholds) and when the last one did (CQE-mode timers).

use crate::time::SimTime;

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EntryKind {
    /// A received packet.
    Rx,
    /// A transmit completion.
    TxDone,
    /// An NVMe completion.
    Cqe,
}

/// Entries landing at `t0 + k * spacing_ns`, `k = 0..count`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Batch {
    pub first_seq: u64,
    pub count: u32,
    pub t0: SimTime,
    pub spacing_ns: u32,
    /// Bytes per entry.
    pub bytes: u32,
    /// Request id for tracked requests (`NO_TAG` otherwise).
    pub tag: u32,
    /// Free word: submission time of NVMe I/Os, send time of requests.
    pub aux: u64,
}

/// No request attached.
pub(crate) const NO_TAG: u32 = u32::MAX;

impl Batch {
    fn land(&self, seq: u64) -> SimTime {
        self.t0
            .after((seq - self.first_seq) * self.spacing_ns as u64)
    }
    fn last_seq(&self) -> u64 {
        self.first_seq + self.count as u64 - 1
    }
    fn last_land(&self) -> SimTime {
        self.land(self.last_seq())
    }
}

/// A ring of entries in sequence order.
#[derive(Clone, Debug)]
pub(crate) struct Cq {
    /// Batches from `front` on are pending; those before it are consumed. One contiguous
    /// slice (no wrap-around as in a `VecDeque`): every question about the ring walks its first
    /// few batches, and a ring usually empties at each poll, which resets it.
    batches: Vec<Batch>,
    front: usize,
    /// Next entry to consume.
    pub head: u64,
    /// Next sequence number to assign.
    pub tail: u64,
    capacity: u64,
    /// Entries refused because the ring was full.
    pub dropped: u64,
}

impl Cq {
    pub(crate) fn new(capacity: u32) -> Cq {
        Cq {
            batches: Vec::new(),
            front: 0,
            head: 0,
            tail: 0,
            capacity: capacity.max(1) as u64,
            dropped: 0,
        }
    }

    /// The pending batches, oldest first.
    fn pending(&self) -> &[Batch] {
        &self.batches[self.front..]
    }

    /// Drops the oldest pending batch.
    fn pop_front(&mut self) {
        self.front += 1;
        if self.front == self.batches.len() {
            self.batches.clear();
            self.front = 0;
        } else if self.front >= 64 && 2 * self.front >= self.batches.len() {
            // Amortized: at least as many pushes as the batches moved happen between drains.
            self.batches.drain(..self.front);
            self.front = 0;
        }
    }

    /// Entries scheduled but not consumed (landed or still landing).
    pub(crate) fn occupancy(&self) -> u64 {
        self.tail - self.head
    }

    /// Adds a batch, truncated to the free space; returns how many entries were accepted.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        t0: SimTime,
        spacing_ns: u32,
        count: u32,
        bytes: u32,
        kind: EntryKind,
        tag: u32,
        aux: u64,
    ) -> u32 {
        let free = self.capacity.saturating_sub(self.occupancy());
        let n = (count as u64).min(free) as u32;
        self.dropped += (count - n) as u64;
        if n > 0 {
            let _ = kind; // kinds are told apart by ring (RX, TX, CQ); kept in the signature for clarity
            self.batches.push(Batch {
                first_seq: self.tail,
                count: n,
                t0,
                spacing_ns,
                bytes,
                tag,
                aux,
            });
            self.tail += n as u64;
        }
        n
    }

    /// Landing time of entry `seq`, if scheduled.
    #[cfg(test)]
    pub(crate) fn land_time(&self, seq: u64) -> Option<SimTime> {
        if seq < self.head || seq >= self.tail {
            return None;
        }
        let pending = self.pending();
        pending.get(locate(pending, seq)).map(|b| b.land(seq))
    }

    /// Entries from the head that have landed by `now`. Landing times never decrease along the
    /// ring (devices DMA in order), so the scan stops at the first entry still in flight.
    pub(crate) fn landed(&self, now: SimTime) -> u64 {
        self.landed_up_to(now, u64::MAX)
    }

    /// `landed(now).min(limit)`, without looking further than `limit` entries.
    pub(crate) fn landed_up_to(&self, now: SimTime, limit: u64) -> u64 {
        let mut n = 0;
        for b in self.pending() {
            if n >= limit {
                return limit;
            }
            let first = b.first_seq.max(self.head);
            if b.land(first) > now {
                break;
            }
            // Whole batches that have landed need no division.
            let last_landed = if b.spacing_ns == 0 || b.last_land() <= now {
                b.last_seq()
            } else {
                (b.first_seq + now.since(b.t0) / b.spacing_ns as u64).min(b.last_seq())
            };
            n += last_landed - first + 1;
            if last_landed < b.last_seq() {
                break;
            }
        }
        n.min(limit)
    }

    /// How many of the first `n` entries from the head carry a tag that `pick` accepts.
    pub(crate) fn count_tagged(&self, n: u64, pick: impl Fn(u32) -> bool) -> u64 {
        let (mut seen, mut hits) = (0u64, 0u64);
        for b in self.pending() {
            if seen >= n {
                break;
            }
            let first = b.first_seq.max(self.head);
            let take = (b.last_seq() - first + 1).min(n - seen);
            if b.tag != NO_TAG && pick(b.tag) {
                hits += take;
            }
            seen += take;
        }
        hits
    }

    /// Consumes `n` entries from the head, calling `f(batch, entries_taken)` per batch portion.
    pub(crate) fn consume(&mut self, mut n: u64, mut f: impl FnMut(&Batch, u32)) {
        while n > 0 {
            let Some(&b) = self.batches.get(self.front) else {
                break;
            };
            let first = b.first_seq.max(self.head);
            let avail = b.last_seq() - first + 1;
            let take = avail.min(n);
            f(&b, take as u32);
            self.head = first + take;
            n -= take;
            if take == avail {
                self.pop_front();
            }
        }
    }

    /// The time the device's moderation would raise an interrupt, counting entries from `from`
    /// (entries that landed before `arm` count as landing at `arm`). `None` when no entry is
    /// pending.
    ///
    /// Inlined into the caller for the two answers a re-armed NIC vector mostly gets (from the
    /// first pending batch, which holds the head while the vector is armed); the rest of the
    /// cases are in [`Cq::fire_time_scan`].
    #[inline(always)]
    pub(crate) fn fire_time(
        &self,
        from: u64,
        arm: SimTime,
        m: &HwMod,
        last_irq: SimTime,
    ) -> Option<SimTime> {
        let from = from.max(self.head);
        if from >= self.tail {
            return None;
        }
        if let (
            Some(b0),
            HwMod::Timer {
                usecs_ns,
                frames,
                cqe,
            },
        ) = (self.batches.get(self.front), *m)
        {
            if usecs_ns != 0 && from <= b0.last_seq() {
                let land = b0.land(from);
                if cqe {
                    // Entries further apart than the timer, `from` not the batch's last and
                    // landing after the arm: the timer fires `u` after it, before the next
                    // entry lands (so before any frame threshold but one of 1).
                    if frames != 1
                        && (b0.spacing_ns as u64) > usecs_ns
                        && from < b0.last_seq()
                        && land >= arm
                    {
                        return Some(land.after(usecs_ns));
                    }
                } else if frames == 0 || from + (frames as u64 - 1) >= self.tail {
                    // EQE mode with the frame threshold beyond the ring: the timer decides.
                    return Some(land.max(arm).after(usecs_ns));
                }
            }
        }
        self.fire_time_scan(from, arm, m, last_irq)
    }

    /// [`Cq::fire_time`] by walking the batches (`from` at or past the head, before the tail).
    fn fire_time_scan(&self, from: u64, arm: SimTime, m: &HwMod, last: SimTime) -> Option<SimTime> {
        // The batches from the one holding `from`: every question below starts there. While a
        // vector is armed `from` is the head, in the first pending batch.
        let pending = self.pending();
        let rest = match pending.first() {
            Some(b) if from <= b.last_seq() => pending,
            _ => pending.get(locate(pending, from)..)?,
        };
        let b0 = rest.first()?;
        let first = b0.land(from).max(arm);
        let tail = self.tail;
        let nth = |k: u64| -> Option<SimTime> {
            let seq = from + k.checked_sub(1)?;
            if seq >= tail {
                return None;
            }
            let b = if seq <= b0.last_seq() {
                b0
            } else {
                rest.get(locate(rest, seq))?
            };
            Some(b.land(seq).max(arm))
        };
        let min_opt = |a: SimTime, b: Option<SimTime>| b.map_or(a, |b| a.min(b));
        Some(match *m {
            HwMod::Immediate => first,
            HwMod::Holdoff { interval_ns } => first.max(last.after(interval_ns)),
            HwMod::Timer {
                usecs_ns,
                frames,
                cqe: false,
            } => {
                let t = if usecs_ns == 0 {
                    first
                } else {
                    first.after(usecs_ns)
                };
                min_opt(t, nth(frames as u64))
            }
            HwMod::Timer {
                usecs_ns,
                frames,
                cqe: true,
            } => {
                let by_frames = nth(frames as u64);
                if usecs_ns == 0 {
                    min_opt(first, by_frames)
                } else {
                    // The timer can only win if it fires before the frame threshold: the
                    // scan for an idle gap stops there.
                    let bound = by_frames.unwrap_or(SimTime(u64::MAX));
                    idle_timer(rest, from, arm, usecs_ns, bound).min(bound)
                }
            }
            HwMod::NvmeAgg { time_ns, threshold } => {
                if time_ns == 0 || threshold <= 1 {
                    first
                } else {
                    min_opt(first.after(time_ns), nth(threshold as u64))
                }
            }
        })
    }
}

/// Index of the batch holding `seq` (batches hold consecutive entries in order).
fn locate(batches: &[Batch], seq: u64) -> usize {
    // Most queries are about the oldest pending entries (the head, a frame threshold a few
    // batches on): a short walk from the front beats a binary search over the ring.
    let near = batches.len().min(4);
    let mut i = 0;
    while i < near {
        if seq <= batches[i].last_seq() {
            return i;
        }
        i += 1;
    }
    batches.partition_point(|b| b.last_seq() < seq)
}

/// CQE mode: every entry restarts the timer; it fires `u` after an entry not followed by
/// another within `u`. `batches` start with the one holding `from`. Entries landing after
/// `bound` are not looked at: any answer later than `bound` is as good as `bound` to the caller.
fn idle_timer(batches: &[Batch], from: u64, arm: SimTime, u: u64, bound: SimTime) -> SimTime {
    let mut prev: Option<SimTime> = None;
    for b in batches {
        let s = b.first_seq.max(from);
        let start = b.land(s).max(arm);
        if start > bound {
            // This entry and every later one land after the bound: the timer fires `u`
            // after the last entry before them, or after the bound (the caller takes the
            // earlier of the answer and the bound).
            return prev.map_or(bound, |p| p.after(u));
        }
        if let Some(p) = prev {
            if start.since(p) > u {
                return p.after(u);
            }
        }
        if b.spacing_ns as u64 > u && s < b.last_seq() {
            return start.after(u);
        }
        prev = Some(b.last_land().max(arm));
    }
    prev.unwrap_or(arm).after(u)
}

/// Device-side moderation programmed on a vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HwMod {
    /// Interrupt at the first pending entry.
    Immediate,
    /// Intel ITR: at least `interval_ns` between interrupts.
    Holdoff { interval_ns: u64 },
    /// `rx-usecs`/`rx-frames` timer; `cqe` restarts it at every entry.
    Timer {
        usecs_ns: u64,
        frames: u32,
        cqe: bool,
    },
    /// NVMe feature 08h: time (ns) and threshold (entries).
    NvmeAgg { time_ns: u64, threshold: u32 },
}

impl HwMod {
    /// The longest delay this program adds to an isolated entry, in ns (for reports).
    pub(crate) fn delay_ns(&self) -> u64 {
        match *self {
            HwMod::Immediate => 0,
            HwMod::Holdoff { interval_ns } => interval_ns,
            HwMod::Timer { usecs_ns, .. } => usecs_ns,
            HwMod::NvmeAgg { time_ns, .. } => time_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> SimTime {
        SimTime(us * 1000)
    }

    fn ring() -> Cq {
        let mut c = Cq::new(1024);
        // 4 packets 1 us apart from 10 us, then 2 packets at 50 us and 51 us.
        c.push(t(10), 1000, 4, 1500, EntryKind::Rx, NO_TAG, 0);
        c.push(t(50), 1000, 2, 1500, EntryKind::Rx, NO_TAG, 0);
        c
    }

    #[test]
    fn landing_and_consuming() {
        let mut c = ring();
        assert_eq!(c.landed(t(9)), 0);
        assert_eq!(c.landed(t(11)), 2);
        assert_eq!(c.landed(t(49)), 4);
        assert_eq!(c.landed(t(60)), 6);
        assert_eq!(c.land_time(5), Some(t(51)));
        let mut seen = 0;
        c.consume(3, |_, n| seen += n);
        assert_eq!((seen, c.head), (3, 3));
        assert_eq!(c.landed(t(60)), 3);
        c.consume(10, |_, _| {});
        assert_eq!(c.occupancy(), 0);
        assert_eq!(c.land_time(0), None);
    }

    #[test]
    fn capacity_drops() {
        let mut c = Cq::new(5);
        assert_eq!(c.push(t(0), 0, 4, 1, EntryKind::Rx, NO_TAG, 0), 4);
        assert_eq!(c.push(t(0), 0, 4, 1, EntryKind::Rx, NO_TAG, 0), 1);
        assert_eq!(c.dropped, 3);
    }

    #[test]
    fn moderation_semantics() {
        let c = ring();
        let z = SimTime::ZERO;
        assert_eq!(c.fire_time(0, z, &HwMod::Immediate, z), Some(t(10)));
        // ITR: an isolated packet long after the last interrupt is not delayed...
        assert_eq!(
            c.fire_time(
                0,
                z,
                &HwMod::Holdoff {
                    interval_ns: 50_000
                },
                z
            ),
            Some(t(50))
        );
        assert_eq!(
            c.fire_time(0, z, &HwMod::Holdoff { interval_ns: 5_000 }, z),
            Some(t(10))
        );
        // ...but one soon after an interrupt waits for the interval.
        assert_eq!(
            c.fire_time(0, z, &HwMod::Holdoff { interval_ns: 5_000 }, t(8)),
            Some(t(13))
        );
        // EQE timer from the first entry; frames threshold can come first.
        assert_eq!(
            c.fire_time(
                0,
                z,
                &HwMod::Timer {
                    usecs_ns: 8_000,
                    frames: 0,
                    cqe: false
                },
                z
            ),
            Some(t(18))
        );
        assert_eq!(
            c.fire_time(
                0,
                z,
                &HwMod::Timer {
                    usecs_ns: 8_000,
                    frames: 3,
                    cqe: false
                },
                z
            ),
            Some(t(12))
        );
        // CQE timer restarts per entry: idle 8 us after the packet at 13 us.
        assert_eq!(
            c.fire_time(
                0,
                z,
                &HwMod::Timer {
                    usecs_ns: 8_000,
                    frames: 0,
                    cqe: true
                },
                z
            ),
            Some(t(21))
        );
        // With a 50 us timer the second batch arrives in time and restarts it.
        assert_eq!(
            c.fire_time(
                0,
                z,
                &HwMod::Timer {
                    usecs_ns: 50_000,
                    frames: 0,
                    cqe: true
                },
                z
            ),
            Some(t(101))
        );
        // Entries further apart than the CQE timer: it fires after the first one, whatever the
        // frame threshold; armed after that entry landed, it counts from the arm time.
        let mut sparse = Cq::new(64);
        sparse.push(t(10), 5_000, 4, 1500, EntryKind::Rx, NO_TAG, 0);
        for (frames, arm, want) in [
            (32, z, 13),
            (0, z, 13),
            (2, z, 13),
            (1, z, 10),
            (32, t(11), 14),
        ] {
            let m = HwMod::Timer {
                usecs_ns: 3_000,
                frames,
                cqe: true,
            };
            assert_eq!(
                sparse.fire_time(0, arm, &m, z),
                Some(t(want)),
                "frames {frames}"
            );
        }
        // Entries landed before arming count from the arm time.
        assert_eq!(c.fire_time(0, t(30), &HwMod::Immediate, z), Some(t(30)));
        assert_eq!(c.fire_time(4, z, &HwMod::Immediate, z), Some(t(50)));
        assert_eq!(c.fire_time(6, z, &HwMod::Immediate, z), None);
        // NVMe aggregation: threshold 5 reached at 50 us, before time 100 us.
        assert_eq!(
            c.fire_time(
                0,
                z,
                &HwMod::NvmeAgg {
                    time_ns: 100_000,
                    threshold: 5
                },
                z
            ),
            Some(t(50))
        );
        assert_eq!(
            c.fire_time(
                0,
                z,
                &HwMod::NvmeAgg {
                    time_ns: 100_000,
                    threshold: 50
                },
                z
            ),
            Some(t(110))
        );
    }
}
