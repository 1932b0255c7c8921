//! What the stackless connection reads from and writes to: a plain TCP
//! stream, or the same stream with the shared TLS session on it.
//!
//! The connection code (`conn`, its fast and general paths) is generic
//! over [`Transport`], so each kind gets its own compiled copy: the plain
//! one is the connection loop as it was, every call below inlined to the
//! `TcpStream` method it was before (no branch, no indirection on the
//! cleartext hot path), and the TLS one is the same loop over
//! [`TlsStream`].

use std::io;
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::task::{Context, Poll};

use executor::net::TcpStream;
use reactor::Interest;

use crate::tls::session::RawIo;
use crate::tls::{Session, Tls};

/// A connection's byte stream, as the stackless connection uses it. The
/// calls never wait: `WouldBlock` (or `Pending`, with the task's waker
/// registered) says when to.
pub trait Transport: AsRawFd + Unpin + 'static {
    /// Whether the transport writes on its own (a TLS handshake's flights
    /// and tickets) before and between the connection's writes: if so,
    /// Nagle's algorithm could hold a small answer behind them, and
    /// `TCP_NODELAY` is set at once (see the connection's `Nagle`).
    const WRITES_ITSELF: bool;
    /// One read attempt into uninitialised memory (see
    /// `TcpStream::try_read_uninit`); returns how many bytes at the start
    /// of `buf` are now initialised, at most `buf.len()`.
    fn try_read_uninit(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize>;
    /// One write attempt: how much of `buf` was taken.
    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// [`Transport::try_write`] when more follows at once (a file body
    /// after its head): a plain socket adds `MSG_MORE` so the head does not
    /// leave in a segment of its own; TLS, whose records are copied anyway,
    /// just writes.
    fn try_write_more(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.try_write(buf)
    }
    /// Sends what earlier writes left inside the transport (TLS records
    /// the socket did not take); `WouldBlock` if some are still there.
    fn try_flush(&mut self) -> io::Result<()>;
    /// Whether a read is worth trying without waiting.
    fn is_read_ready(&self) -> bool;
    /// Ready when a read is worth trying; otherwise registers the waker.
    fn poll_readable(&mut self, cx: &mut Context<'_>) -> Poll<()>;
    /// Ready when an operation in `interest`'s direction is worth trying.
    fn poll_ready(&mut self, cx: &mut Context<'_>, interest: Interest) -> Poll<()>;
    /// Sends up to `count` bytes of `file` from `*offset`, advancing it.
    fn poll_sendfile(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>>;
    /// [`Transport::poll_sendfile`] through a copy into `scratch` (a
    /// `pread` then a `send`; `--sendfile-max`). TLS copies (and
    /// encrypts) every file anyway, so by default this is `poll_sendfile`.
    fn poll_send_file_copied(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
        scratch: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let _ = scratch;
        self.poll_sendfile(cx, file, offset, count)
    }
    /// Shuts down one or both directions (TLS: `close_notify` first).
    fn shutdown(&mut self, how: Shutdown) -> io::Result<()>;
    /// The client's address.
    fn peer_addr(&self) -> io::Result<SocketAddr>;
    /// Turns Nagle's algorithm off (`TCP_NODELAY`).
    fn set_nodelay(&self);
    /// The connection is about to be dropped, the socket's only holder:
    /// its close takes it out of epoll (no `EPOLL_CTL_DEL`).
    fn will_close(&self);
}

impl Transport for TcpStream {
    const WRITES_ITSELF: bool = false;
    #[inline(always)]
    fn try_read_uninit(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        TcpStream::try_read_uninit(self, buf)
    }
    #[inline(always)]
    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        TcpStream::try_write(self, buf)
    }
    fn try_write_more(&mut self, buf: &[u8]) -> io::Result<usize> {
        TcpStream::try_write_more(self, buf)
    }
    #[inline(always)]
    fn try_flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    #[inline(always)]
    fn is_read_ready(&self) -> bool {
        TcpStream::is_read_ready(self)
    }
    #[inline(always)]
    fn poll_readable(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        TcpStream::poll_readable(self, cx)
    }
    #[inline(always)]
    fn poll_ready(&mut self, cx: &mut Context<'_>, interest: Interest) -> Poll<()> {
        TcpStream::poll_ready(self, cx, interest)
    }
    #[inline(always)]
    fn poll_sendfile(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        TcpStream::poll_sendfile(self, cx, file, offset, count)
    }
    #[inline(always)]
    fn poll_send_file_copied(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
        scratch: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        TcpStream::poll_send_file_copied(self, cx, file, offset, count, scratch)
    }
    #[inline(always)]
    fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        TcpStream::shutdown(self, how)
    }
    #[inline(always)]
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        TcpStream::peer_addr(self)
    }
    fn set_nodelay(&self) {
        let _ = TcpStream::set_nodelay(self, true);
    }
    #[inline(always)]
    fn will_close(&self) {
        TcpStream::will_close(self);
    }
}

