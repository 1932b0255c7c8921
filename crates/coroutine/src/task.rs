//! A scheduled coroutine's shared half ([`TaskCell`]: header, result,
//! waker) and its spawner's handle ([`JoinHandle`]).
//!
//! ```text
//!   heap: Arc<TaskCell<T>>                     the coroutine's stack (top)
//!   ┌─────────────────────────────┐            ┌──────────────────────────┐
//!   │ Header: key, queued, cancel │◀── waker ──│ TaskFrame { waker, ... } │
//!   │ JoinState: result, waiter   │◀── *const ─│ cell, body (the closure) │
//!   └─────────────────────────────┘            └──────────────────────────┘
//!          ▲                ▲
//!    JoinHandle<T>    scheduler's slab entry (until the coroutine finishes)
//! ```
//!
//! One allocation per coroutine: the cell. It is an `Arc` because a
//! [`std::task::Waker`] must be `Send + Sync` and may be woken from any
//! thread; a remote wake touches only the header's atomics and pushes the
//! coroutine's key into the runtime's inbox. The result (which may be
//! `!Send`) is only ever touched on the coroutine's own thread.

use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Poll, Wake, Waker};

use crate::coroutine::Cancelled;
use crate::raw::{self, Control, Start};
use crate::scheduler::{Entry, Shared};

/// The thread-safe part of a scheduled coroutine. It holds no id: an idle
/// coroutine's cell is then a 48-byte malloc chunk, not 64. The id lives in
/// the control block at the top of the coroutine's stack (and in a
/// joinable coroutine's [`TaskCell`]); trace lines written where neither
/// can be reached name the coroutine by its `key`.
pub(crate) struct Header {
    /// Slot index and generation in the scheduler's slab.
    pub(crate) key: u64,
    /// In the run queue (or the inbox) already: further wakes are no-ops.
    pub(crate) queued: AtomicBool,
    /// Set by `abort` or runtime shutdown: the next suspension unwinds.
    pub(crate) cancel: AtomicBool,
    /// Stack high-water mark in bytes, 0 until measured. Four bytes, as
    /// are the flags around it: they share a word, and a detached cell
    /// stays within a 48-byte allocation.
    pub(crate) high_water: AtomicU32,
    /// The coroutine has finished (the join state's; here to share the
    /// header's word). Only touched on the owning thread.
    finished: AtomicBool,
    /// The `JoinHandle` is gone. Only touched on the owning thread.
    detached: AtomicBool,
    pub(crate) shared: Arc<Shared>,
}

impl Header {
    /// A header for a coroutine not yet run, queued to run.
    pub(crate) fn new(key: u64, shared: Arc<Shared>) -> Header {
        Header {
            key,
            queued: AtomicBool::new(true),
            cancel: AtomicBool::new(false),
            high_water: AtomicU32::new(0),
            finished: AtomicBool::new(false),
            detached: AtomicBool::new(false),
            shared,
        }
    }
}

struct JoinState<T> {
    result: Option<Result<T, JoinError>>,
    /// The coroutine blocked in `join`, if any.
    waiter: Option<Waker>,
}

/// Header plus the result slot. See the module docs. `repr(C)` with the
/// header first: a cell's address is its header's, whatever `T` is, so the
/// scheduler's slab reaches the header of a type-erased cell without a
/// virtual call or a pointer of its own ([`header_of`]).
#[repr(C)]
pub(crate) struct TaskCell<T> {
    pub(crate) header: Header,
    /// The coroutine's process-wide unique id, for [`JoinHandle::id`].
    id: u64,
    join: UnsafeCell<JoinState<T>>,
}

// SAFETY: other threads reach a TaskCell only through a Waker, and wakes
// touch only `header` (atomics and an `Arc<Shared>`, itself Send + Sync).
// `join` is touched only on the owning thread: by the coroutine's entry and
// by `JoinHandle`, which is `!Send`. The result is taken or dropped on that
// thread before the last owner-thread reference goes (`JoinHandle::drop`,
// or `complete` when detached), so a last reference dropped elsewhere frees
// a cell whose `Option<T>` is `None`: no `T` is dropped on a foreign thread.
unsafe impl<T> Send for TaskCell<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for TaskCell<T> {}

