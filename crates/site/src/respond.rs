//! The first step of every request, shared by every driver: route, and
//! encode what can be encoded now (the hot path: a constant endpoint is one
//! compare and one copy), or hand back the request as [`Slow`] for a
//! [`Plan`]. Also the error replies: a protocol error, a
//! bad body, a panicking handler, an invalid header.

use std::panic::{AssertUnwindSafe, catch_unwind};

use bytes::BytesMut;
use http1::{Framing, HeaderValue, ReplyTo, Request, StaticResponse, Status};

use crate::action::Action;
use crate::exposure::Surface;
use crate::plan::Plan;
use crate::routes::App;
use crate::stats::{ErrorKind, WorkerStats};

pub use crate::action::{HTML, TEXT};

/// What [`handle`] did: answered (keep-alive or not), or handed back work
/// that must wait.
#[derive(Debug)]
pub enum Handled<S> {
    /// Encoded into the write buffer; `true` keeps the connection open.
    Done(bool),
    /// Must wait (a body, a sleep, a file): the runtime finishes it.
    Slow(S),
}

/// A request whose answer must wait: its [`Plan`], possibly with a first
/// step already decided, or a request for an upstream
/// ([`Slow::into_proxied`]).
#[derive(Debug)]
pub struct Slow(pub(crate) Waiting);

#[derive(Debug)]
pub(crate) enum Waiting {
    Plan(crate::plan::Plan),
    Proxied(Proxied),
}

/// A request that a `--proxy` route takes: the driver sends it upstream
/// (see [`crate::reverse_proxy`]).
#[derive(Debug)]
pub struct Proxied {
    /// The request.
    pub req: Request,
    /// Its route.
    pub route: std::sync::Arc<crate::reverse_proxy::Route>,
}

impl Slow {
    /// The request for an upstream, if this is one; the plan's work back
    /// otherwise (for [`Plan::new`]).
    // Moved once per waiting request: boxing it would be an allocation
    // per request for nothing.
    #[allow(clippy::result_large_err)]
    pub fn into_proxied(self) -> Result<Proxied, Slow> {
        match self.0 {
            Waiting::Proxied(p) => Ok(p),
            other => Err(Slow(other)),
        }
    }
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

/// Routes `req`, which came in on listener `*on`, and, for small complete
/// answers (the plaintext hot path), encodes the response at once; `log`
/// is told about every answer given here. A panicking handler is answered
/// with 500 and the connection closes; nothing else is affected. The
/// listener is passed by reference: the hot path reads it only where it
/// matters (a site that hides a constant endpoint), not per request.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn handle(
    app: &App,
    stats: &WorkerStats,
    wbuf: &mut BytesMut,
    req: Request,
    on: &Surface,
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
        && let Some(response) = app.canned(&req, on)
    {
        http1::encode_static(wbuf, to, response);
        return answered(stats, &req, to, response, log);
    }
    routed(app, stats, wbuf, req, *on, to, log)
}

/// [`handle`] for everything but the constant endpoints: route (catching a
/// handler's panic) and answer or hand back. Out of line and cold, so that
/// the routing code (which grows with every feature of the site) stays out
/// of the plaintext path the connection loop inlines `handle` into.
#[cold]
#[inline(never)]
fn routed(
    app: &App,
    stats: &WorkerStats,
    wbuf: &mut BytesMut,
    req: Request,
    on: Surface,
    to: ReplyTo,
    log: impl FnOnce(&Request, Outcome),
) -> Handled<Slow> {
    // A route of the reverse proxy takes the request whole (the public
    // listener's; the admin listener keeps its endpoints).
    if on == Surface::Public
        && let Some((route, _)) = app.proxy.find(req.path())
    {
        let route = route.clone();
        return Handled::Slow(Slow(Waiting::Proxied(Proxied { req, route })));
    }
    let action = match catch_unwind(AssertUnwindSafe(|| app.route(&req, on))) {
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
        // Most file answers are complete at once (a cached or small body,
        // a 304, a 404): answered here, they skip the driver's general
        // path (measured: ~1.5 % of the server's CPU per 1 KiB file).
        action @ Action::File(_) if !req.has_body() => {
            let mut plan = Plan::waiting(req, to, action);
            match plan.start(app, stats, wbuf) {
                Ok(Some(outcome)) => {
                    log(plan.request(), outcome);
                    Handled::Done(outcome.keep_alive)
                }
                Ok(None) => Handled::Done(false),
                Err(()) => Handled::Slow(Slow(Waiting::Plan(plan))),
            }
        }
        action => Handled::Slow(Slow(Waiting::Plan(Plan::waiting(req, to, action)))),
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
    respond_with(wbuf, stats, to, status, &hs, body)
}

/// [`respond_owned`] with the headers as `encode_head` takes them (a caller
/// with a fixed set passes an array: no allocation).
pub(crate) fn respond_with(
    wbuf: &mut BytesMut,
    stats: &WorkerStats,
    to: ReplyTo,
    status: Status,
    hs: &[(&str, &[u8])],
    body: &[u8],
) -> Option<bool> {
    match http1::encode_head(wbuf, to, status, hs, Framing::Length(body.len() as u64)) {
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

/// Encodes the answer to a protocol error; the caller flushes and closes.
pub fn reject(wbuf: &mut BytesMut, stats: &WorkerStats, e: &http1::Error) {
    reject_reply(wbuf, stats, e, false);
}

/// [`reject`] once the request's head is known (an error in its body):
/// the answer to a `HEAD` request then has no body, not even the error's
/// reason (RFC 9110 §9.3.2), or the client would read that reason as the
/// start of the next response.
pub fn reject_reply(wbuf: &mut BytesMut, stats: &WorkerStats, e: &http1::Error, head_only: bool) {
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
            // `Connection: close` among the headers is a request to close
            // after this answer: the encoder writes the header itself.
            let closing = headers
                .iter()
                .any(|(n, v)| n.eq_ignore_ascii_case("connection") && v == "close");
            let to = ReplyTo {
                keep_alive: to.keep_alive && !closing,
                ..to
            };
            let kept: Vec<(&'static str, String)>;
            let headers = match closing {
                false => headers,
                true => {
                    kept = (headers.iter())
                        .filter(|(n, _)| !n.eq_ignore_ascii_case("connection"))
                        .cloned()
                        .collect();
                    &kept
                }
            };
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

/// Encodes the answer to a connection the server has no room for (every
/// thread busy and the connection queue full): `503` with `Retry-After`
/// and `Connection: close`, written before any of the request is read.
/// Counted as `overloaded` and as a 5xx response.
pub fn overloaded(wbuf: &mut BytesMut, stats: &WorkerStats) {
    stats.error(ErrorKind::Overloaded);
    stats.response(503);
    let retry = crate::jobs::http::RETRY_AFTER_SECS.to_string();
    let _ = respond_with(
        wbuf,
        stats,
        ReplyTo::closing(),
        Status::SERVICE_UNAVAILABLE,
        &[
            ("Content-Type", TEXT.as_bytes()),
            ("Retry-After", retry.as_bytes()),
        ],
        b"503 Service Unavailable: every connection thread is busy, retry later\n",
    );
}
