//! A cross-thread doorbell: an eventfd plus an "armed" flag.
//!
//! The acceptor (or, in reuseport mode, a worker's port) sleeps in epoll when
//! `max_connections` is reached; workers that close connections must wake it,
//! but only then: an eventfd write per close would put a syscall on every
//! connection's path for nothing. So the sleeper *arms* the doorbell before
//! its final re-check of the open count, and a closer rings only if it finds
//! the doorbell armed (and disarms it, so exactly one closer rings).
//!
//! That is the store-then-load handshake of Dekker's algorithm:
//!
//! ```text
//!   sleeper                          closer
//!   armed.store(true)     SeqCst     closed.fetch_add(1)   SeqCst
//!   open = count(closed)  SeqCst     armed.swap(false)     SeqCst
//!   open >= max → sleep              was armed → ring
//! ```
//!
//! With `SeqCst` on all four operations at least one side sees the other's
//! write: either the sleeper counts the close and does not sleep, or the
//! closer sees the doorbell armed and rings. A wake cannot be lost.
//!
//! On a timeline (`reactor::trace::chrome`) a ring from inside a slice (a
//! worker's poll that closed a connection) starts an arrow, and the drain
//! that consumes the ring ends it in a short `doorbell` slice on the
//! sleeper's track: the cross-thread wake drawn like the others.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};

use reactor::trace::chrome;

use crate::sys;

/// An eventfd that other threads ring, and the flag that says whether anyone
/// is waiting for a close.
#[derive(Debug)]
pub(crate) struct Wake {
    fd: OwnedFd,
    armed: AtomicBool,
    /// The timeline's arrow of the last ring not yet drained (0: none).
    flow: AtomicU64,
}

impl Wake {
    pub(crate) fn new() -> io::Result<Wake> {
        Ok(Wake {
            fd: reactor::sys::eventfd()?,
            armed: AtomicBool::new(false),
            flow: AtomicU64::new(0),
        })
    }

    /// The eventfd to register (edge-triggered) in the sleeper's epoll.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Rings unconditionally (shutdown, a worker exiting).
    pub(crate) fn ring(&self) {
        if chrome::on() {
            let id = chrome::new_flow();
            if chrome::flow_start(id) {
                self.flow.store(id, Relaxed);
            }
        }
        // An eventfd write can only fail on a bad fd, and this one lives as
        // long as `self`; a full counter is already a pending wake.
        let _ = sys::eventfd_wake(self.fd.as_raw_fd());
    }

    /// Resets the counter so that the next ring is a new edge.
    pub(crate) fn drain(&self) {
        let _ = sys::eventfd_drain(self.fd.as_raw_fd());
        if chrome::on() {
            let id = self.flow.swap(0, Relaxed);
            if id != 0 {
                chrome::begin("doorbell", format_args!(""));
                chrome::flow_end(id);
                chrome::end(format_args!(""));
            }
        }
    }

    /// The sleeper announces it is about to wait for a close. It must re-check
    /// the open count *after* this.
    pub(crate) fn arm(&self) {
        self.armed.store(true, SeqCst);
    }

    /// The sleeper found room after all. Returns `false` if a closer already
    /// disarmed it, meaning a ring is on its way (harmless, but the eventfd
    /// will need draining).
    pub(crate) fn disarm(&self) -> bool {
        self.armed.swap(false, SeqCst)
    }

    /// Called by a closer after it counted its close (with `SeqCst`).
    pub(crate) fn ring_if_armed(&self) {
        if self.armed.load(SeqCst) && self.armed.swap(false, SeqCst) {
            self.ring();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_only_when_armed_and_only_once() {
        let w = Wake::new().unwrap();
        w.ring_if_armed();
        assert_eq!(sys::eventfd_drain(w.fd().as_raw_fd()).unwrap(), 0);
        w.arm();
        w.ring_if_armed();
        w.ring_if_armed();
        assert_eq!(sys::eventfd_drain(w.fd().as_raw_fd()).unwrap(), 1);
        w.arm();
        assert!(w.disarm());
        w.ring_if_armed();
        assert_eq!(sys::eventfd_drain(w.fd().as_raw_fd()).unwrap(), 0);
    }
}
