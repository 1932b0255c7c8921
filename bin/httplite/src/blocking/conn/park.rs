//! The connection loop in the thread pool's event mode
//! (`--threadpool-mode event`): a connection is served on a pool thread
//! only while it has a request to answer, and is *parked* in its worker's
//! front (an epoll set, `blocking::threadpool::front`) whenever the loop
//! would wait for the next bytes of a head.
//!
//! ```text
//!   front: read what arrived (plain) ──▶ decoder has a whole head (or an error)
//!            ▲                                    │ queue
//!            │ Parked                             ▼
//!   pool thread: answer it, and every request already whole in rbuf,
//!                flush; the next head is not whole ── Stop::Park ──┘
//! ```
//!
//! A [`Parked`] connection is the state a `Conn` keeps across that trip:
//! its socket, decoder, read buffer (with the start of the next head, if
//! any), the head the front decoded, and what its deadlines are counted
//! from. Bodies are read on the pool thread, blocking, as in every other
//! blocking design (each read bounded by `--idle-timeout`).

use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::BytesMut;
use http1::{Decoder, Message, Request};
use site::exposure::Surface;
use site::stats::TimeoutKind;

use super::{BufferPool, Conn, Ctx, MIN_READ, Res, Stop, Waits, count, timed};
use crate::blocking::socket::Blocking;
use crate::blocking::{BlockingIo, Deadline, IdleSlot};
use crate::config::Config;

/// A connection between two turns on a pool thread.
#[derive(Debug)]
pub struct Parked<I> {
    io: I,
    decoder: Decoder,
    /// The bytes read and not decoded yet: the start of the next head.
    rbuf: BytesMut,
    /// A head the front decoded, to be answered first.
    pending: Option<Request>,
    /// When the first byte of the head being read arrived (for a new
    /// connection: when it was accepted).
    head_started: Option<Instant>,
    /// When it was parked (the idle timeout counts from there).
    since: Instant,
    /// When the front handed it to the queue.
    handed: Option<Instant>,
    served: u64,
    client: Option<SocketAddr>,
    on: Surface,
    idle: IdleSlot,
}

/// How a turn on a pool thread ended.
#[derive(Debug)]
pub enum Turn<I> {
    /// The next head is to be waited for: back to the front (boxed: the
    /// state moves through a queue and a list, and is large).
    Park(Box<Parked<I>>),
    /// The connection is over (counted): its socket, for the caller to
    /// take out of the front's epoll set before it is closed.
    Close(I),
}

/// What the front's read of a parked connection found.
#[derive(Debug)]
pub enum Feed {
    /// A whole head (or a decoding error, which the pool thread answers):
    /// the connection goes to a thread.
    Ready,
    /// Not a whole head yet: it stays parked.
    More,
    /// The client closed or the socket failed (counted as
    /// `Conn::run` counts it): close.
    Closed,
}

impl<I: BlockingIo> Parked<I> {
    /// A connection just accepted (or just past its PROXY header), before
    /// its first byte; the header timeout counts from now.
    pub fn new(ctx: &Ctx, io: I, client: Option<SocketAddr>, on: Surface) -> Parked<I> {
        let now = io.now();
        Parked {
            io,
            decoder: Decoder::new(ctx.config.limits),
            rbuf: BytesMut::new(),
            pending: None,
            head_started: Some(now),
            since: now,
            handed: None,
            served: 0,
            client,
            on,
            idle: ctx.idle.slot(),
        }
    }

    /// The socket.
    pub fn io(&self) -> &I {
        &self.io
    }

    /// Whether no byte of a next head has come (a TLS session may hold
    /// some that the front cannot see: it counts as idle, as it does for
    /// the blocking loop's idle wait).
    pub fn is_idle(&self) -> bool {
        self.rbuf.is_empty() && self.decoder.is_idle() && self.pending.is_none()
    }

    /// Whether it has answered a request yet.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// When it was accepted, while it has not answered a request.
    pub fn accepted(&self) -> Option<Instant> {
        self.head_started.filter(|_| self.served == 0)
    }

    /// When the front gives up on it, and as which timeout: the same
    /// deadlines as `Conn::fill`'s (a head within the header timeout of
    /// its first byte, or of the accept; the wait between requests within
    /// the idle timeout).
    pub fn deadline(&self, config: &Config) -> (Instant, TimeoutKind) {
        match self.head_started {
            Some(t) => (t + config.header_timeout, TimeoutKind::Header),
            None => (self.since + config.idle_timeout, TimeoutKind::Idle),
        }
    }

    /// Closes it from the front (a timeout, shutdown): gives its idle slot
    /// back and returns the socket, to be taken out of the epoll set
    /// before it is dropped.
    pub fn close(self, ctx: &Ctx) -> I {
        ctx.idle.release(self.idle);
        self.io
    }

    /// The front hands it to the queue now.
    pub fn hand(&mut self, now: Instant) {
        self.handed = Some(now);
    }

    /// Moves the read buffer out if it holds nothing, so that a connection
    /// waiting between requests keeps no memory; the front reuses it.
    pub fn take_empty_buffer(&mut self) -> Option<BytesMut> {
        (self.rbuf.is_empty() && self.rbuf.capacity() > 0 && self.decoder.is_idle())
            .then(|| std::mem::take(&mut self.rbuf))
    }
}