impl<T> TaskCell<T> {
    pub(crate) fn new(header: Header, id: u64) -> TaskCell<T> {
        TaskCell {
            header,
            id,
            join: UnsafeCell::new(JoinState {
                result: None,
                waiter: None,
            }),
        }
    }

    /// # Safety
    /// Only on the owning thread, and not re-entrantly (no user code runs
    /// while the reference is held).
    #[allow(clippy::mut_from_ref)]
    unsafe fn join_state(&self) -> &mut JoinState<T> {
        // SAFETY: the caller's contract.
        unsafe { &mut *self.join.get() }
    }

    /// Records the outcome (or drops it if the handle is gone) and wakes the
    /// joiner. Called once, by the entry, on the owning thread.
    fn complete(&self, result: Result<T, JoinError>) {
        // SAFETY: owning thread; the borrow ends before any user code (the
        // result's destructor, the waker) runs.
        let (detached, waiter) = unsafe {
            let j = self.join_state();
            self.header.finished.store(true, Ordering::Relaxed);
            if !self.header.detached.load(Ordering::Relaxed) {
                j.result = Some(result);
                (None, j.waiter.take())
            } else {
                (Some(result), None)
            }
        };
        if let Some(result) = detached {
            // Nobody wants it: drop it now, here, on the owning thread. A
            // panicking destructor must not unwind out of the entry.
            let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(result)));
        }
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

impl<T> Wake for TaskCell<T> {
    fn wake(self: Arc<Self>) {
        self.header.schedule();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.header.schedule();
    }
}

/// The cell of a coroutine spawned with no handle
/// ([`crate::spawn_detached`]): its header alone. Nobody can join it, so it
/// has no room for a result (nor an id), and an idle coroutine's one
/// allocation is half the size of a [`TaskCell`]'s.
#[repr(C)]
pub(crate) struct DetachedCell {
    pub(crate) header: Header,
}

impl Wake for DetachedCell {
    fn wake(self: Arc<Self>) {
        self.header.schedule();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.header.schedule();
    }
}

/// Where a coroutine's entry leaves its outcome.
pub(crate) trait Completion<T> {
    /// Called once, by the entry, on the owning thread.
    fn complete(&self, result: Result<T, JoinError>);
}

impl<T> Completion<T> for TaskCell<T> {
    fn complete(&self, result: Result<T, JoinError>) {
        TaskCell::complete(self, result);
    }
}

impl<T> Completion<T> for DetachedCell {
    fn complete(&self, result: Result<T, JoinError>) {
        // Nobody wants it: dropped here, on the owning thread. A panicking
        // destructor must not unwind out of the entry.
        let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(result)));
    }
}

/// Type-erased access to a cell's header, for the scheduler's slab.
pub(crate) trait TaskOps {
    fn header(&self) -> &Header;
}

impl<T> TaskOps for TaskCell<T> {
    fn header(&self) -> &Header {
        &self.header
    }
}

impl TaskOps for DetachedCell {
    fn header(&self) -> &Header {
        &self.header
    }
}

/// The header of the cell behind `task`.
#[inline(always)]
pub(crate) fn header_of(task: &Arc<dyn TaskOps>) -> &Header {
    // SAFETY: every `TaskOps` is a `TaskCell<T>` or a `DetachedCell` (the
    // two impls), both `repr(C)` with `header` first, so the cell's address
    // is the header's;
    // `task` keeps the cell alive for the borrow.
    unsafe { &*Arc::as_ptr(task).cast::<Header>() }
}

/// How a coroutine's entry ended, for the runtime's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Running,
    Returned,
    Panicked,
    Cancelled,
}

