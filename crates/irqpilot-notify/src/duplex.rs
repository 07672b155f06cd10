//! [`Duplex`]: one end of a request/response pair (a notifier to the peer, a waiter on its own
//! cell), whose hybrid waits use the peer's state as well as the observed gaps.

use crate::notifier::{Notifier, NotifyCell, Strategy, Waiter, channel, deadline_after};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

/// One end of a request/response pair: a [`Notifier`] to the other end and a [`Waiter`] on its
/// own cell. With [`Strategy::Hybrid`], a wait that follows a notify spins only if that notify
/// found the peer awake (see [`crate::hybrid`]), so two ends that answer each other quickly keep
/// spinning, and ends that find each other asleep block without burning CPU.
///
/// ```
/// use irqpilot_notify::{duplex, Strategy};
///
/// let (mut client, mut server) = duplex(Strategy::hybrid());
/// let t = std::thread::spawn(move || {
///     for _ in 0..1000 {
///         server.wait();
///         server.notify(); // reply
///     }
/// });
/// for _ in 0..1000 {
///     client.notify(); // request
///     assert_eq!(client.wait(), 1); // exactly one reply per request
/// }
/// t.join().unwrap();
/// ```
pub struct Duplex<H: Deref<Target = NotifyCell> = Arc<NotifyCell>> {
    tx: Notifier<H>,
    rx: Waiter<H>,
    peer_was_asleep: Option<bool>,
}

impl<H: Deref<Target = NotifyCell>> Duplex<H> {
    /// Joins a notifier to the peer's cell and a waiter on this end's cell.
    pub fn new(tx: Notifier<H>, rx: Waiter<H>) -> Duplex<H> {
        Duplex {
            tx,
            rx,
            peer_was_asleep: None,
        }
    }

    /// Notifies the peer; returns whether it had to be woken.
    #[inline]
    pub fn notify(&mut self) -> bool {
        let asleep = self.tx.notify();
        self.peer_was_asleep = Some(asleep);
        asleep
    }

    /// Waits for the peer's notification (count since the last wait).
    #[inline]
    pub fn wait(&mut self) -> u32 {
        let hint = self.peer_was_asleep.take();
        loop {
            if let Some(n) = self.rx.wait_until(None, hint) {
                return n;
            }
        }
    }

    /// Like [`wait`](Self::wait) but gives up after `timeout`.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<u32> {
        let hint = self.peer_was_asleep.take();
        self.rx.wait_until(Some(deadline_after(timeout)), hint)
    }

    /// This end's waiter (for its hybrid state).
    pub fn waiter(&self) -> &Waiter<H> {
        &self.rx
    }
}

impl<H: Deref<Target = NotifyCell>> fmt::Debug for Duplex<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Duplex")
            .field("tx", &self.tx)
            .field("rx", &self.rx)
            .field("peer_was_asleep", &self.peer_was_asleep)
            .finish()
    }
}

/// Two connected [`Duplex`] ends for threads of one process.
pub fn duplex(strategy: Strategy) -> (Duplex, Duplex) {
    let (a_tx, b_rx) = channel(strategy);
    let (b_tx, a_rx) = channel(strategy);
    (Duplex::new(a_tx, a_rx), Duplex::new(b_tx, b_rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplex_ping_pong_and_return_to_spinning() {
        let (mut a, mut b) = duplex(Strategy::hybrid());
        let t = std::thread::spawn(move || {
            for _ in 0..3000 {
                assert_eq!(b.wait_timeout(Duration::from_secs(20)), Some(1));
                b.notify();
            }
            b
        });
        for i in 0..3000 {
            if i % 500 == 0 {
                // Idle now and then, so both ends fall asleep and must find their way back.
                std::thread::sleep(Duration::from_millis(3));
            }
            a.notify();
            assert_eq!(a.wait_timeout(Duration::from_secs(20)), Some(1));
        }
        let b = t.join().unwrap();
        assert!(a.waiter().hybrid_state().is_some());
        assert!(b.waiter().hybrid_state().is_some());
    }
}
