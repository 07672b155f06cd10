//! The event queue: a binary heap keyed by `(time, seq)`, so events due at the same instant come
//! out in the order they were scheduled (a deterministic tie-break, as in nexosim).

use crate::time::SimTime;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// `(time << 64) | seq` in one integer: a single comparison orders by time, then insertion.
struct Entry<E> {
    key: u128,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap and the earliest event must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// Pending events.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            seq: 0,
            popped: 0,
        }
    }
}

impl<E> std::fmt::Debug for EventQueue<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "EventQueue({} pending, {} handled)",
            self.heap.len(),
            self.popped
        )
    }
}

impl<E> EventQueue<E> {
    /// Schedules `ev` at `time`.
    pub fn push(&mut self, time: SimTime, ev: E) {
        self.seq += 1;
        self.heap.push(Entry {
            key: ((time.0 as u128) << 64) | self.seq as u128,
            ev,
        });
    }

    /// Time of the next event.
    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|e| SimTime((e.key >> 64) as u64))
    }

    /// Removes the next event.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        let e = self.heap.pop()?;
        self.popped += 1;
        Some((SimTime((e.key >> 64) as u64), e.ev))
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Events handed out so far.
    pub fn handled(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