/// The scheduler's view of a running coroutine, at the top of its stack.
/// The thread-local `CURRENT` (wait.rs) points here while it runs.
pub(crate) struct TaskFrame {
    /// Wakes this coroutine: the Context of every poll it makes.
    pub(crate) waker: ManuallyDrop<Waker>,
    /// Valid while the coroutine lives: the slab holds a reference.
    pub(crate) header: *const Header,
    /// This coroutine's control block (set right after creation).
    pub(crate) ctl: Cell<*const Control>,
    pub(crate) outcome: Cell<Outcome>,
}

/// What the scheduler writes at the top of a new coroutine's stack.
#[repr(C)]
pub(crate) struct TaskPayload<F, C> {
    pub(crate) frame: TaskFrame,
    /// Kept alive by the slab's reference until after the entry finishes.
    pub(crate) cell: *const C,
    /// The scheduler's bookkeeping, written after the stack is set up and
    /// owned by its slab (see [`crate::scheduler::Entry`]). The coroutine
    /// never touches it.
    pub(crate) entry: MaybeUninit<Entry>,
    pub(crate) body: ManuallyDrop<F>,
}

/// The first function on a scheduled coroutine's stack (see `switch`).
pub(crate) unsafe extern "C" fn task_entry<F, T, C>(arg: *mut u8) -> !
where
    F: FnOnce() -> T,
    C: Completion<T> + TaskOps,
{
    let start = arg.cast::<Start<TaskPayload<F, C>>>();
    // SAFETY: the Start block RawCoroutine::new wrote for us; it lives until
    // the scheduler releases the stack, after `finish`.
    let ctl = unsafe { &(*start).ctl };
    {
        // By field, never as a whole: the scheduler reads `entry` meanwhile.
        // SAFETY: as above.
        let p = unsafe { &raw mut (*start).payload };
        // SAFETY: the body is taken exactly once, here; nothing else drops it.
        let body = unsafe { ManuallyDrop::take(&mut (*p).body) };
        // SAFETY: the slab holds a reference to the cell until we finish.
        let cell = unsafe { &*(*p).cell };
        // SAFETY: the frame lives as long as the payload.
        let frame = unsafe { &(*p).frame };
        let result = if cell.header().cancel.load(Ordering::Relaxed) {
            // Cancelled before it ever ran: drop the closure, run nothing.
            let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(body)));
            Err(JoinError::Cancelled)
        } else {
            match panic::catch_unwind(AssertUnwindSafe(body)) {
                Ok(v) => Ok(v),
                Err(payload) if payload.is::<Cancelled>() => Err(JoinError::Cancelled),
                Err(payload) => Err(JoinError::Panicked(payload)),
            }
        };
        frame.outcome.set(match &result {
            Ok(_) => Outcome::Returned,
            Err(JoinError::Panicked(_)) => Outcome::Panicked,
            Err(JoinError::Cancelled) => Outcome::Cancelled,
        });
        cell.complete(result);
        // SAFETY: the frame's waker is dropped once, here; nothing uses it
        // after this point (the coroutine never suspends again).
        unsafe { ManuallyDrop::drop(&mut (*p).frame.waker) };
    }
    // SAFETY: we are the coroutine of `ctl`, on its own stack, and own
    // nothing any more.
    unsafe { raw::finish(ctl) }
}

/// Why a coroutine produced no value: [`Cancelled`](JoinError::Cancelled)
/// ([`JoinHandle::abort`], or its runtime was dropped) or
/// [`Panicked`](JoinError::Panicked) (the payload is kept for
/// [`std::panic::resume_unwind`]). The same type as `pool::JoinError` and
/// `executor::JoinError`: the three carry the same information, so they
/// share the pool's definition (a crate this one already depends on).
pub use pool::JoinError;

