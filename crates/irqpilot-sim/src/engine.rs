//! The event queue, keyed by `(time, seq)`, so events due at the same instant come out in the
//! order they were scheduled (a deterministic tie-break, as in nexosim).
//!
//! A timing wheel with an overflow heap. The wheel has [`SLOTS`] slots of [`SLOT_NS`]; an event
//! due within the window that starts at the slot of the latest event handed out goes into its
//! slot (one unsorted list per slot, linked through one pool of nodes that is reused, so the
//! live events stay in a few cache lines; one bit per slot in a two-level occupancy map), a later
//! one into a binary heap. The next event is the smallest key of the first occupied slot, or the
//! heap's top if that is smaller. An interrupt's next steps are microseconds away, so nearly
//! every event lands in the wheel: pushing is an append, taking the next one a few bit scans.
//! Which structure holds an event never changes the order: it is that of one priority queue.

use crate::time::SimTime;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Width of a wheel slot.
pub const SLOT_NS: u64 = 64;
/// Slots in the wheel (a window of `SLOTS * SLOT_NS`, 262 us).
pub const SLOTS: usize = 4096;
const WORDS: usize = SLOTS / 64;
// The summary word has one bit per occupancy word.
const _: () = assert!(WORDS == 64);

/// `(time << 64) | seq`: one comparison orders by time, then by scheduling order.
type Key = u128;

fn key(time: u64, seq: u64) -> Key {
    ((time as u128) << 64) | seq as u128
}

fn time_of(k: Key) -> u64 {
    (k >> 64) as u64
}

/// An event in the overflow heap, ordered by key alone.
struct Far<E> {
    key: Key,
    ev: E,
}

impl<E> PartialEq for Far<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<E> Eq for Far<E> {}
impl<E> PartialOrd for Far<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Far<E> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

/// No node.
const NIL: u32 = u32::MAX;

/// An event in the wheel, in its slot's list (a free node keeps its last event; events are
/// `Copy`, so nothing is dropped or taken).
struct Node<E> {
    key: Key,
    next: u32,
    ev: E,
}

/// Pending events.
pub struct EventQueue<E> {
    /// First node of each slot's list (a fixed-size array: slot numbers are masked into it, so
    /// no index is bounds-checked at run time).
    heads: Box<[u32; SLOTS]>,
    nodes: Vec<Node<E>>,
    /// First free node (linked through `next`).
    free: u32,
    /// Bit `s % 64` of word `s / 64` set when slot `s` holds something.
    words: [u64; WORDS],
    /// Bit `w` set when word `w` is not zero.
    summary: u64,
    /// Slot number (`time / SLOT_NS`) where the window starts: that of the latest event handed
    /// out. Events due before it (scheduled in the past) go into the first slot of the window.
    base: u64,
    in_wheel: usize,
    far: BinaryHeap<Reverse<Far<E>>>,
    seq: u64,
    popped: u64,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heads: Box::new([NIL; SLOTS]),
            nodes: Vec::new(),
            free: NIL,
            words: [0; WORDS],
            summary: 0,
            base: 0,
            in_wheel: 0,
            far: BinaryHeap::new(),
            seq: 0,
            popped: 0,
        }
    }
}

impl<E: Copy> std::fmt::Debug for EventQueue<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "EventQueue({} pending, {} handled)",
            self.len(),
            self.popped
        )
    }
}

/// Word of slot `s` in the occupancy map and the slot's bit in it.
fn word_bit(s: usize) -> (usize, u64) {
    ((s / 64) % WORDS, 1 << (s % 64))
}

