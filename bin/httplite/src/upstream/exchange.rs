//! The parts of a proxied exchange that do not wait, shared by the two
//! models that run it: straight-line code for the blocking designs
//! (`blocking/conn/proxy.rs`) and `.await`s for the stackless ones
//! (`stackless/proxy.rs`). Those two keep only the waits (connect, send,
//! read, flush), which Rust cannot write once for a thread that blocks and
//! a task that returns `Pending`; what to send, how a failure is counted
//! and answered, and what the loop does after a try are here.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use bytes::BytesMut;
use http1::{
    BodyKind, Method, ReplyTo, Request, ResponseDecoder, ResponseHead, ResponseMessage, Status,
    Version,
};
use site::access_log::UpstreamLog;
use site::respond::Outcome;
use site::reverse_proxy::answer::{ClientFraming, client_framing};
use site::reverse_proxy::forward::{
    BodyFraming, Forwarding, HostPolicy, connection_tokens, write_request_head,
};
use site::reverse_proxy::{Balancer, UpstreamStats, upstream_target};
use site::stats::WorkerStats;

/// What a failed connect answers (502), and a timed-out one (504): the
/// two failures after which the next upstream is tried, as nothing was
/// sent anywhere (nginx's `proxy_next_upstream error timeout`).
pub const CONNECT_FAILED: &str = "upstream refused the connection";
/// See [`CONNECT_FAILED`].
pub const CONNECT_TIMED_OUT: &str = "upstream connect timed out";
/// Most bytes of an upstream's response head.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// Room for the next read of an answer into `buf`: one page for its first
/// bytes (a head and a small body fit, as in nginx's default
/// `proxy_buffer_size`), then 16 KiB at a time once it streams. Thousands
/// of answers that arrive together then hold a page each, not 16 KiB.
pub fn room_for_answer(buf: &mut BytesMut) {
    if buf.capacity() == 0 {
        buf.reserve(4096);
    } else if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
}

/// While the upstream thinks, the client is watched too: its end cancels
/// the request, and what it sends meanwhile (pipelined requests) is kept
/// for later, up to this many bytes in its read buffer; beyond them only
/// the upstream is waited on.
pub const WATCH_CLIENT_UP_TO: usize = 64 * 1024;

/// Who is asking, for the forwarding fields (asked once per request: the
/// socket's peer is a system call).
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// Whether the peer is a `--trusted-proxy` (its forwarding fields stay).
    pub trusted_peer: bool,
    /// The client (a PROXY header's, or the socket's peer).
    pub client: Option<SocketAddr>,
    /// Whether the client came over TLS.
    pub https: bool,
}

/// How one try at an upstream ended, when not with an answer; `S` is the
/// model's reason to stop a connection.
#[derive(Debug)]
pub enum Failed<S> {
    /// A pooled connection the upstream had closed: nothing of the answer
    /// came and the request may be sent again, on a new connection.
    Retry,
    /// Answer the client with this status (502, 504) and reason;
    /// `body_left` when the client's body was not read to its end (the
    /// connection must close).
    Answer(Status, &'static str, bool),
    /// The client's side failed (it left, or timed out).
    Stop(S),
}

/// What the loop over upstreams does after a try.
#[derive(Debug)]
pub enum Next<S> {
    /// The client has its answer; whether its connection stays open.
    Answered(bool),
    /// Try again: the same upstream on a new connection, or the next one.
    Again,
    /// Answer the client with this status and reason (see [`Failed`]).
    Error(Status, &'static str, bool),
    /// Stop the client's connection.
    Stop(S),
}

/// Why an answer that had begun was cut.
#[derive(Debug)]
pub enum Cut<S> {
    /// Writing to the client failed (it left).
    Client(S),
    /// The upstream was silent for `--proxy-timeout-read`.
    Timeout,
    /// The upstream closed or failed.
    Upstream,
    /// The upstream's framing broke.
    Malformed,
}

impl<S> Cut<S> {
    /// The upstream's counter for this cut.
    pub fn counter<'a>(&self, stats: &'a UpstreamStats) -> &'a AtomicU64 {
        match self {
            Cut::Client(_) => &stats.cancelled,
            Cut::Timeout => &stats.read_timeout,
            Cut::Upstream => &stats.closed_early,
            Cut::Malformed => &stats.malformed,
        }
    }
}

