//! One connection on the proactor: wait for bytes, decode, answer, send,
//! until the client or a timeout ends it.
//!
//! ```text
//!   multishot recv armed once ── CQE {res=78, BUFFER=3} ──▶ copy into rbuf,
//!   buffer 3 back to the ring → decode → route → encode into wbuf
//!   (more complete requests? loop) → IORING_OP_SEND of the answer, split
//!   off wbuf and not waited for (a detached send) → idle: request state
//!   back to the pool; the idle wait watches the send
//! ```
//!
//! Unlike the epoll driver there is no "try the read first": the recv is
//! always in the kernel, and bytes that arrive while the connection is busy
//! wait in its slot as CQEs for the next wait, which then returns at once
//! with no system call.

use std::future::Future;
use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Instant;

use http1::Request;
use proactor::{RecvBuf, TcpStream};
use site::exposure::Surface;
use site::respond::{self, Handled, Slow};
use site::stats::TimeoutKind;

use super::ctx::{ConnGuard, WorkerCtx};
use super::tls::TlsConn;
use crate::driver;
use crate::stackless::answer;
pub(super) use crate::stackless::answer::{Res, Stop};
use crate::stackless::ctx::Active;
pub(super) use log::{log, log_proxied};
use recv::Waiting;

mod log;
mod recv;
mod send;

/// One connection's state (small: an idle connection is this, its task
/// and its armed recv).
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    /// Buffers and decoder while a request is in hand; `None` while idle.
    pub(super) active: Option<Box<Active>>,
    /// When the first byte of the request being read arrived.
    pub(super) head_started: Option<Instant>,
    /// When the request in hand began (the access log's request time).
    /// Until the first request, when the connection was handed to this
    /// worker: the first request's header timeout and the shutdown grace
    /// count from it (one `Instant` fewer in every idle connection).
    pub(super) request_started: Instant,
    /// Requests answered on this connection (saturating: it only tells
    /// the first request from the others; 32 bits leave room for `on`).
    served: u32,
    /// The listener it came in on.
    pub(super) on: Surface,
    /// An HTTPS connection: its TLS session is in the worker's
    /// [`WorkerCtx::tls_conns`] (a flag here costs a plain connection
    /// nothing: it fits beside `on`).
    pub(super) tls: bool,
    /// Whether the next send needs `TCP_NODELAY` first (shares the word
    /// with the flags above).
    pub(super) nagle: driver::Nagle,
    /// The one timer entry every wait for bytes shares: going idle again
    /// moves the deadline later without touching the timer map.
    deadline: proactor::time::LazyDeadline,
    /// The worker, through the guard that counts the connection open
    /// (one reference for both); declared last so that it drops after the
    /// socket is closed.
    pub(super) ctx: ConnGuard,
}

