//! The fast path: a hand-written `poll` for the loop nearly every request
//! takes (wait for bytes, read, answer every complete request at once,
//! write the answers in one go, wait again).
//!
//! Written by hand rather than as an `async fn` because this loop runs once
//! per request: resuming nested `async` state machines, building a future
//! for each wait and moving the results through them cost more here than
//! the work itself. Anything that has to wait mid-request leaves this file
//! as an [`Exit::Resume`] for the general path, which is ordinary `async`
//! code (see the module above).

use std::io;
use std::task::{Context, Poll};

use bytes::Buf;
use http1::Message;

use super::super::transport::Transport;
use super::{Conn, FLUSH_AT, Resume, Stop, log};
use site::respond::{self, Handled};
use site::stats::TimeoutKind;

use crate::driver::{self, Flush};

/// Why the fast path returned.
pub(super) enum Exit {
    /// The connection is over.
    Stop(Stop),
    /// Something must wait: the general path takes over from here.
    Resume(Resume),
}

/// What a write attempt did.
enum Flushed {
    /// Everything went.
    All,
    /// The socket took part or none of it: the rest must wait.
    Blocked,
}

impl<S: Transport> Conn<S> {
    /// At shutdown: whether this connection has yet to send its first
    /// request and was accepted less than [`driver::FIRST_REQUEST_GRACE`]
    /// ago; if so, its timer is set to wake it when that ends.
    pub(super) fn in_first_request_grace(&mut self) -> bool {
        let Some(accepted) = self.head_started.filter(|_| !self.served_any) else {
            return false;
        };
        let until = accepted + driver::first_request_grace(&self.ctx.config);
        if self.ctx.reactor.now() >= until {
            return false;
        }
        self.timer
            .arm(&self.ctx.reactor, until, TimeoutKind::Header);
        true
    }

    /// Waits for the next request, answers it and everything else
    /// buffered, and writes the answers, for as long as nothing has to wait
    /// mid-request.
    ///
    /// `woken`: this poll follows a wake-up of the task. Nearly always the
    /// socket's readability woke it, so the read is tried at once, without
    /// asking the registry first; after the rare other wakes (the timer,
    /// shutdown) that read finds nothing and the wait resumes.
    ///
    /// The poll nearly every request makes (woken, read, answer, write,
    /// wait again) is written as straight-line code, with the loops for the
    /// rest ([`Conn::poll_fast_loop`], [`Conn::answer_more`]) out of line:
    /// around a loop, LLVM hoists a dozen field and thread-local addresses
    /// and spills them to the stack on every entry, which cost this path
    /// about 20 instructions per request for loops that nearly always ran
    /// once.
    #[inline(always)]
    pub(super) fn poll_fast(&mut self, cx: &mut Context<'_>, woken: bool) -> Poll<Exit> {
        if woken && let Some(exit) = self.read_and_answer() {
            return Poll::Ready(exit);
        }
        // Idle between requests, holding no buffers.
        if self.stream.poll_readable(cx).is_pending() {
            return self.idle_pending(cx);
        }
        // Readable already (the next request came in meanwhile).
        self.poll_fast_loop(cx)
    }

    /// [`Conn::poll_fast`]'s loop, for a socket found readable: read,
    /// answer, write, and again until a read finds nothing.
    #[inline(never)]
    fn poll_fast_loop(&mut self, cx: &mut Context<'_>) -> Poll<Exit> {
        loop {
            if let Some(exit) = self.read_and_answer() {
                return Poll::Ready(exit);
            }
            if self.stream.poll_readable(cx).is_pending() {
                return self.idle_pending(cx);
            }
        }
    }

    /// One read without waiting, and what it brought answered and written;
    /// then the connection goes idle. `Some` when the fast path ends. A
    /// read that finds nothing (a wake for something else, or a stale
    /// edge) clears readiness: the caller waits again.
    #[inline(always)]
    fn read_and_answer(&mut self) -> Option<Exit> {
        match self.read_now() {
            Some(Ok(0)) => Some(Exit::Stop(Stop::Done)),
            Some(Ok(_)) => {
                let exit = self.answer_and_flush();
                if exit.is_none() {
                    self.go_idle();
                }
                exit
            }
            Some(Err(e)) => Some(Exit::Stop(Stop::Io(e))),
            None => {
                self.release_active();
                None
            }
        }
    }

