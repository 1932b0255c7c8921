//! A connection's one timer, and waiting on an operation under it.

use std::io;
use std::task::{Context, Poll};
use std::time::Instant;

use reactor::{Reactor, TimerKey};

use super::{Res, Stop};
use crate::stats::TimeoutKind;

/// A connection timer whose deadline can move without touching the heap
/// on the hot path (see the connection module's docs). It is a key into the
/// reactor's timer heap, not a boxed `Sleep`: one allocation less per
/// connection. The connection removes it when it drops.
pub(super) struct Timer {
    pub(super) key: TimerKey,
    /// The deadline the reactor's heap holds for `key` (it fires then, or
    /// has fired, which `poll_expired` notices).
    armed: Instant,
    /// The deadline that counts.
    pub(super) deadline: Instant,
    pub(super) kind: TimeoutKind,
}

impl Timer {
    /// A timer armed for `deadline`.
    pub(super) fn new(reactor: &Reactor, deadline: Instant, kind: TimeoutKind) -> Timer {
        Timer {
            key: reactor.insert_timer(deadline),
            armed: deadline,
            deadline,
            kind,
        }
    }

    /// Sets the deadline. The heap is touched only if it moves earlier; a
    /// later one is picked up when the timer fires early.
    pub(super) fn arm(&mut self, reactor: &Reactor, deadline: Instant, kind: TimeoutKind) {
        self.kind = kind;
        self.deadline = deadline;
        if deadline < self.armed {
            reactor.reset_timer(self.key, deadline);
            self.armed = deadline;
        }
    }

    /// True once the real deadline has passed; otherwise `cx` is woken when
    /// the timer fires.
    pub(super) fn poll_expired(&mut self, reactor: &Reactor, cx: &mut Context<'_>) -> bool {
        loop {
            if reactor.poll_timer(self.key, cx).is_pending() {
                return false;
            }
            if self.armed >= self.deadline {
                return true;
            }
            // Fired for an older, earlier deadline: re-arm for the real one.
            reactor.reset_timer(self.key, self.deadline);
            self.armed = self.deadline;
        }
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
