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
    /// The `now` of the last [`Timers::fire`]: every deadline at or before
    /// it has left the map, none after it has.
    fired_through: Option<Instant>,
}

impl Timers {
    pub fn insert(&mut self, at: Instant, waker: Waker) -> (Instant, u64) {
        self.seq += 1;
        let key = (at, self.seq);
        self.map.insert(key, waker);
        key
    }

    /// Inserts under a key the caller makes unique.
    fn insert_key(&mut self, key: (Instant, u64), waker: Waker) {
        self.map.insert(key, waker);
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
        self.fired_through = Some(now);
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

    /// Whether a deadline at `at` has fired (it is out of the map).
    fn has_fired(&self, at: Instant) -> bool {
        self.fired_through.is_some_and(|t| at <= t)
    }
}

/// One deadline kept in the timer map across many waits of one task, whose
/// deadline may move later for free: the map keeps the *armed* entry, moved
/// only earlier; when it fires before the deadline that counts, the task is
/// woken once, and the next poll arms it again for that deadline.
///
/// A connection waits under a new deadline for every idle wait (each one
/// later than the last): a [`Sleep`] per wait would cost a map insert and a
/// remove each time, where this costs two compares. Its owner must call
/// [`LazyDeadline::clear`] before it goes (or leave one spurious wake behind).
///
/// Its map key is the armed deadline and an `id` the owner passes on every
/// call, unique among the lazy deadlines alive on the proactor (a
/// connection's fd, open while it lives): one `Instant`, not a key, in
/// every idle connection.
#[derive(Debug, Default)]
pub struct LazyDeadline {
    /// The deadline of the map's entry while it holds one for this, or
    /// held it until it fired.
    armed: std::cell::Cell<Option<Instant>>,
}

/// Sets lazy deadlines' map keys apart from [`Sleep`]'s, which count up
/// from 1 and never reach it.
const LAZY_ID: u64 = 1 << 63;

impl LazyDeadline {
    /// True once `at` has passed (a timer turn found it due); otherwise `cx`
    /// is woken no later than at `at` (perhaps earlier, spuriously). Every
    /// poll must come from the same task (the waker is the one stored when
    /// the entry was armed) and pass the same `id`.
    pub fn poll_until(&self, p: &Proactor, id: i32, at: Instant, cx: &mut Context<'_>) -> bool {
        let key = |at| (at, LAZY_ID | u64::from(id as u32));
        let mut timers = p.inner.timers.borrow_mut();
        if let Some(armed) = self.armed.get() {
            if !timers.has_fired(armed) {
                if armed <= at {
                    // Still in the map, due no later than `at`: it wakes us.
                    return false;
                }
                timers.remove(key(armed));
            }
            self.armed.set(None);
        }
        if timers.has_fired(at) {
            return true;
        }
        timers.insert_key(key(at), cx.waker().clone());
        self.armed.set(Some(at));
        false
    }

    /// Takes the deadline out of the map (if it has not fired); `id` as
    /// given to [`LazyDeadline::poll_until`].
    pub fn clear(&self, p: &Proactor, id: i32) {
        if let Some(armed) = self.armed.take() {
            let mut timers = p.inner.timers.borrow_mut();
            if !timers.has_fired(armed) {
                timers.remove((armed, LAZY_ID | u64::from(id as u32)));
            }
        }
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
