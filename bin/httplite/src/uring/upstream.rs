//! An upstream socket of the reverse proxy on the io_uring driver: plain
//! non-blocking calls, and on `EAGAIN` a one-shot `IORING_OP_POLL_ADD` on
//! the worker's ring for readiness (see `stackless::upstream`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::pin::pin;
use std::task::Poll;
use std::time::Instant;

use proactor::{Proactor, op};

use crate::stackless::upstream::UpstreamSocket;

/// An upstream socket waited on with ring polls.
pub(crate) struct RingUpstream {
    /// `None` once given to the idle pool.
    fd: Option<OwnedFd>,
    p: Proactor,
}

impl std::fmt::Debug for RingUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingUpstream")
            .field("fd", &self.fd)
            .finish()
    }
}

impl RingUpstream {
    /// Takes `fd` (non-blocking) for the current worker's ring.
    pub(crate) fn new(fd: OwnedFd) -> RingUpstream {
        RingUpstream {
            fd: Some(fd),
            p: Proactor::current(),
        }
    }

    /// One ring poll for `events`, until `at`.
    async fn poll(&self, events: i16, at: Instant) -> io::Result<()> {
        // SAFETY: the socket stays open while this future lives (`self`
        // is borrowed), and if the future is dropped first its close goes
        // through this ring behind the poll's SQE (`Drop` below).
        let poll = pin!(unsafe { op::poll(&self.p, self.fd().as_raw_fd(), events) });
        let mut sleep = pin!(proactor::time::sleep_until(at));
        let mut poll = poll;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = poll.as_mut().poll(cx) {
                return Poll::Ready(r.map(drop));
            }
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
            }
            Poll::Pending
        })
        .await
    }
}

impl UpstreamSocket for RingUpstream {
    async fn io<R>(
        &mut self,
        write: bool,
        at: Instant,
        mut op: impl FnMut(BorrowedFd<'_>) -> io::Result<R>,
    ) -> io::Result<R> {
        let events = if write { libc::POLLOUT } else { libc::POLLIN };
        loop {
            match op(self.fd()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.poll(events, at).await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    async fn writable(&mut self, at: Instant) -> io::Result<()> {
        self.poll(libc::POLLOUT, at).await
    }

    async fn readable(&mut self, at: Instant) -> io::Result<()> {
        self.poll(libc::POLLIN, at).await
    }

    /// Nothing to forget: a ring poll reports the socket's state when it
    /// is made, not an edge.
    fn drained(&mut self) {}

    fn into_fd(mut self) -> OwnedFd {
        self.fd.take().expect("open until given away")
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_ref().expect("open until given away").as_fd()
    }
}

impl Drop for RingUpstream {
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            // Queued behind any poll of this socket still in the ring, so
            // that the kernel holds its own reference first.
            drop(op::close(&self.p, fd));
        }
    }
}
