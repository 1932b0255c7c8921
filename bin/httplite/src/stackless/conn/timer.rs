//! A connection's one timer, and waiting on an operation under it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use executor::Sleep;

use super::{Res, Stop};
use crate::stats::TimeoutKind;

/// A connection timer whose deadline can move without touching the heap
/// on the hot path (see the connection module's docs).
pub(super) struct Timer {
    pub(super) sleep: Pin<Box<Sleep>>,
    pub(super) deadline: Instant,
    pub(super) kind: TimeoutKind,
}

impl Timer {
    pub(super) fn arm(&mut self, deadline: Instant, kind: TimeoutKind) {
        self.kind = kind;
        self.deadline = deadline;
        if deadline < self.sleep.deadline() || self.sleep.is_elapsed() {
            self.sleep.as_mut().reset(deadline);
        }
    }

    /// True once the real deadline has passed.
    pub(super) fn poll_expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return false;
            }
            if self.sleep.deadline() >= self.deadline {
                return true;
            }
            // Fired for an older, earlier deadline: re-arm for the real one.
            let d = self.deadline;
            self.sleep.as_mut().reset(d);
        }
    }
}

/// Runs `op` until ready, failing with a timeout when the timer expires.
/// The deadline is computed and armed only if `op` has to wait: most reads
/// and writes complete at once, and then cost no clock arithmetic at all.
pub(super) async fn with_deadline<T>(
    timer: &mut Timer,
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
            timer.arm(at, kind);
        }
        if timer.poll_expired(cx) {
            return Poll::Ready(Err(Stop::Timeout(timer.kind)));
        }
        Poll::Pending
    })
    .await
}
