//! The proactor: one ring, its operation table, its buffer ring, its timers
//! and its notifier, owned by one thread; and the loop turn.

use std::any::Any;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::VecDeque;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{IntoRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::abi::*;
use crate::bufring::BufRing;
use crate::notify::Notifier;
use crate::ops::{Completion, Kind, OpKey, Ops};
use crate::ring::{Ring, TaskRun};
use crate::stats::Counters;
use crate::time::Timers;
use crate::{ProactorStats, sys, trace};

/// `user_data` of the eventfd read (cross-thread wakes).
pub(crate) const NOTIFY_UD: u64 = u64::MAX;
/// `user_data` of fire-and-forget SQEs (cancels, closes of dropped fds).
pub(crate) const IGNORE_UD: u64 = u64::MAX - 1;

/// Moves SQEs from the overflow list into the SQ, oldest first, while the
/// SQ has room. Returns whether the list is empty now.
///
/// # Safety
/// Each SQE in `overflow` was queued under [`Ring::push`]'s contract, which
/// still holds (its memory stays valid until its last CQE).
pub(crate) unsafe fn refill(ring: &mut Ring, overflow: &mut VecDeque<Sqe>) -> bool {
    while let Some(sqe) = overflow.front() {
        // SAFETY: our caller's contract.
        if unsafe { ring.push(sqe) }.is_err() {
            return false;
        }
        overflow.pop_front();
    }
    true
}

/// The fds of an SQE that the kernel looks up only when one of its worker
/// threads starts on it, after the submission, rather than while
/// submitting it: `SHUTDOWN` and `SPLICE` always run there. (An SQE linked
/// behind another also starts late; this crate links only splices.)
fn late_fds(sqe: &Sqe) -> Option<[RawFd; 2]> {
    match sqe.opcode {
        IORING_OP_SHUTDOWN => Some([sqe.fd, -1]),
        IORING_OP_SPLICE => Some([sqe.fd, sqe.splice_fd_in]),
        _ => None,
    }
}

/// A per-thread io_uring driver. Cloning gives another handle to the same
/// proactor (reference-counted, `!Send`).
///
/// # The cancellation rule
///
/// An operation's memory belongs to the driver from submission until its
/// last CQE. A future dropped earlier does not free it: the driver
/// moves the buffer into the operation's slot (*parks* it), submits
/// `IORING_OP_ASYNC_CANCEL` for the operation's `user_data`, and the buffer is
/// freed when the final CQE arrives, whatever it says (`-ECANCELED`, or a
/// result if the operation won the race). Bytes that such a CQE reports were
/// received into a buffer nobody will read: they are **counted as discarded**
/// ([`ProactorStats::discarded_bytes`]), never delivered. (A stream's
/// multishot recv is not cancelled by dropping one `recv()` future: it stays
/// armed, and data that arrives meanwhile is delivered to the next `recv()`;
/// only dropping the stream cancels it.)
#[derive(Clone)]
pub struct Proactor {
    pub(crate) inner: Rc<Inner>,
}

impl std::fmt::Debug for Proactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proactor")
            .field("stats", &self.stats())
            .finish()
    }
}

pub(crate) struct Inner {
    pub ring: RefCell<Ring>,
    /// SQEs that found the SQ full even after a submit (the kernel took
    /// nothing), oldest first: pushed into the SQ before anything newer.
    pub overflow: RefCell<VecDeque<Sqe>>,
    pub ops: RefCell<Ops>,
    /// Dropped by hand at the end of `Drop`, after the kernel let go of it.
    pub bufs: ManuallyDrop<BufRing>,
    pub buf_waiters: RefCell<Vec<Waker>>,
    pub timers: RefCell<Timers>,
    pub notifier: Notifier,
    /// The eventfd read's 8 bytes: written by the kernel while the read is in
    /// flight, so it is heap memory the driver owns until the drain in Drop.
    pub(crate) notify_buf: Box<UnsafeCell<u64>>,
    pub(crate) notify_armed: Cell<bool>,
    pub(crate) cqe_buf: RefCell<Vec<Cqe>>,
    pub(crate) wake_buf: RefCell<Vec<Waker>>,
    pub stats: Arc<Counters>,
    pub(crate) max_wait: Option<Duration>,
    /// When the last turn's CQEs had been reaped ([`Proactor::now`]).
    pub(crate) now: Cell<Instant>,
}

