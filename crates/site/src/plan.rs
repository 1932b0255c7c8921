//! The slow half of answering: a request whose answer must wait, as a
//! sequence of small [`Step`]s a driver carries out.
//!
//! Every decision is made here, once: whether the body must be read first
//! (and whether a `100 Continue` is owed), what a file reply sends, when a
//! listing goes to the blocking pool, what a job submits, what the sleep
//! route answers and how shutdown changes it. A driver only waits: it asks
//! [`Plan::next`] what to do, does it (read the body, sleep, send a file
//! range, wait for the pool), and reports back with an [`Event`]:
//!
//! ```text
//!   let mut plan = Plan::new(slow);
//!   let mut event = Event::Start;
//!   loop {
//!       event = match plan.next(app, stats, wbuf, event) {
//!           Step::ReadBody { keep }  => read it (flushing before any wait) → Event::Body
//!           Step::Sleep(d)           => flush, sleep d                      → Event::Slept
//!           Step::Offload(work)      => run it on the pool, wait            → Event::Offloaded
//!           Step::SendFile { .. }    => flush, sendfile the range           → Event::Sent
//!           Step::Echo { .. }        => stream the body through the encoder → Event::Echoed
//!           Step::Tick(d)            => flush, wait d watching the socket   → Event::Ticked
//!           Step::Done(outcome)      => log it; keep the connection if outcome.keep_alive
//!           Step::Close              => flush and close
//!       }
//!   }
//! ```
//!
//! A blocking driver writes that loop with plain calls, an async one with
//! `.await`; both are a few lines per step.

use std::fs::File;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use http1::{BodyEncoder, Framing, HeaderValue, ReplyTo, Request, Status};

use crate::action::{Action, TEXT};
use crate::jobs::JobKind;
use crate::respond::{Outcome, Slow, complete, respond_owned};
use crate::routes::App;
use crate::static_files::StaticReply;
use crate::stats::{ErrorKind, WorkerStats};

/// Work that finishes a static file answer on the blocking pool (a
/// directory listing: milliseconds for thousands of entries).
pub type PoolWork = Box<dyn FnOnce() -> StaticReply + Send>;

/// What [`PoolWork`] is called on a timeline's pool track
/// (`pool::Pool::spawn_blocking_as`): the plan offloads listings only.
pub const POOL_WORK: &str = "listing";

/// What [`Step::Offload`]'s work came to: its reply, or why there is none
/// (it panicked, or the pool's queue was full).
pub type Offloaded = Result<Result<StaticReply, pool::JoinError>, pool::Full>;

/// What the driver must do next for a [`Plan`].
pub enum Step {
    /// Read the rest of the request body (answers to earlier pipelined
    /// requests go out before any wait), keeping it if `keep`, then report
    /// [`Event::Body`]. A body that fails to decode is answered with
    /// [`reject_reply`](crate::respond::reject_reply) (with
    /// [`Plan::head_only`]) and the connection closes.
    ReadBody {
        /// Hand the body back (a job's input) rather than dropping it.
        keep: bool,
    },
    /// Write out what is buffered (earlier answers should not wait for this
    /// one), wait this long, then report [`Event::Slept`].
    Sleep(Duration),
    /// Run this on the blocking pool and report [`Event::Offloaded`].
    Offload(PoolWork),
    /// Write out what is buffered (the head is in it), then send `len`
    /// bytes of `file` from `offset` (with `sendfile(2)`), then report
    /// [`Event::Sent`].
    SendFile {
        /// The file (shared with the open-file cache).
        file: Arc<File>,
        /// First byte.
        offset: u64,
        /// Bytes.
        len: u64,
    },
    /// The head is encoded: stream the request body back through `encoder`
    /// as it arrives (flushing first if `flush_first`: the client waits for
    /// a `100 Continue`), then report [`Event::Echoed`]. A body that fails
    /// to decode mid-way can only be cut off: count it as a bad request,
    /// flush and close.
    Echo {
        /// Frames the echoed body.
        encoder: BodyEncoder,
        /// A `100 Continue` is buffered and the client waits for it.
        flush_first: bool,
    },
    /// An event stream (`/_httplite/events`) is open and its next event
    /// is buffered: write out what is buffered (under the write timeout:
    /// a viewer that stops reading is dropped like any other client), then
    /// wait this long, and report [`Event::Ticked`]. The wait ends early,
    /// with `ended`, when the client sends anything or closes (a browser
    /// sends nothing more on a stream, so either means it left) or when
    /// shutdown begins (a drain must not wait for viewers).
    Tick(Duration),
    /// Answered and counted: log `outcome`, and keep the connection if
    /// `outcome.keep_alive`.
    Done(Outcome),
    /// Answered with an error (or the answer could not be encoded): write
    /// out what is buffered and close.
    Close,
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::ReadBody { keep } => f.debug_struct("ReadBody").field("keep", keep).finish(),
            Step::Sleep(d) => f.debug_tuple("Sleep").field(d).finish(),
            Step::Offload(_) => f.write_str("Offload(..)"),
            Step::SendFile { file, offset, len } => f
                .debug_struct("SendFile")
                .field("file", file)
                .field("offset", offset)
                .field("len", len)
                .finish(),
            Step::Echo { flush_first, .. } => f
                .debug_struct("Echo")
                .field("flush_first", flush_first)
                .finish_non_exhaustive(),
            Step::Tick(d) => f.debug_tuple("Tick").field(d).finish(),
            Step::Done(outcome) => f.debug_tuple("Done").field(outcome).finish(),
            Step::Close => f.write_str("Close"),
        }
    }
}

