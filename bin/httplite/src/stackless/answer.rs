//! The connection loop of the stackless model, written once for both of
//! its drivers: the epoll one (readiness: try the operation, wait for an
//! edge on `EAGAIN`) and the io_uring one (completion: the operation is in
//! the kernel, wait for its CQE).
//!
//! [`answer`] answers every complete request buffered (pipelining), sends
//! the answers and reads on while a request is incomplete. The answers that
//! wait (a body, a sleep, a job, a file, an echo, an event stream) go
//! through [`handle_slow`]: the site's [`Plan`] decides what to send, the
//! loop runs its steps, and [`read_body`] and [`echo`] walk a request's
//! body through the decoder. None of that depends on how a driver waits,
//! only on *that* it can: each driver implements [`Waits`] (fill the read
//! buffer, flush the write buffer, send a file, sleep, wait out an event
//! stream's interval, close) and these loops call it. The trait is generic,
//! not `dyn`: each driver gets its own compiled copy of the loops, with its
//! waits inlined, and nothing is allocated per request for it.

use std::fs::File;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::pin::Pin;
use std::time::{Duration, Instant};

use http1::{BodyEncoder, Message, Request};
use site::access_log::UpstreamLog;
use site::plan::{Event, Plan, Step};
use site::respond::{Handled, Outcome, Slow};
use site::reverse_proxy::Balancer;
use site::routes::App;
use site::stats::{ErrorKind, TimeoutKind, WorkerStats};

use super::ctx::{Active, ActivePool};
use crate::driver::{self, is_disconnect};

/// Flush the write buffer once it holds this much, even mid-batch.
pub(crate) const FLUSH_AT: usize = 64 * 1024;

/// Why a connection stopped.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The client closed, or we answered `Connection: close`.
    Done,
    /// A deadline passed.
    Timeout(TimeoutKind),
    /// The socket failed.
    Io(io::Error),
    /// The worker is shutting down and the connection was idle.
    Shutdown,
}

/// A step's result: `Err` ends the connection.
pub(crate) type Res<T = ()> = Result<T, Stop>;

impl Stop {
    /// Counts why a connection stopped (a client that left is no error).
    pub(crate) fn count(self, stats: &WorkerStats) {
        match self {
            Stop::Done | Stop::Shutdown => {}
            Stop::Timeout(kind) => stats.timeout(kind),
            Stop::Io(e) if is_disconnect(&e) => {}
            Stop::Io(_) => stats.error(ErrorKind::Io),
        }
    }
}

/// What of a connection the shared loops touch without waiting: its
/// request-time state (taken from the worker's pool if it has none) and
/// the site.
pub(crate) struct Parts<'a> {
    pub active: &'a mut Option<Box<Active>>,
    pub pool: &'a ActivePool,
    pub app: &'a App,
    pub stats: &'a WorkerStats,
    /// Whether the worker is shutting down.
    pub shutting_down: bool,
    /// The connection's socket.
    pub fd: RawFd,
}

impl Parts<'_> {
    /// The request-time state.
    #[inline]
    pub(crate) fn io(&mut self) -> &mut Active {
        self.pool.ensure(self.active)
    }

    /// Gives the request-time state back to the pool if it holds nothing
    /// (no byte either way, the decoder between messages), as an idle
    /// connection does: a request that waits on another server then
    /// holds no buffers meanwhile, and the next bytes take a state again.
    pub(crate) fn release_if_empty(&mut self) {
        if self
            .active
            .as_ref()
            .is_some_and(|a| a.is_between_requests() && a.wbuf.is_empty())
            && let Some(active) = self.active.take()
        {
            self.pool.put_drained(active);
        }
    }

    /// Bytes read and not yet decoded (0 without a request-time state).
    pub(crate) fn buffered(&self) -> usize {
        self.active.as_ref().map_or(0, |a| a.rbuf.len())
    }
}

