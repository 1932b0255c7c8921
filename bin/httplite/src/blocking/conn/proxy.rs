//! The reverse proxy in blocking style (stackful, threads, threadpool,
//! fork): a request whose path a `--proxy` route takes is sent to an
//! upstream and its answer streamed back, as straight-line code; each wait
//! is the design's ([`UpstreamWaits`]).
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
//! pooled. A client that leaves while the upstream is still thinking is
//! noticed at the first write, when the answer begins.
//!
//! `Upgrade` (WebSocket) requests are forwarded without their `Upgrade`
//! here, so the upstream answers them as plain requests: the blocking
//! designs do not tunnel yet.

use std::io;
use std::time::Instant;

use bytes::{BufMut, BytesMut};
use http1::{
    BodyKind, Message, Method, ReplyTo, Request, ResponseDecoder, ResponseMessage, Status,
};
use site::access_log::UpstreamLog;
use site::respond::Outcome;
use site::reverse_proxy::answer::{ClientFraming, client_framing, write_response_head};
use site::reverse_proxy::forward::{BodyFraming, Forwarding, write_request_head};
use site::reverse_proxy::{Balancer, Route, upstream_target};

use super::log::log_proxied;
use super::{Conn, FLUSH_AT, Res, Stop};
use crate::blocking::BlockingIo;
use crate::blocking::upstream::Upstream;
use crate::upstream::idle;

/// Most bytes of an upstream's response head.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// How one try at an upstream ended, when not with an answer.
enum Failed {
    /// A pooled connection the upstream had closed: nothing of the answer
    /// came and nothing of a body was sent, so a new connection may try
    /// again.
    Retry,
    /// Answer the client with this status (502, 504); `body_left` when the
    /// client's body was not read to its end (the connection must close).
    Answer(Status, &'static str, bool),
    /// The client's side failed (it left, or timed out): stop the
    /// connection.
    Stop(Stop),
}

type Upstreamed<I> = Upstream<<I as BlockingIo>::Waits>;

impl<I: BlockingIo> Conn<'_, I> {
    /// Forwards `req` (its path's part after the route's prefix is `rest`);
    /// whether the client's connection stays open.
    #[cold]
    #[inline(never)]
    pub(super) fn proxy(&mut self, req: Request, route: &Route) -> Res<bool> {
        let rest = route.rest(req.path()).unwrap_or_default();
        let balancer = &*route.balancer;
        let body = match req.body_kind() {
            BodyKind::None | BodyKind::Length(0) => BodyFraming::None,
            BodyKind::Length(n) => BodyFraming::Length(n),
            BodyKind::Chunked => BodyFraming::Chunked,
        };
        let mut tried = Vec::new();
        let mut retried = false;
        loop {
            let now = self.io.now();
            let i = balancer.pick(now, &tried);
            tried.push(i);
            let began = (i, now);
            let attempt = self.connect(balancer, i, retried, body).and_then(|up| {
                let head = self.upstream_head(&req, balancer, i, rest, body);
                self.exchange(&req, up, &head, body, balancer, began)
            });
            let failed = match attempt {
                Ok(keep) => {
                    balancer.finished(i, true, self.io.now());
                    return Ok(keep);
                }
                Err(f) => f,
            };
            let now = self.io.now();
            match failed {
                Failed::Retry if !retried => {
                    // Not the upstream's failure: a race with its idle
                    // close. Once more, to the same one, on a new socket.
                    balancer.finished(i, true, now);
                    tried.pop();
                    retried = true;
                }
                Failed::Retry => {
                    balancer.finished(i, false, now);
                    let why = "upstream closed";
                    return self.proxy_error(
                        &req,
                        Status::BAD_GATEWAY,
                        why,
                        false,
                        balancer,
                        began,
                    );
                }
                Failed::Answer(status, why, body_left) => {
                    balancer.finished(i, false, now);
                    // Nothing was sent anywhere yet: another upstream may
                    // take it (nginx's `proxy_next_upstream error timeout`).
                    let untried = tried.len() < balancer.upstreams().len();
                    if matches!(why, CONNECT_FAILED | CONNECT_TIMED_OUT) && untried {
                        continue;
                    }
                    return self.proxy_error(&req, status, why, body_left, balancer, began);
                }
                Failed::Stop(stop) => {
                    balancer.finished(i, true, now);
                    return Err(stop);
                }
            }
        }
    }