/// What the driver reports to [`Plan::next`] after a [`Step`].
#[derive(Debug)]
pub enum Event {
    /// The first call.
    Start,
    /// [`Step::ReadBody`] is done: the body if it was to be kept, empty
    /// otherwise.
    Body(Vec<u8>),
    /// [`Step::Sleep`] is over.
    Slept {
        /// Shutdown began meanwhile: the answer closes the connection.
        shutting_down: bool,
    },
    /// [`Step::Offload`]'s result.
    Offloaded(Offloaded),
    /// [`Step::SendFile`] sent the whole range.
    Sent,
    /// [`Step::Echo`] streamed the whole body.
    Echoed {
        /// The encoder it was given back, to finish the body.
        encoder: BodyEncoder,
        /// Body bytes echoed.
        sent: u64,
    },
    /// [`Step::Tick`] is over.
    Ticked {
        /// The client left or shutdown began: end the stream.
        ended: bool,
    },
}

/// The answer to one request whose answer waits (see the module).
#[derive(Debug)]
pub struct Plan {
    req: Request,
    to: ReplyTo,
    stage: Stage,
}

/// Where a plan is: what it waits for.
#[derive(Debug)]
enum Stage {
    /// Nothing done yet.
    Start(Action),
    /// The first step is decided (by [`Plan::start`]); the driver's first
    /// [`Plan::next`] returns it, and the plan is then at the stage after it.
    Begun(Box<(Step, Stage)>),
    /// The body is being dropped; then `Action` is answered.
    AfterBody(Action),
    /// A job's input is being read.
    JobInput(JobKind),
    /// Sleeping this long.
    Sleeping(Duration),
    /// A listing is being built on the pool.
    Listing,
    /// A file range is being sent; then this is the outcome.
    Sending(Outcome),
    /// A part of a `multipart/byteranges` body is being sent; the rest
    /// follow.
    SendingParts(Box<parts::Sending>),
    /// The body is being echoed.
    Echoing,
    /// An event stream is open.
    Streaming(Box<crate::events::Stream>),
    /// [`Step::Done`] or [`Step::Close`] was given.
    Finished,
}

impl Plan {
    /// The plan for a request [`handle`](crate::respond::handle) could not
    /// answer at once.
    ///
    /// # Panics
    /// For a request for an upstream: the driver takes those out first
    /// ([`Slow::into_proxied`]).
    pub fn new(slow: Slow) -> Plan {
        match slow.0 {
            crate::respond::Waiting::Plan(plan) => plan,
            crate::respond::Waiting::Proxied(_) => {
                panic!("a proxied request has no plan: take it out with Slow::into_proxied")
            }
        }
    }

    /// A plan that has not started.
    pub(crate) fn waiting(req: Request, to: ReplyTo, action: Action) -> Plan {
        Plan {
            req,
            to,
            stage: Stage::Start(action),
        }
    }

