//! The task in memory: one allocation holding a header and the future (later
//! its output), plus the hand-written `RawWakerVTable` that points at it.
//!
//! ```text
//!  TaskRef / Waker ──▶ ┌──────────────── Cell<F> (repr C) ───────────────┐
//!  (pointer to Header) │ Header: state (flags + refcount), vtable,        │
//!                      │         shared (for remote wakes), id, ...       │
//!                      │ Stage:  Running(F) │ Finished(Result) │ Consumed │
//!                      └──────────────────────────────────────────────────┘
//! ```
//!
//! The header comes first (`repr(C)`), so a `*const Header` is also a pointer
//! to the whole cell, and type-erased code reaches the typed parts through the
//! vtable's monomorphised functions.
//!
//! Thread rule: the header's `state` and `shared` may be touched from any
//! thread (wakers are `Send + Sync`); everything else — the stage, the join
//! waker, the owned-slab index — only on the thread that spawned the task.
//! Remote threads therefore never drop a future or an output: by the time a
//! remote thread can hold the last reference, the owner thread has already
//! dropped both (see `Runtime::drop` and `JoinHandle::drop`).

use std::cell::{Cell as StdCell, UnsafeCell};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering, fence};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use super::JoinError;
use super::state::*;
use crate::sched::{Shared, schedule};

/// Type-erased operations on a task cell.
pub(crate) struct Vtable {
    /// Polls the future (or cancels it if `CLOSED`); see [`RunOutcome`].
    run: unsafe fn(NonNull<Header>) -> RunOutcome,
    /// Drops the future in place, storing `Err(Cancelled)`. Owner thread.
    cancel: unsafe fn(NonNull<Header>),
    /// Moves the output into `*mut Poll<Result<T, JoinError>>`. Owner thread.
    take_output: unsafe fn(NonNull<Header>, *mut ()),
    /// Drops a stored output nobody will read. Owner thread.
    drop_output: unsafe fn(NonNull<Header>),
    /// Frees the cell (refcount reached zero). Any thread.
    dealloc: unsafe fn(NonNull<Header>),
}

/// What happened when the executor ran a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunOutcome {
    /// Pending and not woken during the poll: park it.
    Idle,
    /// Pending but woken during the poll: put it at the back of the queue.
    Requeue,
    /// Finished (ready or cancelled): drop it from the owned set.
    Complete,
    /// Its future panicked (caught; the JoinHandle gets the payload).
    Panicked,
}

/// The fixed-layout part of every task.
#[repr(C)]
pub(crate) struct Header {
    pub(crate) state: AtomicUsize,
    vtable: &'static Vtable,
    /// The spawning runtime's cross-thread inbox.
    pub(crate) shared: Arc<Shared>,
    /// Index in the runtime's owned-task slab. Owner thread only.
    pub(crate) owned_index: StdCell<usize>,
    /// Who to wake when the task completes. Owner thread only.
    pub(crate) join_waker: UnsafeCell<Option<Waker>>,
    /// A number for traces and debugging.
    pub(crate) id: u64,
}

enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Consumed,
}

#[repr(C)]
struct TaskCell<F: Future> {
    header: Header,
    stage: UnsafeCell<Stage<F>>,
}

/// An owned reference to a task (one count of the refcount).
pub(crate) struct TaskRef {
    ptr: NonNull<Header>,
}

// SAFETY: a TaskRef crossing threads only ever touches `state` (atomic) and
// `shared` (Arc<Shared>, Sync) off the owner thread: remote wakes push it into
// the owner's inbox and the owner runs it. Dropping it remotely only
// decrements the count; deallocation then drops a stage that the owner thread
// has already emptied (module docs).
unsafe impl Send for TaskRef {}

