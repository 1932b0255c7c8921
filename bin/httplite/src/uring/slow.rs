//! How the completion driver waits in the answers that wait (a body, a
//! sleep, a job, a file, an echo, an event stream): its [`Waits`], for the
//! loops both stackless drivers share (`crate::stackless::answer`), and the
//! two waits that are its own: a file sent with `sendfile(2)` or owned
//! buffers, and an event stream's interval, cut short by the armed recv.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use http1::Request;
use site::access_log::UpstreamLog;
use site::respond::{Handled, Outcome, Slow};

use super::conn::{Conn, Res, Stop, log};
use super::io as uio;
use crate::stackless::answer::{Parts, Waits};

/// Bytes copied per `pread` + send when a file is larger than
/// `--sendfile-max`.
const COPY_CHUNK: usize = 256 * 1024;

/// How the completion driver waits, for the loops the two stackless
/// drivers share.
impl Waits for Conn {
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
            shutting_down: ctx.shutdown.get(),
            fd: stream.as_raw_fd(),
        }
    }

    #[inline]
    fn start_request(&mut self) {
        // A pipelined request: its turn's clock, as the first one's.
        self.request_started =
            (self.head_started.take()).unwrap_or_else(|| self.ctx.proactor.now());
    }

    #[inline]
    fn handle(&mut self, req: Request) -> Handled<Slow> {
        Conn::handle(self, req)
    }

    fn go_idle(&mut self) {
        self.release_active();
    }

    fn awaiting_first_request(&mut self) -> bool {
        self.first_request_grace_end()
            .is_some_and(|end| Instant::now() < end)
    }

    /// Boxed: closing's states (the TLS alert, the linger) must not make
    /// every connection's per-request future larger.
    fn close(&mut self) -> impl Future<Output = Stop> {
        Box::pin(Conn::close(self))
    }

    fn fill(&mut self) -> impl Future<Output = Res> {
        Conn::fill(self)
    }

    fn flush(&mut self) -> impl Future<Output = Res> {
        Conn::flush(self)
    }

    fn flush_more(&mut self) -> impl Future<Output = Res> {
        self.write_out(crate::driver::Flush::BodyFollows)
    }

    /// Sends `len` bytes of `file` from `offset`: `sendfile(2)` on the
    /// socket up to `--sendfile-max` (a full socket is waited for with a
    /// ring poll), and beyond it, or over TLS, `pread` into an owned buffer
    /// sent with `IORING_OP_SEND` (sealed first over TLS).
    async fn send_file(&mut self, file: &File, offset: u64, len: u64) -> Res {
        // No byte of the file may pass an answer still in flight.
        self.sent().await?;
        let end = offset + len;
        let mut off = offset;
        let fd = file.as_fd();
        let write_timeout = self.ctx.config.write_timeout;
        if len > self.ctx.config.sendfile_max || self.tls {
            let mut buf = bytes::BytesMut::new();
            while off < end {
                let chunk = (end - off).min(COPY_CHUNK as u64) as usize;
                buf.clear();
                buf.resize(chunk, 0);
                let n = uio::pread(fd, &mut buf, off).map_err(Stop::Io)?;
                if n == 0 {
                    // The file shrank under us: the length is a lie now.
                    return Err(Stop::Io(io::ErrorKind::UnexpectedEof.into()));
                }
                buf.truncate(n);
                off += n as u64;
                if self.tls {
                    Box::pin(self.send_sealed_chunk(&buf)).await?;
                    continue;
                }
                let at = Instant::now() + write_timeout;
                let (r, back) = uio::send_all(&self.stream, buf, at, 0).await;
                r?;
                buf = back;
            }
            return Ok(());
        }
        let mut at = None;
        while off < end {
            let chunk = (end - off).min(1 << 20) as usize;
            match uio::sendfile_once(self.stream.as_fd(), fd, &mut off, chunk) {
                Ok(0) => return Err(Stop::Io(io::ErrorKind::UnexpectedEof.into())),
                Ok(_) => at = None,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The write timeout counts from the first wait with no
                    // progress since.
                    let deadline = *at.get_or_insert_with(|| Instant::now() + write_timeout);
                    uio::wait_writable(&self.ctx.proactor, &self.stream, deadline).await?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Stop::Io(e)),
            }
        }
        Ok(())
    }

    fn sleep(d: Duration) -> impl Future<Output = ()> {
        proactor::time::sleep(d)
    }

    /// Waits out one interval of an event stream: `Ok(true)` if the stream
    /// is to end now (the client sent something or closed, or the server
    /// is draining), `Ok(false)` when the interval has passed. The armed
    /// multishot recv is what tells that the client spoke; whatever it
    /// sent is dropped with the stream (an event stream reads nothing).
    async fn tick(&mut self, d: Duration) -> Res<bool> {
        let Conn { stream, ctx, .. } = self;
        let mut sleep = pin!(proactor::time::sleep(d));
        // `None`: draining (the worker wakes every task when it starts).
        let woke = std::future::poll_fn(|cx| {
            if ctx.shutdown.get() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(r) = stream.poll_recv(cx) {
                return Poll::Ready(Some(Some(r)));
            }
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Some(None));
            }
            Poll::Pending
        })
        .await;
        match woke {
            None => Ok(true),
            Some(None) => Ok(false),
            Some(Some(Ok(_))) => Ok(true),
            Some(Some(Err(e))) => Err(Stop::Io(e)),
        }
    }

    fn log(&self, req: &Request, outcome: Outcome) {
        let fd = self.stream.as_raw_fd();
        log(&self.ctx, fd, self.on, req, outcome, self.request_started);
    }

    type Upstream = super::upstream::RingUpstream;

    fn upstream(&self, fd: std::os::fd::OwnedFd) -> io::Result<Self::Upstream> {
        Ok(super::upstream::RingUpstream::new(fd))
    }

    /// The process's pool of fds: a ring socket has no registration to
    /// keep.
    fn take_idle(&self, b: &site::reverse_proxy::Balancer, i: usize) -> Option<Self::Upstream> {
        let fd = crate::upstream::idle::shared().take(b, i)?;
        Some(super::upstream::RingUpstream::new(fd))
    }

    fn put_idle(
        &self,
        b: &site::reverse_proxy::Balancer,
        i: usize,
        up: Self::Upstream,
        keep: usize,
    ) {
        use crate::stackless::upstream::UpstreamSocket as _;
        crate::upstream::idle::shared().put(b, i, up.into_fd(), keep);
    }

    fn proxy_settings(&self) -> &crate::upstream::ReverseProxy {
        &self.ctx.config.reverse_proxy
    }

    fn proxy_peer(&self) -> crate::upstream::exchange::Peer {
        let fd = self.stream.as_raw_fd();
        let trusted = &self.ctx.config.proxy.trusted;
        let client = self.ctx.proxy_clients.borrow().get(&fd).copied();
        // SAFETY: `fd` is this connection's socket, open while it lives.
        let peer = || reactor::sys::peer_addr(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) });
        crate::upstream::exchange::Peer {
            trusted_peer: !trusted.is_empty() && trusted.trusts(crate::proxy::peer_of(fd)),
            client: client.or_else(|| peer().ok()),
            https: self.tls,
        }
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn log_proxied(&self, req: &Request, outcome: Outcome, upstream: UpstreamLog<'_>) {
        let fd = self.stream.as_raw_fd();
        let started = self.request_started;
        super::conn::log_proxied(&self.ctx, fd, self.on, req, outcome, started, upstream);
    }

    fn read_client(&mut self, at: Instant) -> impl Future<Output = io::Result<usize>> {
        Conn::read_client(self, at)
    }

    fn idle_timeout(&self) -> Duration {
        self.ctx.config.idle_timeout
    }
}
