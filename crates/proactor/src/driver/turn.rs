//! The loop turn: one `io_uring_enter` that submits what is queued and
//! waits for completions or the nearest timer, then every CQE dispatched
//! to its operation's slot (waking its future), and due timers fired.

use std::io;
use std::task::Waker;
use std::time::{Duration, Instant};

use super::{IGNORE_UD, NOTIFY_UD, Proactor, refill};
use crate::abi::*;
use crate::ops::{Completion, Kind};
use crate::trace;

/// The longest a turn waits while SQEs are still in the overflow list: the
/// next turn pushes them as soon as the kernel makes room.
const OVERFLOW_RETRY: Duration = Duration::from_millis(1);

impl Proactor {
    /// One loop turn: **one** `io_uring_enter` that submits every queued SQE
    /// and, if `wait`, sleeps until a CQE arrives or the nearest timer is due
    /// (the `IORING_ENTER_EXT_ARG` timeout). Then every CQE is dispatched to
    /// its slot (waking its future) and due timers fire. Returns the number
    /// of CQEs.
    pub fn turn(&self, wait: bool) -> io::Result<usize> {
        let inner = &*self.inner;
        let mut timeout = if wait {
            let due = inner
                .timers
                .borrow()
                .next()
                .map(|at| at.saturating_duration_since(Instant::now()));
            // The valgrind cap (see `Builder::max_wait`): the nearer of the
            // two, so that a wait with no timer at all still ends.
            match (due, inner.max_wait) {
                (Some(d), Some(m)) => Some(d.min(m)),
                (d, m) => d.or(m),
            }
        } else {
            None
        };
        let mut cqes = inner.cqe_buf.borrow_mut();
        cqes.clear();
        let submitted;
        {
            let mut ring = inner.ring.borrow_mut();
            // SAFETY: these SQEs were queued by `push`, under its contract.
            let backlog = !unsafe { refill(&mut ring, &mut inner.overflow.borrow_mut()) };
            if backlog && wait {
                timeout = Some(timeout.map_or(OVERFLOW_RETRY, |t| t.min(OVERFLOW_RETRY)));
            }
            let before = ring.pending();
            let t0 = trace::enabled().then(Instant::now);
            if t0.is_some() {
                trace::enter_begin(wait, timeout);
            }
            ring.enter(u32::from(wait), timeout)?;
            inner.stats.enters.bump();
            submitted = before - ring.pending();
            inner.stats.sqes.add(submitted as u64);
            ring.reap(&mut cqes);
            if let Some(t0) = t0 {
                trace::entered(t0, submitted, wait, timeout, cqes.len());
            }
        }
        let n = cqes.len();
        if inner.max_wait.is_some() && wait {
            // Under valgrind (the only user of max_wait) a thread holds the
            // tool's lock until its time slice ends, tens of these turns;
            // yielding lets the other threads (test clients) run now.
            // SAFETY: no arguments, no memory.
            unsafe { libc::sched_yield() };
        }
        inner.stats.cqes.add(n as u64);
        let mut wakes = inner.wake_buf.take();
        for cqe in cqes.iter() {
            self.dispatch(cqe, &mut wakes);
        }
        drop(cqes);
        let now = Instant::now();
        inner.now.set(now);
        if inner.timers.borrow().len() != 0 {
            let fired = inner.timers.borrow_mut().fire(now, &mut wakes);
            inner.stats.timers_fired.add(fired as u64);
        }
        for w in wakes.drain(..) {
            w.wake();
        }
        inner.wake_buf.replace(wakes);
        if trace::enabled() {
            trace::enter_end(submitted, n);
        }
        Ok(n)
    }

    fn dispatch(&self, cqe: &Cqe, wakes: &mut Vec<Waker>) {
        if trace::enabled() {
            trace::cqe(cqe);
        }
        match cqe.user_data {
            NOTIFY_UD => {
                self.inner.notify_armed.set(false);
                self.inner.notifier.clear();
                self.inner.stats.notifies.bump();
                self.arm_notify();
                return;
            }
            IGNORE_UD => return,
            _ => {}
        }
        let mut ops = self.inner.ops.borrow_mut();
        let Some(slot) = ops.get(cqe.user_data) else {
            self.inner.stats.stale_cqes.bump();
            return;
        };
        let more = cqe.flags & IORING_CQE_F_MORE != 0;
        if let Kind::Send { awaits } = slot.kind
            && !slot.orphan
            && !more
        {
            let idx = (cqe.user_data & 0xffff_ffff) as u32;
            if ops
                .detached_len(idx)
                .is_some_and(|len| cqe.res >= 0 && cqe.res as u32 == len)
            {
                // Every byte went: its owner learns only if it waits.
                let waker = ops.slot_at(idx).waker.take().filter(|_| awaits);
                wakes.extend(waker);
                let buf = ops.remove(idx);
                self.inner.stats.in_flight.set(ops.live() as u64);
                drop(ops);
                drop(buf);
                return;
            }
            let slot = ops.slot_at(idx);
            slot.cqes.push_back(Completion {
                res: cqe.res,
                flags: cqe.flags,
            });
            slot.done = true;
            if let Some(w) = slot.waker.take() {
                wakes.push(w);
            }
            return;
        }
        let c = Completion {
            res: cqe.res,
            flags: cqe.flags,
        };
        if c.flags & IORING_CQE_F_BUFFER != 0 {
            // The buffer is ours now: queued for the future, or undone below.
            // SAFETY: this CQE names the buffer, and each CQE is reaped once.
            unsafe {
                self.inner
                    .bufs
                    .taken((c.flags >> IORING_CQE_BUFFER_SHIFT) as u16)
            };
        }
        if slot.orphan {
            let kind = slot.kind;
            if !more {
                let parked = ops.remove((cqe.user_data & 0xffff_ffff) as u32);
                self.inner.stats.parked.set(ops.orphans() as u64);
                self.inner.stats.in_flight.set(ops.live() as u64);
                drop(ops);
                // The kernel is done with the parked memory: free it now.
                drop(parked);
            } else {
                drop(ops);
            }
            self.undo(kind, c);
            return;
        }
        slot.cqes.push_back(c);
        if !more {
            slot.done = true;
        }
        if let Some(w) = slot.waker.take() {
            wakes.push(w);
        }
    }
}
