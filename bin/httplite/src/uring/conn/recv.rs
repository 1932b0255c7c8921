//! The wait for a connection's next bytes: the multishot recv's next
//! completion, or the deadline, or shutdown between requests, all in one
//! small future (an idle connection's whole task is this wait, so its size
//! is every idle connection's cost). A detached send still in flight is
//! watched meanwhile: its failure or its write timeout ends the wait.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use proactor::RecvBuf;
use site::stats::TimeoutKind;

use super::{Conn, Res, Stop};

/// What a wait for bytes may also end on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Waiting {
    /// Between requests: shutdown ends it too.
    Idle,
    /// Within a request: only the deadline does.
    InRequest,
}

impl Conn {
    /// The next bytes of the connection (`None`: the client closed), or a
    /// timeout of `kind` at `at`; an idle wait also ends at shutdown
    /// (after the first-request grace, see
    /// [`driver::FIRST_REQUEST_GRACE`](crate::driver::FIRST_REQUEST_GRACE)).
    pub(super) fn recv(&self, at: Instant, kind: TimeoutKind, waiting: Waiting) -> Recv<'_> {
        Recv {
            conn: self,
            at,
            kind,
            waiting,
            in_grace: false,
        }
    }
}

/// The wait of [`Conn::recv`], written out as a struct so that an idle
/// connection's future holds only this: one reference, the deadline, three
/// bytes (a closure capturing each field it reads was twice the size).
pub(super) struct Recv<'a> {
    conn: &'a Conn,
    /// Under the connection's [`Conn::deadline`].
    at: Instant,
    kind: TimeoutKind,
    waiting: Waiting,
    /// Shutdown began while a first request may still be on its way.
    in_grace: bool,
}

impl Future for Recv<'_> {
    type Output = Res<Option<RecvBuf>>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let conn = this.conn;
        if let Poll::Ready(r) = conn.stream.poll_recv(cx) {
            return Poll::Ready(r.map_err(Stop::Io));
        }
        // An answer still in flight: its failure ends the wait, and so does
        // its write timeout, counted from when the wait began (an idle
        // wait begins as its answer is sent).
        let sending = conn.stream.has_detached()
            && match conn.poll_sent(cx, false) {
                Poll::Ready(Ok(())) => false,
                Poll::Ready(Err(stop)) => return Poll::Ready(Err(stop)),
                Poll::Pending => true,
            };
        if this.waiting == Waiting::Idle && conn.ctx.shutdown.get() {
            // A client accepted just before shutdown has its first
            // request on the way: it gets the grace, not a close.
            let Some(grace_end) = conn
                .first_request_grace_end()
                .filter(|&end| Instant::now() < end)
            else {
                return Poll::Ready(Err(Stop::Shutdown));
            };
            if !this.in_grace {
                this.in_grace = true;
                this.at = grace_end;
            }
        }
        let config = &conn.ctx.config;
        let write_at = match this.kind {
            TimeoutKind::Idle if sending && !this.in_grace => this
                .at
                .checked_sub(config.idle_timeout)
                .map_or(this.at, |began| began + config.write_timeout),
            _ => this.at,
        };
        let at = this.at.min(write_at);
        let id = conn.stream.as_raw_fd();
        if conn.deadline.poll_until(&conn.ctx.proactor, id, at, cx) {
            return Poll::Ready(Err(if write_at < this.at {
                Stop::Timeout(TimeoutKind::Write)
            } else if this.in_grace {
                Stop::Shutdown
            } else {
                Stop::Timeout(this.kind)
            }));
        }
        Poll::Pending
    }
}