thread_local! {
    static CURRENT: RefCell<Option<Proactor>> = const { RefCell::new(None) };
}

/// Restores the previous current proactor when dropped.
#[derive(Debug)]
pub struct EnterGuard {
    prev: Option<Proactor>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

impl Proactor {
    /// A proactor with the default sizes ([`Builder`]).
    pub fn new() -> io::Result<Proactor> {
        Builder::default().build()
    }

    /// Sizes to choose.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Makes this the thread's current proactor until the guard drops.
    pub fn enter(&self) -> EnterGuard {
        let prev = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        EnterGuard { prev }
    }

    /// The thread's current proactor.
    ///
    /// # Panics
    /// Outside [`Proactor::enter`] (or an `executor::Runtime<Proactor>`).
    pub fn current() -> Proactor {
        CURRENT
            .with(|c| c.borrow().clone())
            .expect("no proactor entered on this thread")
    }

    /// The time the last turn woke up (read once its CQEs were reaped): a
    /// cached clock, at most one loop turn old, for deadlines that need no
    /// finer precision (idle and header timeouts). The read is the one the
    /// turn makes to fire its timers anyway.
    #[inline]
    pub fn now(&self) -> Instant {
        self.inner.now.get()
    }

    /// A handle that wakes this proactor from any thread.
    pub fn notifier(&self) -> Notifier {
        self.inner.notifier.clone()
    }

    /// The counters now.
    pub fn stats(&self) -> ProactorStats {
        self.inner.stats.snapshot()
    }

    /// A `Send + Sync` handle to the counters, for other threads.
    pub fn stats_handle(&self) -> crate::StatsHandle {
        crate::StatsHandle(self.inner.stats.clone())
    }

    /// How the kernel runs our completion work (which setup was accepted).
    pub fn task_run(&self) -> TaskRun {
        self.inner.ring.borrow().task_run()
    }

    /// Kernel facts for reports: setup flags, refused flag sets, feature
    /// names, SQ/CQ sizes, and the number of supported opcodes.
    pub fn describe(&self) -> String {
        let ring = self.inner.ring.borrow();
        let (sq, cq) = ring.sizes();
        format!(
            "task_run={:?} setup_flags={:#x} refused={:?} sq={sq} cq={cq} features={:?} opcodes={}",
            ring.task_run(),
            ring.setup_flags(),
            ring.refused_flags(),
            ring.feature_names(),
            ring.probe().map(|o| o.len()).unwrap_or(0),
        )
    }

    /// Buffers of the provided ring the kernel can still pick.
    pub fn buffers_available(&self) -> u32 {
        self.inner.bufs.available()
    }

    /// Makes the next `n` `io_uring_enter`s consume nothing and return at
    /// once ([`Ring::stall_enters`]), to test the full-SQ back-pressure.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn stall_enters(&self, n: u32) {
        self.inner.ring.borrow_mut().stall_enters(n);
    }

    /// Queues an SQE. When the SQ is full, everything queued is submitted
    /// first (an `io_uring_enter` without waiting); if the kernel took
    /// nothing (it could not allocate a request, or the CQ backlog refused
    /// the enter), the SQE waits in the overflow list, which the next turn
    /// pushes first. Never fails: a full SQ is back-pressure, not an error,
    /// and this runs in `Drop` (cancels) and in the middle of a turn (the
    /// notifier's re-arm).
    ///
    /// # Safety
    /// As [`Ring::push`]: what the SQE points to stays valid until its last
    /// CQE. In this crate that memory is either owned by the driver (the
    /// notifier's word, the buffer ring) or held by an operation's future
    /// and parked in its slot if the future goes first ([`Proactor::release`]).
    pub(crate) unsafe fn push(&self, sqe: &Sqe) {
        if trace::enabled() {
            trace::sqe(sqe);
        }
        let mut ring = self.inner.ring.borrow_mut();
        let mut overflow = self.inner.overflow.borrow_mut();
        for flushed in [false, true] {
            // Behind whatever already waits: the kernel sees SQEs in the
            // order they were queued (a cancel after the operation it names).
            // SAFETY: forwarded to our caller's contract (and, for the SQEs
            // that wait, to the contracts they were queued under).
            if unsafe { refill(&mut ring, &mut overflow) } && unsafe { ring.push(sqe) }.is_ok() {
                return;
            }
            if !flushed {
                // An error here (not one `enter` documents) shows up again
                // at the turn's enter, which reports it.
                let consumed = ring.enter(0, None).unwrap_or(0);
                self.inner.stats.enters.bump();
                self.inner.stats.sqes.add(u64::from(consumed));
            }
        }
        overflow.push_back(*sqe);
        self.inner.stats.sq_full.bump();
    }

