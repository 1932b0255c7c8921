//! The reverse proxy of the stackless model, for both of its drivers: the
//! blocking designs' exchange (`blocking/conn/proxy.rs`, which explains
//! the steps) with `.await` at each wait. One task runs both sockets, one
//! after the other: the upstream's answer is read only after the last
//! piece of it was written to the client, so a slow client slows the
//! upstream (back-pressure), and at most one read buffer is held however
//! large the answer. A client that leaves mid-answer fails a write: the
//! upstream connection is closed, not pooled. When the task is dropped
//! (the worker stops), its upstream socket closes with it.
//!
//! Each upstream socket waits the driver's way ([`UpstreamSocket`]); the
//! decisions are the site's ([`site::reverse_proxy`]), the same as every
//! design's.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use bytes::{BufMut, BytesMut};
use http1::{
    BodyKind, Message, Method, ReplyTo, Request, ResponseDecoder, ResponseMessage, Status,
};
use reactor::sys;
use site::access_log::UpstreamLog;
use site::respond::Outcome;
use site::reverse_proxy::answer::{ClientFraming, client_framing, write_response_head};
use site::reverse_proxy::forward::{BodyFraming, Forwarding, write_request_head};
use site::reverse_proxy::{Balancer, Route, UpstreamStats, upstream_target};

use super::answer::{FLUSH_AT, Res, Stop, Waits};
use super::upstream::UpstreamSocket;
use crate::upstream::idle;

/// Most bytes of an upstream's response head.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Who is asking, for the forwarding fields (asked once per request: the
/// socket's peer is a system call).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProxyPeer {
    /// Whether the peer is a `--trusted-proxy` (its forwarding fields stay).
    pub trusted_peer: bool,
    /// The client (a PROXY header's, or the socket's peer).
    pub client: Option<SocketAddr>,
    /// Whether the client came over TLS.
    pub https: bool,
}

/// How one try at an upstream ended, when not with an answer (see the
/// blocking designs' `Failed`).
enum Failed {
    Retry,
    Answer(Status, &'static str, bool),
    Stop(Stop),
}

/// Why an answer that had begun was cut.
enum Cut {
    Client(Stop),
    Timeout,
    Upstream,
    Malformed,
}

/// What a failed connect answers (502), and a timed-out one (504): the
/// two failures after which the next upstream is tried.
const CONNECT_FAILED: &str = "upstream refused the connection";
const CONNECT_TIMED_OUT: &str = "upstream connect timed out";

fn count(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

/// Forwards `req` on `route`; whether the client's connection stays open.
pub(crate) async fn proxy<C: Waits>(conn: &mut C, req: Request, route: &Route) -> Res<bool> {
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
        let now = conn.now();
        let i = balancer.pick(now, &tried);
        tried.push(i);
        let began = (i, now);
        let attempt = match connect(conn, balancer, i, retried, body).await {
            Ok(up) => {
                let head = upstream_head(conn, &req, balancer, i, rest, body);
                exchange(conn, &req, up, &head, body, balancer, began).await
            }
            Err(f) => Err(f),
        };
        let now = conn.now();
        match attempt {
            Ok(keep) => {
                balancer.finished(i, true, now);
                return Ok(keep);
            }
            Err(Failed::Retry) if !retried => {
                balancer.finished(i, true, now);
                tried.pop();
                retried = true;
            }
            Err(Failed::Retry) => {
                balancer.finished(i, false, now);
                let why = "upstream closed";
                return proxy_error(conn, &req, Status::BAD_GATEWAY, why, false, balancer, began);
            }
            Err(Failed::Answer(status, why, body_left)) => {
                balancer.finished(i, false, now);
                let untried = tried.len() < balancer.upstreams().len();
                if matches!(why, CONNECT_FAILED | CONNECT_TIMED_OUT) && untried {
                    continue;
                }
                return proxy_error(conn, &req, status, why, body_left, balancer, began);
            }
            Err(Failed::Stop(stop)) => {
                balancer.finished(i, true, now);
                return Err(stop);
            }
        }
    }
}

/// The head sent to upstream `i`.
fn upstream_head<C: Waits>(
    conn: &C,
    req: &Request,
    balancer: &Balancer,
    i: usize,
    rest: &str,
    body: BodyFraming,
) -> BytesMut {
    let cx = conn.proxy_peer();
    let up = &balancer.upstreams()[i];
    let target = upstream_target(&up.base_path, rest, req.query());
    let fwd = Forwarding {
        client: cx.client.map(|a| a.ip()),
        https: cx.https,
        trusted_peer: cx.trusted_peer,
        host: conn.proxy_settings().host,
        upstream_authority: &up.authority,
        tunnel: false,
    };
    let mut head = BytesMut::with_capacity(512);
    write_request_head(&mut head, req, &target, &fwd, body);
    head
}

/// A pooled connection to upstream `i`, or a new one (always new when
/// `fresh`).
async fn connect<C: Waits>(
    conn: &C,
    b: &Balancer,
    i: usize,
    fresh: bool,
    body: BodyFraming,
) -> Result<(C::Upstream, bool), Failed> {
    let stats = b.upstreams()[i].stats();
    let body_left = body != BodyFraming::None;
    let refused = || Failed::Answer(Status::BAD_GATEWAY, CONNECT_FAILED, body_left);
    if !fresh && let Some(fd) = idle::shared().take(b, i) {
        count(&stats.reused);
        return conn
            .upstream(fd)
            .map(|up| (up, true))
            .map_err(|_| refused());
    }
    let at = conn.now() + conn.proxy_settings().connect_timeout;
    let connected = async {
        let (fd, done) = crate::blocking::upstream::start_connect(&b.upstreams()[i].addr)?;
        let mut up = conn.upstream(fd)?;
        if !done {
            up.writable(at).await?;
            up.io(true, at, |fd| match sys::take_socket_error(fd)? {
                Some(e) => Err(e),
                None => Ok(()),
            })
            .await?;
        }
        io::Result::Ok(up)
    };
    match connected.await {
        Ok(up) => Ok((up, false)),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            count(&stats.connect_timeout);
            Err(Failed::Answer(
                Status::GATEWAY_TIMEOUT,
                CONNECT_TIMED_OUT,
                body_left,
            ))
        }
        Err(_) => {
            count(&stats.connect_failed);
            Err(refused())
        }
    }
}

