//! Timers: a sorted map of deadlines whose nearest becomes the turn's
//! `io_uring_enter` timeout (`IORING_ENTER_EXT_ARG`), and the `sleep` /
//! `timeout` futures over it.
//!
//! Why not `IORING_OP_TIMEOUT` for every timer? Idle and header timeouts are
//! reset far more often than they fire; in a map a reset is two tree
//! operations in user space, where a ring timeout costs an SQE to remove and
//! one to add, and a CQE for each. [`crate::Proactor::timeout_op`] shows the
//! ring's own timeout for completeness.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::Proactor;

/// Deadlines and the wakers waiting for them.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    map: BTreeMap<(Instant, u64), Waker>,
    seq: u64,
}

impl Timers {
    pub fn insert(&mut self, at: Instant, waker: Waker) -> (Instant, u64) {
        self.seq += 1;
        let key = (at, self.seq);
        self.map.insert(key, waker);
        key
    }

    pub fn update(&mut self, key: (Instant, u64), waker: &Waker) {
        if let Some(w) = self.map.get_mut(&key)
            && !w.will_wake(waker)
        {
            *w = waker.clone();
        }
    }

    pub fn remove(&mut self, key: (Instant, u64)) {
        self.map.remove(&key);
    }

    pub fn next(&self) -> Option<Instant> {
        self.map.keys().next().map(|k| k.0)
    }

    /// Moves the wakers of every deadline ≤ `now` into `out`.
    pub fn fire(&mut self, now: Instant, out: &mut Vec<Waker>) -> usize {
        let mut n = 0;
        while let Some(entry) = self.map.first_entry() {
            if entry.key().0 > now {
                break;
            }
            out.push(entry.remove());
            n += 1;
        }
        n
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }
}

/// Waits until a deadline. Created by [`sleep`] / [`sleep_until`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    /// Found on first poll, so a `Sleep` may be made before a runtime runs.
    p: Option<Proactor>,
    at: Instant,
    key: Option<(Instant, u64)>,
}

/// Completes after `d` (on the current proactor's thread).
pub fn sleep(d: Duration) -> Sleep {
    sleep_until(Instant::now() + d)
}

/// Completes at `at`.
pub fn sleep_until(at: Instant) -> Sleep {
    Sleep {
        p: None,
        at,
        key: None,
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if Instant::now() >= this.at {
            if let (Some(k), Some(p)) = (this.key.take(), &this.p) {
                p.inner.timers.borrow_mut().remove(k);
            }
            return Poll::Ready(());
        }
        let p = this.p.get_or_insert_with(Proactor::current);
        let mut timers = p.inner.timers.borrow_mut();
        match this.key {
            Some(k) => timers.update(k, cx.waker()),
            None => this.key = Some(timers.insert(this.at, cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let (Some(k), Some(p)) = (self.key.take(), &self.p) {
            p.inner.timers.borrow_mut().remove(k);
        }
    }
}

/// The error of [`timeout`]: the deadline passed first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// Runs `fut` for at most `d`; when time runs out the future is dropped
/// (which cancels any operation it had in the kernel, see the crate docs).
pub async fn timeout<F: Future>(d: Duration, fut: F) -> Result<F::Output, Elapsed> {
    let mut fut = std::pin::pin!(fut);
    let mut sleep = std::pin::pin!(sleep(d));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(Elapsed));
        }
        Poll::Pending
    })
    .await
}
