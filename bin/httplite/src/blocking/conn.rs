//! One connection in blocking style: the same loop as the stackless
//! connection, written as straight-line code over [`BlockingIo`].
//!
//! ```text
//!   loop {
//!       while a complete request is buffered: answer it into wbuf
//!       write wbuf (one write for a pipelined batch)
//!       read more (blocks; the header/idle deadline bounds the wait)
//!   }
//! ```

use std::fs::File;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use http1::{BodyEncoder, Decoder, Message, Request};

use super::{BlockingIo, Deadline, FileChunk, IdleSet, IdleSlot};
use crate::config::Config;
use buffers::BufferPool;
use log::log;
use site::access_log::AccessLog;
use site::exposure::Surface;
use site::plan::{Event, Plan, Step};
use site::respond::{self, Handled, Slow};
use site::routes::App;
use site::stats::{ErrorKind, TimeoutKind, WorkerStats};

use crate::driver::{self, Flush, is_disconnect};

/// Flush the write buffer once it holds this much, even mid-batch.
const FLUSH_AT: usize = 64 * 1024;
/// Keep at least this much spare room in the read buffer before a read.
const MIN_READ: usize = 1024;
/// Read and write buffers start at this size.
const BUF_SIZE: usize = 4096;
/// How long a closing connection waits for the client's FIN.
const LINGER: Duration = Duration::from_secs(1);
/// At shutdown, how long a connection looks for a request that has
/// already arrived (a check, not a wait: the shortest deadline there is).
const ALREADY_THERE: Duration = Duration::from_millis(1);
/// How much a closing connection reads and discards at most.
const LINGER_BYTES: usize = 64 * 1024;
/// How long an idle connection on a thread of its own keeps its buffers
/// (see `Conn::idle_wait`).
const HOLD_BUFFERS: Duration = Duration::from_millis(50);

/// What every connection of one worker shares (all `Sync`: with the
/// `threads` design, connections run on many threads).
pub struct Ctx {
    /// Routing and the static root.
    pub app: Arc<App>,
    /// Limits and timeouts.
    pub config: Arc<Config>,
    /// This worker's counters.
    pub stats: Arc<WorkerStats>,
    /// The access log, if enabled.
    pub access_log: Option<AccessLog>,
    /// Idle connections, woken (closed) at shutdown.
    pub idle: IdleSet,
    /// `--tls-cert`, `--admin-tls-cert`: which connections are HTTPS (see
    /// [`super::tls::serve`]).
    pub tls: crate::tls::TlsByListener,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("config", &self.config)
            .field("access_log", &self.access_log.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a connection stopped.
#[derive(Debug)]
enum Stop {
    /// The client closed, or we answered `Connection: close`.
    Done,
    /// A deadline passed.
    Timeout(TimeoutKind),
    /// The socket failed.
    Io(io::Error),
    /// Event mode: the next bytes of a head are to be waited for by the
    /// front, not here (see [`park`]).
    Park,
}

type Res<T = ()> = Result<T, Stop>;

struct Conn<'a, I: BlockingIo> {
    ctx: &'a Ctx,
    io: I,
    idle: IdleSlot,
    pool: Rc<BufferPool>,
    decoder: Decoder,
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// When the first byte of the request being read arrived.
    head_started: Option<Instant>,
    /// When the request in hand began (for the access log's request time).
    request_started: Instant,
    served: u64,
    /// The client a PROXY header named (`None`: the socket's peer).
    client: Option<SocketAddr>,
    /// The listener it came in on.
    on: Surface,
    /// Where it waits for the next bytes of a head.
    waits: Waits,
    /// The last read came back short: the socket held nothing more then.
    drained: bool,
    /// Whether the next write needs `TCP_NODELAY` first.
    nagle: crate::driver::Nagle,
}

/// Where a connection waits for the next bytes of a request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waits {
    /// Right here, blocked (every design but the thread pool's event mode).
    Here,
    /// In the thread pool's front: [`Conn::fill`] stops with
    /// [`Stop::Park`] instead. `readable`: the front saw the socket
    /// readable and nothing has read it since (a TLS connection, whose
    /// bytes the front cannot decrypt, comes to its thread that way).
    Front { readable: bool },
}

