//! How a proactor is sized and set up: the ring, the provided-buffer ring
//! and the notifier's first read, chosen before the first turn because
//! the kernel fixes them when the ring is created.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::VecDeque;
use std::io;
use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Inner, Proactor};
use crate::bufring::BufRing;
use crate::notify::Notifier;
use crate::ops::Ops;
use crate::ring::Ring;
use crate::stats::Counters;
use crate::time::Timers;

/// How a [`Proactor`] is sized.
#[derive(Clone, Copy, Debug)]
pub struct Builder {
    entries: u32,
    buffers: u16,
    buf_size: u32,
    max_wait: Option<Duration>,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            entries: 256,
            buffers: 256,
            buf_size: 4096,
            max_wait: std::env::var("PROACTOR_MAX_WAIT_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis),
        }
    }
}

impl Builder {
    /// SQ entries (a power of two; the CQ gets four times as many).
    pub fn entries(mut self, n: u32) -> Builder {
        self.entries = n;
        self
    }

    /// The provided-buffer ring: `count` (a power of two) buffers of `size`
    /// bytes, shared by every multishot recv of this proactor.
    pub fn buffers(mut self, count: u16, size: u32) -> Builder {
        self.buffers = count;
        self.buf_size = size;
        self
    }

    /// Caps every wait in `io_uring_enter` (default: none; the environment
    /// variable `PROACTOR_MAX_WAIT_MS` sets it too). Only for running under
    /// valgrind 3.19, which does not let other threads run while one waits
    /// in `io_uring_enter` (see `scripts/valgrind.sh`): a capped wait hands
    /// the other threads a turn every few milliseconds.
    pub fn max_wait(mut self, d: Option<Duration>) -> Builder {
        self.max_wait = d;
        self
    }

    /// Sets up the ring, registers the buffers, arms the notifier's read.
    pub fn build(self) -> io::Result<Proactor> {
        let ring = Ring::new(self.entries)?;
        // SAFETY: the BufRing lives in Inner beside the ring, and Inner's Drop
        // unregisters it (after the last CQE) before freeing it.
        let bufs = unsafe { BufRing::new(ring.fd(), 0, self.buffers, self.buf_size) }?;
        let p = Proactor {
            inner: Rc::new(Inner {
                ring: RefCell::new(ring),
                overflow: RefCell::new(VecDeque::new()),
                ops: RefCell::new(Ops::default()),
                bufs: ManuallyDrop::new(bufs),
                buf_waiters: RefCell::new(Vec::new()),
                timers: RefCell::new(Timers::default()),
                notifier: Notifier::new()?,
                notify_buf: Box::new(UnsafeCell::new(0)),
                notify_armed: Cell::new(false),
                cqe_buf: RefCell::new(Vec::with_capacity(256)),
                wake_buf: RefCell::new(Vec::new()),
                stats: Arc::new(Counters::default()),
                max_wait: self.max_wait,
                now: Cell::new(Instant::now()),
            }),
        };
        p.arm_notify();
        Ok(p)
    }
}