/// How a stackless connection waits: what each driver implements for the
/// loops of this module.
pub(crate) trait Waits {
    /// Its state and the site's (see [`Parts`]).
    fn parts(&mut self) -> Parts<'_>;
    /// A head was decoded: the request's time starts (when its first byte
    /// came, if known, or now).
    fn start_request(&mut self);
    /// Handles one request without waiting, if it can; what must wait
    /// comes back as `Slow`, for [`handle_slow`].
    fn handle(&mut self, req: Request) -> Handled<Slow>;
    /// Nothing of a next request has arrived and everything is sent: the
    /// connection goes idle (its request state back to the pool).
    fn go_idle(&mut self);
    /// At shutdown: whether the connection has yet to send its first
    /// request and was accepted less than [`driver::FIRST_REQUEST_GRACE`]
    /// ago, so that it goes idle rather than closing (its idle wait closes
    /// it when the grace ends).
    fn awaiting_first_request(&mut self) -> bool;
    /// Sends what is buffered and closes (lingering if the client may
    /// still be sending); why the connection ended.
    fn close(&mut self) -> impl Future<Output = Stop>;
    /// Reads more bytes of the request in hand into `rbuf` (a partial head
    /// under the header timeout, a body under the idle one).
    fn fill(&mut self) -> impl Future<Output = Res>;
    /// Sends `wbuf` (and what a TLS session still holds), under the write
    /// timeout.
    fn flush(&mut self) -> impl Future<Output = Res>;
    /// [`Waits::flush`] for a head whose file body follows at once: sent
    /// with `MSG_MORE`, so that the two share a segment.
    fn flush_more(&mut self) -> impl Future<Output = Res>;
    /// Sends `len` bytes of `file` from `offset`.
    fn send_file(&mut self, file: &File, offset: u64, len: u64) -> impl Future<Output = Res>;
    /// Sleeps `d` on the driver's timers.
    fn sleep(d: Duration) -> impl Future<Output = ()>;
    /// An event stream's wait between two events: `d`, or less if the
    /// client sends anything or closes, or shutdown begins (`true`: the
    /// stream is to end).
    fn tick(&mut self, d: Duration) -> impl Future<Output = Res<bool>>;
    /// The trace and access-log lines of one answer.
    fn log(&self, req: &Request, outcome: Outcome);
    /// A socket to an upstream of the reverse proxy, waited on this
    /// driver's way (see [`super::upstream`]).
    type Upstream: super::upstream::UpstreamSocket;
    /// Adopts `fd` (non-blocking; connected or connecting) as an upstream
    /// socket.
    fn upstream(&self, fd: OwnedFd) -> io::Result<Self::Upstream>;
    /// A live idle socket to upstream `i` of `b`, from the driver's pool
    /// (see `upstream::idle`).
    fn take_idle(&self, b: &Balancer, i: usize) -> Option<Self::Upstream>;
    /// Keeps `up` for the next request to upstream `i` of `b` (at most
    /// `keepalive` per upstream).
    fn put_idle(&self, b: &Balancer, i: usize, up: Self::Upstream, keepalive: usize);
    /// `--proxy`'s settings.
    fn proxy_settings(&self) -> &crate::upstream::ReverseProxy;
    /// Who is asking, for the forwarding fields.
    fn proxy_peer(&self) -> crate::upstream::exchange::Peer;
    /// The driver's clock (the reactor's cached one where it has one).
    fn now(&self) -> Instant;
    /// The trace and access-log lines of a proxied request.
    fn log_proxied(&self, req: &Request, outcome: Outcome, upstream: UpstreamLog<'_>);
    /// A proxied tunnel's read (see [`super::tunnel`]): what the client
    /// sent (under TLS, its plaintext) into `rbuf`, until `at` (then
    /// `TimedOut`); 0 at its end. Dropped before it is ready, it has taken
    /// nothing, so that it can race the upstream's read.
    fn read_client(&mut self, at: Instant) -> impl Future<Output = io::Result<usize>>;
    /// `--idle-timeout` (a tunnel silent both ways that long closes).
    fn idle_timeout(&self) -> Duration;
}

/// The boxed waiting answer of one request.
type SlowFuture<'a> = Pin<Box<dyn Future<Output = Res<bool>> + 'a>>;

/// Answers every complete request buffered, sends the answers, and reads
/// on while a request is incomplete: `None` once the connection is idle
/// between requests again, or why it ended.
pub(crate) async fn answer<C: Waits>(conn: &mut C) -> Option<Stop> {
    loop {
        // Answer every complete request already buffered (pipelining).
        loop {
            // Nothing request-sized may be held across an await here:
            // temporaries of a `match` live to its end, so decoding and the
            // answer without waiting finish in a block, and only a boxed
            // future (one pointer) crosses the await: the waiting answers'
            // states must not make every connection's future larger.
            let keep = {
                let next: Handled<SlowFuture<'_>> = {
                    let mut parts = conn.parts();
                    let stats = parts.stats;
                    let io = parts.io();
                    let step = match io.decoder.decode(&mut io.rbuf) {
                        Ok(Some(Message::Head(req))) => {
                            conn.start_request();
                            conn.handle(req)
                        }
                        // Bodies are consumed by the handlers.
                        Ok(Some(_)) => continue,
                        Ok(None) => break,
                        Err(e) => {
                            driver::reject(&mut io.wbuf, stats, &e, false);
                            Handled::Done(false)
                        }
                    };
                    match step {
                        Handled::Done(keep) => Handled::Done(keep),
                        Handled::Slow(slow) => Handled::Slow(Box::pin(handle_slow(conn, slow))),
                    }
                };
                match next {
                    Handled::Done(keep) => keep,
                    Handled::Slow(fut) => match fut.await {
                        Ok(keep) => keep,
                        Err(stop) => return Some(stop),
                    },
                }
            };
            if !keep {
                return Some(conn.close().await);
            }
            if conn.parts().io().wbuf.len() >= FLUSH_AT
                && let Err(stop) = conn.flush().await
            {
                return Some(stop);
            }
        }
        if let Err(stop) = conn.flush().await {
            return Some(stop);
        }
        let parts = conn.parts();
        let idle = parts.active.as_ref();
        if idle.is_none_or(|a| a.is_between_requests()) {
            // (Only a TLS handshake's records get here without a request.)
            if parts.shutting_down && !conn.awaiting_first_request() {
                return Some(Stop::Shutdown);
            }
            conn.go_idle();
            return None;
        }
        if let Err(stop) = conn.fill().await {
            return Some(stop);
        }
    }
}