/// Serves one connection to the end on the calling thread of control.
/// `client` is the one a PROXY header named, if any, and `on` the
/// listener it came in on (see [`super::tls::serve`]).
pub fn serve<I: BlockingIo>(ctx: &Ctx, io: I, client: Option<SocketAddr>, on: Surface) {
    crate::driver::trace_arrival(io.fd());
    let mut conn = Conn {
        pool: BufferPool::current(),
        idle: ctx.idle.slot(),
        decoder: Decoder::new(ctx.config.limits),
        // Taken from the pool once the first bytes are there (see
        // `Conn::read_some`).
        rbuf: BytesMut::new(),
        wbuf: BytesMut::new(),
        head_started: Some(io.now()),
        request_started: io.now(),
        served: 0,
        client,
        on,
        waits: Waits::Here,
        drained: false,
        nagle: crate::driver::Nagle::Unwritten,
        ctx,
        io,
    };
    if I::ENCRYPTED {
        // The session writes on its own (the handshake, tickets): Nagle
        // could hold an answer behind those.
        conn.io.set_nodelay();
        conn.nagle = crate::driver::Nagle::Off;
    }
    let stop = conn.run();
    if !matches!(stop, Stop::Park) {
        conn.io.will_close();
    }
    let Conn {
        idle,
        pool,
        mut rbuf,
        mut wbuf,
        ..
    } = conn;
    ctx.idle.release(idle);
    pool.put(&mut rbuf, &mut wbuf);
    count(ctx, stop);
}

/// Counts why a connection ended.
fn count(ctx: &Ctx, stop: Stop) {
    match stop {
        Stop::Done | Stop::Park => {}
        Stop::Timeout(kind) => ctx.stats.timeout(kind),
        Stop::Io(e) if is_disconnect(&e) => {}
        Stop::Io(_) => ctx.stats.error(ErrorKind::Io),
    }
}

/// What became of a new connection's first request within the grace
/// after its accept ([`Conn::first_request`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum FirstRequest {
    /// Bytes of it are in `rbuf`.
    Read,
    /// Bytes of it are in the socket, to be read.
    Ready,
    /// Nothing came (or this is not a new connection's first request).
    NotYet,
}

/// Maps a timed-out I/O error to the timeout that caused it.
fn timed(kind: TimeoutKind) -> impl Fn(io::Error) -> Stop {
    move |e| {
        if e.kind() == io::ErrorKind::TimedOut {
            Stop::Timeout(kind)
        } else {
            Stop::Io(e)
        }
    }
}