    /// Nothing to read: `Pending` after checking for shutdown and the
    /// timer, which registers the task's waker with it.
    #[inline(always)]
    fn idle_pending(&mut self, cx: &mut Context<'_>) -> Poll<Exit> {
        if self.ctx.shutdown.is_set() && !self.in_first_request_grace() {
            return Poll::Ready(Exit::Stop(Stop::Shutdown));
        }
        if self.timer.poll_expired(&self.ctx.reactor, cx) {
            return Poll::Ready(Exit::Stop(Stop::Timeout(self.timer.kind)));
        }
        Poll::Pending
    }

    /// After a read: answers everything buffered and writes the answers.
    /// `None` when all went out and the socket was drained (the connection
    /// goes idle); otherwise why the fast path ends.
    #[inline(always)]
    fn answer_and_flush(&mut self) -> Option<Exit> {
        match self.answer_once() {
            Err(exit) => Some(exit),
            Ok(false) => None,
            Ok(true) => self.answer_more(),
        }
    }

    /// Answers what is buffered and writes it. `Err` when the fast path
    /// ends; `Ok(true)` when the next request may be in the socket already
    /// (a pipelining or fast client), worth a read with the buffers in hand.
    #[inline(always)]
    fn answer_once(&mut self) -> Result<bool, Exit> {
        if let Some(resume) = self.answer_buffered() {
            return Err(Exit::Resume(resume));
        }
        match self.try_flush(Flush::Now) {
            Ok(Flushed::All) => {}
            Ok(Flushed::Blocked) => return Err(Exit::Resume(Resume::Top)),
            Err(stop) => return Err(Exit::Stop(stop)),
        }
        if self.ctx.shutdown.is_set() {
            return Err(Exit::Stop(Stop::Shutdown));
        }
        Ok(!self.drained && self.stream.is_read_ready())
    }

    /// [`Conn::answer_once`] again for as long as reads with the buffers
    /// in hand find more requests.
    #[inline(never)]
    fn answer_more(&mut self) -> Option<Exit> {
        loop {
            match self.read_now() {
                Some(Ok(0)) => return Some(Exit::Stop(Stop::Done)),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Some(Exit::Stop(Stop::Io(e))),
                None => return None,
            }
            match self.answer_once() {
                Err(exit) => return Some(exit),
                Ok(false) => return None,
                Ok(true) => {}
            }
        }
    }

    /// [`Conn::poll_fast`] after the general path gave the connection back
    /// (no wake: ask the registry before reading), out of line so that the
    /// copy inlined into `Connection::poll` stays the only hot one.
    #[inline(never)]
    pub(super) fn poll_fast_outlined(&mut self, cx: &mut Context<'_>) -> Poll<Exit> {
        self.poll_fast(cx, false)
    }

    /// Gives the buffers back and arms the timer for the wait for the next
    /// request: the idle timeout, or the header timeout before the first.
    #[inline(always)]
    pub(super) fn go_idle(&mut self) {
        if let Some(active) = self.active.take() {
            self.ctx.pool.put_drained(active);
        }
        let ctx = &*self.ctx;
        if self.served_any && ctx.idle_is_longest {
            // The heap's deadline cannot be later than this one (no
            // timeout is longer): there is nothing to move, and the time
            // is kept as the reactor's tick, unconverted.
            self.timer.extend(
                ctx.reactor.tick(),
                ctx.config.idle_timeout,
                TimeoutKind::Idle,
            );
        } else if !self.served_any {
            let at = ctx.reactor.now() + ctx.config.header_timeout;
            self.timer.arm(&ctx.reactor, at, TimeoutKind::Header);
        } else {
            let at = ctx.reactor.now() + ctx.config.idle_timeout;
            self.timer.arm(&ctx.reactor, at, TimeoutKind::Idle);
        }
    }

