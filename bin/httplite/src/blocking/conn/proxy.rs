//! The reverse proxy in blocking style (stackful, threads, threadpool,
//! fork): a request whose path a `--proxy` route takes is sent to an
//! upstream and its answer streamed back, as straight-line code; each wait
//! is the design's ([`crate::blocking::upstream::UpstreamWaits`]). What does
//! not wait is shared with the stackless model
//! ([`crate::upstream::exchange`]).
//!
//! ```text
//!   pick an upstream (balancer) ─▶ an idle pooled connection, or connect
//!     (refused or timed out: the next upstream, then 502 / 504)
//!   send the head ─▶ stream the body (client reads, upstream writes)
//!   read the answer's head (--proxy-timeout-read: 504; malformed: 502)
//!     (a pooled connection closed before any byte of it, with nothing of a
//!      body sent: once more on a new connection)
//!   write the head ─▶ stream the body: upstream reads, client writes
//!   the answer read to its end and the upstream willing: back to the pool
//! ```
//!
//! Back-pressure is the blocking style's own: the next upstream read comes
//! only after the last piece was written to the client, so a slow client
//! slows the upstream through TCP's window, and at most one read buffer
//! (plus the client's write buffer, flushed at 64 KiB) is held however
//! large the answer. A client that leaves mid-answer makes a write fail:
//! the upstream connection is closed then (counted `cancelled`), never
//! pooled. While the upstream is still thinking, the client is watched
//! too (`read_answer`): its end cancels the request.
//!
//! A request that asks to switch protocols (`Upgrade`, a WebSocket
//! handshake: [`x::wants_tunnel`]) goes up with its `Upgrade`; an
//! upstream's `101` makes the connection a tunnel ([`super::tunnel`]) until
//! either side ends, and it then closes (the upstream's socket too, never
//! pooled).

use std::io;
use std::os::fd::AsRawFd as _;
use std::time::Instant;

use bytes::BytesMut;
use http1::{Message, Method, Request, ResponseDecoder, Status};
use site::reverse_proxy::answer::write_response_head;
use site::reverse_proxy::forward::BodyFraming;
use site::reverse_proxy::{Balancer, Route, UpstreamStats};

use super::log::log_proxied;
use super::{Conn, FLUSH_AT, Res, Stop};
use crate::blocking::upstream::{Side, Upstream};
use crate::blocking::{BlockingIo, Deadline};
use crate::upstream::exchange::{
    self as x, BodyStep, CONNECT_FAILED, CONNECT_TIMED_OUT, Cut, MAX_RESPONSE_HEAD, Next, count,
};
use crate::upstream::idle;

type Failed = x::Failed<Stop>;
type Upstreamed<I> = Upstream<<I as BlockingIo>::Waits>;

