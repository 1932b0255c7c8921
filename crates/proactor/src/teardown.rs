//! Tearing a proactor down without freeing memory under the kernel.
//!
//! The rule of the crate (memory an operation uses belongs to the driver
//! until the operation's last CQE) holds at the very end too: when the last
//! handle goes, operations may still be in flight (a stream's multishot recv
//! on the buffer ring, the notifier's eventfd read, a parked buffer whose
//! cancel has not been answered). So Drop cancels everything, waits for the
//! last CQEs (bounded), and only then lets the fields go: the buffer ring is
//! unregistered and unmapped, parked buffers are freed, the rings are
//! unmapped and the ring fd is closed.

use std::mem::ManuallyDrop;
use std::os::fd::AsFd;
use std::time::Duration;

use crate::abi::*;
use crate::driver::{IGNORE_UD, Inner, NOTIFY_UD, refill};
use crate::ops::Kind;
use crate::sys;

impl Drop for Inner {
    /// Tears down in the order that keeps memory safe: cancel whatever is
    /// still in flight, wait (bounded) for every last CQE, unregister the
    /// buffer ring; only then are the buffers, the parked memory and the
    /// rings unmapped and the ring fd closed (field drops).
    fn drop(&mut self) {
        let live = self.ops.get_mut().live();
        if live == 0 && !self.notify_armed.get() && self.overflow.get_mut().is_empty() {
            self.drop_bufs();
            return;
        }
        let cancel_all = Sqe {
            opcode: IORING_OP_ASYNC_CANCEL,
            op_flags: IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL,
            user_data: IGNORE_UD,
            ..Sqe::default()
        };
        let mut cancel_queued = false;
        let mut cqes = Vec::new();
        for _ in 0..200 {
            let ring = self.ring.get_mut();
            // The overflow list goes to the kernel first and the cancel-all
            // after it: the kernel cancels only operations it has seen. A
            // full SQ is retried after this round's enter made room.
            // SAFETY: queued by `Proactor::push` under its contract; the
            // memory stays until the last CQE, which this loop waits for
            // (or it is leaked below).
            let flushed = unsafe { refill(ring, self.overflow.get_mut()) };
            if flushed && !cancel_queued {
                // SAFETY: ASYNC_CANCEL points to no memory.
                cancel_queued = unsafe { ring.push(&cancel_all) }.is_ok();
            }
            if flushed
                && ring.pending() == 0
                && self.ops.get_mut().live() == 0
                && !self.notify_armed.get()
            {
                break;
            }
            let _ = ring.enter(1, Some(Duration::from_millis(10)));
            cqes.clear();
            ring.reap(&mut cqes);
            for c in &cqes {
                if c.user_data == NOTIFY_UD {
                    self.notify_armed.set(false);
                    continue;
                }
                let more = c.flags & IORING_CQE_F_MORE != 0;
                let ops = self.ops.get_mut();
                let Some(slot) = ops.get(c.user_data) else {
                    continue;
                };
                let kind = slot.kind;
                if kind == Kind::Accept && c.res >= 0 {
                    // SAFETY: an fd accepted for an op nobody will reap: the
                    // kernel made it, and no one else learns its number.
                    unsafe { sys::close(c.res) };
                }
                if !more {
                    let parked = ops.remove((c.user_data & 0xffff_ffff) as u32);
                    // The gauges stay true to the end: a `StatsHandle`
                    // outlives the proactor.
                    self.stats.parked.set(ops.orphans() as u64);
                    self.stats.in_flight.set(ops.live() as u64);
                    drop(parked);
                }
            }
        }
        if self.ops.get_mut().live() != 0 || self.notify_armed.get() {
            // The kernel never answered: leaking is the only memory-safe
            // choice for what it may still write.
            for idx in self.ops.get_mut().live_indices() {
                std::mem::forget(self.ops.get_mut().remove(idx));
            }
            std::mem::forget(std::mem::take(&mut self.notify_buf));
            eprintln!("proactor: in-flight operations never completed; their memory is leaked");
            return;
        }
        self.drop_bufs();
    }
}

impl Inner {
    /// Unregisters and frees the buffer ring (only once nothing is in flight).
    fn drop_bufs(&mut self) {
        let _ = self.bufs.unregister(self.ring.get_mut().as_fd());
        // SAFETY: called once, from Drop, after which `bufs` is never used;
        // the kernel no longer knows the group (unregistered just above).
        unsafe { ManuallyDrop::drop(&mut self.bufs) };
    }
}