/// Serves one connection to the end. Never panics on bad input: protocol
/// errors are answered and the connection closed. `None`: the connection's
/// TLS session could not start, and it is closed.
///
/// The connection is built before the async block, so the task's future
/// holds it once instead of also keeping `serve`'s two arguments.
pub(super) fn serve(ctx: Rc<WorkerCtx>, stream: TcpStream) -> Option<impl Future<Output = ()>> {
    let guard = ctx.open_connection();
    drop(ctx);
    let ctx = &guard;
    let now = Instant::now();
    let on = (ctx.config.admin).surface_of(stream.as_fd());
    if on == Surface::Admin {
        ctx.stats.admin_connection();
    }
    // The PROXY protocol is the balancer's, on public listeners only (an
    // operator reaches --admin directly).
    let proxied = on == Surface::Public && ctx.config.proxy.expects_header(stream.as_raw_fd());
    let mut conn = Conn {
        stream,
        active: None,
        head_started: None,
        request_started: now,
        served: 0,
        on,
        tls: false,
        nagle: driver::Nagle::Unwritten,
        deadline: Default::default(),
        ctx: guard,
    };
    if let Some(tls) = conn.ctx.tls.on(on) {
        // Dropped on failure: its guard counts the connection closed.
        let session = TlsConn::new(tls).ok()?;
        let fd = conn.stream.as_raw_fd();
        conn.ctx.tls_conns.borrow_mut().insert(fd, session);
        conn.tls = true;
        // The session writes on its own (the handshake, tickets): Nagle
        // could hold an answer behind those.
        let _ = reactor::sys::set_nodelay(conn.stream.as_fd(), true);
        conn.nagle = driver::Nagle::Off;
    }
    Some(async move {
        // The first poll ends the handoff's arrow on a timeline.
        let fd = conn.stream.as_raw_fd();
        crate::driver::trace_arrival(fd);
        if proxied {
            // Boxed: the header's reader must not enlarge every idle
            // connection's future (this state is live only until then).
            let header = Box::pin(super::proxied::read_header(
                &conn.ctx,
                &conn.stream,
                conn.request_started,
            ));
            match header.await {
                Ok(client) => {
                    crate::proxy::trace_accepted(fd, client);
                    if let Some(client) = client {
                        conn.ctx.proxy_clients.borrow_mut().insert(fd, client);
                    }
                }
                Err(refused) => {
                    refused.trace(fd);
                    refused.count(&conn.ctx.stats);
                    return;
                }
            }
        }
        let mut stop = conn.run().await;
        // An answer may still be on its way (a detached send): it goes
        // before the close, unless it is what timed out.
        // (Boxed: this state must not enlarge every idle connection's
        // future.)
        if !matches!(stop, Stop::Timeout(TimeoutKind::Write))
            && conn.stream.has_detached()
            && let Err(failed) = Box::pin(conn.sent()).await
        {
            stop = failed;
        }
        conn.finish(stop);
    })
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.deadline
            .clear(&self.ctx.proactor, self.stream.as_raw_fd());
        if let Some(active) = self.active.take() {
            self.ctx.pool.put(active);
        }
        // Here rather than at the end of `serve`: a task cancelled at the
        // shutdown deadline drops its connection too.
        if self.tls {
            let fd = self.stream.as_raw_fd();
            self.ctx.tls_conns.borrow_mut().remove(&fd);
        }
        if !matches!(
            self.ctx.config.proxy.listeners,
            crate::proxy::Listeners::None
        ) {
            let fd = self.stream.as_raw_fd();
            self.ctx.proxy_clients.borrow_mut().remove(&fd);
        }
    }
}

impl Conn {
    /// Counts why the connection stopped; dropping it closes the socket
    /// (its recv cancelled, a `close` queued on the ring).
    fn finish(self, stop: Stop) {
        stop.count(&self.ctx.stats);
    }

