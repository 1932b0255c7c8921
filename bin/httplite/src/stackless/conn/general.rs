//! The general path: ordinary `async` code for everything that waits in
//! the middle of a request (a body, a file, a sleep, the rest of a head, a
//! write the socket cannot take at once) and for closing. The fast path
//! hands the connection over with a [`Resume`] and takes it back once the
//! connection is idle between requests.
//!
//! The loop itself is the one both stackless drivers share
//! (`super::super::answer`); what is here is how this driver waits, on
//! readiness: its [`Waits`].

use std::fs::File;
use std::io;
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::task::Poll;
use std::time::{Duration, Instant};

use http1::Request;
use reactor::Interest;

use super::super::answer::{self, Parts, Waits};
use super::super::transport::Transport;
use super::timer::with_deadline;
use super::{Conn, LINGER, Res, Resume, Stop, log, log_proxied};
use site::access_log::UpstreamLog;
use site::respond::{Handled, Outcome, Slow};
use site::stats::TimeoutKind;

use crate::driver::{self, Flush};

/// How much a closing connection reads and discards at most.
const LINGER_BYTES: usize = 64 * 1024;

impl<S: Transport> Conn<S> {
    /// Runs the connection from where the fast path stopped until it is
    /// idle between requests again (`None`: the fast path takes over) or
    /// it ends (why).
    pub(super) async fn run(&mut self, resume: Resume) -> Option<Stop> {
        match resume {
            Resume::Top => {}
            Resume::Slow(slow) => match answer::handle_slow(self, *slow).await {
                Ok(true) => {}
                Ok(false) => return Some(self.close().await),
                Err(stop) => return Some(stop),
            },
            Resume::Close => return Some(self.close().await),
        }
        answer::answer(self).await
    }

    /// Writes what is buffered, then half-closes and lingers (see
    /// [`Conn::linger_close`]) if the client may still be sending.
    ///
    /// It may not when the last read came back short (the socket held
    /// nothing more then), everything read was a whole request now
    /// answered, and the server is not shutting down (which closes
    /// keep-alive clients that may be about to send their next request):
    /// a plain close then sends a FIN, never a reset, and saves a
    /// `shutdown`, a wait and a `read` per connection. That is nginx's rule
    /// too (`lingering_close on` lingers only when more may come).
    ///
    /// The last answer leaves with the FIN ([`Flush::Last`]).
    async fn close(&mut self) -> Stop {
        if let Err(stop) = self.write_out(Flush::Last).await {
            return stop;
        }
        if self.unread_possible() {
            self.linger_close().await;
        } else if S::WRITES_ITSELF {
            // TLS ends with `close_notify` (a client may take its absence
            // for a truncation attack: OpenSSL 3 reports an unexpected EOF).
            let _ = self.stream.shutdown(Shutdown::Write);
        }
        Stop::Done
    }

    /// Whether the client may still be sending (see [`Conn::close`]).
    pub(super) fn unread_possible(&self) -> bool {
        !self.drained || !self.between_requests() || self.ctx.shutdown.is_set()
    }