    /// The head sent to upstream `i`.
    fn upstream_head(
        &self,
        req: &Request,
        balancer: &Balancer,
        i: usize,
        rest: &str,
        body: BodyFraming,
    ) -> BytesMut {
        let up = &balancer.upstreams()[i];
        let target = upstream_target(&up.base_path, rest, req.query());
        let trusted = &self.ctx.config.proxy.trusted;
        let peer = crate::proxy::peer_of(self.io.fd());
        let fwd = Forwarding {
            client: self.client.or_else(|| self.io.peer_addr()).map(|a| a.ip()),
            https: I::ENCRYPTED,
            trusted_peer: !trusted.is_empty() && trusted.trusts(peer),
            host: self.ctx.config.reverse_proxy.host,
            upstream_authority: &up.authority,
            tunnel: false,
        };
        let mut head = BytesMut::with_capacity(512);
        write_request_head(&mut head, req, &target, &fwd, body);
        head
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
            stats
                .reused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Upstream::adopt(fd, true)
                .map_err(|_| Failed::Answer(Status::BAD_GATEWAY, CONNECT_FAILED, body_left));
        }
        let deadline = self.io.now() + self.ctx.config.reverse_proxy.connect_timeout;
        Upstream::connect(&b.upstreams()[i].addr, deadline).map_err(|e| {
            let timed_out = e.kind() == io::ErrorKind::TimedOut;
            let counter = if timed_out {
                &stats.connect_timeout
            } else {
                &stats.connect_failed
            };
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if timed_out {
                Failed::Answer(Status::GATEWAY_TIMEOUT, CONNECT_TIMED_OUT, body_left)
            } else {
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
        let fd = self.io.fd();
        reactor::trace!(
            "upstream",
            "fd={fd} to={} reused={}",
            b.upstreams()[i].addr,
            up.reused
        );
        let count = |c: &std::sync::atomic::AtomicU64| {
            c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let timeout = self.ctx.config.reverse_proxy.read_timeout;
        // A pooled connection's failure before any answer may be the
        // upstream's idle close crossing the request: sent again only if
        // it can be (no body, already consumed) and may be (idempotent).
        let retry_ok = up.reused && body == BodyFraming::None && idempotent(req);
        if up.write_all(head, self.io.now() + timeout).is_err() {
            if retry_ok {
                return Err(Failed::Retry);
            }
            count(&stats.closed_early);
            return Err(Failed::Answer(
                Status::BAD_GATEWAY,
                "upstream closed",
                body != BodyFraming::None,
            ));
        }
        if body != BodyFraming::None {
            self.send_body(req, &up, body, stats)?;
        }
        let mut decoder = ResponseDecoder::new(MAX_RESPONSE_HEAD, u64::MAX);
        decoder.expect(req.method() == Method::Head);
        let mut ubuf = BytesMut::with_capacity(16 * 1024);
        let mut received = false;
        let answer = loop {
            match decoder.decode(&mut ubuf) {
                Ok(Some(ResponseMessage::Head(h))) if h.is_interim() => {}
                Ok(Some(ResponseMessage::Head(h))) if h.status() == 101 => {
                    count(&stats.malformed);
                    return Err(Failed::Answer(
                        Status::BAD_GATEWAY,
                        "upstream switched protocols unasked",
                        false,
                    ));
                }
                Ok(Some(ResponseMessage::Head(h))) => break h,
                Ok(Some(_)) => unreachable!("a body before its head"),
                Ok(None) => match up.read(&mut ubuf, self.io.now() + timeout) {
                    Ok(0) | Err(_) if retry_ok && !received => return Err(Failed::Retry),
                    Ok(0) => {
                        count(&stats.closed_early);
                        return Err(Failed::Answer(
                            Status::BAD_GATEWAY,
                            "upstream closed",
                            false,
                        ));
                    }
                    Ok(_) => received = true,
                    Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                        count(&stats.read_timeout);
                        return Err(Failed::Answer(
                            Status::GATEWAY_TIMEOUT,
                            "upstream timed out",
                            false,
                        ));
                    }
                    Err(_) => {
                        count(&stats.closed_early);
                        return Err(Failed::Answer(
                            Status::BAD_GATEWAY,
                            "upstream failed",
                            false,
                        ));
                    }
                },
                Err(e) => {
                    count(&stats.malformed);
                    return Err(Failed::Answer(Status::BAD_GATEWAY, e.reason(), false));
                }
            }
        };
        reactor::trace!("upstream", "fd={fd} answer status={}", answer.status());
        let framing = client_framing(&answer, req.version());
        let close = !req.keep_alive()
            || framing == ClientFraming::Close
            || self.ctx.idle.is_shutting_down();
        write_response_head(&mut self.wbuf, &answer, framing, close);
        self.ctx.stats.response(answer.status());
        let sent = match self.stream_answer(&up, &mut decoder, &mut ubuf, framing) {
            Ok(sent) => sent,
            Err(why) => {
                // The head is out: all that is left is to close both.
                let counter = match why {
                    Cut::Client(_) => &stats.cancelled,
                    Cut::Timeout => &stats.read_timeout,
                    Cut::Upstream => &stats.closed_early,
                    Cut::Malformed => &stats.malformed,
                };
                count(counter);
                let stop = match why {
                    Cut::Client(stop) => stop,
                    _ => self.flush().err().unwrap_or(Stop::Done),
                };
                return Err(Failed::Stop(stop));
            }
        };
        if answer.keep_alive() && decoder.is_done() && ubuf.is_empty() {
            let keep = self.ctx.config.reverse_proxy.keepalive;
            idle::shared().put(b, i, up.into_idle(), keep);
        }
        let out = Outcome {
            status: Status::from_code(answer.status()).unwrap_or(Status::OK),
            bytes: sent,
            keep_alive: !close,
        };
        let addr = b.upstreams()[i].addr.to_string();
        let upstream = UpstreamLog {
            addr: &addr,
            status: Some(answer.status()),
            micros: micros_since(began, self.io.now()),
        };
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
        Ok(!close)
    }

    /// Streams the client's body to `up` (answering `100-continue` first).
    fn send_body(
        &mut self,
        req: &Request,
        up: &Upstreamed<I>,
        body: BodyFraming,
        stats: &site::reverse_proxy::UpstreamStats,
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
                    stats
                        .cancelled
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    crate::driver::reject(&mut self.wbuf, &self.ctx.stats, &e, false);
                    return Err(Failed::Stop(self.flush().err().unwrap_or(Stop::Done)));
                }
            };
            let bytes: &[u8] = match body {
                BodyFraming::Chunked => {
                    chunk.clear();
                    http1::encode_chunk(&mut chunk, &piece);
                    &chunk
                }
                _ => &piece,
            };
            if up.write_all(bytes, self.io.now() + timeout).is_err() {
                stats
                    .closed_early
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Err(Failed::Answer(Status::BAD_GATEWAY, "upstream closed", true));
            }
        }
        if body == BodyFraming::Chunked {
            chunk.clear();
            http1::encode_last_chunk(&mut chunk);
            if up.write_all(&chunk, self.io.now() + timeout).is_err() {
                stats
                    .closed_early
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Err(Failed::Answer(
                    Status::BAD_GATEWAY,
                    "upstream closed",
                    false,
                ));
            }
        }
        Ok(())
    }

    /// Copies the answer's body from `up` to the client as it comes; the
    /// body bytes sent.
    fn stream_answer(
        &mut self,
        up: &Upstreamed<I>,
        decoder: &mut ResponseDecoder,
        ubuf: &mut BytesMut,
        framing: ClientFraming,
    ) -> Result<u64, Cut> {
        let timeout = self.ctx.config.reverse_proxy.read_timeout;
        let mut sent = 0u64;
        loop {
            match decoder.decode(ubuf) {
                Ok(Some(ResponseMessage::Body(b))) => {
                    sent += b.len() as u64;
                    match framing {
                        ClientFraming::Chunked => http1::encode_chunk(&mut self.wbuf, &b),
                        _ => self.wbuf.put_slice(&b),
                    }
                    if self.wbuf.len() >= FLUSH_AT {
                        self.flush().map_err(Cut::Client)?;
                    }
                }
                Ok(Some(ResponseMessage::End)) => break,
                Ok(Some(ResponseMessage::Head(_))) => return Err(Cut::Malformed),
                Ok(None) => {
                    // Out with what we have before waiting on the upstream.
                    self.flush().map_err(Cut::Client)?;
                    match up.read(ubuf, self.io.now() + timeout) {
                        // The end of a body the close delimits, or a cut.
                        Ok(0) => match decoder.eof() {
                            Ok(Some(ResponseMessage::End)) => break,
                            _ => return Err(Cut::Upstream),
                        },
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(Cut::Timeout),
                        Err(_) => return Err(Cut::Upstream),
                    }
                }
                Err(_) => return Err(Cut::Malformed),
            }
        }
        if framing == ClientFraming::Chunked {
            http1::encode_last_chunk(&mut self.wbuf);
        }
        Ok(sent)
    }

    /// Answers `status` for a request no upstream answered; whether the
    /// connection stays open (not if the client's body was left unread).
    #[allow(clippy::too_many_arguments)]
    fn proxy_error(
        &mut self,
        req: &Request,
        status: Status,
        why: &str,
        body_left: bool,
        b: &Balancer,
        (i, began): (usize, Instant),
    ) -> Res<bool> {
        let (fd, code) = (self.io.fd(), status.code());
        reactor::trace!("upstream", "fd={fd} failed status={code} why={why}");
        let keep = req.keep_alive() && !body_left && !self.ctx.idle.is_shutting_down();
        let to = ReplyTo {
            keep_alive: keep,
            ..ReplyTo::new(req)
        };
        let text = format!("{why}\n");
        http1::encode_response(
            &mut self.wbuf,
            to,
            status,
            Some(http1::TEXT_PLAIN),
            text.as_bytes(),
        );
        self.ctx.stats.response(status.code());
        let out = Outcome {
            status,
            bytes: text.len() as u64,
            keep_alive: keep,
        };
        let addr = b.upstreams()[i].addr.to_string();
        let upstream = UpstreamLog {
            addr: &addr,
            status: None,
            micros: micros_since(began, self.io.now()),
        };
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
        Ok(keep)
    }
}

/// Why an answer that had begun was cut.
enum Cut {
    Client(Stop),
    Timeout,
    Upstream,
    Malformed,
}

/// What a failed connect answers (502), and a timed-out one (504): the
/// two failures after which the next upstream is tried, as nothing was
/// sent anywhere.
const CONNECT_FAILED: &str = "upstream refused the connection";
const CONNECT_TIMED_OUT: &str = "upstream connect timed out";

/// Whether the request is one a proxy may send again after a failure that
/// may have reached the upstream (RFC 9110 §9.2.2).
fn idempotent(req: &Request) -> bool {
    matches!(
        req.method(),
        Method::Get | Method::Head | Method::Options | Method::Put | Method::Delete | Method::Trace
    )
}

fn micros_since(t: Instant, now: Instant) -> u64 {
    now.saturating_duration_since(t)
        .as_micros()
        .min(u128::from(u64::MAX)) as u64
}
