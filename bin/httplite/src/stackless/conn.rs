//! One connection on the stackless runtime: read, decode, route, encode,
//! write, until the client or a timeout ends it.
//!
//! The loop, for a keep-alive client sending one request at a time:
//!
//! ```text
//!   read(2) → decode → route → encode into wbuf → (more complete requests? loop)
//!   write(2) wbuf once for the whole batch (pipelined responses leave together)
//!   short read (socket drained) → buffers and decoder back to the worker's
//!   pool → wait for readability → take them again → read(2)
//! ```
//!
//! An idle connection holds no buffer and no decoder (nginx's trick for
//! cheap idle keep-alive connections, taken one step further): everything
//! request-sized lives in a pooled [`Active`] state while a request is in
//! hand, so an idle connection costs its task, its socket's registry slot
//! and its timer. Reads after a wake and first writes are optimistic (no
//! readiness check first). Timeouts use one timer per connection that is
//! only re-armed when a deadline moves *earlier*; a later deadline is picked up
//! when the timer fires early, so the hot path never touches the timer heap.

use std::fs::File;
use std::io;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use executor::net::TcpStream;
use http1::{Message, ReplyTo, Request, Status};
use reactor::Interest;

use super::worker::{Active, WorkerCtx};
use crate::access_log::Entry;
use crate::respond::{self, FileStep, Handled, Outcome, Slow};
use crate::routes::Action;
use crate::stats::{ErrorKind, TimeoutKind};

/// Flush the write buffer once it holds this much, even mid-batch.
const FLUSH_AT: usize = 64 * 1024;
/// Keep at least this much spare room in the read buffer before a read.
const MIN_READ: usize = 1024;
/// How long a closing connection waits for the client's FIN.
const LINGER: Duration = Duration::from_secs(1);
/// How much a closing connection reads and discards at most.
const LINGER_BYTES: usize = 64 * 1024;

/// Why a connection stopped.
#[derive(Debug)]
enum Stop {
    /// The client closed, or we answered `Connection: close`.
    Done,
    /// A deadline passed.
    Timeout(TimeoutKind),
    /// The socket failed.
    Io(io::Error),
    /// The worker is shutting down and the connection was idle.
    Shutdown,
}

type Res<T = ()> = Result<T, Stop>;

mod timer;
use timer::{Timer, with_deadline};

/// The boxed slow path of one request.
type SlowFuture<'a> = Pin<Box<dyn std::future::Future<Output = Res<bool>> + 'a>>;

struct Conn {
    ctx: Rc<WorkerCtx>,
    stream: TcpStream,
    /// Buffers and decoder, from the worker's pool while a request is in
    /// hand; `None` while waiting between requests (see [`Active`]).
    active: Option<Box<Active>>,
    timer: Timer,
    /// When the first byte of the request being read arrived.
    head_started: Option<Instant>,
    /// Requests answered on this connection.
    served: u64,
    /// The last read came back short, so the socket was empty then: the
    /// next wait can skip asking whether more arrived (a hint only; the
    /// registry's readiness still decides when the wait ends).
    drained: bool,
}

/// Serves one connection to the end. Never panics on bad input: protocol
/// errors are answered and the connection closed.
///
/// Not an `async fn`: the connection is built here and moved into an
/// `async move` block, which holds it once. (An `async fn` keeps its
/// arguments in the future next to the locals they are moved into, and
/// every connection, idle or not, pays for the future's size.)
pub fn serve(ctx: Rc<WorkerCtx>, stream: TcpStream) -> impl Future<Output = ()> {
    let guard = ctx.open_connection();
    let _ = stream.set_nodelay(true);
    let now = ctx.reactor.now();
    let header_timeout = ctx.config.header_timeout;
    let timer = Timer::new(&ctx.reactor, now + header_timeout, TimeoutKind::Header);
    let mut conn = Conn {
        // Nothing until the first bytes arrive (`fill` takes it): a batch of
        // new connections must not each take buffers at once, and a client
        // that connects and sends nothing holds none.
        active: None,
        timer,
        head_started: Some(now),
        served: 0,
        drained: false,
        ctx,
        stream,
    };
    // Captured variables of an `async move` block live in the future once.
    async move {
        let stop = conn.run().await;
        let stats = &conn.ctx.stats;
        match stop {
            Stop::Done | Stop::Shutdown => {}
            Stop::Timeout(kind) => stats.timeout(kind),
            Stop::Io(e) if is_disconnect(&e) => {}
            Stop::Io(_) => stats.error(ErrorKind::Io),
        }
        conn.release_active();
        drop(guard);
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.timer.lazy.remove(&self.ctx.reactor);
    }
}

fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::UnexpectedEof
    )
}

impl Conn {
    async fn run(&mut self) -> Stop {
        loop {
            // Answer every complete request already buffered (pipelining).
            loop {
                // Nothing request-sized may be held across an await here:
                // temporaries of a `match` live to its end, so decoding and
                // the fast path finish in a block, and only a boxed future
                // (one pointer) crosses the await.
                let keep = {
                    let next: Handled<SlowFuture<'_>> = {
                        let io = self.io();
                        let step = match io.decoder.decode(&mut io.rbuf) {
                            Ok(Some(Message::Head(req))) => {
                                self.head_started = None;
                                self.handle(req)
                            }
                            // Bodies are consumed by the handlers.
                            Ok(Some(_)) => continue,
                            Ok(None) => break,
                            Err(e) => {
                                self.reject(&e);
                                Handled::Done(false)
                            }
                        };
                        match step {
                            Handled::Done(keep) => Handled::Done(keep),
                            Handled::Slow(slow) => Handled::Slow(Box::pin(self.handle_slow(slow))),
                        }
                    };
                    match next {
                        Handled::Done(keep) => keep,
                        Handled::Slow(fut) => match fut.await {
                            Ok(keep) => keep,
                            Err(stop) => return stop,
                        },
                    }
                };
                if !keep {
                    if let Err(stop) = self.flush().await {
                        return stop;
                    }
                    self.linger_close().await;
                    return Stop::Done;
                }
                if self.io().wbuf.len() >= FLUSH_AT
                    && let Err(stop) = self.flush().await
                {
                    return stop;
                }
            }
            if let Err(stop) = self.flush().await {
                return stop;
            }
            if let Err(stop) = self.fill().await {
                return stop;
            }
        }
    }

    /// Reads more bytes into `rbuf`. Between requests it waits without
    /// holding buffers; within a request head the header timeout applies.
    async fn fill(&mut self) -> Res {
        let between_requests = self
            .active
            .as_ref()
            .is_none_or(|a| a.rbuf.is_empty() && a.decoder.is_idle());
        if between_requests {
            if self.ctx.shutdown.is_set() {
                return Err(Stop::Shutdown);
            }
            // Try once with the buffers we hold: a pipelining or fast client
            // has already sent the next request.
            if !self.drained && self.active.is_some() && self.stream.is_read_ready() {
                match self.read_now() {
                    Some(Ok(0)) => return Err(Stop::Done),
                    Some(Ok(_)) => {
                        self.head_started = Some(self.ctx.reactor.now());
                        return Ok(());
                    }
                    Some(Err(e)) => return Err(Stop::Io(e)),
                    None => {}
                }
            }
            self.release_active();
            self.wait_readable_idle().await?;
            self.active = Some(self.ctx.pool.get());
            self.head_started = Some(self.ctx.reactor.now());
            // Woken because the socket is readable: read without asking the
            // registry again.
            match self.read_now() {
                Some(Ok(0)) => return Err(Stop::Done),
                Some(Ok(_)) => return Ok(()),
                Some(Err(e)) => return Err(Stop::Io(e)),
                None => {} // a stale edge: wait below, under the header timeout
            }
        }
        // A partial head (not a body) is bound by the header timeout however
        // slowly it trickles in: a slowloris gains nothing per byte.
        let in_body = self.io().decoder.in_body();
        let head_started = self.head_started.filter(|_| !in_body);
        loop {
            if self.stream.is_read_ready() {
                match self.read_now() {
                    Some(Ok(0)) => {
                        let io = self.io();
                        return Err(if io.decoder.is_idle() && io.rbuf.is_empty() {
                            Stop::Done
                        } else {
                            Stop::Io(io::ErrorKind::UnexpectedEof.into())
                        });
                    }
                    Some(Ok(_)) => return Ok(()),
                    Some(Err(e)) => return Err(Stop::Io(e)),
                    None => {}
                }
            }
            let config = &self.ctx.config;
            let (at, kind) = match head_started {
                Some(t) => (t + config.header_timeout, TimeoutKind::Header),
                None => (
                    self.ctx.reactor.now() + config.idle_timeout,
                    TimeoutKind::Idle,
                ),
            };
            self.wait_ready(Interest::Readable, at, kind).await?;
        }
    }

    /// One read attempt, without waiting or consulting readiness first:
    /// `None` if it would block.
    fn read_now(&mut self) -> Option<io::Result<usize>> {
        let Conn {
            active,
            ctx,
            stream,
            ..
        } = self;
        let rbuf = &mut ctx.pool.ensure(active).rbuf;
        if rbuf.capacity() - rbuf.len() < MIN_READ {
            // Doubling for a head that keeps growing; MIN_READ otherwise.
            rbuf.reserve(MIN_READ.max(rbuf.len()));
        }
        let spare = rbuf.spare_capacity_mut();
        let room = spare.len();
        match stream.try_read_uninit(spare) {
            Ok(n) => {
                // SAFETY: the kernel initialised the first `n` spare bytes.
                unsafe { rbuf.set_len(rbuf.len() + n) };
                self.drained = n < room;
                Some(Ok(n))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// Waits for the next request's first bytes, the idle (or, before the
    /// first request, header) timeout, or shutdown (which wakes every task,
    /// so nothing registers for it here).
    async fn wait_readable_idle(&mut self) -> Res {
        let (timeout, kind) = if self.served == 0 {
            (self.ctx.config.header_timeout, TimeoutKind::Header)
        } else {
            (self.ctx.config.idle_timeout, TimeoutKind::Idle)
        };
        let reactor = &self.ctx.reactor;
        self.timer.arm(reactor, reactor.now() + timeout, kind);
        let Conn {
            stream, timer, ctx, ..
        } = self;
        std::future::poll_fn(|cx| {
            if stream.poll_readable(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            if ctx.shutdown.is_set() {
                return Poll::Ready(Err(Stop::Shutdown));
            }
            if timer.poll_expired(&ctx.reactor, cx) {
                return Poll::Ready(Err(Stop::Timeout(timer.kind)));
            }
            Poll::Pending
        })
        .await
    }

    /// Waits until the socket is ready in `interest`'s direction, or fails
    /// with a timeout of `kind` at `at`. Every wait of the connection goes
    /// through this one small future (a few words in the connection's
    /// state), so the future's size, which every idle connection pays for,
    /// does not grow with each operation that may wait.
    async fn wait_ready(&mut self, interest: Interest, at: Instant, kind: TimeoutKind) -> Res {
        self.timer.arm(&self.ctx.reactor, at, kind);
        let Conn {
            stream, timer, ctx, ..
        } = self;
        std::future::poll_fn(|cx| {
            if stream.poll_ready(cx, interest).is_ready() {
                return Poll::Ready(Ok(()));
            }
            if timer.poll_expired(&ctx.reactor, cx) {
                return Poll::Ready(Err(Stop::Timeout(timer.kind)));
            }
            Poll::Pending
        })
        .await
    }

    /// The request-time state, taken from the pool if the connection has
    /// none (it has one from the first bytes of a request until it goes
    /// idle again).
    #[inline]
    fn io(&mut self) -> &mut Active {
        self.ctx.pool.ensure(&mut self.active)
    }

    /// Gives the request-time state back to the pool (going idle, or done).
    fn release_active(&mut self) {
        if let Some(active) = self.active.take() {
            self.ctx.pool.put(active);
        }
    }

    /// Writes out `wbuf` (one `send` for all pipelined responses).
    async fn flush(&mut self) -> Res {
        let len = self.active.as_ref().map_or(0, |a| a.wbuf.len());
        if len == 0 {
            return Ok(());
        }
        // Optimistic: a socket's send buffer nearly always has room, so try
        // before asking about readiness. A short write or `WouldBlock`
        // clears writable readiness, so the wait below lasts until the
        // kernel has room again.
        let mut off = 0;
        while off < len {
            // The error is dropped before the await: nothing but what the
            // wait needs is kept in the future.
            let Conn { active, stream, .. } = self;
            let wbuf = active.as_ref().map_or(&[][..], |a| &a.wbuf[..]);
            let blocked = match stream.try_write(&wbuf[off..]) {
                Ok(0) => return Err(Stop::Io(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    off += n;
                    false
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => false,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => true,
                Err(e) => return Err(Stop::Io(e)),
            };
            if blocked {
                let at = self.ctx.reactor.now() + self.ctx.config.write_timeout;
                self.wait_ready(Interest::Writable, at, TimeoutKind::Write)
                    .await?;
            }
        }
        self.io().wbuf.clear();
        Ok(())
    }

    /// Encodes the answer to a protocol error; the caller flushes and closes.
    fn reject(&mut self, e: &http1::Error) {
        let Conn { active, ctx, .. } = self;
        respond::reject(&mut ctx.pool.ensure(active).wbuf, &ctx.stats, e);
    }

    /// Half-closes, then drains what the client still sends (bounded), so
    /// that closing with unread input does not turn into a reset that could
    /// destroy the response before the client reads it.
    async fn linger_close(&mut self) {
        if self.stream.shutdown(Shutdown::Write).is_err() {
            return;
        }
        let deadline = self.ctx.reactor.now() + LINGER;
        let mut drained = 0;
        // The read buffer serves as scratch: a stack array here would make
        // every connection's future (and so every idle connection) 4 KiB larger.
        while drained < LINGER_BYTES {
            self.io().rbuf.clear();
            if self.stream.is_read_ready() {
                match self.read_now() {
                    Some(Ok(n)) if n > 0 => {
                        drained += n;
                        continue;
                    }
                    Some(_) => break, // end of stream or an error
                    None => {}
                }
            }
            if self
                .wait_ready(Interest::Readable, deadline, TimeoutKind::Write)
                .await
                .is_err()
            {
                break;
            }
        }
    }

    /// Handles one request without waiting, if it can (see
    /// [`respond::handle`]). What must wait comes back as `Slow`, which the
    /// caller runs boxed: a future's size is the largest of all its states
    /// and every connection, idle or not, pays for it, so the heavy states
    /// live in their own allocation only while they run.
    fn handle(&mut self, req: Request) -> Handled<Slow> {
        self.served += 1;
        let Conn {
            ctx,
            active,
            stream,
            ..
        } = self;
        let wbuf = &mut ctx.pool.ensure(active).wbuf;
        let shutting_down = ctx.shutdown.is_set();
        respond::handle(
            &ctx.app,
            &ctx.stats,
            wbuf,
            req,
            shutting_down,
            |req, out| log(ctx, stream, req, out),
        )
    }

    /// The answers that wait for something (see [`Conn::handle`]).
    async fn handle_slow(&mut self, mut slow: Slow) -> Res<bool> {
        if respond::body_policy(&mut slow) {
            match self.read_body(None, slow.to.head_only).await {
                Ok(()) => {}
                Err(Stop::Done) => return Ok(false), // answered with an error
                Err(stop) => return Err(stop),
            }
        }
        let Slow {
            req,
            mut to,
            action,
        } = slow;
        let stats = self.ctx.stats.clone();
        let outcome = match action {
            Action::Sleep(d) => {
                // Earlier pipelined answers should not wait for this one.
                self.flush().await?;
                executor::sleep(d).await;
                if self.ctx.shutdown.is_set() {
                    to.keep_alive = false; // shutdown began while we slept
                }
                respond::slept(&mut self.io().wbuf, &stats, to, d)
            }
            Action::Echo => self.echo(&req, to).await?,
            Action::Job(kind) => {
                respond::job_head(&mut self.io().wbuf, &req);
                self.flush().await?;
                let mut input = Vec::new();
                if req.has_body() {
                    match self.read_body(Some(&mut input), to.head_only).await {
                        Ok(()) => {}
                        Err(Stop::Done) => return Ok(false), // answered with an error
                        Err(stop) => return Err(stop),
                    }
                }
                let Conn { active, ctx, .. } = self;
                let wbuf = &mut ctx.pool.ensure(active).wbuf;
                respond::job_submitted(wbuf, &ctx.app, &stats, to, kind, input)
            }
            Action::File(reply) => {
                let reply = match respond::pool_work(reply) {
                    Ok(work) => match self.ctx.app.jobs.pool().spawn_blocking(work) {
                        Ok(listed) => respond::pool_done(&stats, Ok(listed.await)),
                        Err(full) => respond::pool_done(&stats, Err(full)),
                    },
                    Err(reply) => reply,
                };
                match respond::file_head(&mut self.io().wbuf, &stats, reply, to) {
                    FileStep::Done(outcome) => outcome,
                    FileStep::Fail => return Ok(false),
                    FileStep::Send {
                        file,
                        offset,
                        len,
                        outcome,
                    } => {
                        self.flush().await?;
                        self.send_file(&file, offset, len).await?;
                        outcome
                    }
                }
            }
            action => match respond::complete(&mut self.io().wbuf, &stats, to, &action) {
                Some(outcome) => outcome,
                None => unreachable!("every waiting action is handled above"),
            },
        };
        stats.response(outcome.status.code());
        log(&self.ctx, &self.stream, &req, outcome);
        Ok(outcome.keep_alive)
    }

    /// Reads the rest of the current request's body into `keep`, or drops
    /// it; a bad body is answered (without a body if `head_only`).
    async fn read_body(&mut self, mut keep: Option<&mut Vec<u8>>, head_only: bool) -> Res {
        loop {
            let io = self.io();
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
                    self.flush().await?;
                    self.fill().await?;
                }
                Err(e) => {
                    // Answered with the error; the caller flushes and closes.
                    let Conn { active, ctx, .. } = self;
                    let wbuf = &mut ctx.pool.ensure(active).wbuf;
                    respond::reject_reply(wbuf, &ctx.stats, &e, head_only);
                    return Err(Stop::Done);
                }
            }
        }
    }

    /// Streams the request body back as it arrives.
    async fn echo(&mut self, req: &Request, to: ReplyTo) -> Res<Outcome> {
        let Some(mut enc) = respond::echo_head(&mut self.io().wbuf, req, to) else {
            return Err(Stop::Done);
        };
        if req.expects_continue() {
            self.flush().await?; // the client waits for the 100 first
        }
        let mut sent = 0u64;
        if req.has_body() {
            loop {
                let io = self.io();
                match io.decoder.decode(&mut io.rbuf) {
                    Ok(Some(Message::Body(b))) => {
                        sent += b.len() as u64;
                        enc.write(&mut io.wbuf, &b).map_err(|_| Stop::Done)?;
                        if io.wbuf.len() >= FLUSH_AT {
                            self.flush().await?;
                        }
                    }
                    Ok(Some(Message::End)) => break,
                    Ok(Some(Message::Head(_))) => unreachable!("a head inside a body"),
                    Ok(None) => {
                        // Stream what we have before waiting for more.
                        self.flush().await?;
                        self.fill().await?;
                    }
                    Err(_) => {
                        // The head is already out: all we can do is close.
                        self.ctx.stats.error(ErrorKind::BadRequest);
                        self.flush().await?;
                        return Err(Stop::Done);
                    }
                }
            }
        }
        let keep_alive = enc.keep_alive();
        enc.finish(&mut self.io().wbuf).map_err(|_| Stop::Done)?;
        Ok(Outcome {
            status: Status::OK,
            bytes: sent,
            keep_alive,
        })
    }

    /// Sends `len` bytes of `file` from `offset` with `sendfile(2)`.
    async fn send_file(&mut self, file: &File, offset: u64, len: u64) -> Res {
        let mut off = offset;
        let end = offset + len;
        while off < end {
            let Conn {
                stream, timer, ctx, ..
            } = self;
            let deadline = || {
                let at = ctx.reactor.now() + ctx.config.write_timeout;
                (at, TimeoutKind::Write)
            };
            let chunk = (end - off).min(1 << 20) as usize;
            let n = with_deadline(timer, &ctx.reactor, deadline, |cx| {
                stream.poll_sendfile(cx, file.as_raw_fd(), &mut off, chunk)
            })
            .await?;
            if n == 0 {
                // The file shrank under us: the length is a lie now.
                return Err(Stop::Io(io::ErrorKind::UnexpectedEof.into()));
            }
        }
        Ok(())
    }
}

/// Writes the access-log line, if logging is on.
fn log(ctx: &WorkerCtx, stream: &TcpStream, req: &Request, out: Outcome) {
    respond::trace_outcome(stream.as_raw_fd(), req, out);
    if let Some(log) = &ctx.access_log {
        log.log(&Entry {
            peer: stream.peer_addr().ok(),
            method: req.method().as_str(),
            target: req.target(),
            version: req.version().as_str(),
            status: out.status.code(),
            bytes: out.bytes,
        });
    }
}