    /// Starts an operation: a slot of `kind`, `sqe.user_data` set to it,
    /// queued for the next enter.
    ///
    /// # Safety
    /// As [`Proactor::push`]; the caller keeps the memory the SQE points to
    /// until the operation's last CQE, or hands it to [`Proactor::release`].
    pub(crate) unsafe fn start(&self, kind: Kind, sqe: Sqe) -> OpKey {
        // SAFETY: our caller's contract.
        unsafe { self.start_with(kind, sqe, |_, _| {}) }
    }

    /// [`Proactor::start`], with `with` run on the table and the new key
    /// before the SQE is queued (to keep the operation's memory there).
    ///
    /// # Safety
    /// As [`Proactor::start`].
    pub(crate) unsafe fn start_with(
        &self,
        kind: Kind,
        mut sqe: Sqe,
        with: impl FnOnce(&mut Ops, OpKey),
    ) -> OpKey {
        let key = self.inner.ops.borrow_mut().insert(kind);
        with(&mut self.inner.ops.borrow_mut(), key);
        if let Some(fds) = late_fds(&sqe) {
            self.inner.ops.borrow_mut().insert_late(key, fds);
        }
        self.inner
            .stats
            .in_flight
            .set(self.inner.ops.borrow().live() as u64);
        sqe.user_data = key.user_data();
        // SAFETY: forwarded to our caller's contract.
        unsafe { self.push(&sqe) };
        key
    }

