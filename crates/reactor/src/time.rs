//! Timer futures over the current thread's reactor: [`sleep`],
//! [`sleep_until`], [`timeout`] and [`interval`].
//!
//! They work under any executor that runs on a thread where a reactor is
//! entered (the stackless executor and the coroutine scheduler both are).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::reactor::Reactor;
use crate::timer::TimerKey;

/// A future that completes at a deadline. Dropping it cancels the timer and
/// frees its entry at once.
pub struct Sleep {
    reactor: Reactor,
    key: TimerKey,
    deadline: Instant,
}

/// Completes after `duration`.
///
/// # Panics
/// Outside a thread with a current reactor.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration)
}

/// Completes at `deadline` (at once if it has passed, on the next turn).
///
/// # Panics
/// Outside a thread with a current reactor.
pub fn sleep_until(deadline: Instant) -> Sleep {
    let reactor = Reactor::current();
    let key = reactor.insert_timer(deadline);
    Sleep {
        reactor,
        key,
        deadline,
    }
}

impl Sleep {
    /// When it completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has been reached (the reactor fired it).
    pub fn is_elapsed(&self) -> bool {
        self.reactor.timer_fired(self.key)
    }

    /// Moves the deadline, reusing the timer entry (cheaper than a new Sleep:
    /// a connection's idle timeout is reset on every request this way).
    pub fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        self.reactor.reset_timer(self.key, deadline);
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.reactor.poll_timer(self.key, cx)
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.reactor.remove_timer(self.key);
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .finish()
    }
}

/// The error of a [`timeout`] that ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> Self {
        std::io::Error::new(std::io::ErrorKind::TimedOut, Elapsed)
    }
}

pin_project_lite::pin_project! {
    /// Runs a future with a deadline; see [`timeout`].
    #[derive(Debug)]
    pub struct Timeout<F> {
        #[pin]
        future: F,
        sleep: Sleep,
    }
}

/// Runs `future` for at most `duration`. On time-out the future is dropped
/// (cancelled) when the `Timeout` is, and `Err(Elapsed)` is returned.
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep(duration),
    }
}

/// Like [`timeout`] with an absolute deadline.
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep_until(deadline),
    }
}

impl<F> Timeout<F> {
    /// The timer, e.g. to extend the deadline.
    pub fn sleep_mut(&mut self) -> &mut Sleep {
        &mut self.sleep
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // The inner future goes first: a result that is ready wins a tie.
        if let Poll::Ready(v) = this.future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match Pin::new(this.sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Ticks every `period`; see [`interval`].
#[derive(Debug)]
pub struct Interval {
    sleep: Sleep,
    period: Duration,
}

/// A stream of ticks, the first at once, then every `period`. A consumer that
/// falls behind by more than a period skips the missed ticks instead of
/// firing a burst of them.
///
/// # Panics
/// If `period` is zero, or outside a thread with a current reactor.
pub fn interval(period: Duration) -> Interval {
    assert!(!period.is_zero(), "interval period must be non-zero");
    Interval {
        sleep: sleep_until(Instant::now()),
        period,
    }
}

impl Interval {
    /// Waits for the next tick and returns its scheduled time.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Poll form of [`Interval::tick`].
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if Pin::new(&mut self.sleep).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let tick = self.sleep.deadline();
        let mut next = tick + self.period;
        let now = Instant::now();
        if next <= now {
            next = now + self.period;
        }
        self.sleep.reset(next);
        Poll::Ready(tick)
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }
}
