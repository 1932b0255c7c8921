//! Waking a proactor from another thread.
//!
//! An eventfd with a read of it always in flight on the ring: another thread
//! writes the eventfd, the read completes, and the thread's wait in
//! `io_uring_enter` ends. An "already notified" flag coalesces a burst of
//! wakes into one `write`. (`IORING_OP_MSG_RING` would post straight into our
//! CQ, but only from a thread that has a ring of its own.)

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sys;

#[derive(Debug)]
struct Shared {
    fd: OwnedFd,
    pending: AtomicBool,
}

/// A `Send + Sync` handle that wakes its proactor's thread.
#[derive(Clone, Debug)]
pub struct Notifier {
    shared: Arc<Shared>,
}

impl Notifier {
    pub(crate) fn new() -> io::Result<Notifier> {
        Ok(Notifier {
            shared: Arc::new(Shared {
                fd: sys::eventfd()?,
                pending: AtomicBool::new(false),
            }),
        })
    }

    /// Ends the proactor's current or next wait. Cheap when repeated: only
    /// the first call after a wake-up writes the eventfd.
    pub fn notify(&self) {
        // AcqRel: whatever the caller published before (an inbox push) is
        // visible to the thread that later clears the flag and drains.
        if !self.shared.pending.swap(true, Ordering::AcqRel) {
            let _ = sys::eventfd_write(self.shared.fd.as_fd());
        }
    }

    /// Called by the proactor when the eventfd read completed, before it
    /// re-arms the read and before the executor drains its inbox.
    pub(crate) fn clear(&self) {
        self.shared.pending.store(false, Ordering::Release);
    }

    pub(crate) fn fd(&self) -> i32 {
        self.shared.fd.as_raw_fd()
    }
}