impl Parked<Blocking> {
    /// The front's read: takes what has arrived on a plain socket, without
    /// waiting, into the read buffer (`spare`, if the connection has none)
    /// and decodes it.
    pub fn feed(&mut self, ctx: &Ctx, buffer: impl FnOnce() -> BytesMut) -> Feed {
        if self.rbuf.capacity() == 0 {
            self.rbuf = buffer();
        }
        loop {
            if self.rbuf.capacity() - self.rbuf.len() < MIN_READ {
                self.rbuf.reserve(MIN_READ.max(self.rbuf.len()));
            }
            let was_idle = self.rbuf.is_empty() && self.decoder.is_idle();
            let spare: &mut [MaybeUninit<u8>] = self.rbuf.spare_capacity_mut();
            let n = match reactor::sys::recv_nowait(self.io.as_fd(), spare) {
                Ok(0) => {
                    let stop = if was_idle {
                        Stop::Done
                    } else {
                        Stop::Io(io::ErrorKind::UnexpectedEof.into())
                    };
                    count(ctx, stop);
                    return Feed::Closed;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Feed::More,
                Err(e) => {
                    count(ctx, Stop::Io(e));
                    return Feed::Closed;
                }
            };
            // SAFETY: `recv` initialised the first `n` bytes of the spare
            // capacity, and `n` fits in it.
            unsafe { self.rbuf.set_len(self.rbuf.len() + n) };
            if was_idle {
                // The first bytes of a head: the header timeout starts
                // again, from them (as in `Conn::fill`).
                self.head_started = Some(Instant::now());
            }
            match self.decoder.decode(&mut self.rbuf) {
                Ok(Some(Message::Head(req))) => {
                    self.pending = Some(req);
                    return Feed::Ready;
                }
                // The decoder stays failed and says it again on the pool
                // thread, which answers it as the blocking loop does.
                Err(_) => return Feed::Ready,
                // Not whole yet: read on while bytes are there.
                Ok(None) => {}
                // No body comes between requests, where the front reads.
                Ok(Some(_)) => return Feed::Ready,
            }
        }
    }
}

/// Serves a parked connection's turn on the calling pool thread: the head
/// the front decoded, any more already whole, until the next head must be
/// waited for. `readable`: the front handed it over on readability
/// without reading (TLS). `wbuf` is the thread's write buffer, lent.
pub fn resume<I: BlockingIo>(
    ctx: &Ctx,
    parked: Parked<I>,
    readable: bool,
    wbuf: &mut BytesMut,
) -> Turn<I> {
    let Parked {
        io,
        decoder,
        rbuf,
        pending,
        head_started,
        since: _,
        handed,
        served,
        client,
        on,
        idle,
    } = parked;
    if served == 0 {
        // On a timeline the handoff's arrow ends at the first request, on
        // the pool thread that serves it (the front opens no slice).
        crate::driver::trace_arrival(io.fd());
    }
    let mut conn = Conn {
        ctx,
        request_started: head_started.unwrap_or_else(|| io.now()),
        io,
        idle,
        pool: BufferPool::current(),
        decoder,
        rbuf,
        wbuf: std::mem::take(wbuf),
        head_started,
        served,
        client,
        on,
        waits: Waits::Front { readable },
        // The front read what is buffered: whether the socket was left
        // empty is not known here, so a close lingers.
        drained: false,
        // The thread pool sets TCP_NODELAY at accept.
        nagle: crate::driver::Nagle::Off,
    };
    let stop = conn.turn(pending);
    let Conn {
        io,
        idle,
        decoder,
        rbuf,
        wbuf: mut w,
        mut head_started,
        served,
        client,
        on,
        ..
    } = conn;
    w.clear();
    *wbuf = w;
    match stop {
        Stop::Park => {
            let now = io.now();
            // The time the connection waited for a thread and was on one is
            // the server's, not the client's: a head begun before the
            // handoff (a TLS handshake, a head in several records) does not
            // lose it from its header timeout.
            if let (Some(started), Some(handed)) = (head_started, handed)
                && started < handed
            {
                head_started = Some(started + now.saturating_duration_since(handed));
            }
            Turn::Park(Box::new(Parked {
                since: now,
                io,
                decoder,
                rbuf,
                pending: None,
                head_started,
                handed: None,
                served,
                client,
                on,
                idle,
            }))
        }
        stop => {
            ctx.idle.release(idle);
            count(ctx, stop);
            Turn::Close(io)
        }
    }
}

impl<I: BlockingIo> Conn<'_, I> {
    /// One turn of event mode: the pending head first, then the loop.
    fn turn(&mut self, pending: Option<Request>) -> Stop {
        if let Some(req) = pending {
            match self.answer(req) {
                Ok(true) => {}
                Ok(false) => return self.close(),
                Err(stop) => return stop,
            }
        }
        self.run()
    }

    /// Event mode, outside a body, where the blocking loop would wait for
    /// bytes: parks ([`Stop::Park`]) unless a read returns at once without
    /// the socket (plaintext a TLS session decrypted; see
    /// [`BlockingIo::settle`]).
    #[cold]
    pub(super) fn settle(&mut self) -> Res {
        let Waits::Front { readable } = self.waits else {
            return Ok(());
        };
        self.waits = Waits::Front { readable: false };
        let deadline = Deadline::After(self.ctx.config.write_timeout);
        if !self
            .io
            .settle(readable, deadline)
            .map_err(timed(TimeoutKind::Write))?
        {
            return Err(Stop::Park);
        }
        if self.rbuf.is_empty() && self.decoder.is_idle() {
            // The first bytes of a head (as in `Conn::fill`).
            self.head_started = Some(self.io.now());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
