//! Cross-thread notification: how another thread interrupts `epoll_wait`.
//!
//! The reactor keeps an eventfd in its epoll set. [`Notifier::notify`] writes
//! to it, which makes it readable and ends the wait. Notifies coalesce: the
//! first one sets a flag and writes; later ones see the flag and return, so a
//! burst of a thousand remote wakes costs one syscall. The reactor reads the
//! eventfd *before* clearing the flag; clearing first would let a notify slip
//! in between, be swallowed by the read, and leave the flag set forever.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
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
        match sys::write(self.shared.fd.as_raw_fd(), &1u64.to_ne_bytes()) {
            Ok(_) => {}
            // The counter would pass u64::MAX - 1: it is far from zero, so the
            // fd is readable already and the reactor will wake anyway.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // EBADF etc. cannot happen while we hold the fd; nothing to do if
            // it somehow does, and a notify must never panic in a waker.
            Err(_) => {}
        }
    }

    /// How many notifies actually wrote to the eventfd (the rest coalesced).
    pub fn writes(&self) -> u64 {
        self.shared.writes.load(Ordering::Relaxed)
    }

    pub(crate) fn raw_fd(&self) -> i32 {
        self.shared.fd.as_raw_fd()
    }

    /// Consumes the pending notification. Called by the reactor when the
    /// eventfd is readable. Order matters: read, then clear the flag.
    pub(crate) fn reset(&self) {
        let mut buf = [0u8; 8];
        // EAGAIN: already drained. Any value read just resets the counter.
        let _ = sys::read(self.shared.fd.as_raw_fd(), &mut buf);
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
        sys::write(n.raw_fd(), &(u64::MAX - 1).to_ne_bytes()).unwrap();
        n.notify(); // gets EAGAIN internally; must not panic or wedge.
        n.reset();
        let mut buf = [0u8; 8];
        assert_eq!(
            sys::read(n.raw_fd(), &mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock,
            "reset drained the counter"
        );
        n.notify();
        assert_eq!(n.writes(), 2);
    }
}