    /// Takes the first step now: `Ok(Some(outcome))` if that answered the
    /// request (counted; the caller logs it), `Ok(None)` if the connection
    /// must close, `Err(())` if the step needs the driver, which then gets
    /// it from its first [`Plan::next`].
    pub(crate) fn start(
        &mut self,
        app: &App,
        stats: &WorkerStats,
        wbuf: &mut BytesMut,
    ) -> Result<Option<Outcome>, ()> {
        match self.next(app, stats, wbuf, Event::Start) {
            Step::Done(outcome) => Ok(Some(outcome)),
            Step::Close => Ok(None),
            step => {
                let then = std::mem::replace(&mut self.stage, Stage::Finished);
                self.stage = Stage::Begun(Box::new((step, then)));
                Err(())
            }
        }
    }

    /// The request being answered (for the access log).
    pub fn request(&self) -> &Request {
        &self.req
    }

    /// Whether the answer has no body (a `HEAD` request): an error in the
    /// request body must then be answered without one too.
    pub fn head_only(&self) -> bool {
        self.to.head_only
    }

    /// Takes the driver's report on the last step (`Event::Start` the
    /// first time), encodes what it can into `wbuf` and says what to do
    /// next. Panics if `event` is not the one the last step asked for (a
    /// driver bug).
    pub fn next(
        &mut self,
        app: &App,
        stats: &WorkerStats,
        wbuf: &mut BytesMut,
        event: Event,
    ) -> Step {
        match (std::mem::replace(&mut self.stage, Stage::Finished), event) {
            (Stage::Begun(begun), Event::Start) => {
                let (step, then) = *begun;
                self.stage = then;
                step
            }
            (Stage::Start(action), Event::Start) => {
                if self.body_first(&action) {
                    self.stage = Stage::AfterBody(action);
                    return Step::ReadBody { keep: false };
                }
                self.answer(app, stats, wbuf, action)
            }
            (Stage::AfterBody(action), Event::Body(_)) => self.answer(app, stats, wbuf, action),
            (Stage::JobInput(kind), Event::Body(input)) => {
                self.submit(app, stats, wbuf, kind, input)
            }
            (Stage::Sleeping(d), Event::Slept { shutting_down }) => {
                if shutting_down {
                    self.to.keep_alive = false;
                }
                let body = format!("slept {} ms\n", d.as_millis());
                let keep = respond_owned(
                    wbuf,
                    stats,
                    self.to,
                    Status::OK,
                    Some(TEXT),
                    &[],
                    body.as_bytes(),
                );
                done(stats, Status::OK, body.len(), keep)
            }
            (Stage::Listing, Event::Offloaded(ran)) => {
                let reply = pool_done(stats, ran);
                self.file(stats, wbuf, reply)
            }
            (Stage::Sending(outcome), Event::Sent) => {
                stats.response(outcome.status.code());
                Step::Done(outcome)
            }
            (Stage::SendingParts(rest), Event::Sent) => self.next_part(stats, wbuf, rest),
            (Stage::Echoing, Event::Echoed { encoder, sent }) => {
                let keep_alive = encoder.keep_alive();
                if encoder.finish(wbuf).is_err() {
                    return Step::Close;
                }
                stats.response(Status::OK.code());
                Step::Done(Outcome {
                    status: Status::OK,
                    bytes: sent,
                    keep_alive,
                })
            }
            (Stage::Streaming(mut stream), Event::Ticked { ended }) => {
                if ended {
                    return match stream.finish(stats, wbuf) {
                        Some(outcome) => Step::Done(outcome),
                        None => Step::Close,
                    };
                }
                if stream.push(app, wbuf).is_err() {
                    return Step::Close;
                }
                self.stage = Stage::Streaming(stream);
                Step::Tick(app.events.interval)
            }
            (stage, event) => panic!("plan at {stage:?} was given {event:?}"),
        }
    }

    /// Whether the request's body must be read and dropped before
    /// answering. Not when there is none, nor for echo and jobs (which
    /// read it themselves), nor when the client waits for a `100 Continue`
    /// we will not send: then the answer goes out at once and the
    /// connection closes.
    fn body_first(&mut self, action: &Action) -> bool {
        if !self.req.has_body() || matches!(action, Action::Echo | Action::Job(_)) {
            return false;
        }
        if self.req.expects_continue() {
            // RFC 9110 §10.1.1: the client holds the body back until told
            // to send it. Answer now instead, without reading it, and
            // close: the body's bytes must not be mistaken for the next
            // request.
            self.to.keep_alive = false;
            return false;
        }
        true
    }