impl<I: BlockingIo> Conn<'_, I> {
    /// Forwards `req` on `route`; whether the client's connection stays
    /// open.
    #[cold]
    #[inline(never)]
    pub(super) fn proxy(&mut self, req: Request, route: &Route) -> Res<bool> {
        let rest = route.rest(req.path()).unwrap_or_default();
        let b = &*route.balancer;
        let body = x::body_framing(&req);
        let (mut tried, mut retried) = (Vec::new(), false);
        loop {
            let began = self.io.now();
            let i = b.pick(began, &tried);
            tried.push(i);
            let attempt = self.connect(b, i, retried, body).and_then(|up| {
                let peer = self.peer();
                let host = self.ctx.config.reverse_proxy.host;
                let head = x::request_head(&req, b, i, rest, body, peer, host);
                self.exchange(&req, up, &head, body, b, (i, began))
            });
            match x::after(b, i, attempt, &mut tried, &mut retried, self.io.now()) {
                Next::Answered(keep) => return Ok(keep),
                Next::Again => {}
                Next::Error(status, why, body_left) => {
                    return Ok(self.proxy_error(&req, (status, why, body_left), b, (i, began)));
                }
                Next::Stop(stop) => return Err(stop),
            }
        }
    }

    /// Who is asking, for the forwarding fields.
    fn peer(&self) -> x::Peer {
        let trusted = &self.ctx.config.proxy.trusted;
        let fd = self.io.fd();
        x::Peer {
            trusted_peer: !trusted.is_empty() && trusted.trusts(crate::proxy::peer_of(fd)),
            client: self.client.or_else(|| self.io.peer_addr()),
            https: I::ENCRYPTED,
        }
    }

    /// A pooled connection to upstream `i`, or a new one (always new when
    /// `fresh`).
    fn connect(
        &mut self,
        b: &Balancer,
        i: usize,
        fresh: bool,
        body: BodyFraming,
    ) -> Result<Upstreamed<I>, Failed> {
        let stats = b.upstreams()[i].stats();
        let body_left = body != BodyFraming::None;
        if !fresh && let Some(fd) = idle::shared().take(b, i) {
            count(&stats.reused);
            return Upstream::adopt(fd, true)
                .map_err(|_| Failed::Answer(Status::BAD_GATEWAY, CONNECT_FAILED, body_left));
        }
        let deadline = self.io.now() + self.ctx.config.reverse_proxy.connect_timeout;
        Upstream::connect(&b.upstreams()[i].addr, deadline).map_err(|e| {
            if e.kind() == io::ErrorKind::TimedOut {
                count(&stats.connect_timeout);
                Failed::Answer(Status::GATEWAY_TIMEOUT, CONNECT_TIMED_OUT, body_left)
            } else {
                count(&stats.connect_failed);
                Failed::Answer(Status::BAD_GATEWAY, CONNECT_FAILED, body_left)
            }
        })
    }

    /// Sends the request on `up` and streams the answer back; whether the
    /// client's connection stays open.
    fn exchange(
        &mut self,
        req: &Request,
        up: Upstreamed<I>,
        head: &[u8],
        body: BodyFraming,
        b: &Balancer,
        (i, began): (usize, Instant),
    ) -> Result<bool, Failed> {
        let stats = b.upstreams()[i].stats();
        let (fd, addr) = (self.io.fd(), &b.upstreams()[i].addr);
        reactor::trace!(
            "upstream",
            "fd={fd} to={addr} upstream_fd={} reused={}",
            up.fd().as_raw_fd(),
            up.reused
        );
        let timeout = self.ctx.config.reverse_proxy.read_timeout;
        let retry_ok = x::retry_allowed(req, up.reused, body);
        if up.write_all(head, self.io.now() + timeout).is_err() {
            if retry_ok {
                return Err(Failed::Retry);
            }
            count(&stats.closed_early);
            let body_left = body != BodyFraming::None;
            return Err(Failed::Answer(
                Status::BAD_GATEWAY,
                "upstream closed",
                body_left,
            ));
        }
        if body != BodyFraming::None {
            self.send_body(req, &up, body, stats)?;
        }
        let mut decoder = ResponseDecoder::new(MAX_RESPONSE_HEAD, u64::MAX);
        decoder.expect(req.method() == Method::Head);
        // Room comes with the answer's first bytes (`Upstream::read`): a
        // request the upstream is still thinking about holds no buffer
        // for its answer.
        let mut ubuf = BytesMut::new();
        let mut received = false;
        let tunnel = x::wants_tunnel(req, body);
        let answer = loop {
            if let Some(h) = x::answer_head(&mut decoder, &mut ubuf, stats, tunnel)? {
                break h;
            }
            let read = self.read_answer(&up, &mut ubuf, self.io.now() + timeout, stats)?;
            x::head_read(read, retry_ok, received, stats)?;
            received = true;
        };
        reactor::trace!("upstream", "fd={fd} answer status={}", answer.status());
        if answer.status() == 101 {
            x::tunnel_head(&answer, &mut self.wbuf, stats, &self.ctx.stats);
            self.flush().map_err(Failed::Stop)?;
            reactor::trace!("upstream", "fd={fd} tunnel");
            let (sent, stop) = self.tunnel(&up, &mut ubuf);
            let out = x::answered(&answer, sent, true);
            self.log_answer(req, out, b, i, Some(101), began);
            return stop.map_or(Ok(false), |stop| Err(Failed::Stop(stop)));
        }
        let shutting_down = self.ctx.idle.is_shutting_down();
        let (framing, close) = x::client_side(&answer, req, shutting_down);
        write_response_head(&mut self.wbuf, &answer, framing, close);
        self.ctx.stats.response(answer.status());
        let mut sent = 0;
        loop {
            let step = x::body_step(
                &mut decoder,
                &mut ubuf,
                &mut self.wbuf,
                framing,
                &mut sent,
                FLUSH_AT,
            );
            let cut = match step {
                Ok(BodyStep::Copied(false)) => continue,
                Ok(BodyStep::Copied(true)) => self.flush().err().map(Cut::Client),
                Ok(BodyStep::Done) => break,
                // Out with what we have before waiting on the upstream.
                Ok(BodyStep::Read) => match self.flush() {
                    Err(stop) => Some(Cut::Client(stop)),
                    Ok(()) => {
                        let read = up.read(&mut ubuf, self.io.now() + timeout);
                        match x::body_read(read, &mut decoder) {
                            Ok(false) => None,
                            Ok(true) => {
                                x::end_body(&mut self.wbuf, framing);
                                break;
                            }
                            Err(cut) => Some(cut),
                        }
                    }
                },
                Err(cut) => Some(cut),
            };
            if let Some(cut) = cut {
                // The head is out: all that is left is to close both.
                count(cut.counter(stats));
                let stop = match cut {
                    Cut::Client(stop) => stop,
                    _ => self.flush().err().unwrap_or(Stop::Done),
                };
                return Err(Failed::Stop(stop));
            }
        }
        if answer.keep_alive() && decoder.is_done() && ubuf.is_empty() {
            let keep = self.ctx.config.reverse_proxy.keepalive;
            idle::shared().put(b, i, up.into_idle(), keep);
        }
        let out = x::answered(&answer, sent, close);
        self.log_answer(req, out, b, i, Some(answer.status()), began);
        Ok(!close)
    }

    /// One read of the answer into `ubuf`, until `deadline`, watching the
    /// client meanwhile ([`x::WATCH_CLIENT_UP_TO`]): a client that closes
    /// (or fails) while the upstream thinks cancels the request (the
    /// upstream's socket is closed, counted `cancelled`), as nginx does
    /// unless told to ignore client aborts; a client that half-closes
    /// after its request counts as gone too.
    fn read_answer(
        &mut self,
        up: &Upstreamed<I>,
        ubuf: &mut BytesMut,
        deadline: Instant,
        stats: &UpstreamStats,
    ) -> Result<io::Result<usize>, Failed> {
        while self.rbuf.len() < x::WATCH_CLIENT_UP_TO {
            match self.io.wait_either(up, Deadline::At(deadline)) {
                Ok(Side::Upstream) => break,
                Ok(Side::Client) => match self.read_some(Deadline::At(deadline)) {
                    Ok(n) if n > 0 => {} // pipelined: kept for later
                    _ => {
                        count(&stats.cancelled);
                        return Err(Failed::Stop(Stop::Done));
                    }
                },
                // The upstream's timeout (504), or a wait that cannot be
                // made: the upstream's failure.
                Err(e) => return Ok(Err(e)),
            }
        }
        Ok(up.read(ubuf, deadline))
    }

    /// Streams the client's body to `up` (answering `100-continue` first).
    fn send_body(
        &mut self,
        req: &Request,
        up: &Upstreamed<I>,
        body: BodyFraming,
        stats: &UpstreamStats,
    ) -> Result<(), Failed> {
        if req.expects_continue() {
            http1::encode_continue(&mut self.wbuf);
            self.flush().map_err(Failed::Stop)?;
        }
        let timeout = self.ctx.config.reverse_proxy.read_timeout;
        let mut chunk = BytesMut::new();
        loop {
            let piece = match self.decoder.decode(&mut self.rbuf) {
                Ok(Some(Message::Body(b))) => b,
                Ok(Some(Message::End)) => break,
                Ok(Some(Message::Head(_))) => unreachable!("a head inside a body"),
                Ok(None) => {
                    self.fill().map_err(Failed::Stop)?;
                    continue;
                }
                Err(e) => {
                    // The client's body is malformed: it gets the error,
                    // and the upstream's half-sent request is dropped.
                    count(&stats.cancelled);
                    crate::driver::reject(&mut self.wbuf, &self.ctx.stats, &e, false);
                    return Err(Failed::Stop(self.flush().err().unwrap_or(Stop::Done)));
                }
            };
            let bytes = x::upstream_piece(&piece, body, &mut chunk);
            if up.write_all(bytes, self.io.now() + timeout).is_err() {
                count(&stats.closed_early);
                return Err(Failed::Answer(Status::BAD_GATEWAY, "upstream closed", true));
            }
        }
        if body == BodyFraming::Chunked
            && up
                .write_all(x::last_chunk(&mut chunk), self.io.now() + timeout)
                .is_err()
        {
            count(&stats.closed_early);
            return Err(Failed::Answer(
                Status::BAD_GATEWAY,
                "upstream closed",
                false,
            ));
        }
        Ok(())
    }

    /// The trace and access-log lines of a proxied request, with its
    /// upstream's fields.
    fn log_answer(
        &self,
        req: &Request,
        out: site::respond::Outcome,
        b: &Balancer,
        i: usize,
        status: Option<u16>,
        began: Instant,
    ) {
        let mut addr = String::new();
        let now = self.io.now();
        let upstream = x::upstream_log(&mut addr, b, i, status, began, now);
        let (ctx, started) = (self.ctx, self.request_started);
        log_proxied(
            ctx,
            &self.io,
            self.client,
            self.on,
            req,
            out,
            started,
            upstream,
        );
    }

    /// Answers a request no upstream answered; whether the connection stays
    /// open.
    fn proxy_error(
        &mut self,
        req: &Request,
        error: (Status, &'static str, bool),
        b: &Balancer,
        (i, began): (usize, Instant),
    ) -> bool {
        let fd = self.io.fd();
        reactor::trace!(
            "upstream",
            "fd={fd} failed status={} why={}",
            error.0.code(),
            error.1
        );
        let shutting_down = self.ctx.idle.is_shutting_down();
        let out = x::error_answer(&mut self.wbuf, &self.ctx.stats, req, error, shutting_down);
        self.log_answer(req, out, b, i, None, began);
        out.keep_alive
    }
}