    /// Reads more bytes into `rbuf` within a request (a partial head or a
    /// body), under the header timeout while in a head.
    async fn fill(&mut self) -> Res {
        // A partial head (not a body) is bound by the header timeout however
        // slowly it trickles in: a slowloris gains nothing per byte.
        let in_body = self.io().decoder.in_body();
        let head_started = self.head_started.filter(|_| !in_body);
        loop {
            if self.stream.is_read_ready() {
                match self.read_now() {
                    Some(Ok(0)) => {
                        return Err(if self.io().is_between_requests() {
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

    /// Writes out `wbuf` (one `send` for all pipelined responses), then
    /// what the transport still holds (TLS records), under the write
    /// timeout.
    async fn flush(&mut self) -> Res {
        self.write_out(Flush::Now).await
    }

    /// [`Conn::flush`], with the bytes sent as `how` says.
    async fn write_out(&mut self, how: Flush) -> Res {
        let len = self.active.as_ref().map_or(0, |a| a.wbuf.len());
        if len == 0 {
            return self.flush_transport().await;
        }
        self.before_write(how);
        let more = how.more();
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
            let rest = &wbuf[off..];
            let sent = if more {
                stream.try_write_more(rest)
            } else {
                stream.try_write(rest)
            };
            let blocked = match sent {
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
        self.flush_transport().await
    }

    /// Sends what the transport holds after the last write (TLS records
    /// the socket did not take at once; nothing for a plain stream).
    async fn flush_transport(&mut self) -> Res {
        loop {
            match self.stream.try_flush() {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Stop::Io(e)),
            }
            let at = self.ctx.reactor.now() + self.ctx.config.write_timeout;
            self.wait_ready(Interest::Writable, at, TimeoutKind::Write)
                .await?;
        }
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
}

/// How the readiness driver waits, for the loops the two stackless drivers
/// share (see `super::super::answer`).
impl<S: Transport> Waits for Conn<S> {
    #[inline]
    fn parts(&mut self) -> Parts<'_> {
        let Conn {
            active,
            ctx,
            stream,
            ..
        } = self;
        Parts {
            active,
            pool: &ctx.pool,
            app: &ctx.app,
            stats: &ctx.stats,
            shutting_down: ctx.shutdown.is_set(),
            fd: stream.as_raw_fd(),
        }
    }

    #[inline]
    fn start_request(&mut self) {
        self.request_started = (self.head_started.take()).unwrap_or_else(|| self.ctx.reactor.now());
    }

    #[inline]
    fn handle(&mut self, req: Request) -> Handled<Slow> {
        Conn::handle(self, req)
    }

    /// The fast path takes over, and reads at once if the next request is
    /// already there (readiness still set).
    fn go_idle(&mut self) {
        Conn::go_idle(self);
    }

    fn awaiting_first_request(&mut self) -> bool {
        self.in_first_request_grace()
    }

    fn close(&mut self) -> impl Future<Output = Stop> {
        Conn::close(self)
    }

    fn fill(&mut self) -> impl Future<Output = Res> {
        Conn::fill(self)
    }

    fn flush(&mut self) -> impl Future<Output = Res> {
        Conn::flush(self)
    }

    fn flush_more(&mut self) -> impl Future<Output = Res> {
        self.write_out(Flush::BodyFollows)
    }

    /// Sends `len` bytes of `file` from `offset`: with `sendfile(2)` up to
    /// `--sendfile-max`, copied through the worker's buffer beyond it.
    async fn send_file(&mut self, file: &File, offset: u64, len: u64) -> Res {
        let copy = len > self.ctx.config.sendfile_max;
        let mut off = offset;
        let end = offset + len;
        self.before_write(Flush::Now);
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
                if copy {
                    driver::with_copy_buffer(|buf| {
                        stream.poll_send_file_copied(cx, file.as_fd(), &mut off, chunk, buf)
                    })
                } else {
                    stream.poll_sendfile(cx, file.as_fd(), &mut off, chunk)
                }
            })
            .await?;
            if n == 0 {
                // The file shrank under us: the length is a lie now.
                return Err(Stop::Io(io::ErrorKind::UnexpectedEof.into()));
            }
        }
        Ok(())
    }

    fn sleep(d: Duration) -> impl Future<Output = ()> {
        executor::sleep(d)
    }

    /// An event stream's wait between two events: `d`, or less if the
    /// client sends anything or closes (it left: true) or shutdown begins
    /// (true; shutdown wakes every task of the worker). What a viewer costs
    /// here: this parked task, its socket's registry slot and one timer.
    async fn tick(&mut self, d: Duration) -> Res<bool> {
        let mut sleep = std::pin::pin!(executor::sleep(d));
        loop {
            let Conn { stream, ctx, .. } = self;
            // `None`: shutdown; `Some(readable)` otherwise (false: the
            // interval passed).
            let woke = std::future::poll_fn(|cx| {
                if ctx.shutdown.is_set() {
                    return Poll::Ready(None);
                }
                if stream.poll_ready(cx, Interest::Readable).is_ready() {
                    return Poll::Ready(Some(true));
                }
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(false));
                }
                Poll::Pending
            })
            .await;
            match woke {
                None => return Ok(true),
                Some(false) => return Ok(false),
                // Readable: the client closed or spoke, or the readiness
                // was left over from the request (edge-triggered readiness
                // is cleared only by a read that would block): a read
                // tells which.
                Some(true) => match self.read_now() {
                    Some(Ok(_)) => return Ok(true),
                    Some(Err(e)) => return Err(Stop::Io(e)),
                    None => {}
                },
            }
        }
    }

    fn log(&self, req: &Request, outcome: Outcome) {
        let started = Some(self.request_started);
        log(
            &self.ctx,
            &self.stream,
            &self.client,
            &self.on,
            req,
            outcome,
            started,
        );
    }

    type Upstream = crate::stackless::upstream::EpollUpstream;

    fn upstream(&self, fd: std::os::fd::OwnedFd) -> io::Result<Self::Upstream> {
        crate::stackless::upstream::EpollUpstream::new(fd)
    }

    fn take_idle(&self, b: &site::reverse_proxy::Balancer, i: usize) -> Option<Self::Upstream> {
        crate::stackless::upstream::take_idle(b, i)
    }

    fn put_idle(
        &self,
        b: &site::reverse_proxy::Balancer,
        i: usize,
        up: Self::Upstream,
        keep: usize,
    ) {
        crate::stackless::upstream::put_idle(b, i, up, keep);
    }

    fn proxy_settings(&self) -> &crate::upstream::ReverseProxy {
        &self.ctx.config.reverse_proxy
    }

    fn proxy_peer(&self) -> crate::upstream::exchange::Peer {
        let trusted = &self.ctx.config.proxy.trusted;
        let peer = (self.client.as_deref().copied()).or_else(|| self.stream.peer_addr().ok());
        let trusted_peer = !trusted.is_empty() && {
            let fd = std::os::fd::AsRawFd::as_raw_fd(&self.stream);
            trusted.trusts(crate::proxy::peer_of(fd))
        };
        crate::upstream::exchange::Peer {
            trusted_peer,
            client: peer,
            https: S::WRITES_ITSELF,
        }
    }

    fn now(&self) -> Instant {
        self.ctx.reactor.now()
    }

    fn log_proxied(&self, req: &Request, outcome: Outcome, upstream: UpstreamLog<'_>) {
        let started = self.request_started;
        log_proxied(
            &self.ctx,
            &self.stream,
            &self.client,
            &self.on,
            req,
            outcome,
            started,
            upstream,
        );
    }

    fn idle_timeout(&self) -> std::time::Duration {
        self.ctx.config.idle_timeout
    }

    /// A read when the socket is ready, else a wait for its next edge
    /// under the connection's timer (which a dropped read leaves armed:
    /// harmless, as the next wait re-arms it).
    async fn read_client(&mut self, at: Instant) -> io::Result<usize> {
        loop {
            if self.stream.is_read_ready()
                && let Some(read) = self.read_now()
            {
                return read;
            }
            if self
                .wait_ready(Interest::Readable, at, TimeoutKind::Idle)
                .await
                .is_err()
            {
                return Err(io::ErrorKind::TimedOut.into());
            }
        }
    }
}
