//! The synchronous half of answering a request, shared by every runtime:
//! route, encode what can be encoded now, and describe what must wait.
//!
//! The runtimes differ only in how they wait (a future's `.await`, a
//! coroutine's park, a thread's blocking call). Everything decided between
//! two waits lives here, so that stackless, stackful and thread-per-connection
//! servers answer byte for byte the same and a comparison of them measures
//! the concurrency design, not three different HTTP implementations.

use std::fs::File;
use std::os::fd::RawFd;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use bytes::BytesMut;
use http1::{BodyEncoder, Framing, HeaderValue, ReplyTo, Request, StaticResponse, Status};

use crate::routes::{Action, App};
use crate::static_files::StaticReply;
use crate::stats::{ErrorKind, WorkerStats};

/// `text/plain` for the server's own small answers.
pub const TEXT: HeaderValue<'static> = HeaderValue::from_static("text/plain; charset=utf-8");
/// `text/html` for listings.
pub const HTML: HeaderValue<'static> = HeaderValue::from_static("text/html; charset=utf-8");

/// What [`handle`] did: answered (keep-alive or not), or handed back work
/// that must wait.
#[derive(Debug)]
pub enum Handled<S> {
    /// Encoded into the write buffer; `true` keeps the connection open.
    Done(bool),
    /// Must wait (a body, a sleep, a file): the runtime finishes it.
    Slow(S),
}

/// A request whose answer must wait.
#[derive(Debug)]
pub struct Slow {
    /// The request.
    pub req: Request,
    /// How to answer it.
    pub to: ReplyTo,
    /// What to answer.
    pub action: Action,
}

/// One answered request, for the stats and the access log.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// The status sent.
    pub status: Status,
    /// Body bytes sent.
    pub bytes: u64,
    /// Whether the connection stays open.
    pub keep_alive: bool,
}

/// Routes `req` and, for small complete answers (the plaintext hot path),
/// encodes the response at once; `log` is told about every answer given
/// here. A panicking handler is answered with 500 and the connection
/// closes; nothing else is affected.
pub fn handle(
    app: &App,
    stats: &WorkerStats,
    wbuf: &mut BytesMut,
    req: Request,
    shutting_down: bool,
    log: impl FnOnce(&Request, Outcome),
) -> Handled<Slow> {
    stats.request();
    let mut to = ReplyTo::new(&req);
    if shutting_down {
        to.keep_alive = false;
    }
    // The constant endpoints first: no `Action` to build and move, and no
    // panic to catch.
    if !req.has_body()
        && let Some(response) = app.canned(&req)
    {
        http1::encode_static(wbuf, to, response);
        return answered(stats, &req, to, response, log);
    }
    let action = match catch_unwind(AssertUnwindSafe(|| app.route(&req))) {
        Ok(a) => a,
        Err(_) => {
            stats.error(ErrorKind::Panic);
            stats.response(500);
            let body = b"500 Internal Server Error\n";
            let to = ReplyTo {
                keep_alive: false,
                ..to
            };
            // Cannot fail: no caller headers.
            let _ = respond_owned(
                wbuf,
                stats,
                to,
                Status::INTERNAL_SERVER_ERROR,
                None,
                &[],
                body,
            );
            let outcome = Outcome {
                status: Status::INTERNAL_SERVER_ERROR,
                bytes: body.len() as u64,
                keep_alive: false,
            };
            log(&req, outcome);
            return Handled::Done(false);
        }
    };
    match action {
        Action::Static(response) if !req.has_body() => {
            http1::encode_static(wbuf, to, response);
            answered(stats, &req, to, response, log)
        }
        action => Handled::Slow(Slow { req, to, action }),
    }
}