/// One more of `counter`.
pub fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

/// How the request's body goes upstream.
pub fn body_framing(req: &Request) -> BodyFraming {
    match req.body_kind() {
        BodyKind::None | BodyKind::Length(0) => BodyFraming::None,
        BodyKind::Length(n) => BodyFraming::Length(n),
        BodyKind::Chunked => BodyFraming::Chunked,
    }
}

/// Whether `req` asks to switch protocols in a way the proxy tunnels: an
/// `Upgrade` field that `Connection` names (RFC 9110 §7.8), from an
/// HTTP/1.1 client (a server ignores `Upgrade` from HTTP/1.0), with no
/// body (a WebSocket handshake has none; a request with a body goes up
/// without its upgrade, and is answered as a plain request).
pub fn wants_tunnel(req: &Request, body: BodyFraming) -> bool {
    body == BodyFraming::None
        && req.version() == Version::Http11
        && req
            .headers()
            .any(|(n, _)| n.eq_ignore_ascii_case("upgrade"))
        && connection_tokens(req.headers())
            .iter()
            .any(|t| t == "upgrade")
}

/// The start of a tunnel, after the upstream's `101`: counted (the
/// upstream's `tunnels`, the worker's responses), and the client's head
/// (`Upgrade` and `Connection: upgrade` kept) in `wbuf`.
pub fn tunnel_head(
    answer: &ResponseHead,
    wbuf: &mut BytesMut,
    stats: &UpstreamStats,
    worker: &WorkerStats,
) {
    count(&stats.tunnels);
    worker.response(answer.status());
    site::reverse_proxy::answer::write_response_head(wbuf, answer, ClientFraming::None, false);
}

/// Whether a pooled connection's failure before any answer may be retried:
/// it may be the upstream's idle close crossing the request, and the
/// request can be sent again (no body, already consumed) and may be
/// (idempotent, RFC 9110 §9.2.2).
pub fn retry_allowed(req: &Request, reused: bool, body: BodyFraming) -> bool {
    let idempotent = matches!(
        req.method(),
        Method::Get | Method::Head | Method::Options | Method::Put | Method::Delete | Method::Trace
    );
    reused && body == BodyFraming::None && idempotent
}

/// The head sent to upstream `i` for `req` (`rest`: the path after the
/// route's prefix).
pub fn request_head(
    req: &Request,
    b: &Balancer,
    i: usize,
    rest: &str,
    body: BodyFraming,
    peer: Peer,
    host: HostPolicy,
) -> BytesMut {
    let up = &b.upstreams()[i];
    let target = upstream_target(&up.base_path, rest, req.query());
    let fwd = Forwarding {
        client: peer.client.map(|a| a.ip()),
        https: peer.https,
        trusted_peer: peer.trusted_peer,
        host,
        upstream_authority: &up.authority,
        tunnel: wants_tunnel(req, body),
    };
    let mut head = BytesMut::with_capacity(512);
    write_request_head(&mut head, req, &target, &fwd, body);
    head
}

/// What the loop does after a try at upstream `i` ended with `attempt`;
/// `tried` and `retried` are the loop's, updated here.
pub fn after<S>(
    b: &Balancer,
    i: usize,
    attempt: Result<bool, Failed<S>>,
    tried: &mut Vec<usize>,
    retried: &mut bool,
    now: Instant,
) -> Next<S> {
    match attempt {
        Ok(keep) => {
            b.finished(i, true, now);
            Next::Answered(keep)
        }
        // Not the upstream's failure: a race with its idle close. Once
        // more, to the same one, on a new socket.
        Err(Failed::Retry) if !*retried => {
            b.finished(i, true, now);
            tried.pop();
            *retried = true;
            Next::Again
        }
        Err(Failed::Retry) => {
            b.finished(i, false, now);
            Next::Error(Status::BAD_GATEWAY, "upstream closed", false)
        }
        Err(Failed::Answer(status, why, body_left)) => {
            b.finished(i, false, now);
            let untried = tried.len() < b.upstreams().len();
            if matches!(why, CONNECT_FAILED | CONNECT_TIMED_OUT) && untried {
                return Next::Again;
            }
            Next::Error(status, why, body_left)
        }
        Err(Failed::Stop(stop)) => {
            b.finished(i, true, now);
            Next::Stop(stop)
        }
    }
}