/// Runs one waiting answer to its end: `Ok(keep)` (whether the connection
/// stays open), or why the connection ends.
///
/// The blocking designs have the same loop without the `.await`s
/// (`blocking/conn/slow.rs`); it cannot be this code, since a wait there
/// blocks the thread of control (a coroutine's or an OS thread's) while
/// here it must return `Pending` to the executor, and Rust has no way to be
/// generic over that.
pub(crate) async fn handle_slow<C: Waits>(conn: &mut C, slow: Slow) -> Res<bool> {
    let slow = match slow.into_proxied() {
        Ok(p) => return super::proxy::proxy(conn, p.req, &p.route).await,
        Err(slow) => slow,
    };
    let mut plan = Plan::new(slow);
    let mut event = Event::Start;
    let mut streaming = false;
    loop {
        let mut parts = conn.parts();
        let (app, stats) = (parts.app, parts.stats);
        let wbuf = &mut parts.io().wbuf;
        event = match plan.next(app, stats, wbuf, event) {
            Step::ReadBody { keep } => {
                let mut body = Vec::new();
                let keep = keep.then_some(&mut body);
                match read_body(conn, keep, plan.head_only()).await {
                    Ok(()) => Event::Body(body),
                    Err(Stop::Done) => return Ok(false), // answered with an error
                    Err(stop) => return Err(stop),
                }
            }
            Step::Sleep(d) => {
                // Earlier pipelined answers should not wait for this one.
                conn.flush().await?;
                {
                    let _asleep = conn.parts().stats.sleeping(); // the `sleeping` gauge
                    C::sleep(d).await;
                }
                let shutting_down = conn.parts().shutting_down;
                Event::Slept { shutting_down }
            }
            Step::Tick(d) => {
                if !std::mem::replace(&mut streaming, true) {
                    driver::cap_event_stream_buffer(conn.parts().fd);
                }
                conn.flush().await?; // the event, under the write timeout
                let ended = conn.tick(d).await?;
                Event::Ticked { ended }
            }
            Step::Offload(work) => {
                match (conn.parts().app.jobs.pool()).spawn_blocking_as(site::plan::POOL_WORK, work)
                {
                    Ok(listing) => Event::Offloaded(Ok(listing.await)),
                    Err(full) => Event::Offloaded(Err(full)),
                }
            }
            Step::SendFile { file, offset, len } => {
                // The head shares the body's first segment.
                conn.flush_more().await?;
                conn.send_file(&file, offset, len).await?;
                Event::Sent
            }
            Step::Echo {
                mut encoder,
                flush_first,
            } => {
                if flush_first {
                    conn.flush().await?;
                }
                let sent = echo(conn, &mut encoder).await?;
                Event::Echoed { encoder, sent }
            }
            Step::Done(outcome) => {
                conn.log(plan.request(), outcome);
                return Ok(outcome.keep_alive);
            }
            Step::Close => return Ok(false),
        };
    }
}

