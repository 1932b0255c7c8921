//! # driver: what an executor waits in
//!
//! The executor (the `executor` crate) owns tasks and the run queue. When no
//! task is ready it must sleep until something happens, and *something* is
//! the driver's business: an I/O event, a due timer, or another thread
//! asking it to wake. This crate is the trait between the two, so that
//! both drivers can implement it without knowing each other or the executor,
//! and the [`Counter`] every runtime layer counts its work with:
//!
//! - `reactor` (epoll, readiness): a turn is one `epoll_wait`; a woken task
//!   then makes its own `read` and may meet `EAGAIN`.
//! - `proactor` (io_uring, completion): a turn is one `io_uring_enter` that
//!   submits the queued SQEs and reaps CQEs; a woken task finds its result
//!   (bytes already in a buffer) waiting for it.
//!
//! Either way the executor sees the same thing: a turn, after which some
//! wakers have fired. The `executor` crate's docs explain the shape of the
//! trait and why it holds nothing more; `examples/parker.rs` is a third
//! driver, a condition variable and no I/O, that the executor runs on
//! unchanged.
#![deny(missing_docs)]

mod counter;

use std::io;

pub use counter::Counter;

/// Whether a [`Driver::turn`] may sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Nothing is ready: sleep until an I/O event, the driver's nearest
    /// timer, or a [`Notify::notify`] from another thread.
    Block,
    /// Tasks are still ready (the poll budget ran out): collect what has
    /// already happened, fire due timers, never sleep.
    Peek,
}

/// The waiting half of a single-threaded runtime: one thread's I/O, timers
/// and cross-thread wake-up. The executor calls it and nothing else does
/// the waiting.
///
/// A driver is `!Send` in practice (it belongs to the thread that created
/// it); only its [`Driver::Notifier`] crosses threads.
pub trait Driver: Sized + 'static {
    /// The `Send + Sync` handle that ends this driver's [`Wait::Block`]
    /// from any thread.
    type Notifier: Notify;

    /// Undoes [`Driver::enter`] when dropped.
    type Entered;

    /// Makes this the thread's current driver until the guard drops: I/O
    /// objects and timers created meanwhile find it through a thread-local.
    fn enter(&self) -> Self::Entered;

    /// A handle for waking this driver from other threads.
    fn notifier(&self) -> Self::Notifier;

    /// One turn: wait as `wait` says, then wake every waker that the events,
    /// completions and due timers concern. Returns how much the turn found
    /// (wakers woken, or completions reaped): what the driver's own `turn`
    /// returns, passed through untouched since converting it costs the run
    /// loop instructions; the executor ignores it. Errors are programming
    /// errors (a closed epoll or ring), not I/O results of tasks.
    fn turn(&self, wait: Wait) -> io::Result<usize>;
}

/// Ends a driver's [`Wait::Block`] from any thread. Bursts should coalesce:
/// a thousand calls before the driver wakes cost it one wake-up.
pub trait Notify: Send + Sync + 'static {
    /// Wakes the driver now if it sleeps, or makes its next block return.
    fn notify(&self);
}
