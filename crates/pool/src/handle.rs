//! The way back: a pool thread stores the result in a shared slot and wakes
//! whoever waits on it, a task (through its `Waker`) or a thread (through a
//! condition variable).
//!
//! ```text
//!   pool thread                      slot (Arc<Completion<T>>)          waiting side
//!   start() ── Queued → Running ──▶  phase                              poll(): store waker
//!   f() under catch_unwind                                              (or join(): wait on cv)
//!   finish(r) ─ result = r ────────▶ result, waker.take() ── wake() ──▶ executor inbox +
//!                                                                       reactor eventfd
//! ```
//!
//! The lock is held only to swap a few words; `wake()` is called after it is
//! released, so a waker that runs code (ours queue the task and write an
//! eventfd) never runs under it.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Why a task produced no value.
///
/// One type for the workspace: a pool task, an executor task
/// (`executor::JoinError`) and a coroutine (`coroutine::JoinError`) all end
/// without a value for the same two reasons and carry the same information
/// (nothing, or the panic's payload), so the executor and the coroutine
/// crate re-export this one rather than keeping copies; this crate is the
/// lowest of the three (it needs only `libc`).
pub enum JoinError {
    /// It was cancelled: a pool task with [`JoinHandle::cancel`] before a
    /// thread took it; an executor task by `abort` or its runtime shutting
    /// down; a coroutine by `abort` or its runtime being dropped.
    Cancelled,
    /// It panicked; the payload is kept for [`std::panic::resume_unwind`].
    Panicked(Box<dyn Any + Send + 'static>),
}

impl JoinError {
    /// Whether the task was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }

    /// Whether the closure panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked(_))
    }

    /// The panic message when the payload is a string (what `panic!("...")`
    /// produces), for logs and error reports.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(p) => p
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(String::as_str)),
            JoinError::Cancelled => None,
        }
    }

    /// The panic payload, if it panicked.
    pub fn into_panic(self) -> Option<Box<dyn Any + Send + 'static>> {
        match self {
            JoinError::Panicked(p) => Some(p),
            JoinError::Cancelled => None,
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("Cancelled"),
            JoinError::Panicked(_) => write!(f, "Panicked({:?})", self.panic_message()),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self, self.panic_message()) {
            (JoinError::Cancelled, _) => f.write_str("task was cancelled"),
            (JoinError::Panicked(_), Some(m)) => write!(f, "task panicked: {m}"),
            (JoinError::Panicked(_), None) => f.write_str("task panicked"),
        }
    }
}

impl std::error::Error for JoinError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Queued,
    Running,
    Finished,
}

struct Slot<T> {
    phase: Phase,
    result: Option<Result<T, JoinError>>,
    waker: Option<Waker>,
}

/// The slot a pool thread fills and a [`JoinHandle`] empties.
pub(crate) struct Completion<T> {
    slot: Mutex<Slot<T>>,
    /// For [`JoinHandle::join`] from a plain thread.
    done: Condvar,
}

impl<T> Completion<T> {
    pub(crate) fn new() -> Arc<Completion<T>> {
        Arc::new(Completion {
            slot: Mutex::new(Slot {
                phase: Phase::Queued,
                result: None,
                waker: None,
            }),
            done: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Slot<T>> {
        // A panic never happens under this lock (only field swaps), but a
        // poisoned lock must not turn into a second panic either.
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called by the pool thread before running the closure: false if the
    /// task was cancelled meanwhile (then it must not run).
    pub(crate) fn start(&self) -> bool {
        let mut s = self.lock();
        if s.phase != Phase::Queued {
            return false;
        }
        s.phase = Phase::Running;
        true
    }

    /// Stores the outcome and wakes the waiter, outside the lock.
    pub(crate) fn finish(&self, result: Result<T, JoinError>) {
        let waker = {
            let mut s = self.lock();
            s.phase = Phase::Finished;
            s.result = Some(result);
            s.waker.take()
        };
        self.done.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The result of [`Pool::spawn_blocking`](crate::Pool::spawn_blocking): a
/// future of the closure's value, and a blocking [`join`](JoinHandle::join)
/// for plain threads.
///
/// Awaiting it from an executor task costs nothing while the closure runs:
/// the task is parked, and the pool thread's `Waker::wake` puts it back in
/// its runtime's run queue (through that runtime's cross-thread inbox and
/// eventfd). Dropping the handle detaches the task: it still runs and its
/// value is dropped.
pub struct JoinHandle<T> {
    completion: Arc<Completion<T>>,
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("phase", &self.completion.lock().phase)
            .finish()
    }
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(completion: Arc<Completion<T>>) -> JoinHandle<T> {
        JoinHandle { completion }
    }

    /// Whether the closure has finished (returned or panicked) or was
    /// cancelled: polling now would be ready.
    pub fn is_finished(&self) -> bool {
        self.completion.lock().phase == Phase::Finished
    }

    /// Cancels the task if no thread has taken it yet; returns whether it
    /// did. A cancelled task never runs and its handle yields
    /// [`JoinError::Cancelled`]. A running closure is never interrupted
    /// (threads cannot be cancelled safely), so `false` means it runs, or
    /// ran, to the end.
    pub fn cancel(&self) -> bool {
        let mut s = self.completion.lock();
        if s.phase != Phase::Queued {
            return false;
        }
        s.phase = Phase::Finished;
        s.result = Some(Err(JoinError::Cancelled));
        let waker = s.waker.take();
        drop(s);
        self.completion.done.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    /// Blocks the calling thread until the result is there: for plain
    /// threads. On an event loop's thread, `.await` the handle instead (or
    /// park a coroutine on it with `coroutine::await_future`).
    pub fn join(self) -> Result<T, JoinError> {
        self.wait(None)
            .unwrap_or_else(|_| unreachable!("no deadline"))
    }

    /// Like [`join`](JoinHandle::join), but gives the handle back if
    /// `timeout` passes first.
    pub fn join_timeout(self, timeout: Duration) -> Result<Result<T, JoinError>, JoinHandle<T>> {
        self.wait(Some(Instant::now() + timeout))
    }

    fn wait(self, deadline: Option<Instant>) -> Result<Result<T, JoinError>, JoinHandle<T>> {
        let mut s = self.completion.lock();
        loop {
            if let Some(r) = s.result.take() {
                return Ok(r);
            }
            s = match deadline {
                None => self
                    .completion
                    .done
                    .wait(s)
                    .unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        drop(s);
                        return Err(self);
                    }
                    let (g, _) = self
                        .completion
                        .done
                        .wait_timeout(s, left)
                        .unwrap_or_else(|e| e.into_inner());
                    g
                }
            };
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.completion.lock();
        if let Some(r) = s.result.take() {
            return Poll::Ready(r);
        }
        assert!(
            s.phase != Phase::Finished,
            "pool::JoinHandle polled after it returned Ready"
        );
        // Re-polls with the same task's waker (the common case: spurious
        // wakes from a select-like caller) skip the clone.
        match &mut s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}