/// The answer to a request no upstream answered, encoded into `wbuf`
/// (counted): its outcome, and whether the connection stays open (not if
/// the client's body was left unread).
pub fn error_answer(
    wbuf: &mut BytesMut,
    stats: &WorkerStats,
    req: &Request,
    (status, why, body_left): (Status, &str, bool),
    shutting_down: bool,
) -> Outcome {
    let keep = req.keep_alive() && !body_left && !shutting_down;
    let to = ReplyTo {
        keep_alive: keep,
        ..ReplyTo::new(req)
    };
    let text = format!("{why}\n");
    http1::encode_response(wbuf, to, status, Some(http1::TEXT_PLAIN), text.as_bytes());
    stats.response(status.code());
    Outcome {
        status,
        bytes: text.len() as u64,
        keep_alive: keep,
    }
}

/// The outcome of an answered request: `sent` body bytes of `answer`.
pub fn answered(answer: &ResponseHead, sent: u64, close: bool) -> Outcome {
    Outcome {
        status: Status::from_code(answer.status()).unwrap_or(Status::OK),
        bytes: sent,
        keep_alive: !close,
    }
}

/// The access log's upstream fields: `addr` (upstream `i`'s, written into
/// it), its status if it answered, its time since `began`.
pub fn upstream_log<'a>(
    addr: &'a mut String,
    b: &Balancer,
    i: usize,
    status: Option<u16>,
    began: Instant,
    now: Instant,
) -> UpstreamLog<'a> {
    use std::fmt::Write as _;
    addr.clear();
    let _ = write!(addr, "{}", b.upstreams()[i].addr);
    let micros = now.saturating_duration_since(began).as_micros();
    UpstreamLog {
        addr,
        status,
        micros: micros.min(u128::from(u64::MAX)) as u64,
    }
}

/// The answer's head, if `ubuf` holds it whole (interim answers skipped);
/// `Ok(None)`: read more. A `101` to a request that did not ask to
/// `tunnel` ([`wants_tunnel`]), or a head that does not decode, is a 502
/// (counted). After a `101`, `ubuf` keeps what followed the head: the
/// tunnel's first bytes.
pub fn answer_head<S>(
    decoder: &mut ResponseDecoder,
    ubuf: &mut BytesMut,
    stats: &UpstreamStats,
    tunnel: bool,
) -> Result<Option<ResponseHead>, Failed<S>> {
    loop {
        match decoder.decode(ubuf) {
            Ok(Some(ResponseMessage::Head(h))) if h.is_interim() => {}
            Ok(Some(ResponseMessage::Head(h))) if h.status() == 101 && !tunnel => {
                count(&stats.malformed);
                let why = "upstream switched protocols unasked";
                return Err(Failed::Answer(Status::BAD_GATEWAY, why, false));
            }
            Ok(Some(ResponseMessage::Head(h))) => return Ok(Some(h)),
            Ok(Some(_)) => unreachable!("a body before its head"),
            Ok(None) => return Ok(None),
            Err(e) => {
                count(&stats.malformed);
                return Err(Failed::Answer(Status::BAD_GATEWAY, e.reason(), false));
            }
        }
    }
}

/// What a read for the answer's head brought: `Ok` (bytes, go on), or the
/// failure (counted). `retry_ok` and nothing `received` yet: a close is
/// the idle-close race ([`Failed::Retry`]).
pub fn head_read<S>(
    read: io::Result<usize>,
    retry_ok: bool,
    received: bool,
    stats: &UpstreamStats,
) -> Result<(), Failed<S>> {
    match read {
        Ok(0) | Err(_) if retry_ok && !received => Err(Failed::Retry),
        Ok(0) => {
            count(&stats.closed_early);
            Err(Failed::Answer(
                Status::BAD_GATEWAY,
                "upstream closed",
                false,
            ))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            count(&stats.read_timeout);
            let why = "upstream timed out";
            Err(Failed::Answer(Status::GATEWAY_TIMEOUT, why, false))
        }
        Err(_) => {
            count(&stats.closed_early);
            Err(Failed::Answer(
                Status::BAD_GATEWAY,
                "upstream failed",
                false,
            ))
        }
    }
}

