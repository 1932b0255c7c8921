//! A hook for timelines: what a pool task is, when it was submitted, when
//! a pool thread ran it. The pool knows no tracer; a program that draws
//! timelines installs an [`Observer`] once ([`set_observer`]) and the pool
//! calls it around every task: on the submitting thread, then on the pool
//! thread before the closure and after its result went back (and its
//! waiter was woken), so that both the arrow into the job and the wake
//! out of it can be drawn.

use std::sync::OnceLock;

/// Receives a pool's task events; see the module docs. Each method is
/// called with no pool lock held.
pub trait Observer: Send + Sync {
    /// On the submitting thread, as the task `what` is queued. The value
    /// returned is handed to [`Observer::start`] (a flow id, say).
    fn submit(&self, what: &'static str) -> u64;
    /// On the pool thread, before the task `what` runs.
    fn start(&self, what: &'static str, token: u64);
    /// On the pool thread, after the task's result was stored and its
    /// waiter woken (or the task found cancelled).
    fn finish(&self);
}

static OBSERVER: OnceLock<&'static dyn Observer> = OnceLock::new();

/// Installs the process's observer, for every pool; `false` if one was
/// installed already.
pub fn set_observer(observer: &'static dyn Observer) -> bool {
    OBSERVER.set(observer).is_ok()
}

/// The observer, if one was installed.
#[inline]
pub(crate) fn observer() -> Option<&'static dyn Observer> {
    OBSERVER.get().copied()
}
