//! The per-thread scheduler: a FIFO run queue of coroutines over one
//! reactor.
//!
//! ```text
//!   spawn(f) ─▶ ┌─────────── run queue (FIFO of slab keys) ───────────┐
//!               │ key 3 │ key 7 │ key 1 │ ...                          │──▶ resume
//!   wake() ───▶ └──────────────────────────────────────────────────────┘      │
//!   (this thread)                              ▲                 parks: switches back;
//!                                              │                 its waker is stored in
//!   wake() from another thread:                │                 the reactor, a timer,
//!    inbox (Mutex<Vec<key>>) + eventfd ────────┘                 a JoinHandle...
//!
//!   loop {
//!       resume up to `budget` (128) coroutines from the front of the queue;
//!       move remote wakes from the inbox into the queue;
//!       if nothing is ready: reactor.turn(block)   // epoll_wait until an event
//!       else if budget spent: reactor.turn(peek)   // epoll_wait(0)
//!   }
//! ```
//!
//! The loop runs on the thread's own stack; each coroutine runs on its own
//! and switches back here when it parks, yields or finishes. It is the
//! executor's loop with `poll(task)` replaced by `resume(coroutine)`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Wake;
use std::time::Duration;

use reactor::{Notifier, Reactor, trace};

use crate::raw::{self, RawCoroutine, State};
use crate::stack;
use crate::task::{
    Completion, DetachedCell, Header, JoinHandle, Outcome, TaskCell, TaskFrame, TaskOps,
    TaskPayload, task_entry,
};
use crate::{wait, watermark};

mod slab;
mod stats;

pub(crate) use slab::Slab;
pub(crate) use stats::Counters;
pub use stats::{RuntimeStats, StatsHandle};

/// Coroutine resumes per tick before the reactor is checked (without
/// blocking), so a crowd of ready coroutines cannot starve the network.
pub const DEFAULT_BUDGET: usize = 128;

/// A hook run after every reactor turn (see [`Builder::on_turn`]).
pub(crate) type TurnHook = Box<dyn Fn(&Reactor)>;

/// The part of a runtime other threads can reach: where remote wakes land.
pub(crate) struct Shared {
    pub(crate) inbox: Mutex<Inbox>,
    /// Mirrors the inbox's length so the owner checks it without the lock.
    pub(crate) inbox_len: AtomicUsize,
    pub(crate) notifier: Notifier,
    pub(crate) remote_wakes: AtomicU64,
    /// Written by the owner thread only; read by [`StatsHandle`]s anywhere.
    pub(crate) counters: Counters,
}

pub(crate) struct Inbox {
    pub(crate) keys: Vec<u64>,
    /// The runtime is gone: drop remote wakes.
    pub(crate) closed: bool,
}

thread_local! {
    /// The core running on this thread (set by `block_on` and by drop).
    pub(crate) static CORE: Cell<*const Core> = const { Cell::new(ptr::null()) };
}

impl Header {
    /// Queues the coroutine unless it is queued already: on its own
    /// runtime's thread straight into the FIFO, from anywhere else through
    /// the locked inbox and the reactor's eventfd. Inlined into the waker:
    /// the local case, every I/O wake, is a few instructions.
    #[inline(always)]
    pub(crate) fn schedule(&self) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        // try_with: a waker may fire while this thread's locals are torn down.
        let core = CORE.try_with(Cell::get).unwrap_or(ptr::null());
        if !core.is_null() {
            // SAFETY: CORE is non-null only while `block_on` (or drop) runs
            // on this thread with that core alive.
            let core = unsafe { &*core };
            if Arc::ptr_eq(&core.shared, &self.shared) {
                if trace::chrome::on() {
                    let (key, id) = (self.key, core.id_of(self.key));
                    trace::chrome::wake(key, format_args!("\"co\":{id},\"from\":\"local\""));
                }
                core.push_local(self.key);
                return;
            }
        }
        self.schedule_remote();
    }

    /// [`Header::schedule`] from another thread.
    #[cold]
    #[inline(never)]
    fn schedule_remote(&self) {
        let shared = &self.shared;
        if trace::chrome::on() {
            // Before the push: the resume it causes must find the flow. The
            // id is on the coroutine's stack, out of this thread's reach:
            // the slab key names it.
            let key = self.key;
            let owner = Arc::as_ptr(shared).addr();
            trace::chrome::remote_wake(
                owner,
                key,
                format_args!("\"key\":{key},\"from\":\"remote\""),
            );
        }
        {
            let mut inbox = shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            if inbox.closed {
                return;
            }
            inbox.keys.push(self.key);
            shared.inbox_len.store(inbox.keys.len(), Ordering::Release);
        }
        shared.remote_wakes.fetch_add(1, Ordering::Relaxed);
        shared.notifier.notify();
    }
}

