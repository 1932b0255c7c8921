//! How the blocking connection reads a request's bytes: the waits for
//! them, between requests and within a head, each bounded by its deadline
//! and ended by shutdown, and the buffers that a connection holds only
//! while bytes are there to read.

use std::io;
use std::time::Duration;

use bytes::BytesMut;
use site::stats::TimeoutKind;

use super::{ALREADY_THERE, Conn, MIN_READ, Res, Stop, Waits, timed};
use crate::blocking::{BlockingIo, Deadline};
use crate::driver;

/// How long an idle connection on a thread of its own keeps its buffers
/// (see `Conn::idle_wait`).
const HOLD_BUFFERS: Duration = Duration::from_millis(50);

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

impl<I: BlockingIo> Conn<'_, I> {
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
    pub(super) fn fill(&mut self) -> Res {
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
}
