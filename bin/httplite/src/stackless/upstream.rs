//! A socket to an upstream of the reverse proxy, for the stackless model:
//! the shared proxy loop (`stackless::proxy`) makes plain non-blocking
//! calls on it and, when one says `EAGAIN`, waits the driver's way. The
//! epoll driver waits for the reactor's next edge ([`EpollUpstream`]); the
//! io_uring driver, whose data path is completions, waits for readiness
//! with a one-shot `IORING_OP_POLL_ADD` on the ring (`uring::upstream`),
//! as it already does for `sendfile(2)` on a full socket: an upstream
//! socket is a second, short-lived socket of the connection's task, and
//! readiness keeps its buffers the proxy's own.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::task::Poll;
use std::time::Instant;

use executor::io::Async;
use reactor::{Interest, Reactor};

use site::reverse_proxy::Balancer;

use crate::lazy_timer::LazyTimer;
use crate::upstream::idle::Idle;

/// An upstream socket, waited on the driver's way.
pub(crate) trait UpstreamSocket {
    /// Runs `op` (a non-blocking call on the socket) until it does not say
    /// `EAGAIN`, waiting for readability (writability with `write`)
    /// between tries, until `at` (then `TimedOut`).
    fn io<R>(
        &mut self,
        write: bool,
        at: Instant,
        op: impl FnMut(BorrowedFd<'_>) -> io::Result<R>,
    ) -> impl Future<Output = io::Result<R>>;
    /// Waits until the socket is writable (a connect has ended, either
    /// way), until `at`.
    fn writable(&mut self, at: Instant) -> impl Future<Output = io::Result<()>>;
    /// Waits until the socket is readable, until `at`, without reading.
    fn readable(&mut self, at: Instant) -> impl Future<Output = io::Result<()>>;
    /// A read came back short: the socket's receive queue is empty, so
    /// edge-triggered readiness is forgotten now (the next byte raises a
    /// new edge), and the next wait does not find it stale.
    fn drained(&mut self);
    /// The socket, for the idle pool (its registration, if any, ends).
    fn into_fd(self) -> OwnedFd;
    /// The socket (for trace lines).
    fn fd(&self) -> BorrowedFd<'_>;
}

/// An upstream socket registered with the worker's reactor.
#[derive(Debug)]
pub(crate) struct EpollUpstream {
    io: Async<OwnedFd>,
    reactor: Reactor,
}

impl EpollUpstream {
    /// Registers `fd` (non-blocking: every upstream socket is made so)
    /// with the current worker's reactor.
    pub(crate) fn new(fd: OwnedFd) -> io::Result<EpollUpstream> {
        Ok(EpollUpstream {
            io: Async::from_nonblocking(fd)?,
            reactor: Reactor::current(),
        })
    }

    /// Waits for `interest` (after an `EAGAIN`, or for a connect's end)
    /// with `op` tried at each edge, under a timer armed for `at` on first
    /// need and taken out of the heap however the wait ends.
    async fn wait<R>(
        &self,
        interest: Interest,
        at: Instant,
        mut op: impl FnMut(BorrowedFd<'_>) -> io::Result<R>,
        ready_is_enough: bool,
    ) -> io::Result<Option<R>> {
        let mut timer = TimerGuard {
            reactor: &self.reactor,
            timer: None,
        };
        let reg = self.io.registration();
        let fd = self.io.get_ref().as_fd();
        std::future::poll_fn(|cx| {
            if ready_is_enough {
                if reg.poll_ready(cx, interest).is_ready() {
                    return Poll::Ready(Ok(None));
                }
            } else if let Poll::Ready(r) = reg.poll_io(cx, interest, || op(fd)) {
                return Poll::Ready(r.map(Some));
            }
            let t = (timer.timer).get_or_insert_with(|| LazyTimer::new(&self.reactor, at));
            if t.poll_expired(&self.reactor, cx, at) {
                return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
            }
            Poll::Pending
        })
        .await
    }
}

impl AsFd for EpollUpstream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

thread_local! {
    /// This worker's idle upstream sockets, still registered with its
    /// reactor (see `upstream::idle`).
    static IDLE: RefCell<Idle<EpollUpstream>> = RefCell::new(Idle::default());
}

/// A live idle socket to upstream `i` of `b` from this worker's pool.
pub(crate) fn take_idle(b: &Balancer, i: usize) -> Option<EpollUpstream> {
    IDLE.with(|p| p.borrow_mut().take(b, i))
}

/// Keeps `up` in this worker's pool (at most `keepalive` per upstream).
pub(crate) fn put_idle(b: &Balancer, i: usize, up: EpollUpstream, keepalive: usize) {
    // Taken out of the pool's borrow before a socket beyond the bound is
    // dropped: its deregistration must not run inside the borrow.
    let over = IDLE.with(|p| p.borrow_mut().put(b, i, up, keepalive));
    drop(over);
}

/// Takes a wait's timer out of the reactor's heap when the wait ends,
/// completed or dropped (the client left mid-wait).
struct TimerGuard<'a> {
    reactor: &'a Reactor,
    timer: Option<LazyTimer>,
}

impl Drop for TimerGuard<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            t.remove(self.reactor);
        }
    }
}

impl UpstreamSocket for EpollUpstream {
    async fn io<R>(
        &mut self,
        write: bool,
        at: Instant,
        op: impl FnMut(BorrowedFd<'_>) -> io::Result<R>,
    ) -> io::Result<R> {
        let interest = if write {
            Interest::Writable
        } else {
            Interest::Readable
        };
        match self.wait(interest, at, op, false).await? {
            Some(r) => Ok(r),
            None => unreachable!("an operation's wait returns its result"),
        }
    }

    async fn writable(&mut self, at: Instant) -> io::Result<()> {
        let never = |_: BorrowedFd<'_>| -> io::Result<()> { Ok(()) };
        self.wait(Interest::Writable, at, never, true)
            .await
            .map(drop)
    }

    async fn readable(&mut self, at: Instant) -> io::Result<()> {
        let never = |_: BorrowedFd<'_>| -> io::Result<()> { Ok(()) };
        self.wait(Interest::Readable, at, never, true)
            .await
            .map(drop)
    }

    fn drained(&mut self) {
        self.io.registration().clear_readiness(Interest::Readable);
    }

    fn into_fd(self) -> OwnedFd {
        self.io.into_inner()
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}