impl<E: Copy> EventQueue<E> {
    /// Schedules `ev` at `time`.
    pub fn push(&mut self, time: SimTime, ev: E) {
        self.seq += 1;
        let k = key(time.0, self.seq);
        let slot_no = (time.0 / SLOT_NS).max(self.base);
        if slot_no - self.base >= SLOTS as u64 {
            self.push_far(k, ev);
            return;
        }
        let s = (slot_no % SLOTS as u64) as usize;
        let node = Node {
            key: k,
            next: self.heads[s],
            ev,
        };
        let i = match self.nodes.get_mut(self.free as usize) {
            Some(slot) => {
                let i = self.free;
                self.free = slot.next;
                *slot = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.heads[s] = i;
        let (w, bit) = word_bit(s);
        self.words[w] |= bit;
        self.summary |= 1 << w;
        self.in_wheel += 1;
    }

    /// An event beyond the window, into the overflow heap (rare: kept out of `push`, whose
    /// hot path then needs fewer registers).
    #[cold]
    #[inline(never)]
    fn push_far(&mut self, key: Key, ev: E) {
        self.far.push(Reverse(Far { key, ev }));
    }

    /// The first occupied slot at or after the window's start, in window order.
    fn first_slot(&self) -> Option<usize> {
        if self.in_wheel == 0 {
            return None;
        }
        let start = (self.base % SLOTS as u64) as usize;
        let (w0, b0) = ((start / 64) % WORDS, start % 64);
        // The start word, from the start bit.
        let here = self.words[w0] & (u64::MAX << b0);
        if here != 0 {
            return Some(w0 * 64 + here.trailing_zeros() as usize);
        }
        // Later words, then (wrapping) the earlier ones and the start word's low bits.
        let later = if w0 == WORDS - 1 {
            0
        } else {
            self.summary & (u64::MAX << (w0 + 1))
        };
        let w = if later != 0 {
            later.trailing_zeros() as usize
        } else {
            let wrapped = self.summary & !(u64::MAX << w0);
            if wrapped != 0 {
                wrapped.trailing_zeros() as usize
            } else {
                // Only the start word's bits below the start remain.
                w0
            }
        };
        let bits = self.words[w % WORDS];
        (bits != 0).then(|| w * 64 + bits.trailing_zeros() as usize)
    }

    /// The smallest key in the wheel, with its slot, its node and the node before it.
    fn wheel_min(&self) -> Option<(Key, usize, u32, u32)> {
        let s = self.first_slot()? % SLOTS;
        // An occupied slot's list is not empty; most hold one event.
        let head = self.heads[s];
        let first = self.nodes.get(head as usize)?;
        let (mut best, mut best_i, mut best_prev) = (first.key, head, NIL);
        let (mut prev, mut i) = (head, first.next);
        while let Some(n) = self.nodes.get(i as usize) {
            if n.key < best {
                (best, best_i, best_prev) = (n.key, i, prev);
            }
            prev = i;
            i = n.next;
        }
        Some((best, s, best_i, best_prev))
    }

    /// Time of the next event.
    pub fn peek_time(&self) -> Option<SimTime> {
        let w = self.wheel_min().map(|(k, ..)| k);
        let f = self.far.peek().map(|Reverse(f)| f.key);
        let k = match (w, f) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(SimTime(time_of(k)))
    }

    /// Removes the next event.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        self.pop_until(SimTime(u64::MAX))
    }

    /// Removes the next event if it is due at or before `until`.
    pub fn pop_until(&mut self, until: SimTime) -> Option<(SimTime, E)> {
        if let Some((k, s, i, prev)) = self.wheel_min() {
            if self.far.peek().is_none_or(|Reverse(f)| f.key > k) {
                if time_of(k) > until.0 {
                    return None;
                }
                let node = self.nodes.get_mut(i as usize)?;
                let (next, ev) = (node.next, node.ev);
                node.next = self.free;
                self.free = i;
                match self.nodes.get_mut(prev as usize) {
                    Some(p) => p.next = next,
                    None => self.heads[s] = next,
                }
                if self.heads[s] == NIL {
                    let (w, bit) = word_bit(s);
                    self.words[w] &= !bit;
                    if self.words[w] == 0 {
                        self.summary &= !(1 << w);
                    }
                }
                self.in_wheel -= 1;
                return Some(self.handed_out(k, ev));
            }
        }
        self.pop_far(until)
    }

    /// The overflow heap's top, if it is the next event and due by `until`.
    #[cold]
    #[inline(never)]
    fn pop_far(&mut self, until: SimTime) -> Option<(SimTime, E)> {
        if self
            .far
            .peek()
            .is_none_or(|Reverse(f)| time_of(f.key) > until.0)
        {
            return None;
        }
        let Reverse(f) = self.far.pop()?;
        Some(self.handed_out(f.key, f.ev))
    }

    /// Counts an event handed out and moves the window's start to its slot (never back).
    fn handed_out(&mut self, k: Key, ev: E) -> (SimTime, E) {
        self.popped += 1;
        self.base = self.base.max(time_of(k) / SLOT_NS);
        (SimTime(time_of(k)), ev)
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.in_wheel + self.far.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Events handed out so far.
    pub fn handled(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    #[test]
    fn time_order_then_fifo() {
        let mut q = EventQueue::default();
        q.push(SimTime(5), 'a');
        q.push(SimTime(1), 'b');
        q.push(SimTime(5), 'c');
        q.push(SimTime(1), 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'd', 'a', 'c']);
        assert_eq!(q.handled(), 4);
    }

    /// The same order as one binary heap keyed by `(time, seq)`, under the pattern a simulation
    /// makes (pop, then push at or after the popped time, near and far), with pushes into the
    /// past, long idle gaps and a full turn of the wheel.
    #[test]
    fn same_order_as_one_binary_heap() {
        let mut rng = Stream::new(1, "engine");
        let mut q = EventQueue::default();
        let mut reference: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
        let mut seq = 0u64;
        let mut push = |q: &mut EventQueue<u64>, r: &mut BinaryHeap<_>, t: u64| {
            seq += 1;
            q.push(SimTime(t), seq);
            r.push(Reverse((t, seq)));
        };
        for i in 0..1000 {
            push(&mut q, &mut reference, rng.below(1_000_000) + i);
        }
        let window = SLOTS as u64 * SLOT_NS;
        let mut now = 0u64;
        for round in 0..300_000u64 {
            if round % 97 == 0 {
                push(&mut q, &mut reference, now.saturating_sub(rng.below(500)));
                continue;
            }
            assert_eq!(
                q.peek_time(),
                reference.peek().map(|Reverse((t, _))| SimTime(*t))
            );
            let got = q.pop();
            let want = reference.pop().map(|Reverse((t, s))| (SimTime(t), s));
            assert_eq!(got, want, "round {round}");
            let Some((t, _)) = got else { break };
            now = t.0;
            for _ in 0..rng.below(3) {
                let dt = [
                    0,
                    1,
                    63,
                    64,
                    1_000,
                    50_000,
                    window - 1,
                    window,
                    window + 65,
                    3 * window,
                ][rng.below(10) as usize];
                push(&mut q, &mut reference, now + dt);
            }
        }
        while let Some(Reverse((t, s))) = reference.pop() {
            assert_eq!(q.pop(), Some((SimTime(t), s)));
        }
        assert!(q.is_empty() && q.pop().is_none());
    }
}
