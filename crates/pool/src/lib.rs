//! # pool: a bounded thread pool for work an event loop must not do
//!
//! An event loop serves thousands of connections on one thread because none
//! of them ever makes it wait: every operation that would block returns
//! `EAGAIN` instead and the loop moves on. Some work has no `EAGAIN`. A
//! SHA-256 of a megabyte keeps the CPU for milliseconds; `open(2)` on a cold
//! network filesystem sleeps in the kernel; a library call may block with no
//! way to ask it not to. Run on the loop, each of these stalls *every*
//! connection of that thread for as long as it takes.
//!
//! The hybrid design moves such work to a separate pool of ordinary threads
//! and lets the waiting task sleep until the result is back:
//!
//! ```text
//!   event loop thread                           pool threads
//!   task: h = spawn_blocking(f)? ─── queue ──▶  idle thread wakes, runs f()
//!         h.await → Pending (task parked;        │
//!         the loop serves others)                │ result stored in h's slot
//!                                                ▼
//!   reactor eventfd ◀── inbox ◀── Waker::wake() from the pool thread
//!   task polled again → Ready(result)
//! ```
//!
//! The wake is the executor's ordinary cross-thread wake (its locked inbox
//! plus the reactor's eventfd), so the pool needs to know nothing about the
//! runtime that waits: any `Future` executor, a stackful coroutine parked with
//! `coroutine::wait` (see `coroutine::spawn_blocking`), or a plain thread
//! ([`JoinHandle::join`]) can wait on the same handle.
//!
//! ## Bounds, and why they matter
//!
//! - **Threads** start lazily, one per submission that finds no idle thread,
//!   up to [`Builder::max_threads`]; a thread idle for
//!   [`Builder::idle_timeout`] exits. A quiet server holds no pool threads.
//! - **The queue** of tasks waiting for a thread is bounded
//!   ([`Builder::queue_bound`]). When it is full, [`Pool::spawn_blocking`]
//!   fails at once with [`Full`]: an overloaded server answers `503` and the
//!   client retries later, instead of the queue (and its latency) growing
//!   without limit.
//! - **Panics** in a task are caught on the pool thread and come back as
//!   [`JoinError::Panicked`]; the thread carries on.
//! - **Scheduling**: [`Builder::nice`] lowers the threads' priority, so that
//!   when jobs and event loops both want a CPU the loops get it; and pool
//!   threads take the CPU affinity of the thread that built the pool, not
//!   that of a pinned event loop whose submission happened to start them.
//!
//! [`PoolStats`] reports the queue length, threads alive and busy, and tasks
//! completed and rejected. An [`Observer`] ([`set_observer`]) sees every
//! task submitted and run, named by [`Pool::spawn_blocking_as`], to draw
//! the pool threads on a timeline.
//!
//! ## Example
//!
//! ```
//! let pool = pool::Pool::builder().max_threads(2).queue_bound(16).build();
//! let sum = executor::block_on(async {
//!     let a = pool.spawn_blocking(|| (1..=1000u64).sum::<u64>()).unwrap();
//!     let b = pool.spawn_blocking(|| 42u64).unwrap();
//!     a.await.unwrap() + b.await.unwrap()
//! });
//! assert_eq!(sum, 500_542);
//! ```
//!
//! The process-wide default pool behind [`spawn_blocking`] is configured
//! once with [`init_default`] (a server does it from its flags), or gets
//! [`Builder`]'s defaults on first use.
#![deny(missing_docs)]

mod handle;
mod observe;
mod pool;
mod sys;

use std::sync::OnceLock;

pub use handle::{JoinError, JoinHandle};
pub use observe::{Observer, set_observer};
pub use pool::{Builder, Full, Pool, PoolStats};

static DEFAULT: OnceLock<Pool> = OnceLock::new();

/// Makes `pool` the process-wide default. Fails (giving it back) if the
/// default was already set or already used.
pub fn init_default(pool: Pool) -> Result<(), Pool> {
    let mut pool = Some(pool);
    DEFAULT.get_or_init(|| pool.take().expect("taken once"));
    match pool {
        None => Ok(()),
        Some(p) => Err(p),
    }
}

/// The process-wide default pool (named `blocking`, with [`Builder`]'s
/// defaults unless [`init_default`] came first).
pub fn default_pool() -> &'static Pool {
    DEFAULT.get_or_init(|| Pool::builder().name("blocking").build())
}

/// [`Pool::spawn_blocking`] on the [`default_pool`].
pub fn spawn_blocking<F, T>(f: F) -> Result<JoinHandle<T>, Full>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    default_pool().spawn_blocking(f)
}

#[cfg(test)]
mod tests;