    async fn run(&mut self) -> Stop {
        loop {
            if self.tls && self.tls_peer_closed() {
                return Stop::Done;
            }
            // Idle: no buffer, no decoder, only the recv in the kernel.
            let (at, kind) = if self.served == 0 {
                (
                    self.request_started + self.ctx.config.header_timeout,
                    TimeoutKind::Header,
                )
            } else {
                // The turn's clock: an idle deadline needs no finer one.
                (
                    self.ctx.proactor.now() + self.ctx.config.idle_timeout,
                    TimeoutKind::Idle,
                )
            };
            let taken = match self.recv(at, kind, Waiting::Idle).await {
                Ok(Some(buf)) => {
                    // When the turn that brought the bytes woke up.
                    self.head_started = Some(self.ctx.proactor.now());
                    self.take_bytes(&buf)
                }
                Ok(None) => return Stop::Done,
                Err(stop) => return stop,
            };
            // Boxed: the answering states (sends, their timeouts, the
            // decoder loop) live only while a request is in hand, and must
            // not make every idle connection's future larger. Taking the
            // bytes fails only on a TLS session's error, answered here.
            let answer: Pin<Box<dyn Future<Output = Option<Stop>> + '_>> = match taken {
                Ok(()) => Box::pin(answer::answer(self)),
                Err(stop) => Box::pin(self.failed_answer(stop)),
            };
            if let Some(stop) = answer.await {
                return stop;
            }
            // Only a TLS handshake's records leave it set: they were no
            // request's head.
            self.head_started = None;
        }
    }

    /// The end of a connection whose TLS session failed on the bytes that
    /// woke it, in [`Conn::run`]'s answering state.
    async fn failed_answer(&mut self, stop: Stop) -> Option<Stop> {
        Some(self.failed(stop).await)
    }

    /// Copies a ring buffer's bytes into the read buffer (over TLS, their
    /// plaintext); the caller drops the buffer, which returns it to the
    /// ring at once.
    #[inline]
    fn take_bytes(&mut self, buf: &RecvBuf) -> Res {
        if self.tls {
            return self.feed_tls(buf);
        }
        self.io().rbuf.extend_from_slice(buf);
        Ok(())
    }

    /// [`crate::stackless::answer::Waits::read_client`]: the next bytes
    /// the recv delivers, taken into `rbuf` (over TLS, their plaintext; a
    /// record that brings none is waited past).
    pub(super) async fn read_client(&mut self, at: Instant) -> io::Result<usize> {
        loop {
            // Not `self.io()`: a request that waits on its upstream holds
            // no buffers until bytes come (see `Parts::release_if_empty`).
            let before = self.active.as_ref().map_or(0, |a| a.rbuf.len());
            match self.recv(at, TimeoutKind::Idle, Waiting::InRequest).await {
                Ok(Some(buf)) => {
                    if let Err(stop) = self.take_bytes(&buf) {
                        return Err(match stop {
                            Stop::Io(e) => e,
                            _ => io::ErrorKind::InvalidData.into(),
                        });
                    }
                }
                Ok(None) => return Ok(0),
                Err(Stop::Io(e)) => return Err(e),
                Err(_) => return Err(io::ErrorKind::TimedOut.into()),
            }
            let n = self.io().rbuf.len() - before;
            if n > 0 || (self.tls && self.tls_peer_closed()) {
                return Ok(n);
            }
        }
    }

    /// Until when, at shutdown, a connection that has sent no request yet
    /// waits for its first one ([`driver::FIRST_REQUEST_GRACE`] from the
    /// accept); `None` once it has sent one.
    pub(super) fn first_request_grace_end(&self) -> Option<Instant> {
        (self.served == 0)
            .then(|| self.request_started + driver::first_request_grace(&self.ctx.config))
    }

    /// Reads more bytes within a request (a partial head under the header
    /// timeout however slowly it trickles in, a body under the idle one).
    pub(super) async fn fill(&mut self) -> Res {
        let in_body = self.io().decoder.in_body();
        if self.head_started.is_none() && !in_body {
            // Part of a head: the rest comes under the header timeout.
            self.head_started = Some(Instant::now());
        }
        let config = &self.ctx.config;
        let (at, kind) = match self.head_started.filter(|_| !in_body) {
            Some(t) => (t + config.header_timeout, TimeoutKind::Header),
            None => (Instant::now() + config.idle_timeout, TimeoutKind::Idle),
        };
        // After a TLS `close_notify` nothing more will come: the end of
        // the stream, whatever the socket still does.
        let closed = self.tls && self.tls_peer_closed();
        let got = match closed {
            false => self.recv(at, kind, Waiting::InRequest).await?,
            true => None,
        };
        match got {
            Some(buf) => match self.take_bytes(&buf) {
                Ok(()) => Ok(()),
                Err(stop) => Err(Box::pin(self.failed(stop)).await),
            },
            None => Err(if self.io().is_between_requests() {
                Stop::Done
            } else {
                Stop::Io(io::ErrorKind::UnexpectedEof.into())
            }),
        }
    }

    /// The request-time state, taken from the pool if the connection has
    /// none.
    #[inline]
    pub(super) fn io(&mut self) -> &mut Active {
        self.ctx.pool.ensure(&mut self.active)
    }

    /// Gives the request-time state back to the pool (going idle).
    pub(super) fn release_active(&mut self) {
        if let Some(active) = self.active.take() {
            self.ctx.pool.put(active);
        }
    }

    /// Whether nothing of a next request has arrived.
    fn between_requests(&self) -> bool {
        self.active.as_ref().is_none_or(|a| a.is_between_requests())
    }

    /// Handles one request without waiting, if it can (see
    /// [`respond::handle`]); what must wait comes back as `Slow`.
    pub(super) fn handle(&mut self, req: Request) -> Handled<Slow> {
        self.served = self.served.saturating_add(1);
        let Conn {
            ctx,
            active,
            stream,
            request_started,
            on,
            ..
        } = self;
        let wbuf = &mut ctx.pool.ensure(active).wbuf;
        let shutting_down = ctx.shutdown.get();
        let started = *request_started;
        let fd = stream.as_raw_fd();
        let on = &*on;
        respond::handle(
            &ctx.app,
            &ctx.stats,
            wbuf,
            req,
            on,
            shutting_down,
            |req, out| log(ctx, fd, *on, req, out, started),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future a function of two arguments returns (if it
    /// returns one).
    fn future_size<A, B, F>(_: fn(A, B) -> Option<F>) -> usize {
        size_of::<F>()
    }

    /// Every idle connection pays for its task's whole future, whose size
    /// is that of its largest state: the answering states are boxed so that
    /// the idle one (the recv wait) sets it. 1,104 bytes before they were,
    /// 328 with the wait as a closure capturing five references.
    #[test]
    fn an_idle_connections_future_stays_small() {
        let size = future_size(serve);

        assert!(size <= 184, "the connection's future grew to {size} bytes");
    }
}