/// Counts and logs a small answer [`handle`] has encoded.
#[inline(always)]
fn answered(
    stats: &WorkerStats,
    req: &Request,
    to: ReplyTo,
    response: &StaticResponse,
    log: impl FnOnce(&Request, Outcome),
) -> Handled<Slow> {
    stats.response(response.status.code());
    let outcome = Outcome {
        status: response.status,
        bytes: response.body.len() as u64,
        keep_alive: to.keep_alive,
    };
    log(req, outcome);
    Handled::Done(to.keep_alive)
}

/// Whether the request's body must be read and dropped before answering.
/// Not when there is none, nor for echo and jobs (which read it
/// themselves), nor when
/// the client waits for a `100 Continue` we will not send: then the answer
/// goes out at once and the connection closes.
pub fn body_policy(slow: &mut Slow) -> bool {
    if !slow.req.has_body() || matches!(slow.action, Action::Echo | Action::Job(_)) {
        return false;
    }
    if slow.req.expects_continue() {
        // RFC 9110 §10.1.1: the client holds the body back until told to
        // send it. Answer now instead, without reading it, and close: the
        // body's bytes must not be mistaken for the next request.
        slow.to.keep_alive = false;
        return false;
    }
    true
}

/// Encodes a complete response with arbitrary headers. `None` means the
/// headers were invalid: a 500 was encoded instead and the connection must
/// close.
pub fn respond_owned(
    wbuf: &mut BytesMut,
    stats: &WorkerStats,
    to: ReplyTo,
    status: Status,
    content_type: Option<HeaderValue<'static>>,
    headers: &[(&'static str, String)],
    body: &[u8],
) -> Option<bool> {
    let mut hs: Vec<(&str, &[u8])> = Vec::with_capacity(headers.len() + 1);
    if let Some(ct) = content_type {
        hs.push(("Content-Type", ct.as_bytes()));
    }
    hs.extend(headers.iter().map(|(n, v)| (*n, v.as_bytes())));
    match http1::encode_head(wbuf, to, status, &hs, Framing::Length(body.len() as u64)) {
        Ok(mut enc) => {
            enc.write(wbuf, body).ok()?;
            let keep = enc.keep_alive();
            enc.finish(wbuf).ok()?;
            Some(keep)
        }
        Err(e) => {
            // A handler produced an invalid header: answer 500 instead.
            stats.error(ErrorKind::Panic);
            http1::encode_error(wbuf, &e);
            None
        }
    }
}

/// The `http` trace line of one answered request.
#[inline]
pub fn trace_outcome(fd: RawFd, req: &Request, out: Outcome) {
    reactor::trace!(
        "http",
        "fd={fd} {} {} {} -> {} body={}B{}",
        req.method().as_str(),
        req.target(),
        req.version().as_str(),
        out.status.code(),
        out.bytes,
        if out.keep_alive { "" } else { " close" }
    );
}

/// Encodes the answer to a protocol error; the caller flushes and closes.
pub fn reject(wbuf: &mut BytesMut, stats: &WorkerStats, e: &http1::Error) {
    reject_reply(wbuf, stats, e, false);
}

/// [`reject`] once the request's head is known (an error in its body):
/// the answer to a `HEAD` request then has no body, not even the error's
/// reason (RFC 9110 §9.3.2), or the client would read that reason as the
/// start of the next response.
pub fn reject_reply(wbuf: &mut BytesMut, stats: &WorkerStats, e: &http1::Error, head_only: bool) {
    reactor::trace!("http", "reject {} ({e})", e.status().code());
    let kind = match e.status().code() {
        413 => ErrorKind::BodyTooLarge,
        414 => ErrorKind::UriTooLong,
        431 => ErrorKind::HeadersTooLarge,
        505 => ErrorKind::Version,
        _ => ErrorKind::BadRequest,
    };
    stats.error(kind);
    stats.response(e.status().code());
    // As `http1::encode_error`, with the request's `head_only`.
    let to = ReplyTo {
        head_only,
        ..ReplyTo::closing()
    };
    let reason = e.reason().as_bytes();
    http1::encode_response(wbuf, to, e.status(), Some(http1::TEXT_PLAIN), reason);
}

/// Encodes a complete answer for actions that need no further I/O once any
/// request body has been dealt with (`Static`, `Owned`). `None` for actions
/// that do (`Echo`, `Sleep`, `File`).
pub fn complete(
    wbuf: &mut BytesMut,
    stats: &WorkerStats,
    to: ReplyTo,
    action: &Action,
) -> Option<Outcome> {
    match action {
        Action::Static(response) => {
            http1::encode_static(wbuf, to, response);
            Some(Outcome {
                status: response.status,
                bytes: response.body.len() as u64,
                keep_alive: to.keep_alive,
            })
        }
        Action::Owned {
            status,
            content_type,
            headers,
            body,
        } => {
            let keep = respond_owned(wbuf, stats, to, *status, *content_type, headers, body);
            Some(Outcome {
                status: *status,
                bytes: body.len() as u64,
                keep_alive: keep.unwrap_or(false),
            })
        }
        _ => None,
    }
}

/// Starts reading a job's input: `100 Continue` first if the client waits
/// for it (the caller flushes before reading the body).
pub fn job_head(wbuf: &mut BytesMut, req: &Request) {
    if req.expects_continue() {
        http1::encode_continue(wbuf);
    }
}

/// Submits a job whose input has been read and encodes the answer (202,
/// or 503 with `Retry-After` when the pool is full).
pub fn job_submitted(
    wbuf: &mut BytesMut,
    app: &App,
    stats: &WorkerStats,
    to: ReplyTo,
    kind: crate::jobs::JobKind,
    input: Vec<u8>,
) -> Outcome {
    let action = crate::jobs::http::submitted(&app.jobs, kind, input);
    if let Action::Owned { status, .. } = &action
        && *status == Status::SERVICE_UNAVAILABLE
    {
        stats.error(ErrorKind::Overloaded);
    }
    complete(wbuf, stats, to, &action).expect("submitted() answers with a complete response")
}

/// The answer to `/_httplite/sleep` once the sleep is over.
pub fn slept(wbuf: &mut BytesMut, stats: &WorkerStats, to: ReplyTo, d: Duration) -> Outcome {
    let body = format!("slept {} ms\n", d.as_millis());
    let keep = respond_owned(
        wbuf,
        stats,
        to,
        Status::OK,
        Some(TEXT),
        &[],
        body.as_bytes(),
    );
    Outcome {
        status: Status::OK,
        bytes: body.len() as u64,
        keep_alive: keep.unwrap_or(false),
    }
}

/// Starts the echo response: `100 Continue` first if the client waits for
/// it (the caller must flush it before reading the body), then the head,
/// sized if the request was, chunked if it was chunked.
pub fn echo_head(wbuf: &mut BytesMut, req: &Request, to: ReplyTo) -> Option<BodyEncoder> {
    if req.expects_continue() {
        http1::encode_continue(wbuf);
    }
    let framing = match req.body_kind() {
        http1::BodyKind::Length(n) => Framing::Length(n),
        http1::BodyKind::Chunked => Framing::Chunked,
        http1::BodyKind::None => Framing::Length(0),
    };
    let ct: &[u8] = req
        .header("content-type")
        .and_then(|v| HeaderValue::new(v).ok())
        .map_or(b"application/octet-stream", |v| v.as_bytes());
    http1::encode_head(wbuf, to, Status::OK, &[("Content-Type", ct)], framing).ok()
}

/// A static file answer: either complete already, or a body to `sendfile`.
#[derive(Debug)]
pub enum FileStep {
    /// Encoded entirely (304, 301, listing, error, or HEAD).
    Done(Outcome),
    /// The head is encoded; send `len` bytes of `file` from `offset`.
    Send {
        /// The file.
        file: File,
        /// First byte.
        offset: u64,
        /// Bytes.
        len: u64,
        /// What to report once sent.
        outcome: Outcome,
    },
    /// The head could not be encoded; close.
    Fail,
}

/// Work that finishes a static file answer on the blocking pool.
pub type PoolWork = Box<dyn FnOnce() -> StaticReply + Send>;

/// Splits off the part of a static file answer that must run on the
/// blocking pool: a directory listing (milliseconds for thousands of
/// entries). `Err` gives back a reply that needs no pool.
pub fn pool_work(reply: StaticReply) -> Result<PoolWork, StaticReply> {
    match reply {
        StaticReply::ListDir { dir, url_path } => {
            Ok(Box::new(move || StaticReply::list(&dir, &url_path)))
        }
        other => Err(other),
    }
}

/// The reply once [`pool_work`] ran: `503` with `Retry-After` if the pool
/// was full, `500` if it panicked.
pub fn pool_done(
    stats: &WorkerStats,
    ran: Result<Result<StaticReply, pool::JoinError>, pool::Full>,
) -> StaticReply {
    match ran {
        Ok(Ok(reply)) => reply,
        Ok(Err(_)) => {
            stats.error(ErrorKind::Panic);
            StaticReply::Error(Status::INTERNAL_SERVER_ERROR, Vec::new())
        }
        Err(pool::Full) => {
            stats.error(ErrorKind::Overloaded);
            let retry = crate::jobs::http::RETRY_AFTER_SECS.to_string();
            StaticReply::Error(Status::SERVICE_UNAVAILABLE, vec![("Retry-After", retry)])
        }
    }
}

/// Encodes a static file decision's head (and whole answer if there is no
/// file body to send).
pub fn file_head(
    wbuf: &mut BytesMut,
    stats: &WorkerStats,
    reply: StaticReply,
    to: ReplyTo,
) -> FileStep {
    let done = |status: Status, bytes: usize, keep: Option<bool>| match keep {
        Some(keep_alive) => FileStep::Done(Outcome {
            status,
            bytes: bytes as u64,
            keep_alive,
        }),
        None => FileStep::Fail,
    };
    match reply {
        StaticReply::File {
            status,
            file,
            offset,
            len,
            headers,
        } => {
            let hs: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
            let Ok(enc) = http1::encode_head(wbuf, to, status, &hs, Framing::Length(len)) else {
                return FileStep::Fail;
            };
            let outcome = Outcome {
                status,
                bytes: len,
                keep_alive: enc.keep_alive(),
            };
            if !enc.wants_body() {
                return FileStep::Done(Outcome {
                    bytes: 0,
                    ..outcome
                });
            }
            FileStep::Send {
                file,
                offset,
                len,
                outcome,
            }
        }
        StaticReply::NotModified { headers } => {
            let keep = respond_owned(wbuf, stats, to, Status::NOT_MODIFIED, None, &headers, b"");
            done(Status::NOT_MODIFIED, 0, keep)
        }
        StaticReply::Redirect(location) => {
            let body = b"301 Moved Permanently\n";
            let headers = [("Location", location)];
            let keep = respond_owned(
                wbuf,
                stats,
                to,
                Status::MOVED_PERMANENTLY,
                Some(TEXT),
                &headers,
                body,
            );
            done(Status::MOVED_PERMANENTLY, body.len(), keep)
        }
        StaticReply::ListDir { dir, url_path } => {
            // Runtimes list on the pool first (`pool_work`); listing here
            // keeps the answer right if one did not.
            file_head(wbuf, stats, StaticReply::list(&dir, &url_path), to)
        }
        StaticReply::Listing(html) => {
            let keep = respond_owned(
                wbuf,
                stats,
                to,
                Status::OK,
                Some(HTML),
                &[],
                html.as_bytes(),
            );
            done(Status::OK, html.len(), keep)
        }
        StaticReply::Error(status, headers) => {
            let body = format!("{} {}\n", status.code(), status.reason());
            let keep = respond_owned(
                wbuf,
                stats,
                to,
                status,
                Some(TEXT),
                &headers,
                body.as_bytes(),
            );
            done(status, body.len(), keep)
        }
    }
}
