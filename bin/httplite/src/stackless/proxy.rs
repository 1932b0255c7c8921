//! The reverse proxy of the stackless model, for both of its drivers: the
//! blocking designs' exchange (`blocking/conn/proxy.rs`, which explains
//! the steps) with `.await` at each wait; what does not wait is shared
//! with it ([`crate::upstream::exchange`]). One task runs both sockets, one
//! after the other: the upstream's answer is read only after the last
//! piece of it was written to the client, so a slow client slows the
//! upstream (back-pressure), and at most one read buffer is held however
//! large the answer. A client that leaves mid-answer fails a write: the
//! upstream connection is closed, not pooled; one that leaves while the
//! upstream thinks is seen by the read that races the upstream's
//! (`read_answer`). When the task is dropped
//! (the worker stops), its upstream socket closes with it.
//!
//! Each upstream socket waits the driver's way ([`UpstreamSocket`]). An
//! upstream's `101` to a request that asked to switch protocols makes the
//! connection a tunnel ([`super::tunnel`]).

use std::io;
use std::os::fd::AsRawFd as _;
use std::time::Instant;

use bytes::BytesMut;
use http1::{Message, Method, Request, ResponseDecoder, Status};
use reactor::sys;
use site::reverse_proxy::answer::write_response_head;
use site::reverse_proxy::forward::BodyFraming;
use site::reverse_proxy::{Balancer, Route, UpstreamStats};

use super::answer::{FLUSH_AT, Res, Stop, Waits};
use super::tunnel::Read;
use super::upstream::UpstreamSocket;
use crate::upstream::exchange::{
    self as x, BodyStep, CONNECT_FAILED, CONNECT_TIMED_OUT, Cut, MAX_RESPONSE_HEAD, Next, count,
};

type Failed = x::Failed<Stop>;

/// Forwards `req` on `route`; whether the client's connection stays open.
pub(crate) async fn proxy<C: Waits>(conn: &mut C, req: Request, route: &Route) -> Res<bool> {
    let rest = route.rest(req.path()).unwrap_or_default();
    let b = &*route.balancer;
    let body = x::body_framing(&req);
    // A request without a body needs nothing of the connection's buffers
    // until its answer comes (a connect may take a while).
    before_waiting(conn).await?;
    let (mut tried, mut retried) = (Vec::new(), false);
    loop {
        let began = conn.now();
        let i = b.pick(began, &tried);
        tried.push(i);
        let attempt = match connect(conn, b, i, retried, body).await {
            Ok(up) => {
                let peer = conn.proxy_peer();
                let host = conn.proxy_settings().host;
                let head = x::request_head(&req, b, i, rest, body, peer, host);
                exchange(conn, &req, up, &head, body, b, (i, began)).await
            }
            Err(f) => Err(f),
        };
        match x::after(b, i, attempt, &mut tried, &mut retried, conn.now()) {
            Next::Answered(keep) => return Ok(keep),
            Next::Again => {}
            Next::Error(status, why, body_left) => {
                return Ok(proxy_error(
                    conn,
                    &req,
                    (status, why, body_left),
                    b,
                    (i, began),
                ));
            }
            Next::Stop(stop) => return Err(stop),
        }
    }
}