impl TaskRef {
    /// Allocates a task for `future`. The new task starts with three
    /// references (the owned slab, the run queue, the JoinHandle) and the
    /// `SCHEDULED | HANDLE` flags: the caller must hand them out accordingly.
    pub(crate) fn new<F: Future + 'static>(future: F, shared: Arc<Shared>, id: u64) -> TaskRef {
        let cell = Box::new(TaskCell {
            header: Header {
                state: AtomicUsize::new((3 * REF_ONE) | SCHEDULED | HANDLE),
                vtable: vtable::<F>(),
                shared,
                owned_index: StdCell::new(usize::MAX),
                join_waker: UnsafeCell::new(None),
                id,
            },
            stage: UnsafeCell::new(Stage::Running(future)),
        });
        let ptr = NonNull::from(Box::leak(cell)).cast::<Header>();
        TaskRef { ptr }
    }

    /// A second reference to the same task, without touching the count.
    ///
    /// # Safety
    /// The caller must account for the extra reference: the count must
    /// already include it (as `new`'s three do).
    pub(crate) unsafe fn alias(&self) -> TaskRef {
        TaskRef { ptr: self.ptr }
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: a TaskRef holds a reference, so the cell is alive.
        unsafe { self.ptr.as_ref() }
    }

    /// Runs the task once. Consumes the queue's reference unless the task is
    /// to be re-queued, in which case the reference comes back in `Some`.
    pub(crate) fn run(self) -> (RunOutcome, Option<TaskRef>) {
        let this = ManuallyDrop::new(self);
        // SAFETY: we hold a reference; `run` is called on the owner thread
        // by the executor, as the vtable contract requires.
        let outcome = unsafe { (this.header().vtable.run)(this.ptr) };
        match outcome {
            // The queue's reference was handed back to us.
            RunOutcome::Requeue => (outcome, Some(ManuallyDrop::into_inner(this))),
            // `run` consumed the queue's reference: do not drop it again.
            _ => (outcome, None),
        }
    }

    /// Cancels the task in place (runtime shutdown). Owner thread only.
    pub(crate) fn cancel_now(&self) {
        let state = self.header().state.load(Ordering::Acquire);
        if state & COMPLETE != 0 {
            return;
        }
        // SAFETY: owner thread, task not running (the runtime is shutting
        // down outside any poll), reference held.
        unsafe { (self.header().vtable.cancel)(self.ptr) };
    }

    /// Moves a finished task's output into `out` (a `Poll<Result<T, _>>`).
    ///
    /// # Safety
    /// Owner thread; `out` must point at a `Poll<Result<T, JoinError>>` for
    /// the task's output type `T`.
    pub(crate) unsafe fn take_output(&self, out: *mut ()) {
        // SAFETY: forwarded to the caller.
        unsafe { (self.header().vtable.take_output)(self.ptr, out) }
    }

    /// Drops a stored output nobody will read. Owner thread only.
    pub(crate) fn drop_output(&self) {
        // SAFETY: we hold a reference; owner thread by contract of callers.
        unsafe { (self.header().vtable.drop_output)(self.ptr) }
    }
}

impl Drop for TaskRef {
    fn drop(&mut self) {
        // SAFETY: this TaskRef owned one reference.
        unsafe { drop_ref(self.ptr) }
    }
}

/// Releases one reference, freeing the cell on the last.
///
/// # Safety
/// The caller must own one reference to a live task.
unsafe fn drop_ref(ptr: NonNull<Header>) {
    // SAFETY: the reference keeps the header alive until the decrement.
    let header = unsafe { ptr.as_ref() };
    let prev = header.state.fetch_sub(REF_ONE, Ordering::Release);
    debug_assert!(refs(prev) >= 1, "task refcount underflow");
    if refs(prev) == 1 {
        // Pairs with the Release above on other threads: everything they
        // did before dropping their reference happens-before the free.
        fence(Ordering::Acquire);
        // SAFETY: that was the last reference; nobody can reach the cell.
        unsafe { (header.vtable.dealloc)(ptr) }
    }
}

fn vtable<F: Future + 'static>() -> &'static Vtable {
    // A `const` item is promoted to a `'static` borrow: one vtable per `F`.
    trait HasVtable {
        const VTABLE: Vtable;
    }
    impl<F: Future + 'static> HasVtable for F {
        const VTABLE: Vtable = Vtable {
            run: run::<F>,
            cancel: cancel::<F>,
            take_output: take_output::<F>,
            drop_output: drop_output::<F>,
            dealloc: dealloc::<F>,
        };
    }
    &<F as HasVtable>::VTABLE
}

/// The typed view of a cell.
///
/// # Safety
/// `ptr` must point at a live `TaskCell<F>`.
unsafe fn cell<'a, F: Future>(ptr: NonNull<Header>) -> &'a TaskCell<F> {
    // SAFETY: Header is the first field of the repr(C) TaskCell<F>.
    unsafe { ptr.cast::<TaskCell<F>>().as_ref() }
}