/// A live coroutine's bookkeeping. It lives at the top of the coroutine's
/// own stack (`TaskPayload::entry`), in the page the coroutine touches
/// anyway, and the slab holds a pointer to it: a slot is 16 bytes, where
/// the entry itself would take 80 of the slab's memory per live coroutine.
pub(crate) struct Entry {
    raw: RawCoroutine,
    /// The task's cell; its header is reached with
    /// [`crate::task::header_of`] (no virtual call on every resume).
    task: Arc<dyn TaskOps>,
    frame: NonNull<TaskFrame>,
}

pub(crate) struct Core {
    pub(crate) reactor: Reactor,
    pub(crate) queue: RefCell<VecDeque<u64>>,
    pub(crate) slab: RefCell<Slab>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) stack_size: usize,
    pub(crate) watermarks: bool,
    pub(crate) report_watermarks: bool,
    pub(crate) budget: usize,
    pub(crate) on_turn: Option<TurnHook>,
    /// Set while an [`Enter`] for this core lives. `CORE` alone cannot tell:
    /// a generator's body runs with it cleared, and may hold the runtime.
    pub(crate) running: Cell<bool>,
}

impl Core {
    fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    fn push_local(&self, key: u64) {
        self.counters().local_wakes.bump();
        let mut q = self.queue.borrow_mut();
        q.push_back(key);
        self.counters().queue_high_water.raise(q.len() as u64);
    }

    pub(crate) fn spawn<F, T>(&self, body: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let stack = stack::take(self.stack_size)?;
        let key = self.slab.borrow().next_key();
        let id = raw::next_id();
        let cell = Arc::new(TaskCell::<T>::new(
            Header::new(key, self.shared.clone()),
            id,
        ));
        self.start(stack, id, body, cell.clone());
        Ok(JoinHandle::new(cell))
    }

    /// [`Core::spawn`] with no handle: the coroutine's cell is its header
    /// alone, with no room for a result (see [`DetachedCell`]).
    pub(crate) fn spawn_detached<F>(&self, body: F) -> io::Result<()>
    where
        F: FnOnce() + 'static,
    {
        let stack = stack::take(self.stack_size)?;
        let key = self.slab.borrow().next_key();
        let id = raw::next_id();
        let cell = Arc::new(DetachedCell {
            header: Header::new(key, self.shared.clone()),
        });
        self.start(stack, id, body, cell);
        Ok(())
    }

    /// Sets up a new coroutine on `stack` and queues it.
    fn start<F, T, C>(&self, stack: stack::Stack, id: u64, body: F, cell: Arc<C>)
    where
        F: FnOnce() -> T + 'static,
        C: Completion<T> + TaskOps + Wake + Send + Sync + 'static,
    {
        let header = cell.header();
        let key = header.key;
        let payload = TaskPayload {
            frame: TaskFrame {
                waker: std::mem::ManuallyDrop::new(cell.clone().into()),
                header,
                ctl: Cell::new(ptr::null()),
                outcome: Cell::new(Outcome::Running),
            },
            cell: Arc::as_ptr(&cell),
            entry: MaybeUninit::uninit(),
            body: std::mem::ManuallyDrop::new(body),
        };
        let (raw, payload) =
            RawCoroutine::new(stack, id, payload, task_entry::<F, T, C>, self.watermarks);
        // SAFETY: the payload sits at the top of the stack `raw` owns.
        let frame = unsafe { NonNull::from(&payload.as_ref().frame) };
        // SAFETY: as above.
        unsafe { frame.as_ref() }
            .ctl
            .set(raw.control_ptr().as_ptr());
        // SAFETY: as above; the coroutine has not run, and its entry
        // function never touches this field.
        let entry = unsafe {
            let at = &raw mut (*payload.as_ptr()).entry;
            at.write(MaybeUninit::new(Entry {
                raw,
                task: cell,
                frame,
            }));
            NonNull::new_unchecked(at).cast::<Entry>()
        };
        // SAFETY: just initialised, on the stack its `raw` owns; from here
        // on only the slab reaches it.
        let inserted = unsafe { self.slab.borrow_mut().insert(entry) };
        debug_assert_eq!(inserted, key);
        let c = self.counters();
        c.spawned.bump();
        c.alive.bump();
        c.alive_high_water.raise(c.alive.get());
        reactor::trace!("spawn", "co={id} stack={}KiB", self.stack_size / 1024);
        self.push_local(key);
    }