/// Writes all of `bytes` to the upstream, until `at`.
async fn write_all<U: UpstreamSocket>(up: &mut U, mut bytes: &[u8], at: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        let n = up.io(true, at, |fd| sys::send(fd, bytes)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
    }
    Ok(())
}

/// Reads what the upstream sent into `buf`'s spare room; 0 at its end.
async fn read<U: UpstreamSocket>(up: &mut U, buf: &mut BytesMut, at: Instant) -> io::Result<usize> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
    let spare = buf.spare_capacity_mut();
    let n = up.io(false, at, |fd| sys::recv_nowait(fd, spare)).await?;
    // SAFETY: `recv_nowait` initialised the first `n` bytes of the spare
    // capacity, and `n` is at most its length.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// Whether the request may be sent again after a failure that may have
/// reached the upstream (RFC 9110 §9.2.2).
fn idempotent(req: &Request) -> bool {
    matches!(
        req.method(),
        Method::Get | Method::Head | Method::Options | Method::Put | Method::Delete | Method::Trace
    )
}

/// Sends the request on `up` and streams the answer back; whether the
/// client's connection stays open.
async fn exchange<C: Waits>(
    conn: &mut C,
    req: &Request,
    (mut up, reused): (C::Upstream, bool),
    head: &[u8],
    body: BodyFraming,
    b: &Balancer,
    (i, began): (usize, Instant),
) -> Result<bool, Failed> {
    let stats = b.upstreams()[i].stats();
    let (timeout, fd) = (conn.proxy_settings().read_timeout, conn.parts().fd);
    reactor::trace!(
        "upstream",
        "fd={fd} to={} reused={reused}",
        b.upstreams()[i].addr
    );
    let retry_ok = reused && body == BodyFraming::None && idempotent(req);
    if write_all(&mut up, head, conn.now() + timeout)
        .await
        .is_err()
    {
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
        send_body(conn, req, &mut up, body, stats).await?;
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
                let why = "upstream switched protocols unasked";
                return Err(Failed::Answer(Status::BAD_GATEWAY, why, false));
            }
            Ok(Some(ResponseMessage::Head(h))) => break h,
            Ok(Some(_)) => unreachable!("a body before its head"),
            Ok(None) => match read(&mut up, &mut ubuf, conn.now() + timeout).await {
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
                    let why = "upstream timed out";
                    return Err(Failed::Answer(Status::GATEWAY_TIMEOUT, why, false));
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
    let close = !req.keep_alive() || framing == ClientFraming::Close || conn.parts().shutting_down;
    {
        let mut parts = conn.parts();
        parts.stats.response(answer.status());
        write_response_head(&mut parts.io().wbuf, &answer, framing, close);
    }
    let sent = match stream_answer(conn, &mut up, &mut decoder, &mut ubuf, framing).await {
        Ok(sent) => sent,
        Err(why) => {
            let stop = match why {
                Cut::Client(stop) => {
                    count(&stats.cancelled);
                    stop
                }
                other => {
                    count(match other {
                        Cut::Timeout => &stats.read_timeout,
                        Cut::Upstream => &stats.closed_early,
                        _ => &stats.malformed,
                    });
                    conn.flush().await.err().unwrap_or(Stop::Done)
                }
            };
            return Err(Failed::Stop(stop));
        }
    };
    if answer.keep_alive() && decoder.is_done() && ubuf.is_empty() {
        let keep = conn.proxy_settings().keepalive;
        idle::shared().put(b, i, up.into_fd(), keep);
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
        micros: micros_since(began, conn.now()),
    };
    conn.log_proxied(req, out, upstream);
    Ok(!close)
}

/// Streams the client's body to `up` (answering `100-continue` first).
async fn send_body<C: Waits>(
    conn: &mut C,
    req: &Request,
    up: &mut C::Upstream,
    body: BodyFraming,
    stats: &UpstreamStats,
) -> Result<(), Failed> {
    if req.expects_continue() {
        http1::encode_continue(&mut conn.parts().io().wbuf);
        conn.flush().await.map_err(Failed::Stop)?;
    }
    let timeout = conn.proxy_settings().read_timeout;
    let mut chunk = BytesMut::new();
    loop {
        let piece = {
            let mut parts = conn.parts();
            let wstats = parts.stats;
            let io = parts.io();
            match io.decoder.decode(&mut io.rbuf) {
                Ok(Some(Message::Body(b))) => Some(b),
                Ok(Some(Message::End)) => break,
                Ok(Some(Message::Head(_))) => unreachable!("a head inside a body"),
                Ok(None) => None,
                Err(e) => {
                    // The client's body is malformed: it gets the error,
                    // and the upstream's half-sent request is dropped.
                    count(&stats.cancelled);
                    crate::driver::reject(&mut io.wbuf, wstats, &e, false);
                    let stop = conn.flush().await.err().unwrap_or(Stop::Done);
                    return Err(Failed::Stop(stop));
                }
            }
        };
        let Some(piece) = piece else {
            conn.fill().await.map_err(Failed::Stop)?;
            continue;
        };
        let bytes: &[u8] = match body {
            BodyFraming::Chunked => {
                chunk.clear();
                http1::encode_chunk(&mut chunk, &piece);
                &chunk
            }
            _ => &piece,
        };
        if write_all(up, bytes, conn.now() + timeout).await.is_err() {
            count(&stats.closed_early);
            return Err(Failed::Answer(Status::BAD_GATEWAY, "upstream closed", true));
        }
    }
    if body == BodyFraming::Chunked {
        chunk.clear();
        http1::encode_last_chunk(&mut chunk);
        if write_all(up, &chunk, conn.now() + timeout).await.is_err() {
            count(&stats.closed_early);
            return Err(Failed::Answer(
                Status::BAD_GATEWAY,
                "upstream closed",
                false,
            ));
        }
    }
    Ok(())
}

/// Copies the answer's body from `up` to the client as it comes; the body
/// bytes sent.
async fn stream_answer<C: Waits>(
    conn: &mut C,
    up: &mut C::Upstream,
    decoder: &mut ResponseDecoder,
    ubuf: &mut BytesMut,
    framing: ClientFraming,
) -> Result<u64, Cut> {
    let timeout = conn.proxy_settings().read_timeout;
    let mut sent = 0u64;
    loop {
        match decoder.decode(ubuf) {
            Ok(Some(ResponseMessage::Body(b))) => {
                sent += b.len() as u64;
                let full = {
                    let mut parts = conn.parts();
                    let wbuf = &mut parts.io().wbuf;
                    match framing {
                        ClientFraming::Chunked => http1::encode_chunk(wbuf, &b),
                        _ => wbuf.put_slice(&b),
                    }
                    wbuf.len() >= FLUSH_AT
                };
                if full {
                    conn.flush().await.map_err(Cut::Client)?;
                }
            }
            Ok(Some(ResponseMessage::End)) => break,
            Ok(Some(ResponseMessage::Head(_))) => return Err(Cut::Malformed),
            Ok(None) => {
                // Out with what we have before waiting on the upstream.
                conn.flush().await.map_err(Cut::Client)?;
                match read(up, ubuf, conn.now() + timeout).await {
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
        http1::encode_last_chunk(&mut conn.parts().io().wbuf);
    }
    Ok(sent)
}

/// Answers `status` for a request no upstream answered; whether the
/// connection stays open (not if the client's body was left unread).
fn proxy_error<C: Waits>(
    conn: &mut C,
    req: &Request,
    status: Status,
    why: &str,
    body_left: bool,
    b: &Balancer,
    (i, began): (usize, Instant),
) -> Res<bool> {
    let fd = conn.parts().fd;
    reactor::trace!(
        "upstream",
        "fd={fd} failed status={} why={why}",
        status.code()
    );
    let keep = req.keep_alive() && !body_left && !conn.parts().shutting_down;
    let to = ReplyTo {
        keep_alive: keep,
        ..ReplyTo::new(req)
    };
    let text = format!("{why}\n");
    {
        let mut parts = conn.parts();
        parts.stats.response(status.code());
        let wbuf = &mut parts.io().wbuf;
        http1::encode_response(wbuf, to, status, Some(http1::TEXT_PLAIN), text.as_bytes());
    }
    let out = Outcome {
        status,
        bytes: text.len() as u64,
        keep_alive: keep,
    };
    let addr = b.upstreams()[i].addr.to_string();
    let upstream = UpstreamLog {
        addr: &addr,
        status: None,
        micros: micros_since(began, conn.now()),
    };
    conn.log_proxied(req, out, upstream);
    Ok(keep)
}

fn micros_since(t: Instant, now: Instant) -> u64 {
    now.saturating_duration_since(t)
        .as_micros()
        .min(u128::from(u64::MAX)) as u64
}
