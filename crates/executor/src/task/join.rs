//! `JoinHandle`: the spawner's side of a task.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use super::raw::{TaskRef, request_cancel};
use super::state::{COMPLETE, HANDLE};

/// Why a task produced no value: [`Cancelled`](JoinError::Cancelled) (by
/// [`JoinHandle::abort`] or by the runtime shutting down) or
/// [`Panicked`](JoinError::Panicked) (its future panicked; the payload is
/// kept). The same type as `pool::JoinError` and `coroutine::JoinError`:
/// the three carry the same information, so they share the definition of
/// the lowest of the three crates.
pub use pool::JoinError;

/// A future resolving to a spawned task's output.
///
/// **Dropping a `JoinHandle` detaches the task**: it keeps running and its
/// output is dropped when it finishes. Servers spawn a task per connection
/// and forget it; cancelling on drop would make that pattern a bug. Call
/// [`JoinHandle::abort`] to cancel.
///
/// It is `!Send`: the output (which may be `!Send`) is read on the spawning
/// thread, which is what lets the task's stage live without a lock.
pub struct JoinHandle<T> {
    task: TaskRef,
    _output: PhantomData<*const T>, // !Send + !Sync, invariant in T
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(task: TaskRef) -> JoinHandle<T> {
        JoinHandle {
            task,
            _output: PhantomData,
        }
    }

    /// Cancels the task: its future is dropped (on this thread, before it is
    /// polled again) and the handle resolves to `Err(JoinError::Cancelled)`.
    /// No effect if it already finished.
    pub fn abort(&self) {
        request_cancel(&self.task);
    }

    /// Whether the task has finished (its output is ready to be taken).
    pub fn is_finished(&self) -> bool {
        self.task.header().state.load(Ordering::Acquire) & COMPLETE != 0
    }

    /// The task's id, as shown in traces.
    pub fn id(&self) -> u64 {
        self.task.header().id
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let header = self.task.header();
        if header.state.load(Ordering::Acquire) & COMPLETE != 0 {
            let mut out: Poll<Result<T, JoinError>> = Poll::Pending;
            // SAFETY: owner thread (JoinHandle is !Send) and `out` has the
            // task's output type, fixed at spawn by JoinHandle<T>'s T.
            unsafe { self.task.take_output(&mut out as *mut _ as *mut ()) };
            // Polling after completion found nothing: the output was taken.
            assert!(out.is_ready(), "JoinHandle polled after it returned Ready");
            return out;
        }
        // SAFETY: owner thread only, and no one else holds a reference into
        // the join waker slot across this assignment.
        let slot = unsafe { &mut *header.join_waker.get() };
        match slot {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        let header = self.task.header();
        let prev = header.state.fetch_and(!HANDLE, Ordering::AcqRel);
        // SAFETY: owner thread: the join waker is ours to clear.
        drop(unsafe { (*header.join_waker.get()).take() });
        if prev & COMPLETE != 0 {
            // Finished while we held the handle: the output is ours to drop,
            // here on the owner thread.
            self.task.drop_output();
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .field(
                "state",
                &super::state::describe(self.task.header().state.load(Ordering::Relaxed)),
            )
            .finish()
    }
}