/// A pooled connection to upstream `i`, or a new one (always new when
/// `fresh`); whether it was pooled.
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
    if !fresh && let Some(up) = conn.take_idle(b, i) {
        count(&stats.reused);
        return Ok((up, true));
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
pub(super) async fn write_all<U: UpstreamSocket>(
    up: &mut U,
    mut bytes: &[u8],
    at: Instant,
) -> io::Result<()> {
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
pub(super) async fn read<U: UpstreamSocket>(
    up: &mut U,
    buf: &mut BytesMut,
    at: Instant,
) -> io::Result<usize> {
    x::room_for_answer(buf);
    let spare = buf.spare_capacity_mut();
    let room = spare.len();
    let n = up.io(false, at, |fd| sys::recv_nowait(fd, spare)).await?;
    // SAFETY: `recv_nowait` initialised the first `n` bytes of the spare
    // capacity, and `n` is at most its length.
    unsafe { buf.set_len(buf.len() + n) };
    if n > 0 && n < room {
        up.drained();
    }
    Ok(n)
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
        "fd={fd} to={} upstream_fd={} reused={reused}",
        b.upstreams()[i].addr,
        up.fd().as_raw_fd()
    );
    let retry_ok = x::retry_allowed(req, reused, body);
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
        // The body is in: its buffers can go while the upstream thinks.
        before_waiting(conn).await.map_err(Failed::Stop)?;
    }
    let mut decoder = ResponseDecoder::new(MAX_RESPONSE_HEAD, u64::MAX);
    decoder.expect(req.method() == Method::Head);
    // Room comes with the answer's first bytes (`read`): a request the
    // upstream is still thinking about holds no buffer for its answer.
    let mut ubuf = BytesMut::new();
    let mut received = false;
    let tunnel = x::wants_tunnel(req, body);
    let answer = loop {
        if let Some(h) = x::answer_head(&mut decoder, &mut ubuf, stats, tunnel)? {
            break h;
        }
        let at = conn.now() + timeout;
        let read = read_answer(conn, &mut up, &mut ubuf, at, stats).await?;
        x::head_read(read, retry_ok, received, stats)?;
        received = true;
    };
    reactor::trace!("upstream", "fd={fd} answer status={}", answer.status());
    if answer.status() == 101 {
        {
            let mut parts = conn.parts();
            let worker = parts.stats;
            x::tunnel_head(&answer, &mut parts.io().wbuf, stats, worker);
        }
        conn.flush().await.map_err(Failed::Stop)?;
        reactor::trace!("upstream", "fd={fd} tunnel");
        let (sent, stop) = super::tunnel::tunnel(conn, &mut up, &mut ubuf).await;
        let out = x::answered(&answer, sent, true);
        log_answer(conn, req, out, b, (i, began), Some(101));
        return stop.map_or(Ok(false), |stop| Err(Failed::Stop(stop)));
    }
    let (framing, close) = x::client_side(&answer, req, conn.parts().shutting_down);
    {
        let mut parts = conn.parts();
        parts.stats.response(answer.status());
        write_response_head(&mut parts.io().wbuf, &answer, framing, close);
    }
    let mut sent = 0;
    loop {
        let step = {
            let mut parts = conn.parts();
            let wbuf = &mut parts.io().wbuf;
            x::body_step(&mut decoder, &mut ubuf, wbuf, framing, &mut sent, FLUSH_AT)
        };
        let cut = match step {
            Ok(BodyStep::Copied(false)) => continue,
            Ok(BodyStep::Copied(true)) => conn.flush().await.err().map(Cut::Client),
            Ok(BodyStep::Done) => break,
            // Out with what we have before waiting on the upstream.
            Ok(BodyStep::Read) => match conn.flush().await {
                Err(stop) => Some(Cut::Client(stop)),
                Ok(()) => {
                    let read = read(&mut up, &mut ubuf, conn.now() + timeout).await;
                    match x::body_read(read, &mut decoder) {
                        Ok(false) => None,
                        Ok(true) => {
                            x::end_body(&mut conn.parts().io().wbuf, framing);
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
                _ => conn.flush().await.err().unwrap_or(Stop::Done),
            };
            return Err(Failed::Stop(stop));
        }
    }
    if answer.keep_alive() && decoder.is_done() && ubuf.is_empty() {
        let keep = conn.proxy_settings().keepalive;
        conn.put_idle(b, i, up, keep);
    }
    let out = x::answered(&answer, sent, close);
    log_answer(conn, req, out, b, (i, began), Some(answer.status()));
    Ok(!close)
}

/// One read of the answer into `ubuf`, until `at`, watching the client
/// meanwhile (see the blocking designs' `read_answer`): its end cancels
/// the request; what it sends is kept in its `rbuf`, up to
/// [`x::WATCH_CLIENT_UP_TO`]. The connection's buffers went back to the
/// pool before (see [`before_waiting`]).
async fn read_answer<C: Waits>(
    conn: &mut C,
    up: &mut C::Upstream,
    ubuf: &mut BytesMut,
    at: Instant,
    stats: &UpstreamStats,
) -> Result<io::Result<usize>, Failed> {
    while conn.parts().buffered() < x::WATCH_CLIENT_UP_TO {
        match super::tunnel::either(conn, up, ubuf, at).await {
            Read::Upstream(read) => return Ok(read),
            Read::Client(Ok(n)) if n > 0 => {} // pipelined: kept for later
            // The deadline is the upstream's (504).
            Read::Client(Err(e)) if e.kind() == io::ErrorKind::TimedOut => return Ok(Err(e)),
            Read::Client(_) => {
                count(&stats.cancelled);
                return Err(Failed::Stop(Stop::Done));
            }
        }
    }
    if let Err(e) = up.readable(at).await {
        return Ok(Err(e));
    }
    Ok(read(up, ubuf, at).await)
}

/// Before a wait on the upstream: earlier pipelined answers leave (they
/// must not wait for this one), and the connection's buffers go back to
/// the worker's pool if nothing is in them.
async fn before_waiting<C: Waits>(conn: &mut C) -> Res {
    conn.flush().await?;
    conn.parts().release_if_empty();
    Ok(())
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
        let bytes = x::upstream_piece(&piece, body, &mut chunk);
        if write_all(up, bytes, conn.now() + timeout).await.is_err() {
            count(&stats.closed_early);
            return Err(Failed::Answer(Status::BAD_GATEWAY, "upstream closed", true));
        }
    }
    if body == BodyFraming::Chunked
        && write_all(up, x::last_chunk(&mut chunk), conn.now() + timeout)
            .await
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

/// Answers a request no upstream answered; whether the connection stays
/// open.
fn proxy_error<C: Waits>(
    conn: &mut C,
    req: &Request,
    error: (Status, &'static str, bool),
    b: &Balancer,
    (i, began): (usize, Instant),
) -> bool {
    let fd = conn.parts().fd;
    reactor::trace!(
        "upstream",
        "fd={fd} failed status={} why={}",
        error.0.code(),
        error.1
    );
    let out = {
        let mut parts = conn.parts();
        let (stats, shutting_down) = (parts.stats, parts.shutting_down);
        x::error_answer(&mut parts.io().wbuf, stats, req, error, shutting_down)
    };
    log_answer(conn, req, out, b, (i, began), None);
    out.keep_alive
}

/// The trace and access-log lines of a proxied request, with upstream
/// `i`'s fields (its status, if it answered).
fn log_answer<C: Waits>(
    conn: &C,
    req: &Request,
    out: site::respond::Outcome,
    b: &Balancer,
    (i, began): (usize, Instant),
    status: Option<u16>,
) {
    let mut addr = String::new();
    let upstream = x::upstream_log(&mut addr, b, i, status, began, conn.now());
    conn.log_proxied(req, out, upstream);
}