    /// Resumes one coroutine until it parks, yields or finishes. Inlined
    /// into the loop, whose registers are saved once, not on every resume.
    #[inline(always)]
    fn run(&self, key: u64) {
        let (ctl, frame, id) = {
            let slab = self.slab.borrow();
            let Some(entry) = slab.get(key) else {
                return; // finished since it was queued: a stale wake
            };
            let header = crate::task::header_of(&entry.task);
            header.queued.store(false, Ordering::Release);
            let id = trace::active().then(|| entry.raw.control().id);
            (entry.raw.control_ptr(), entry.frame, id)
        };
        self.counters().resumes.bump();
        let traced = id.map(|id| {
            if trace::chrome::on() {
                trace::chrome::begin(&format!("resume co={id}"), format_args!("\"co\":{id}"));
                trace::chrome::woken_poll(Arc::as_ptr(&self.shared).addr(), key);
            } else {
                trace::emit("switch", format_args!("sched -> co={id}"));
            }
            (id, std::time::Instant::now())
        });
        let prev = wait::set_current(frame.as_ptr());
        // SAFETY: the coroutine is in the slab, so it is live and not running
        // (a running one is not in the queue: it cleared `queued` and only
        // re-queues itself through `yield_now`, which parks right after),
        // and the scheduler is not a coroutine of this runtime.
        unsafe { raw::resume_ctl(ctl) };
        wait::restore_current(prev);
        // SAFETY: the control block is still mapped: only `retire` frees it.
        let finished = unsafe { ctl.as_ref() }.state() == State::Finished;
        if let Some((id, start)) = traced {
            let how = if finished { "finished" } else { "parked" };
            if trace::chrome::on() {
                trace::chrome::end(format_args!("\"result\":\"{how}\""));
            } else {
                let ran = trace::Short(start.elapsed());
                trace::emit("switch", format_args!("co={id} -> sched {how} ran={ran}"));
            }
        }
        if finished {
            self.retire(key);
        }
    }

    /// Frees a finished coroutine: counts it, measures its stack if asked,
    /// returns the stack to the pool.
    fn retire(&self, key: u64) {
        let Some(mut entry) = self.slab.borrow_mut().remove(key) else {
            return;
        };
        // SAFETY: the frame lives on the stack, still mapped until release.
        let outcome = unsafe { entry.frame.as_ref() }.outcome.get();
        let c = self.counters();
        c.completed.bump();
        c.alive.add(u64::MAX); // -1
        match outcome {
            Outcome::Panicked => c.panicked.bump(),
            Outcome::Cancelled => c.cancelled.bump(),
            Outcome::Returned | Outcome::Running => {}
        }
        let size = entry.raw.stack_size();
        let id = entry.raw.control().id;
        if let Some(used) = entry.raw.release(self.watermarks) {
            entry
                .task
                .header()
                .high_water
                .store(u32::try_from(used).unwrap_or(u32::MAX), Ordering::Relaxed);
            self.counters().stack_high_water.raise(used as u64);
            if self.report_watermarks {
                watermark::report(id, used, size);
            }
        }
        drop(entry); // outside the slab's borrow
    }