    /// Answers every complete request in the read buffer. `None` when all
    /// were answered and nothing of another has arrived; otherwise where the
    /// general path must take over.
    #[inline(always)]
    fn answer_buffered(&mut self) -> Option<Resume> {
        // Fields apart, and the state looked up once: this loop runs per
        // request, pipelined ones included.
        let Conn {
            ctx,
            stream,
            active,
            head_started,
            request_started,
            served_any,
            client,
            on,
            ..
        } = self;
        let io = ctx.pool.ensure(active);
        loop {
            match io.decoder.decode(&mut io.rbuf) {
                Ok(Some(Message::Head(req))) => {
                    // `None`: the head came whole in this poll, so it began
                    // at the reactor's time, which does not move before the
                    // answer is logged; read only if a log or the general
                    // path needs it (a clock read and a store per request
                    // otherwise). Borrowed by the log (one pointer in its
                    // closure) and cleared after the answer.
                    let started = &*head_started;
                    *served_any = true;
                    let handled = respond::handle(
                        &ctx.app,
                        &ctx.stats,
                        &mut io.wbuf,
                        req,
                        on,
                        ctx.shutdown.is_set(),
                        |req, out| log(ctx, stream, client, on, req, out, *started),
                    );
                    let started = head_started.take();
                    match handled {
                        Handled::Done(true) => {}
                        Handled::Done(false) => return Some(Resume::Close),
                        Handled::Slow(slow) => {
                            *request_started = started.unwrap_or_else(|| ctx.reactor.now());
                            return Some(Resume::Slow(Box::new(slow)));
                        }
                    }
                    if io.wbuf.len() >= FLUSH_AT {
                        return Some(Resume::Top);
                    }
                    // Nothing more buffered (one request at a time): done,
                    // without asking the decoder.
                    if io.is_between_requests() {
                        return None;
                    }
                }
                // Bodies are consumed by the handlers.
                Ok(Some(_)) => {}
                Ok(None) if io.is_between_requests() => return None,
                // Part of a head: the rest comes under the header timeout,
                // counted from now. (Its first bytes came in during this
                // poll, and the reactor's clock has not moved since: the
                // time is taken here rather than on every read.)
                Ok(None) => {
                    *head_started = Some(ctx.reactor.now());
                    return Some(Resume::Top);
                }
                Err(e) => {
                    driver::reject(&mut io.wbuf, &ctx.stats, &e, false);
                    return Some(Resume::Close);
                }
            }
        }
    }

    /// [`Conn::close`] without leaving the fast path, where nothing needs
    /// a wait: a plain stream whose socket takes the last answer whole,
    /// with nothing more to come from the client. `None`: the general path
    /// closes. A `Connection: close` answer then ends the connection
    /// without the general path's future (allocated, moved into its box,
    /// polled and freed): 2,800–2,970 user-space instructions per new
    /// connection instead of 4,000–4,020 (callgrind, `ab -c 16`, 5,000
    /// connections against 1,000; the count moves with how accepts batch).
    pub(super) fn close_now(&mut self) -> Option<Stop> {
        if S::WRITES_ITSELF || self.unread_possible() {
            return None;
        }
        match self.try_flush(Flush::Last) {
            Ok(Flushed::All) => Some(Stop::Done),
            Ok(Flushed::Blocked) => None,
            Err(stop) => Some(stop),
        }
    }

    /// Writes the write buffer, sent as `how` says, without waiting; what
    /// the socket does not take stays in the buffer for the general path.
    #[inline(always)]
    fn try_flush(&mut self, how: Flush) -> Result<Flushed, Stop> {
        self.before_write(how);
        let Conn { active, stream, .. } = self;
        let Some(wbuf) = active.as_mut().map(|a| &mut a.wbuf) else {
            return Ok(Flushed::All);
        };
        while !wbuf.is_empty() {
            let sent = match how.more() {
                true => stream.try_write_more(wbuf),
                false => stream.try_write(wbuf),
            };
            match sent {
                Ok(0) => return Err(Stop::Io(io::ErrorKind::WriteZero.into())),
                Ok(n) if n == wbuf.len() => break,
                Ok(n) => {
                    wbuf.advance(n);
                    return Ok(Flushed::Blocked);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Flushed::Blocked),
                Err(e) => return Err(Stop::Io(e)),
            }
        }
        wbuf.clear();
        // What the transport still holds (TLS records the socket did not
        // take; a plain stream never holds any, and this folds away).
        match stream.try_flush() {
            Ok(()) => Ok(Flushed::All),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Flushed::Blocked),
            Err(e) => Err(Stop::Io(e)),
        }
    }
}