impl<I: BlockingIo> Conn<'_, I> {
    fn run(&mut self) -> Stop {
        loop {
            // Answer every complete request already buffered (pipelining).
            loop {
                let keep = match self.decoder.decode(&mut self.rbuf) {
                    Ok(Some(Message::Head(req))) => match self.answer(req) {
                        Ok(keep) => keep,
                        Err(stop) => return stop,
                    },
                    // Bodies are consumed by the handlers.
                    Ok(Some(_)) => continue,
                    Ok(None) => break,
                    Err(e) => {
                        driver::reject(&mut self.wbuf, &self.ctx.stats, &e, false);
                        false
                    }
                };
                if !keep {
                    return self.close();
                }
                if self.wbuf.len() >= FLUSH_AT
                    && let Err(stop) = self.flush()
                {
                    return stop;
                }
            }
            if let Err(stop) = self.flush() {
                return stop;
            }
            if let Err(stop) = self.fill() {
                return stop;
            }
        }
    }

    /// Answers one request (into `wbuf`, or out through the socket for the
    /// answers that wait); whether the connection stays open. Inlined: the
    /// body of [`Conn::run`]'s loop, written once for it and for the event
    /// mode's first request of a turn, whose head the front decoded.
    #[inline(always)]
    fn answer(&mut self, req: Request) -> Res<bool> {
        let started = self.head_started.take().unwrap_or_else(|| self.io.now());
        self.request_started = started;
        self.served += 1;
        let shutting_down = self.ctx.idle.is_shutting_down();
        let Conn {
            ctx,
            io,
            wbuf,
            client,
            on,
            ..
        } = self;
        let (client, on) = (*client, &*on);
        let handled = respond::handle(
            &ctx.app,
            &ctx.stats,
            wbuf,
            req,
            on,
            shutting_down,
            |req, out| log(ctx, &*io, client, *on, req, out, started),
        );
        match handled {
            Handled::Done(keep) => Ok(keep),
            Handled::Slow(slow) => self.handle_slow(slow),
        }
    }

    /// The last answer is in `wbuf`: writes it out and closes, lingering
    /// only if the client may still be sending (the stackless driver's rule,
    /// see its `close`): the last read came back long, something of a next
    /// request is buffered, the server is shutting down, or the connection
    /// is TLS (whose records a short read of plaintext says nothing of).
    /// The last answer leaves with the FIN ([`Flush::Last`]).
    fn close(&mut self) -> Stop {
        if let Err(stop) = self.write_out(Flush::Last) {
            return stop;
        }
        let unread_possible = I::ENCRYPTED
            || !self.drained
            || !(self.rbuf.is_empty() && self.decoder.is_idle())
            || self.ctx.idle.is_shutting_down();
        if unread_possible {
            self.linger_close();
        }
        Stop::Done
    }

    /// A new connection's first request is on its way: the first
    /// [`driver::FIRST_REQUEST_GRACE`] after the accept is waited for
    /// outside the idle set, so that a shutdown meanwhile does not close
    /// over it.
    ///
    /// An I/O with [`BlockingIo::READ_FIRST`] reads at once: a client
    /// sends its request right after connecting, so it is nearly always
    /// there already.
    #[inline(never)]
    fn first_request(&mut self) -> Res<FirstRequest> {
        let Some(accepted) = self.head_started.filter(|_| self.served == 0) else {
            return Ok(FirstRequest::NotYet);
        };
        if I::READ_FIRST {
            match self.read_now()? {
                Some(0) => return Err(self.ended()),
                Some(_) => return Ok(FirstRequest::Read),
                None => {}
            }
        }
        let grace = driver::first_request_grace(&self.ctx.config);
        match self.io.wait_readable(Deadline::Since(accepted, grace)) {
            Ok(()) => Ok(FirstRequest::Ready),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => Ok(FirstRequest::NotYet),
            Err(e) => Err(Stop::Io(e)),
        }
    }

    /// One read that does not wait ([`BlockingIo::read_now`]): how many
    /// bytes came (0: the client has closed), or `None` if nothing is there
    /// yet. Buffers come from the pool for it and go back if it finds
    /// nothing, so that connections waiting for their first bytes hold
    /// none (see `fill`).
    fn read_now(&mut self) -> Res<Option<usize>> {
        let room = self.make_room();
        match self.io.read_now(self.rbuf.spare_capacity_mut()) {
            Ok(n) => {
                // SAFETY: `read_now`'s count, as `took` requires.
                unsafe { self.took(n, room) };
                Ok(Some(n))
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                self.pool.put(&mut self.rbuf, &mut self.wbuf);
                Ok(None)
            }
            Err(e) => Err(Stop::Io(e)),
        }
    }

    /// Reads more bytes into `rbuf`. Between requests the wait is bounded by
    /// the idle timeout (the header timeout before the first request), and
    /// shutdown ends it; within a head, by the header timeout. In event
    /// mode, outside a body, the front waits instead ([`Conn::settle`]).
    fn fill(&mut self) -> Res {
        if self.waits != Waits::Here {
            if !self.decoder.in_body() {
                self.settle()?;
            }
        } else if self.rbuf.is_empty() && self.decoder.is_idle() {
            let (timeout, kind) = match (self.served, self.head_started) {
                // Counted from the accept (the first-request wait above
                // used part of it).
                (0, Some(accepted)) => (
                    Deadline::Since(accepted, self.ctx.config.header_timeout),
                    TimeoutKind::Header,
                ),
                (0, None) => (
                    Deadline::After(self.ctx.config.header_timeout),
                    TimeoutKind::Header,
                ),
                _ => (
                    Deadline::After(self.ctx.config.idle_timeout),
                    TimeoutKind::Idle,
                ),
            };
            let first = match self.served {
                0 => self.first_request()?,
                _ => FirstRequest::NotYet,
            };
            match first {
                FirstRequest::Read => {
                    self.head_started = Some(self.io.now());
                    return Ok(());
                }
                FirstRequest::Ready => {}
                FirstRequest::NotYet => {
                    if !self.ctx.idle.enter(&self.idle, self.io.fd()) {
                        // Shutting down. A request that has already arrived
                        // is served, with `Connection: close`: closing over
                        // it would reset the connection.
                        if self
                            .io
                            .wait_readable(Deadline::After(ALREADY_THERE))
                            .is_err()
                        {
                            return Err(Stop::Done);
                        }
                    } else {
                        let waited = self.idle_wait(timeout);
                        self.ctx.idle.leave(&self.idle);
                        waited.map_err(timed(kind))?;
                    }
                }
            }
            self.head_started = Some(self.io.now());
        }
        let (deadline, kind) = match self.head_started {
            // A partial head (not a body) is bound by the header timeout
            // however slowly it trickles in.
            Some(t) if !self.decoder.in_body() => (
                Deadline::Since(t, self.ctx.config.header_timeout),
                TimeoutKind::Header,
            ),
            _ => (
                Deadline::After(self.ctx.config.idle_timeout),
                TimeoutKind::Idle,
            ),
        };
        match self.read_some(deadline).map_err(timed(kind))? {
            0 => Err(self.ended()),
            _ => Ok(()),
        }
    }

    /// One read into `rbuf`'s spare room (made at least [`MIN_READ`]),
    /// waiting until `deadline`: how many bytes came (0: the client has
    /// closed).
    ///
    /// A new connection holds no buffers while its first request is on its
    /// way: in a burst of accepts, thousands of them wait at once, and
    /// their buffers, freed as they went idle, would stay behind as holes
    /// in the worker's heap. They come from the pool here, with the bytes.
    #[inline(always)]
    pub(super) fn read_some(&mut self, deadline: Deadline) -> io::Result<usize> {
        let room = self.make_room();
        let n = self
            .io
            .read_uninit(self.rbuf.spare_capacity_mut(), deadline)?;
        // SAFETY: `read_uninit`'s count, as `took` requires.
        unsafe { self.took(n, room) };
        Ok(n)
    }

    /// Makes `rbuf`'s spare room at least [`MIN_READ`] (buffers from the
    /// pool if it has none), and returns it.
    #[inline(always)]
    fn make_room(&mut self) -> usize {
        if self.rbuf.capacity() == 0 {
            self.pool.get(&mut self.rbuf, &mut self.wbuf);
        }
        if self.rbuf.capacity() - self.rbuf.len() < MIN_READ {
            self.rbuf.reserve(MIN_READ.max(self.rbuf.len()));
        }
        self.rbuf.capacity() - self.rbuf.len()
    }

    /// Counts `n` bytes just read into `rbuf`'s spare room of `room`.
    ///
    /// # Safety
    /// The first `n` bytes of the spare capacity were initialised by the
    /// read, and `n <= room`: what `BlockingIo`, an `unsafe trait`,
    /// promises of `read_uninit` and `read_now`.
    #[inline(always)]
    unsafe fn took(&mut self, n: usize, room: usize) {
        self.drained = n < room;
        // SAFETY: the caller's promise.
        unsafe { self.rbuf.set_len(self.rbuf.len() + n) };
    }

    /// Why the connection stops when the client has closed: done between
    /// requests, cut short within one.
    fn ended(&self) -> Stop {
        if self.decoder.is_idle() && self.rbuf.is_empty() {
            Stop::Done
        } else {
            Stop::Io(io::ErrorKind::UnexpectedEof.into())
        }
    }

    /// The wait between two requests, until `timeout`: an idle connection
    /// holds no buffer. Coroutines hand theirs to the worker's pool, where
    /// the next connection to wake takes them. A thread of the
    /// connection's own would only keep them in its pool for itself, so it
    /// holds them through a first [`HOLD_BUFFERS`] (a busy client's next
    /// request comes within it, and costs no allocation) and frees them
    /// for the rest of the wait.
    fn idle_wait(&mut self, timeout: Deadline) -> io::Result<()> {
        if !I::OWN_THREAD {
            self.pool.put(&mut self.rbuf, &mut self.wbuf);
            let waited = self.io.wait_readable(timeout);
            self.pool.get(&mut self.rbuf, &mut self.wbuf);
            return waited;
        }
        let until = timeout.at(|| self.io.now());
        let hold = until.min(self.io.now() + HOLD_BUFFERS);
        match self.io.wait_readable(Deadline::At(hold)) {
            Err(e) if e.kind() == io::ErrorKind::TimedOut && hold < until => {}
            waited => return waited,
        }
        (self.rbuf, self.wbuf) = (BytesMut::new(), BytesMut::new());
        let waited = self.io.wait_readable(Deadline::At(until));
        self.pool.get(&mut self.rbuf, &mut self.wbuf);
        waited
    }

    /// Writes out `wbuf`. Inlined: once per request, and small (the
    /// write's waiting half is out of line).
    #[inline(always)]
    fn flush(&mut self) -> Res {
        self.write_out(Flush::Now)
    }

    /// [`Conn::flush`], sent as `how` says (with `MSG_MORE`, by
    /// [`BlockingIo::write_more`]).
    fn write_out(&mut self, how: Flush) -> Res {
        let more = how.more();
        if !self.wbuf.is_empty() && self.nagle.before_write(how) {
            self.io.set_nodelay();
        }
        let mut off = 0;
        while off < self.wbuf.len() {
            let deadline = Deadline::After(self.ctx.config.write_timeout);
            let rest = &self.wbuf[off..];
            let n = if more {
                self.io.write_more(rest, deadline)
            } else {
                self.io.write(rest, deadline)
            }
            .map_err(timed(TimeoutKind::Write))?;
            if n == 0 {
                return Err(Stop::Io(io::ErrorKind::WriteZero.into()));
            }
            off += n;
        }
        self.wbuf.clear();
        Ok(())
    }

    /// Half-closes, then drains what the client still sends (bounded), so
    /// that closing with unread input does not reset the connection before
    /// the client has read our answer.
    fn linger_close(&mut self) {
        if self.io.shutdown(Shutdown::Write).is_err() {
            return;
        }
        let deadline = Deadline::At(self.io.now() + LINGER);
        let mut drained = 0;
        while drained < LINGER_BYTES {
            self.rbuf.clear();
            if self.rbuf.capacity() < MIN_READ {
                self.rbuf.reserve(BUF_SIZE);
            }
            match self
                .io
                .read_uninit(self.rbuf.spare_capacity_mut(), deadline)
            {
                Ok(n) if n > 0 => drained += n,
                _ => break,
            }
        }
    }

    /// The answers that wait for something: the site's [`Plan`] decides,
    /// this loop waits. (The stackless drivers' `stackless/answer.rs` has
    /// the same loop with `.await` at each wait: one piece of code cannot
    /// both block a thread of control and return `Pending` to an executor.)
    fn handle_slow(&mut self, slow: Slow) -> Res<bool> {
        let slow = match slow.into_proxied() {
            Ok(p) => return self.proxy(p.req, &p.route),
            Err(slow) => slow,
        };
        let mut plan = Plan::new(slow);
        let mut event = Event::Start;
        let mut streaming = false;
        loop {
            let Conn { ctx, wbuf, .. } = self;
            event = match plan.next(&ctx.app, &ctx.stats, wbuf, event) {
                Step::ReadBody { keep } => {
                    let mut body = Vec::new();
                    let keep = keep.then_some(&mut body);
                    match self.read_body(keep, plan.head_only()) {
                        Ok(()) => Event::Body(body),
                        Err(Stop::Done) => return Ok(false), // answered with an error
                        Err(stop) => return Err(stop),
                    }
                }
                Step::Sleep(d) => {
                    self.flush()?; // earlier pipelined answers go first
                    {
                        let _asleep = self.ctx.stats.sleeping(); // the `sleeping` gauge
                        self.io.sleep(d);
                    }
                    let shutting_down = self.ctx.idle.is_shutting_down();
                    Event::Slept { shutting_down }
                }
                Step::Tick(d) => {
                    if !std::mem::replace(&mut streaming, true) {
                        driver::cap_event_stream_buffer(self.io.fd());
                    }
                    self.flush()?; // the event, under the write timeout
                    let ended = self.tick(d)?;
                    Event::Ticked { ended }
                }
                Step::Offload(work) => {
                    Event::Offloaded(self.io.offload(self.ctx.app.jobs.pool(), work))
                }
                Step::SendFile { file, offset, len } => {
                    self.write_out(Flush::BodyFollows)?;
                    self.send_file(&file, offset, len)?;
                    Event::Sent
                }
                Step::Echo {
                    mut encoder,
                    flush_first,
                } => {
                    if flush_first {
                        self.flush()?;
                    }
                    let sent = self.echo(&mut encoder)?;
                    Event::Echoed { encoder, sent }
                }
                Step::Done(outcome) => {
                    log(
                        self.ctx,
                        &self.io,
                        self.client,
                        self.on,
                        plan.request(),
                        outcome,
                        self.request_started,
                    );
                    return Ok(outcome.keep_alive);
                }
                Step::Close => return Ok(false),
            };
        }
    }

    /// An event stream's wait between two events: `d`, or less if the
    /// client sends anything or closes (it left: true) or shutdown begins
    /// (true). The connection waits in the idle set meanwhile, so that
    /// shutdown ends the wait at once (its read side is shut down), as it
    /// ends a keep-alive wait.
    fn tick(&mut self, d: Duration) -> Res<bool> {
        let until = Deadline::At(self.io.now() + d);
        loop {
            if !self.ctx.idle.enter(&self.idle, self.io.fd()) {
                return Ok(true); // shutting down
            }
            let waited = self.io.wait_readable(until);
            self.ctx.idle.leave(&self.idle);
            match waited {
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Ok(false),
                Err(e) => return Err(Stop::Io(e)),
                Ok(()) if self.ctx.idle.is_shutting_down() => return Ok(true),
                Ok(()) => {}
            }
            // Readable: the client closed or spoke, or the readiness was
            // left over from the request (a design that keeps readiness
            // until a read says otherwise): a read tells which.
            if self.rbuf.capacity() - self.rbuf.len() < MIN_READ {
                self.rbuf.reserve(MIN_READ);
            }
            let check = Deadline::After(ALREADY_THERE);
            match self.io.read_uninit(self.rbuf.spare_capacity_mut(), check) {
                Ok(_) => return Ok(true), // end of stream, or bytes: either way it ends
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(Stop::Io(e)),
            }
        }
    }

    /// Reads the rest of the current request's body into `keep`, or drops
    /// it; a bad body is answered (without a body if `head_only`).
    fn read_body(&mut self, mut keep: Option<&mut Vec<u8>>, head_only: bool) -> Res {
        loop {
            match self.decoder.decode(&mut self.rbuf) {
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
                    self.flush()?;
                    self.fill()?;
                }
                Err(e) => {
                    driver::reject(&mut self.wbuf, &self.ctx.stats, &e, head_only);
                    return Err(Stop::Done);
                }
            }
        }
    }

    /// Streams the request body back through `enc` as it arrives; the
    /// bytes echoed.
    fn echo(&mut self, enc: &mut BodyEncoder) -> Res<u64> {
        let mut sent = 0u64;
        // A request without a body has none to stream.
        while self.decoder.in_body() {
            match self.decoder.decode(&mut self.rbuf) {
                Ok(Some(Message::Body(b))) => {
                    sent += b.len() as u64;
                    enc.write(&mut self.wbuf, &b).map_err(|_| Stop::Done)?;
                    if self.wbuf.len() >= FLUSH_AT {
                        self.flush()?;
                    }
                }
                Ok(Some(Message::End)) => break,
                Ok(Some(Message::Head(_))) => unreachable!("a head inside a body"),
                Ok(None) => {
                    self.flush()?; // stream what we have
                    self.fill()?;
                }
                Err(_) => {
                    // The head is already out: all we can do is close.
                    self.ctx.stats.error(ErrorKind::BadRequest);
                    self.flush()?;
                    return Err(Stop::Done);
                }
            }
        }
        Ok(sent)
    }

    /// Sends `len` bytes of `file` from `offset`: with `sendfile(2)` up to
    /// `--sendfile-max`, copied through the thread's buffer beyond it.
    fn send_file(&mut self, file: &File, offset: u64, len: u64) -> Res {
        let copy = len > self.ctx.config.sendfile_max;
        let mut off = offset;
        let end = offset + len;
        if self.nagle.before_write(Flush::Now) {
            self.io.set_nodelay();
        }
        while off < end {
            let deadline = Deadline::After(self.ctx.config.write_timeout);
            let chunk = (end - off).min(1 << 20) as usize;
            let chunk = FileChunk {
                file: file.as_fd(),
                offset: &mut off,
                count: chunk,
                copy,
            };
            let n = (self.io.send_file(chunk, deadline)).map_err(timed(TimeoutKind::Write))?;
            if n == 0 {
                return Err(Stop::Io(io::ErrorKind::UnexpectedEof.into()));
            }
        }
        Ok(())
    }
}

mod buffers;
mod log;
pub mod park;
mod proxy;
mod tunnel;

pub use park::{Feed, Parked, Turn};

#[cfg(test)]
mod tests;