/// The spawner's handle on a coroutine: [`join`](JoinHandle::join) waits for
/// its result.
///
/// **Dropping it detaches the coroutine**: it keeps running and its result
/// is dropped when it finishes (a server spawns a coroutine per connection
/// and forgets it). [`abort`](JoinHandle::abort) cancels.
///
/// `!Send`, like the coroutine: it is joined on the thread that spawned it.
///
/// ```compile_fail
/// coroutine::run(|| {
///     let handle = coroutine::spawn(|| 1);
///     std::thread::spawn(move || handle.join()); // error: cannot be sent between threads
/// });
/// ```
pub struct JoinHandle<T> {
    cell: Arc<TaskCell<T>>,
    _not_send: PhantomData<*const ()>,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(cell: Arc<TaskCell<T>>) -> JoinHandle<T> {
        JoinHandle {
            cell,
            _not_send: PhantomData,
        }
    }

    /// Blocks the calling coroutine until this one finishes, and returns its
    /// value, or why there is none.
    ///
    /// If the *calling* coroutine is cancelled meanwhile, it unwinds (see
    /// [`Cancelled`]) or, while already unwinding, gets
    /// `Err(JoinError::Cancelled)`.
    ///
    /// # Panics
    /// Outside a coroutine, unless the coroutine has already finished.
    pub fn join(self) -> Result<T, JoinError> {
        let waited = crate::wait::wait_or_now(|cx| {
            // SAFETY: owning thread (the handle is !Send); no user code runs
            // while the state is borrowed.
            let j = unsafe { self.cell.join_state() };
            if self.cell.header.finished.load(Ordering::Relaxed) {
                return Poll::Ready(());
            }
            match &j.waiter {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => j.waiter = Some(cx.waker().clone()),
            }
            Poll::Pending
        });
        if waited.is_err() {
            return Err(JoinError::Cancelled);
        }
        // SAFETY: as above.
        let result = unsafe { self.cell.join_state() }.result.take();
        result.expect("a finished coroutine's result is taken once, by join")
    }

    /// Whether the coroutine has finished (returned, panicked or cancelled).
    pub fn is_finished(&self) -> bool {
        self.cell.header.finished.load(Ordering::Relaxed)
    }

    /// Cancels the coroutine: it is woken, and the call it is suspended in
    /// unwinds with [`Cancelled`] (it never runs if it had not started).
    /// `join` then returns `Err(JoinError::Cancelled)` unless it finished
    /// first. Does nothing to a finished coroutine.
    pub fn abort(&self) {
        if self.is_finished() {
            return;
        }
        self.cell.header.cancel.store(true, Ordering::Relaxed);
        self.cell.header.schedule();
    }

    /// The coroutine's process-wide unique id (as printed on overflow).
    pub fn id(&self) -> u64 {
        self.cell.id
    }

    pub(crate) fn header(&self) -> &Header {
        &self.cell.header
    }

    /// The most stack the coroutine used, in bytes: known once it has
    /// finished, on a runtime with [`crate::Builder::stack_watermarks`] on.
    pub fn stack_high_water(&self) -> Option<usize> {
        match self.cell.header.high_water.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n as usize),
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // SAFETY: owning thread; the borrow ends before anything drops.
        let taken = unsafe {
            let j = self.cell.join_state();
            self.cell.header.detached.store(true, Ordering::Relaxed);
            (j.result.take(), j.waiter.take())
        };
        drop(taken);
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .field("finished", &self.is_finished())
            .finish()
    }
}
#[cfg(test)]
mod tests {
    /// Every live coroutine holds one cell: with `Arc`'s two counts, a
    /// detached coroutine's (`T = ()`) fits a 96-byte malloc chunk.
    #[test]
    fn a_unit_cell_fits_88_bytes_with_its_counts() {
        assert!(size_of::<super::TaskCell<()>>() + 16 <= 88);
    }

    /// A detached one's fits a 48-byte chunk.
    #[test]
    fn a_detached_cell_fits_40_bytes_with_its_counts() {
        assert!(size_of::<super::DetachedCell>() + 16 <= 40);
    }
}