/// Plaintext is read at most this much at a time (one TLS record's
/// worth), so that the spare room zeroed before a read stays small.
const READ_CHUNK: usize = 16 * 1024;

/// A TCP stream with a TLS session on it.
#[derive(Debug)]
pub struct TlsStream {
    /// Boxed: a session is large, and the plain connection's size must
    /// not depend on it (the two are separate types anyway; this keeps the
    /// TLS connection's task small too).
    session: Box<Session>,
    stream: TcpStream,
}

impl TlsStream {
    /// Starts a server-side TLS session on `stream`.
    pub fn new(stream: TcpStream, tls: &Arc<Tls>) -> io::Result<TlsStream> {
        Ok(TlsStream {
            session: Box::new(Session::new(tls)?),
            stream,
        })
    }

    /// The session and the socket as its [`RawIo`].
    fn parts(&mut self) -> (&mut Session, Nb<'_>) {
        (&mut self.session, Nb(&self.stream))
    }

    /// Sends waiting records; if some remain, registers for writability.
    /// Ready if the socket can take more now.
    fn poll_send_pending(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let (session, mut nb) = self.parts();
        if !session.wants_write() {
            return Poll::Pending;
        }
        let _ = session.flush(&mut nb);
        if !self.session.wants_write() {
            return Poll::Pending;
        }
        self.stream.poll_ready(cx, Interest::Writable)
    }
}

/// The non-blocking socket as a session's [`RawIo`].
struct Nb<'a>(&'a TcpStream);

impl RawIo for Nb<'_> {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
}

impl AsRawFd for TlsStream {
    fn as_raw_fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }
}

impl Transport for TlsStream {
    const WRITES_ITSELF: bool = true;

    fn try_read_uninit(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        let len = buf.len().min(READ_CHUNK);
        let buf = &mut buf[..len];
        buf.fill(MaybeUninit::new(0));
        // SAFETY: every element was initialised just above, and
        // `MaybeUninit<u8>` has the layout of `u8`.
        let out = unsafe { &mut *(std::ptr::from_mut(buf) as *mut [u8]) };
        let (session, mut nb) = self.parts();
        session.read(&mut nb, out)
    }

    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (session, mut nb) = self.parts();
        session.write(&mut nb, buf)
    }

    fn try_flush(&mut self) -> io::Result<()> {
        let (session, mut nb) = self.parts();
        session.flush(&mut nb)
    }

    fn is_read_ready(&self) -> bool {
        self.session.has_plaintext() || self.stream.is_read_ready()
    }

    fn poll_readable(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.session.has_plaintext() {
            return Poll::Ready(());
        }
        // Records the client waits for (the handshake's) must not sit
        // here while we wait to read: a writable socket wakes us too, and
        // the read that follows sends them.
        if self.poll_send_pending(cx).is_ready() {
            return Poll::Ready(());
        }
        self.stream.poll_readable(cx)
    }

    fn poll_ready(&mut self, cx: &mut Context<'_>, interest: Interest) -> Poll<()> {
        match interest {
            Interest::Readable => self.poll_readable(cx),
            _ => {
                let _ = self.poll_send_pending(cx);
                self.stream.poll_ready(cx, interest)
            }
        }
    }

    fn poll_sendfile(
        &mut self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        loop {
            let (session, mut nb) = self.parts();
            match session.send_file(&mut nb, file, offset, count) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.stream.poll_ready(cx, Interest::Writable).is_pending() {
                        return Poll::Pending;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => return Poll::Ready(other),
            }
        }
    }

    fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        if how != Shutdown::Read {
            let (session, mut nb) = self.parts();
            session.close(&mut nb);
        }
        self.stream.shutdown(how)
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    fn set_nodelay(&self) {
        let _ = self.stream.set_nodelay(true);
    }

    fn will_close(&self) {
        self.stream.will_close();
    }
}