    /// The id of the coroutine `key` names, for trace lines (0 if it has
    /// finished, or the slab is borrowed: a wake from inside the slab's
    /// own bookkeeping).
    #[cold]
    fn id_of(&self, key: u64) -> u64 {
        let slab = self.slab.try_borrow();
        let entry = slab.as_ref().ok().and_then(|s| s.get(key));
        entry.map_or(0, |e| e.raw.control().id)
    }

    /// Cancels one coroutine and runs it until it has unwound.
    pub(crate) fn cancel_now(&self, key: u64) {
        loop {
            let Some(header) = self.slab.borrow().get(key).map(|e| e.task.clone()) else {
                return;
            };
            header.header().cancel.store(true, Ordering::Relaxed);
            // A cancelled coroutine cannot park (it unwinds instead), so one
            // resume normally runs it to the end.
            self.run(key);
        }
    }

    /// Moves remote wakes into the local queue (no lock if there are none).
    /// Inlined: it runs several times per loop and is nearly always a no-op.
    #[inline(always)]
    fn drain_inbox(&self) {
        if self.shared.inbox_len.load(Ordering::Acquire) != 0 {
            self.drain_inbox_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn drain_inbox_slow(&self) {
        let keys = {
            let mut inbox = self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.inbox_len.store(0, Ordering::Relaxed);
            std::mem::take(&mut inbox.keys)
        };
        reactor::trace!("inbox", "remote_wakes={}", keys.len());
        let mut q = self.queue.borrow_mut();
        q.extend(keys);
        self.counters().queue_high_water.raise(q.len() as u64);
    }

    /// The loop: runs coroutines and the reactor until `done()`.
    pub(crate) fn run_until(&self, done: impl Fn() -> bool) {
        let mut since_turn = 0;
        loop {
            while since_turn < self.budget {
                // The borrow ends before the resume: the coroutine may spawn.
                let Some(key) = self.queue.borrow_mut().pop_front() else {
                    break;
                };
                self.run(key);
                since_turn += 1;
                if done() {
                    return;
                }
            }
            self.drain_inbox();
            let idle = self.queue.borrow().is_empty();
            if idle || since_turn >= self.budget {
                self.counters().ticks.bump();
                // Idle: sleep until I/O, a timer or a remote wake. Busy: only
                // peek, so that I/O and timers keep flowing under load.
                let timeout = if idle { None } else { Some(Duration::ZERO) };
                if let Err(e) = self.reactor.turn(timeout) {
                    // epoll_wait fails only on programming errors (EBADF,
                    // EFAULT); spinning on it would hide the bug.
                    panic!("reactor failed: {e}");
                }
                since_turn = 0;
                if let Some(hook) = &self.on_turn {
                    hook(&self.reactor);
                }
                self.drain_inbox();
            }
        }
    }

    pub(crate) fn stats(&self) -> RuntimeStats {
        self.shared.snapshot()
    }
}

/// Marks this thread as running `core`; undoes it on drop, unwinding
/// included.
pub(crate) struct Enter<'a> {
    core: &'a Core,
}

/// Why [`Enter::try_new`] refused.
pub(crate) enum Refused {
    /// A coroutine of a runtime is running on this thread.
    Nested,
    /// This core is running already, further down this thread's stacks.
    Reentered,
}

impl<'a> Enter<'a> {
    pub(crate) fn try_new(core: &'a Core) -> Result<Enter<'a>, Refused> {
        if !CORE.with(Cell::get).is_null() {
            return Err(Refused::Nested);
        }
        // Checked on the core too: a generator's body sees `CORE` cleared
        // while its resumer, a coroutine of this core, runs. A second loop
        // would resume that coroutine from a stale stack pointer if it is
        // queued.
        if core.running.get() {
            return Err(Refused::Reentered);
        }
        core.running.set(true);
        CORE.with(|c| c.set(core));
        Ok(Enter { core })
    }
}

impl Drop for Enter<'_> {
    fn drop(&mut self) {
        // `try_new` found `CORE` null; a generator's body that entered a
        // runtime of its own gets its resumer's back from `resume_cleared`.
        CORE.with(|c| c.set(ptr::null()));
        self.core.running.set(false);
    }
}