/// Reads the rest of the current request's body into `keep`, or drops it;
/// a bad body is answered (without a body if `head_only`) and ends the
/// connection with [`Stop::Done`] (the caller flushes and closes).
async fn read_body<C: Waits>(conn: &mut C, mut keep: Option<&mut Vec<u8>>, head_only: bool) -> Res {
    loop {
        let mut parts = conn.parts();
        let stats = parts.stats;
        let io = parts.io();
        match io.decoder.decode(&mut io.rbuf) {
            Ok(Some(Message::End)) => return Ok(()),
            Ok(Some(Message::Body(b))) => {
                if let Some(keep) = keep.as_deref_mut() {
                    keep.extend_from_slice(&b);
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                // Answers to earlier pipelined requests go out before
                // waiting: the rest of this body may be slow, or never
                // come (found by the `connection` fuzz target).
                conn.flush().await?;
                conn.fill().await?;
            }
            Err(e) => {
                driver::reject(&mut io.wbuf, stats, &e, head_only);
                return Err(Stop::Done);
            }
        }
    }
}

/// Streams the request body back through `enc` as it arrives; the bytes
/// echoed.
async fn echo<C: Waits>(conn: &mut C, enc: &mut BodyEncoder) -> Res<u64> {
    let mut sent = 0u64;
    // A request without a body has none to stream.
    while conn.parts().io().decoder.in_body() {
        let mut parts = conn.parts();
        let stats = parts.stats;
        let io = parts.io();
        match io.decoder.decode(&mut io.rbuf) {
            Ok(Some(Message::Body(b))) => {
                sent += b.len() as u64;
                enc.write(&mut io.wbuf, &b).map_err(|_| Stop::Done)?;
                if io.wbuf.len() >= FLUSH_AT {
                    conn.flush().await?;
                }
            }
            Ok(Some(Message::End)) => break,
            Ok(Some(Message::Head(_))) => unreachable!("a head inside a body"),
            Ok(None) => {
                // Stream what we have before waiting for more.
                conn.flush().await?;
                conn.fill().await?;
            }
            Err(_) => {
                // The head is already out: all we can do is close.
                stats.error(ErrorKind::BadRequest);
                conn.flush().await?;
                return Err(Stop::Done);
            }
        }
    }
    Ok(sent)
}
