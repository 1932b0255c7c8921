//! # executor: running futures on one thread
//!
//! A future is a state machine that makes progress only when polled. The
//! executor decides *when* to poll *which* future: it keeps a FIFO queue of
//! tasks that were woken, polls them in order, and when the queue is empty it
//! sleeps in the reactor until the kernel (or another thread) wakes something.
//!
//! ```text
//!   spawn(fut) ──▶ ┌────────────── run queue (FIFO) ───────────────┐
//!                  │ task 3 │ task 7 │ task 1 │ ...                 │──▶ poll
//!   waker.wake() ─▶└─────────────────────────────────────────────────┘     │
//!    (same thread: push_back)                 ▲                  Pending: parked,
//!                                             │                  its waker stored in
//!   waker.wake() from another thread:         │                  the reactor / a timer /
//!    inbox (Mutex<Vec>) + eventfd ────────────┘                  a JoinHandle...
//!
//!   loop {
//!       poll up to `budget` (128) tasks from the front of the queue;
//!       move remote wakes from the inbox into the queue;
//!       if nothing is ready: reactor.turn(block)    // epoll_wait until an event
//!       else if budget spent: reactor.turn(peek)    // epoll_wait(0): I/O keeps flowing
//!   }
//! ```
//!
//! ## Choices, and why
//!
//! - **Tasks never migrate.** Each worker thread runs its own runtime and the
//!   dispatcher spreads connections over them. So [`spawn`] accepts `!Send`
//!   futures, `Rc`/`RefCell` are fine inside handlers, and the queue needs no
//!   lock. A [`std::task::Waker`] is still `Send + Sync` (the contract says
//!   so): a wake from another thread goes through the runtime's locked inbox
//!   and the reactor's eventfd.
//! - **One allocation per task.** Header (state word, vtable, ids) and the
//!   future share one heap cell; the waker is a pointer to it with a
//!   hand-written `RawWakerVTable`, so cloning a waker is a refcount increment
//!   and waking is one compare-and-swap plus a queue push.
//! - **State as bit flags** (`SCHEDULED`, `RUNNING`, `COMPLETE`, `CLOSED`,
//!   `HANDLE`, plus a refcount) in one atomic word. Waking a task that is
//!   already queued or finished is a no-op; waking it *while it is being
//!   polled* sets `SCHEDULED`, and the executor re-queues it once after the
//!   poll returns, at the back: a task that wakes itself on every poll cannot
//!   starve the others.
//! - **A poll budget.** After 128 polls the reactor is checked without
//!   blocking, so a crowd of ready tasks cannot starve the network or timers.
//! - **[`JoinHandle`]** is a future of `Result<T, JoinError>`. Dropping it
//!   detaches the task (servers spawn-and-forget connections); `abort()`
//!   cancels. A panic in a task is caught at its poll, stored for its handle,
//!   counted, and never takes the thread down.
//!
//! ## Example
//!
//! ```
//! use std::time::Duration;
//! let sum = executor::block_on(async {
//!     let a = executor::spawn(async { 20 });
//!     let b = executor::spawn(async {
//!         executor::sleep(Duration::from_millis(1)).await;
//!         22
//!     });
//!     a.await.unwrap() + b.await.unwrap()
//! });
//! assert_eq!(sum, 42);
//! ```
//!
//! The async I/O types ([`net::TcpListener`], [`net::TcpStream`],
//! [`io::Async`]) wrap non-blocking fds registered with the thread's reactor;
//! see the `reactor` crate for the edge-triggered contract they follow.
#![deny(missing_docs)]

pub mod io;
pub mod net;
mod runtime;
mod task;

pub use reactor::time::{
    Elapsed, Interval, Sleep, interval, sleep, sleep_until, timeout, timeout_at,
};
pub use runtime::{
    Builder, DEFAULT_BUDGET, Runtime, RuntimeStats, StatsHandle, block_on, current_stats, spawn,
    wake_all, yield_now,
};
pub use task::{JoinError, JoinHandle};