/// # Safety
/// Owner thread; the caller holds a reference (the queue's).
unsafe fn run<F: Future + 'static>(ptr: NonNull<Header>) -> RunOutcome {
    // SAFETY: caller contract.
    let cell = unsafe { cell::<F>(ptr) };
    let header = &cell.header;

    // SCHEDULED → RUNNING. Wakes from now on only set SCHEDULED again.
    let mut state = header.state.load(Ordering::Acquire);
    loop {
        if state & COMPLETE != 0 {
            // Woken after completion raced with the queue: nothing to do.
            // SAFETY: we own the queue's reference.
            unsafe { drop_ref(ptr) };
            return RunOutcome::Idle;
        }
        let next = (state & !SCHEDULED) | RUNNING;
        match header
            .state
            .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => break,
            Err(actual) => state = actual,
        }
    }

    if state & CLOSED != 0 {
        // SAFETY: owner thread, RUNNING is ours, reference held.
        unsafe { cancel::<F>(ptr) };
        // SAFETY: we own the queue's reference.
        unsafe { drop_ref(ptr) };
        return RunOutcome::Complete;
    }

    // The queue's reference keeps the task alive for the whole poll, so the
    // waker handed to the future borrows it instead of taking its own.
    // SAFETY: the vtable functions uphold RawWaker's contract (see below).
    let waker = ManuallyDrop::new(unsafe { Waker::from_raw(raw_waker(ptr)) });
    let mut cx = Context::from_waker(&waker);

    // SAFETY: owner thread and RUNNING: nobody else touches the stage.
    let stage = unsafe { &mut *cell.stage.get() };
    let Stage::Running(future) = stage else {
        unreachable!("a task without a future is COMPLETE");
    };
    // SAFETY: the future lives in a heap cell that never moves until freed,
    // and it is dropped in place, never moved out: it is pinned.
    let future = unsafe { Pin::new_unchecked(future) };
    let result = catch_unwind(AssertUnwindSafe(|| future.poll(&mut cx)));

    let mut outcome = RunOutcome::Complete;
    let output = match result {
        Ok(Poll::Pending) => {
            // RUNNING → idle; if a wake came in meanwhile, SCHEDULED is set
            // and the queue's reference goes back into the queue.
            let prev = header.state.fetch_and(!RUNNING, Ordering::AcqRel);
            if prev & SCHEDULED != 0 {
                return RunOutcome::Requeue;
            }
            // SAFETY: we own the queue's reference.
            unsafe { drop_ref(ptr) };
            return RunOutcome::Idle;
        }
        Ok(Poll::Ready(v)) => Ok(v),
        Err(panic) => {
            outcome = RunOutcome::Panicked;
            Err(JoinError::Panicked(panic))
        }
    };
    // SAFETY: owner thread, RUNNING held.
    unsafe { complete::<F>(ptr, output) };
    // SAFETY: we own the queue's reference.
    unsafe { drop_ref(ptr) };
    outcome
}

/// Stores the result, drops the future, flips to COMPLETE and tells the
/// JoinHandle (or drops the output if there is none).
///
/// # Safety
/// Owner thread; the task is not being polled by anyone else; a reference is
/// held.
unsafe fn complete<F: Future>(ptr: NonNull<Header>, output: Result<F::Output, JoinError>) {
    // SAFETY: caller contract.
    let cell = unsafe { cell::<F>(ptr) };
    // SAFETY: owner thread, not polled: exclusive access to the stage. The
    // assignment drops the future in place, on this thread.
    let stage = unsafe { &mut *cell.stage.get() };
    // Drop the future before storing the output: a future's destructor may
    // look at the runtime, which should see a clean state.
    *stage = Stage::Consumed;
    *stage = Stage::Finished(output);
    let prev = cell
        .header
        .state
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
            Some((s | COMPLETE) & !RUNNING)
        })
        .unwrap_or_else(|s| s);
    if prev & HANDLE != 0 {
        // SAFETY: owner thread only touches the join waker.
        if let Some(w) = unsafe { (*cell.header.join_waker.get()).take() } {
            w.wake();
        }
    } else {
        *stage = Stage::Consumed;
    }
}

/// # Safety
/// Owner thread; not being polled; a reference is held.
unsafe fn cancel<F: Future>(ptr: NonNull<Header>) {
    // SAFETY: forwarded; the output type matches the cell's.
    unsafe { complete::<F>(ptr, Err(JoinError::Cancelled)) }
}

/// # Safety
/// Owner thread; `out` points at a `Poll<Result<F::Output, JoinError>>`.
unsafe fn take_output<F: Future>(ptr: NonNull<Header>, out: *mut ()) {
    // SAFETY: caller contract.
    let cell = unsafe { cell::<F>(ptr) };
    // SAFETY: owner thread: exclusive access to the stage.
    let stage = unsafe { &mut *cell.stage.get() };
    if let Stage::Finished(v) = std::mem::replace(stage, Stage::Consumed) {
        // SAFETY: caller contract on `out`'s type; the old value is a plain
        // Poll::Pending, so overwriting without dropping leaks nothing.
        unsafe { *(out as *mut Poll<Result<F::Output, JoinError>>) = Poll::Ready(v) };
    }
}

/// # Safety
/// Owner thread; a reference is held.
unsafe fn drop_output<F: Future>(ptr: NonNull<Header>) {
    // SAFETY: caller contract.
    let cell = unsafe { cell::<F>(ptr) };
    // SAFETY: owner thread: exclusive access to the stage.
    let stage = unsafe { &mut *cell.stage.get() };
    if matches!(stage, Stage::Finished(_)) {
        *stage = Stage::Consumed;
    }
}

