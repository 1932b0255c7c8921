//! A connection's one timer, and waiting on an operation under it.

use std::io;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use reactor::{Reactor, Tick};

use super::{Res, Stop};
use crate::lazy_timer::LazyTimer;
use site::stats::TimeoutKind;

/// The connection's one timer (a [`LazyTimer`]: its deadline moves later
/// without touching the heap), with the deadline that counts now and what
/// kind of timeout passing it is. The connection removes it when it drops.
pub(super) struct Timer {
    pub(super) lazy: LazyTimer,
    /// The deadline that counts is `since + after`, added up only when the
    /// heap's timer fires: going idle after a request (see [`Timer::extend`])
    /// then costs no clock arithmetic at all (a [`Tick`] is copied as it
    /// is, never converted until then).
    since: Tick,
    after: Duration,
    pub(super) kind: TimeoutKind,
}

impl Timer {
    /// A timer armed for `deadline`.
    pub(super) fn new(reactor: &Reactor, deadline: Instant, kind: TimeoutKind) -> Timer {
        Timer {
            lazy: LazyTimer::new(reactor, deadline),
            since: reactor.tick_of(deadline),
            after: Duration::ZERO,
            kind,
        }
    }

    /// Sets the deadline.
    pub(super) fn arm(&mut self, reactor: &Reactor, deadline: Instant, kind: TimeoutKind) {
        self.kind = kind;
        self.since = reactor.tick_of(deadline);
        self.after = Duration::ZERO;
        self.lazy.arm(reactor, deadline);
    }

    /// Sets the deadline to `after` from `since`, which the caller knows
    /// comes no earlier than the deadline the heap holds (the longest
    /// timeout, counted from now): nothing to re-arm, nothing to add.
    #[inline]
    pub(super) fn extend(&mut self, since: Tick, after: Duration, kind: TimeoutKind) {
        self.kind = kind;
        self.since = since;
        self.after = after;
    }

    /// True once the real deadline has passed; otherwise `cx` is woken when
    /// the timer fires.
    #[inline(always)]
    pub(super) fn poll_expired(&mut self, reactor: &Reactor, cx: &mut Context<'_>) -> bool {
        // The deadline is added up only once the heap's timer has fired.
        if reactor.poll_timer(self.lazy.key(), cx).is_pending() {
            return false;
        }
        self.lazy
            .poll_expired(reactor, cx, reactor.instant_at(self.since) + self.after)
    }
}

/// Runs `op` until ready, failing with a timeout when the timer expires.
/// The deadline is computed and armed only if `op` has to wait: most
/// operations complete at once, and then cost no clock arithmetic at all.
pub(super) async fn with_deadline<T>(
    timer: &mut Timer,
    reactor: &Reactor,
    deadline: impl FnOnce() -> (Instant, TimeoutKind),
    mut op: impl FnMut(&mut Context<'_>) -> Poll<io::Result<T>>,
) -> Res<T> {
    let mut deadline = Some(deadline);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = op(cx) {
            return Poll::Ready(r.map_err(Stop::Io));
        }
        if let Some(d) = deadline.take() {
            let (at, kind) = d();
            timer.arm(reactor, at, kind);
        }
        if timer.poll_expired(reactor, cx) {
            return Poll::Ready(Err(Stop::Timeout(timer.kind)));
        }
        Poll::Pending
    })
    .await
}
