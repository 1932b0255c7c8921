//! Cross-thread notification: how another thread interrupts `epoll_wait`.
//!
//! The reactor keeps an eventfd in its epoll set, registered edge-triggered
//! for reading. [`Notifier::notify`] writes to it, which ends the wait.
//! Notifies coalesce: the first one sets a flag and writes; later ones see the
//! flag and return, so a burst of a thousand remote wakes costs one syscall.
//!
//! The reactor never reads the eventfd. In edge-triggered mode *every* write
//! to an eventfd is a new edge (the kernel re-queues the fd on each write), so
//! clearing the flag when the event arrives is enough, and saves a syscall per
//! remote wake. The counter grows by one per non-coalesced notify; were it to
//! reach its maximum (2^64 - 2), the write fails with `EAGAIN` and the
//! notifier drains the counter and writes again.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::sys;

struct Shared {
    fd: OwnedFd,
    notified: AtomicBool,
    writes: AtomicU64,
}

/// A `Send + Sync` handle that wakes one reactor's `epoll_wait` from any
/// thread. Cheap to clone.
#[derive(Clone)]
pub struct Notifier {
    shared: Arc<Shared>,
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier")
            .field("fd", &self.shared.fd.as_raw_fd())
            .field("notified", &self.shared.notified.load(Ordering::Relaxed))
            .finish()
    }
}

impl Notifier {
    pub(crate) fn new() -> io::Result<Notifier> {
        Ok(Notifier {
            shared: Arc::new(Shared {
                fd: sys::eventfd()?,
                notified: AtomicBool::new(false),
                writes: AtomicU64::new(0),
            }),
        })
    }

    /// Wakes the reactor if it is (or is about to be) blocked in `epoll_wait`.
    /// Redundant calls before the reactor wakes up cost one atomic swap.
    pub fn notify(&self) {
        if self.shared.notified.swap(true, Ordering::AcqRel) {
            return;
        }
        self.shared.writes.fetch_add(1, Ordering::Relaxed);
        let fd = self.shared.fd.as_fd();
        let one = 1u64.to_ne_bytes();
        // Other errors (EBADF) cannot happen while we hold the fd, and a waker
        // must never panic, so only a full counter gets an answer.
        if let Err(e) = sys::write(fd, &one)
            && e.kind() == io::ErrorKind::WouldBlock
        {
            // Counter at its maximum: drain it, then the write fits.
            let _ = sys::read(fd, &mut [0u8; 8]);
            let _ = sys::write(fd, &one);
        }
    }

    /// How many notifies actually wrote to the eventfd (the rest coalesced).
    pub fn writes(&self) -> u64 {
        self.shared.writes.load(Ordering::Relaxed)
    }

    /// The eventfd, for the reactor's epoll set.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }

    /// Acknowledges the notification: called by the reactor when the eventfd
    /// reported an edge. The next notify writes (and so wakes) again.
    pub(crate) fn reset(&self) {
        self.shared.notified.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifies_coalesce_until_reset() {
        let n = Notifier::new().unwrap();
        n.notify();
        n.notify();
        n.notify();
        assert_eq!(n.writes(), 1);
        n.reset();
        n.notify();
        assert_eq!(n.writes(), 2);
    }

    #[test]
    fn counter_overflow_is_harmless() {
        let n = Notifier::new().unwrap();
        // Drive the eventfd counter to its maximum: a further write would block.
        sys::write(n.shared.fd.as_fd(), &(u64::MAX - 1).to_ne_bytes()).unwrap();
        n.notify(); // drains and writes again; must not panic or wedge.
        let mut buf = [0u8; 8];
        sys::read(n.shared.fd.as_fd(), &mut buf).unwrap();
        assert_eq!(
            u64::from_ne_bytes(buf),
            1,
            "counter was drained, then bumped"
        );
        n.reset();
        n.notify();
        assert_eq!(n.writes(), 2);
    }

    #[test]
    fn every_write_is_a_new_edge() {
        use crate::epoll::{Epoll, Events};
        use std::time::Duration;
        let n = Notifier::new().unwrap();
        let ep = Epoll::new().unwrap();
        ep.add(n.fd(), (libc::EPOLLIN | libc::EPOLLET) as u32, 1)
            .unwrap();
        let mut ev = Events::with_capacity(4);
        for _ in 0..3 {
            n.notify();
            assert_eq!(ep.wait(&mut ev, Some(Duration::ZERO)).unwrap(), 1);
            assert_eq!(ep.wait(&mut ev, Some(Duration::ZERO)).unwrap(), 0);
            n.reset(); // without reading the counter
        }
    }
}