/// # Safety
/// Last reference gone.
unsafe fn dealloc<F: Future>(ptr: NonNull<Header>) {
    // SAFETY: the cell came from Box::leak in TaskRef::new with this F. Its
    // stage is Consumed or Finished(Err) by now (module docs), so dropping it
    // here runs no !Send destructor on a foreign thread.
    drop(unsafe { Box::from_raw(ptr.cast::<TaskCell<F>>().as_ptr()) });
}

// ---- the waker ----------------------------------------------------------

static WAKER_VTABLE: RawWakerVTable =
    RawWakerVTable::new(waker_clone, waker_wake, waker_wake_by_ref, waker_drop);

fn raw_waker(ptr: NonNull<Header>) -> RawWaker {
    RawWaker::new(ptr.as_ptr() as *const (), &WAKER_VTABLE)
}

/// # Safety
/// `data` is a live task header and the caller's waker owns (or borrows)
/// a reference.
unsafe fn waker_clone(data: *const ()) -> RawWaker {
    // SAFETY: caller contract.
    let header = unsafe { &*(data as *const Header) };
    let prev = header.state.fetch_add(REF_ONE, Ordering::Relaxed);
    if prev > isize::MAX as usize {
        std::process::abort(); // refcount overflow: like Arc, refuse to go on
    }
    // SAFETY: data is non-null (it came from a NonNull).
    raw_waker(unsafe { NonNull::new_unchecked(data as *mut Header) })
}

/// # Safety
/// `data` is a live task header and this waker owns a reference.
unsafe fn waker_wake(data: *const ()) {
    // SAFETY: non-null, live, and we own one reference, which moves into the
    // run queue or is dropped.
    unsafe { wake_by_val(NonNull::new_unchecked(data as *mut Header)) }
}

/// # Safety
/// `data` is a live task header and the caller's waker holds a reference.
unsafe fn waker_wake_by_ref(data: *const ()) {
    // SAFETY: non-null and live for the call.
    let ptr = unsafe { NonNull::new_unchecked(data as *mut Header) };
    // SAFETY: as above.
    if unsafe { transition_to_scheduled(ptr, true) } {
        schedule(TaskRef { ptr });
    }
}

/// # Safety
/// `data` is a live task header and this waker owns a reference.
unsafe fn waker_drop(data: *const ()) {
    // SAFETY: caller contract.
    unsafe { drop_ref(NonNull::new_unchecked(data as *mut Header)) }
}

/// Wakes consuming one owned reference.
///
/// # Safety
/// The caller owns one reference to a live task.
pub(crate) unsafe fn wake_by_val(ptr: NonNull<Header>) {
    // SAFETY: caller contract.
    if unsafe { transition_to_scheduled(ptr, false) } {
        schedule(TaskRef { ptr }); // our reference moves into the queue
    } else {
        // SAFETY: we owned it and nothing took it.
        unsafe { drop_ref(ptr) };
    }
}

/// Sets SCHEDULED. Returns true if the caller must now push the task: it was
/// idle (not queued, not running, not complete). With `add_ref`, the push's
/// reference is added in the same CAS.
///
/// # Safety
/// `ptr` is a live task the caller holds a reference to.
unsafe fn transition_to_scheduled(ptr: NonNull<Header>, add_ref: bool) -> bool {
    // SAFETY: caller contract.
    let header = unsafe { ptr.as_ref() };
    let mut state = header.state.load(Ordering::Acquire);
    loop {
        if state & (COMPLETE | SCHEDULED) != 0 {
            return false; // finished, or already going to run: a cheap no-op
        }
        let running = state & RUNNING != 0;
        let mut next = state | SCHEDULED;
        if !running && add_ref {
            next += REF_ONE;
        }
        match header
            .state
            .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
        {
            // While running, the poller re-queues it when the poll returns.
            Ok(_) => return !running,
            Err(actual) => state = actual,
        }
    }
}

/// Queues the task to run unless it is already queued or finished, as a
/// `wake_by_ref` of its waker would.
pub(crate) fn wake_by_ref(task: &TaskRef) {
    // SAFETY: `task` holds a reference for the duration of the call; the
    // push's own reference is added by the transition.
    if unsafe { transition_to_scheduled(task.ptr, true) } {
        schedule(TaskRef { ptr: task.ptr });
    }
}

/// Requests cancellation and makes sure the task runs to see it.
pub(crate) fn request_cancel(task: &TaskRef) {
    let prev = task.header().state.fetch_or(CLOSED, Ordering::AcqRel);
    if prev & COMPLETE != 0 {
        return;
    }
    // SAFETY: `task` holds a reference for the duration of the call.
    if unsafe { transition_to_scheduled(task.ptr, true) } {
        schedule(TaskRef { ptr: task.ptr });
    }
}