    /// The next CQE of `key`, or `Pending` with the waker stored.
    pub(crate) fn poll_next(&self, key: OpKey, cx: &mut Context<'_>) -> Poll<Completion> {
        let mut ops = self.inner.ops.borrow_mut();
        let slot = ops.slot(key);
        if let Some(c) = slot.cqes.pop_front() {
            return Poll::Ready(c);
        }
        match &slot.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => slot.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The operation's last CQE has arrived and been read.
    pub(crate) fn is_finished(&self, key: OpKey) -> bool {
        let mut ops = self.inner.ops.borrow_mut();
        let s = ops.slot(key);
        s.done && s.cqes.is_empty()
    }

    /// The owner of `key` lets go of it: read to the end, or dropped.
    ///
    /// Finished: the slot is freed. Not finished: the slot is orphaned with
    /// `parked` (the memory the kernel may still write), its queued CQEs are
    /// undone (buffers back to the ring, fds closed), and an
    /// `IORING_OP_ASYNC_CANCEL` is submitted; the slot and `parked` are freed
    /// when the last CQE arrives (see [`Proactor`]).
    pub(crate) fn release(&self, key: OpKey, parked: Option<Box<dyn Any>>) {
        let mut ops = self.inner.ops.borrow_mut();
        let slot = ops.slot(key);
        let queued: Vec<Completion> = slot.cqes.drain(..).collect();
        let kind = slot.kind;
        if slot.done {
            let parked = ops.remove(key.idx);
            self.inner.stats.in_flight.set(ops.live() as u64);
            drop(ops);
            drop(parked);
        } else {
            ops.orphan(key, parked);
            self.inner.stats.parked.set(ops.orphans() as u64);
            drop(ops);
            self.inner.stats.cancels.bump();
            // SAFETY: ASYNC_CANCEL points to no memory (`addr` is a user_data).
            unsafe {
                self.push(&Sqe {
                    opcode: IORING_OP_ASYNC_CANCEL,
                    addr: key.user_data(),
                    user_data: IGNORE_UD,
                    ..Sqe::default()
                })
            };
        }
        // Outside the table's borrow: returning a buffer may wake a task.
        for c in queued {
            self.undo(kind, c);
        }
    }

    /// Undoes a result nobody will read (an orphan's CQE).
    fn undo(&self, kind: Kind, c: Completion) {
        if c.flags & IORING_CQE_F_BUFFER != 0 {
            self.recycle((c.flags >> IORING_CQE_BUFFER_SHIFT) as u16);
        }
        match kind {
            // SAFETY: an accepted fd in an orphan's completion: the kernel
            // made it for this op, and nobody else learns its number.
            Kind::Accept if c.res >= 0 => unsafe { sys::close(c.res) },
            Kind::Recv | Kind::Read if c.res > 0 => {
                self.inner.stats.discarded_bytes.add(c.res as u64)
            }
            _ => {}
        }
    }

    /// Returns buffer `bid` to the ring and wakes a stream waiting for one.
    pub(crate) fn recycle(&self, bid: u16) {
        self.inner.bufs.put(bid);
        let w = self.inner.buf_waiters.borrow_mut().pop();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Closes `fd` without waiting (the CQE is ignored): queued on the ring
    /// behind every SQE already queued, so an operation submitted before
    /// it has its own reference to the file by then. An operation the
    /// kernel looks its fds up for late (`SHUTDOWN`, `SPLICE`, in its
    /// worker threads) and that names `fd` holds the close back instead,
    /// until its last CQE (`Ops::defer_close`).
    pub(crate) fn close_detached(&self, fd: OwnedFd) {
        let Some(fd) = self.inner.ops.borrow_mut().defer_close(fd) else {
            return;
        };
        let sqe = Sqe {
            opcode: IORING_OP_CLOSE,
            fd: fd.into_raw_fd(),
            user_data: IGNORE_UD,
            ..Sqe::default()
        };
        // SAFETY: CLOSE points to no memory; the fd was ours to close.
        unsafe { self.push(&sqe) };
    }

    fn arm_notify(&self) {
        let sqe = Sqe {
            opcode: IORING_OP_READ,
            fd: self.inner.notifier.fd(),
            addr: self.inner.notify_buf.get() as u64,
            len: 8,
            user_data: NOTIFY_UD,
            ..Sqe::default()
        };
        self.inner.notify_armed.set(true);
        // SAFETY: the 8 bytes live in `notify_buf`, owned by the driver,
        // which Drop frees only after this read's last CQE (or leaks).
        unsafe { self.push(&sqe) };
    }

    /// Whether anything is queued for submission.
    pub fn has_pending_sqes(&self) -> bool {
        self.inner.ring.borrow().pending() > 0 || !self.inner.overflow.borrow().is_empty()
    }

    /// Registers `waker` to be woken when a buffer returns to the ring.
    pub(crate) fn wait_for_buffer(&self, waker: &Waker) {
        self.inner.buf_waiters.borrow_mut().push(waker.clone());
    }

    /// A ring-native timer (`IORING_OP_TIMEOUT`): resolves after `d`.
    /// [`crate::time::sleep`] is the cheap form; this one shows the op.
    pub async fn timeout_op(&self, d: Duration) {
        let ts = Box::new(Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: d.subsec_nanos() as i64,
        });
        let sqe = Sqe {
            opcode: IORING_OP_TIMEOUT,
            fd: -1,
            addr: &*ts as *const Timespec as u64,
            len: 1,
            ..Sqe::default()
        };
        // SAFETY: the timespec is the operation's resource: held by the
        // future, parked if it is dropped.
        let c = unsafe { crate::op::Oneshot::new(self, Kind::Other, sqe, ts) }
            .await
            .0;
        debug_assert!(c.res == -libc::ETIME || c.res == -libc::ECANCELED || c.res == 0);
    }
}

mod builder;
mod turn;

pub use builder::Builder;

#[cfg(test)]
mod tests;
