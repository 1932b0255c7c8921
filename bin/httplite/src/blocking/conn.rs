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

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use http1::{Decoder, Message, Request};

use super::{BlockingIo, Deadline, IdleSet, IdleSlot};
use crate::config::Config;
use buffers::BufferPool;
use log::log;
use site::access_log::AccessLog;
use site::exposure::Surface;
use site::respond::{self, Handled};
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
        if !self.wbuf.is_empty() {
            self.before_write(how);
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

    /// Before any write sent as `how`: a write after the first turns Nagle
    /// off (see [`driver::Nagle`]).
    #[inline(always)]
    fn before_write(&mut self, how: Flush) {
        if self.nagle.before_write(how) {
            self.io.set_nodelay();
        }
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
}

mod buffers;
mod log;
pub mod park;
mod proxy;
mod read;
mod slow;
mod tunnel;

pub use park::{Feed, Parked, Turn};

#[cfg(test)]
mod tests;