    /// The first step of answering `action`, once any body to drop is gone.
    fn answer(
        &mut self,
        app: &App,
        stats: &WorkerStats,
        wbuf: &mut BytesMut,
        action: Action,
    ) -> Step {
        match action {
            Action::Sleep(d) => {
                self.stage = Stage::Sleeping(d);
                Step::Sleep(d)
            }
            Action::Echo => match echo_head(wbuf, &self.req, self.to) {
                Some(encoder) => {
                    self.stage = Stage::Echoing;
                    Step::Echo {
                        encoder,
                        flush_first: self.req.expects_continue(),
                    }
                }
                None => Step::Close,
            },
            Action::Job(kind) => {
                // The client may wait for a `100 Continue` before sending
                // the input; reading the body flushes it before any wait.
                if self.req.expects_continue() {
                    http1::encode_continue(wbuf);
                }
                if self.req.has_body() {
                    self.stage = Stage::JobInput(kind);
                    return Step::ReadBody { keep: true };
                }
                self.submit(app, stats, wbuf, kind, Vec::new())
            }
            Action::File(StaticReply::ListDir {
                dir,
                url_path,
                view,
            }) => {
                self.stage = Stage::Listing;
                Step::Offload(Box::new(move || StaticReply::list(&dir, &url_path, &view)))
            }
            Action::File(reply) => self.file(stats, wbuf, reply),
            Action::Events => match crate::events::open(app, stats, wbuf, self.to) {
                crate::events::Opened::Streaming(stream) => {
                    self.stage = Stage::Streaming(Box::new(stream));
                    Step::Tick(app.events.interval)
                }
                crate::events::Opened::Answered(outcome) => {
                    stats.response(outcome.status.code());
                    Step::Done(outcome)
                }
                crate::events::Opened::Failed => Step::Close,
            },
            action => match complete(wbuf, stats, self.to, &action) {
                Some(outcome) => {
                    stats.response(outcome.status.code());
                    Step::Done(outcome)
                }
                None => unreachable!("every waiting action is handled above"),
            },
        }
    }

    /// Submits a job whose input has been read and encodes the answer
    /// (202, or 503 with `Retry-After` when the pool is full).
    fn submit(
        &mut self,
        app: &App,
        stats: &WorkerStats,
        wbuf: &mut BytesMut,
        kind: JobKind,
        input: Vec<u8>,
    ) -> Step {
        let action = crate::jobs::http::submitted(&app.jobs, kind, input);
        if let Action::Owned { status, .. } = &action
            && *status == Status::SERVICE_UNAVAILABLE
        {
            stats.error(ErrorKind::Overloaded);
        }
        let outcome =
            complete(wbuf, stats, self.to, &action).expect("submitted() answers completely");
        stats.response(outcome.status.code());
        Step::Done(outcome)
    }
}

/// [`Step::Done`] for a complete answer of `bytes` body bytes, counted;
/// [`Step::Close`] if its head could not be encoded (`keep` is `None`).
fn done(stats: &WorkerStats, status: Status, bytes: usize, keep: Option<bool>) -> Step {
    match keep {
        Some(keep_alive) => {
            stats.response(status.code());
            Step::Done(Outcome {
                status,
                bytes: bytes as u64,
                keep_alive,
            })
        }
        None => Step::Close,
    }
}

/// Starts the echo response: `100 Continue` first if the client waits for
/// it, then the head, sized if the request was, chunked if it was chunked.
fn echo_head(wbuf: &mut BytesMut, req: &Request, to: ReplyTo) -> Option<BodyEncoder> {
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

/// The reply once a listing ran on the pool: `503` with `Retry-After` if
/// the pool was full, `500` if it panicked.
fn pool_done(stats: &WorkerStats, ran: Offloaded) -> StaticReply {
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

mod file;
mod parts;

pub use file::INLINE_FILE_MAX;
#[cfg(test)]
mod tests;
