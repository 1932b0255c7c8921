//! Step 7: timers, and the reactor's wait bounded by the nearest deadline.
//!
//! A [`Sleep`] future registers its deadline and waker in the thread's
//! timer list, ordered by deadline. When the executor runs out of ready
//! tasks, [`turn`] waits in epoll for at most the time left until the
//! nearest deadline, then wakes every task whose deadline passed. One
//! `epoll_wait` thus waits for sockets and timers at once, and an idle
//! server with no timers sleeps without ever waking up.
//!
//! Exercises (solutions in [`crate::solutions::step07`]):
//!
//! 1. `timeout(duration, future)`: the output of `future`, or
//!    `Err(Elapsed)` if `duration` passes first.
//! 2. `echo_with_idle_timeout(stream, idle)`: step 6's echo that closes a
//!    connection which sent nothing for `idle`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::step05_executor::Executor;
use crate::step06_reactor::with_reactor;

// ANCHOR: timers
/// Deadlines in order; the `u64` tells two equal deadlines apart.
type Timers = BTreeMap<(Instant, u64), Waker>;

thread_local! {
    static TIMERS: RefCell<(Timers, u64)> = const { RefCell::new((BTreeMap::new(), 0)) };
}

/// A future that is ready once its deadline has passed.
#[derive(Debug)]
pub struct Sleep {
    deadline: Instant,
    /// Its entry in the timer list, while it waits.
    key: Option<(Instant, u64)>,
}

/// Waits for `duration`.
pub fn sleep(duration: Duration) -> Sleep {
    Sleep {
        deadline: Instant::now() + duration,
        key: None,
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        let deadline = self.deadline;
        let key = TIMERS.with(|t| {
            let (timers, next_id) = &mut *t.borrow_mut();
            // Polled again (by another wake): keep one entry, newest waker.
            let key = self.key.unwrap_or_else(|| {
                *next_id += 1;
                (deadline, *next_id)
            });
            timers.insert(key, cx.waker().clone());
            key
        });
        self.key = Some(key);
        Poll::Pending
    }
}

impl Sleep {
    fn cancel(&mut self) {
        if let Some(key) = self.key.take() {
            TIMERS.with(|t| t.borrow_mut().0.remove(&key));
        }
    }
}

impl Drop for Sleep {
    // A sleep dropped before its deadline (a lost race, a cancelled task)
    // leaves no entry that would wake the reactor for nothing.
    fn drop(&mut self) {
        self.cancel();
    }
}
// ANCHOR_END: timers

// ANCHOR: turn
/// One turn of the event loop: wait for I/O until the nearest deadline at
/// most, then wake the sleeps whose deadline has passed.
pub fn turn() -> io::Result<()> {
    let nearest = TIMERS.with(|t| t.borrow().0.keys().next().map(|&(deadline, _)| deadline));
    let timeout = nearest.map(|d| d.saturating_duration_since(Instant::now()));
    with_reactor(|r| r.wait(timeout))?;
    let now = Instant::now();
    let expired = TIMERS.with(|t| {
        let timers = &mut t.borrow_mut().0;
        // Everything before (now, MAX) is due; the rest stays.
        let later = timers.split_off(&(now, u64::MAX));
        std::mem::replace(timers, later)
    });
    expired.into_values().for_each(Waker::wake);
    Ok(())
}

/// Runs `future` on `executor`, idling in [`turn`].
pub fn block_on<F>(executor: &Executor, future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    executor.block_on_with_idle(future, || turn().expect("epoll_wait"))
}
// ANCHOR_END: turn

/// How many sleeps wait on this thread (for tests and the curious).
pub fn pending_timers() -> usize {
    TIMERS.with(|t| t.borrow().0.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn sleeps_end_in_deadline_order() {
        let ex = Executor::new();
        let order = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        for ms in [60u64, 20, 40] {
            let order = order.clone();
            ex.spawn(async move {
                sleep(Duration::from_millis(ms)).await;
                order.lock().unwrap().push(ms);
            });
        }
        block_on(&ex, sleep(Duration::from_millis(80)));
        assert_eq!(*order.lock().unwrap(), [20, 40, 60]);
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(80) && took < Duration::from_secs(2),
            "{took:?}"
        );
        assert_eq!(pending_timers(), 0);
    }

    #[test]
    fn a_dropped_sleep_leaves_no_timer() {
        let ex = Executor::new();
        block_on(&ex, async {
            let mut long = Box::pin(sleep(Duration::from_secs(3600)));
            let waker = Waker::noop();
            assert!(
                long.as_mut()
                    .poll(&mut Context::from_waker(waker))
                    .is_pending()
            );
            assert_eq!(pending_timers(), 1);
            drop(long);
            assert_eq!(pending_timers(), 0);
        });
    }
}