/// One step of copying the answer's body: what [`body_step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyStep {
    /// A piece went into the client's buffer; `true` when the buffer is
    /// full enough to flush.
    Copied(bool),
    /// `ubuf` holds no more of the body: flush, then read.
    Read,
    /// The body ended (the last chunk is in the client's buffer).
    Done,
}

/// Moves what `ubuf` holds of the answer's body into `wbuf`, framed for
/// the client; `sent` counts the body bytes.
pub fn body_step<S>(
    decoder: &mut ResponseDecoder,
    ubuf: &mut BytesMut,
    wbuf: &mut BytesMut,
    framing: ClientFraming,
    sent: &mut u64,
    flush_at: usize,
) -> Result<BodyStep, Cut<S>> {
    match decoder.decode(ubuf) {
        Ok(Some(ResponseMessage::Body(b))) => {
            *sent += b.len() as u64;
            match framing {
                ClientFraming::Chunked => http1::encode_chunk(wbuf, &b),
                _ => bytes::BufMut::put_slice(wbuf, &b),
            }
            Ok(BodyStep::Copied(wbuf.len() >= flush_at))
        }
        Ok(Some(ResponseMessage::End)) => {
            end_body(wbuf, framing);
            Ok(BodyStep::Done)
        }
        Ok(None) => Ok(BodyStep::Read),
        Ok(Some(ResponseMessage::Head(_))) | Err(_) => Err(Cut::Malformed),
    }
}

/// The body's end for the client: the last chunk, if chunked.
pub fn end_body(wbuf: &mut BytesMut, framing: ClientFraming) {
    if framing == ClientFraming::Chunked {
        http1::encode_last_chunk(wbuf);
    }
}

/// What a read for the answer's body brought: `Ok(false)` to go on
/// (bytes), `Ok(true)` for the close that ends a body the close delimits
/// (then [`end_body`]), or the cut.
pub fn body_read<S>(
    read: io::Result<usize>,
    decoder: &mut ResponseDecoder,
) -> Result<bool, Cut<S>> {
    match read {
        Ok(0) => match decoder.eof() {
            Ok(Some(ResponseMessage::End)) => Ok(true),
            _ => Err(Cut::Upstream),
        },
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => Err(Cut::Timeout),
        Err(_) => Err(Cut::Upstream),
    }
}

/// The framing for a client of `req`'s version, and whether its connection
/// closes after the answer.
pub fn client_side(
    answer: &ResponseHead,
    req: &Request,
    shutting_down: bool,
) -> (ClientFraming, bool) {
    let framing = client_framing(answer, req.version());
    let close = !req.keep_alive() || framing == ClientFraming::Close || shutting_down;
    (framing, close)
}

/// A piece of the client's body, re-framed for the upstream (`chunk` is
/// scratch room for a chunk's framing).
pub fn upstream_piece<'a>(piece: &'a [u8], body: BodyFraming, chunk: &'a mut BytesMut) -> &'a [u8] {
    match body {
        BodyFraming::Chunked => {
            chunk.clear();
            http1::encode_chunk(chunk, piece);
            chunk
        }
        _ => piece,
    }
}

/// The end of a chunked body for the upstream.
pub fn last_chunk(chunk: &mut BytesMut) -> &[u8] {
    chunk.clear();
    http1::encode_last_chunk(chunk);
    chunk
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(head: &str) -> Request {
        let mut buf = BytesMut::from(head.as_bytes());
        match http1::Decoder::new(http1::Limits::default()).decode(&mut buf) {
            Ok(Some(http1::Message::Head(r))) => r,
            other => panic!("{head:?} decoded as {other:?}"),
        }
    }

    #[test]
    fn only_an_http11_upgrade_without_a_body_is_tunnelled() {
        let ws = "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n";
        let cases = [
            (ws, true),
            // `Upgrade` not named in `Connection`: a hop-by-hop field to drop.
            (
                "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n",
                false,
            ),
            // Named, but absent.
            (
                "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n",
                false,
            ),
            // RFC 9110 §7.8: ignored from HTTP/1.0.
            (
                "GET /ws HTTP/1.0\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
                false,
            ),
            // A body goes up as a plain request's.
            (
                "POST /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: h2c\r\nContent-Length: 3\r\n\r\n",
                false,
            ),
        ];
        for (head, tunnel) in cases {
            let req = request(head);
            assert_eq!(wants_tunnel(&req, body_framing(&req)), tunnel, "{head:?}");
        }
    }
}
