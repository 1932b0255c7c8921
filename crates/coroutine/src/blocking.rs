//! Blocking work from a coroutine: hand it to a [`pool::Pool`] and park
//! until it is done.
//!
//! A coroutine's "blocking" calls only look blocking: they park it and the
//! scheduler runs others. A call that *really* blocks (CPU for
//! milliseconds, `open(2)` on a slow disk) would hold the whole thread, and
//! every coroutine on it. So it goes to a pool thread, and the coroutine
//! parks on the pool's [`JoinHandle`](pool::JoinHandle), a plain `Future`
//! whose completion is a cross-thread `Waker::wake` (through the runtime's
//! inbox and the reactor's eventfd). This is [`crate::await_future`] on that
//! handle; the functions here only name the pattern.

use pool::{Full, JoinError, Pool};

/// Runs `f` on the process-wide default pool ([`pool::default_pool`]) and
/// parks the running coroutine until it returns.
///
/// `Err(Full)` if the pool is at capacity (nothing was run); `Ok(Err(_))`
/// if `f` panicked, or if this coroutine was cancelled while waiting and
/// could not unwind (see [`crate::Cancelled`]): then `f` still runs, detached.
///
/// # Panics
/// Outside a coroutine.
pub fn spawn_blocking<F, T>(f: F) -> Result<Result<T, JoinError>, Full>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_blocking_in(pool::default_pool(), f)
}

/// [`spawn_blocking`] on a given pool.
///
/// # Panics
/// Outside a coroutine.
pub fn spawn_blocking_in<F, T>(pool: &Pool, f: F) -> Result<Result<T, JoinError>, Full>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let handle = pool.spawn_blocking(f)?;
    Ok(crate::await_future(handle).unwrap_or(Err(JoinError::Cancelled)))
}
