//! # executor: running futures on one thread
//!
//! A future is a state machine that makes progress only when polled. The
//! executor decides *when* to poll *which* future: it keeps a FIFO queue of
//! tasks that were woken, polls them in order, and when the queue is empty it
//! sleeps in its **driver** until the kernel (or another thread) wakes
//! something.
//!
//! ```text
//!   spawn(fut) ──▶ ┌────────────── run queue (FIFO) ───────────────┐
//!                  │ task 3 │ task 7 │ task 1 │ ...                 │──▶ poll
//!   waker.wake() ─▶└─────────────────────────────────────────────────┘     │
//!    (same thread: push_back)                 ▲                  Pending: parked,
//!                                             │                  its waker stored in
//!   waker.wake() from another thread:         │                  the driver / a timer /
//!    inbox (Mutex<Vec>) + driver's notifier ──┘                  a JoinHandle...
//!
//!   loop {
//!       poll up to `budget` (128) tasks from the front of the queue;
//!       move remote wakes from the inbox into the queue;
//!       if nothing is ready: driver.turn(Wait::Block)  // sleep until something happens
//!       else if budget spent: driver.turn(Wait::Peek)  // don't sleep: I/O keeps flowing
//!   }
//! ```
//!
//! ## One executor, two drivers
//!
//! The executor owns tasks and the run queue. What its thread *waits in* is
//! a [`Driver`], and that is the whole interface between them:
//!
//! ```text
//!   pub trait Driver {
//!       type Notifier: Notify;      // Send + Sync: fn notify(&self)
//!       type Entered;               // guard: "this thread's driver is me"
//!       fn enter(&self) -> Self::Entered;
//!       fn notifier(&self) -> Self::Notifier;
//!       fn turn(&self, wait: Wait) -> io::Result<usize>; // Wait::Block | Wait::Peek
//!   }
//! ```
//!
//! **The executor does not care whether readiness or completion wakes it.**
//! After a turn, some wakers have fired; that is all it needs to know. Two
//! drivers implement the trait, each in its own crate, neither knowing the
//! other:
//!
//! | | `reactor::Reactor` (epoll) | `proactor::Proactor` (io_uring) |
//! |---|---|---|
//! | model | readiness: "fd 7 may be read now" | completion: "fd 7: 78 bytes, in buffer 3" |
//! | `turn(Block)` | one `epoll_wait` until an event, the nearest timer, or the eventfd | one `io_uring_enter(GETEVENTS)`: submits every queued SQE, waits for a CQE, the nearest timer, or the notifier's eventfd read |
//! | `turn(Peek)` | `epoll_wait(0)` | `io_uring_enter` that submits and reaps, waits for nothing |
//! | what a woken task does | makes the syscall itself (`read` until `EAGAIN`) | takes its result from its operation's slot, no syscall |
//! | timers | an indexed heap in the reactor | a map in the proactor |
//! | `Notifier` | eventfd in the epoll set | eventfd with a read in flight on the ring |
//!
//! What is *not* in the trait, and why:
//!
//! - **Timers.** The driver owns them because its turn must wake up for the
//!   nearest one; the executor never sees a deadline. A task arms a timer
//!   with its driver's own future (`executor::sleep` is the reactor's,
//!   `proactor::time::sleep` the proactor's), found through [`Driver::enter`].
//! - **I/O.** Readiness and completion need different APIs (`read(&mut buf)`
//!   against "give me the next buffer you filled"), so I/O types belong to
//!   each driver ([`net`] and [`io`] here are the reactor's); only the
//!   waiting is shared.
//! - **Registration of wakers.** A future hands its waker to the driver
//!   directly; the executor only ever sees the wake.
//!
//! [`Runtime<D>`] is generic over the driver and monomorphised: the loop
//! calls `D::turn` directly, no `dyn` on the hot path (the one `dyn` is the
//! notifier, called only for a wake from another thread, after the inbox's
//! lock). [`Runtime::new`] is `Runtime<Reactor>`;
//! `Runtime::with_driver(proactor)` is the same executor on io_uring.
//!
//! ## Choices, and why
//!
//! - **Tasks never migrate.** Each worker thread runs its own runtime and the
//!   dispatcher spreads connections over them. So [`spawn`] accepts `!Send`
//!   futures, `Rc`/`RefCell` are fine inside handlers, and the queue needs no
//!   lock. A [`std::task::Waker`] is still `Send + Sync` (the contract says
//!   so): a wake from another thread goes through the runtime's locked inbox
//!   and the driver's notifier.
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
//! - **A poll budget.** After 128 polls the driver is checked without
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
mod sched;
mod task;

pub use driver::{Driver, Notify, Wait};

pub use reactor::time::{
    Elapsed, Interval, Sleep, interval, sleep, sleep_until, timeout, timeout_at,
};
pub use runtime::{Builder, DEFAULT_BUDGET, Runtime, block_on};
pub use sched::{RuntimeStats, StatsHandle, current_stats, spawn, wake_all, yield_now};
pub use task::{JoinError, JoinHandle};
