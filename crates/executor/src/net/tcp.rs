//! Async TCP over the reactor: a listener and a stream.
//!
//! Each object owns its fd and its [`Registration`]. The registration is
//! declared first so that it drops first: the fd leaves epoll before it is
//! closed (the design's rule).

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};

use reactor::sys::{self, ListenOptions};
use reactor::{Interest, Reactor, Registration};

/// A listening socket whose `accept` waits in the reactor.
#[derive(Debug)]
pub struct TcpListener {
    reg: Registration,
    fd: OwnedFd,
}

impl TcpListener {
    /// Binds a listener (`SO_REUSEADDR`, backlog 4096) on `addr`.
    pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
        Self::bind_with(addr, ListenOptions::default())
    }

    /// Binds with explicit options (backlog, `SO_REUSEPORT`).
    pub fn bind_with(addr: SocketAddr, opts: ListenOptions) -> io::Result<TcpListener> {
        Self::from_fd(sys::tcp_listener(addr, opts)?)
    }

    /// Adopts a listening socket created elsewhere (made non-blocking here).
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        Self::from_fd(OwnedFd::from(listener))
    }

    /// Adopts a listening socket fd (made non-blocking here).
    pub fn from_fd(fd: OwnedFd) -> io::Result<TcpListener> {
        sys::set_nonblocking(fd.as_fd(), true)?;
        // SAFETY: the listener owns `fd` and keeps it in the field after
        // `reg`, so the registration is dropped first.
        let reg = unsafe { Reactor::current().register(fd.as_fd()) }?;
        Ok(TcpListener { reg, fd })
    }

    /// Waits for a connection; the new stream is non-blocking, close-on-exec
    /// and registered with this thread's reactor.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (fd, addr) = std::future::poll_fn(|cx| self.poll_accept_fd(cx)).await?;
        Ok((TcpStream::from_fd(fd)?, addr))
    }

    /// Poll form of accept, returning the raw fd (not yet registered): what a
    /// dispatcher hands to another thread.
    pub fn poll_accept_fd(&self, cx: &mut Context<'_>) -> Poll<io::Result<(OwnedFd, SocketAddr)>> {
        self.reg
            .poll_io(cx, Interest::Readable, || sys::accept(self.fd.as_fd()))
    }

    /// The bound address (useful after binding port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sys::local_addr(self.fd.as_fd())
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A connected TCP socket with async reads and writes.
///
/// Methods take `&self` so that one task can read while another writes (they
/// wait in separate waker slots). Two tasks *reading* at once would replace
/// each other's waker: keep one reader and one writer per stream.
#[derive(Debug)]
pub struct TcpStream {
    reg: Registration,
    fd: OwnedFd,
}

impl TcpStream {
    /// Connects to `addr` without blocking the thread.
    pub async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let fd = sys::tcp_socket(addr)?;
        let connected = sys::connect(fd.as_fd(), addr)?;
        let stream = TcpStream::from_fd(fd)?;
        if !connected {
            // Writable means the handshake finished, one way or the other.
            std::future::poll_fn(|cx| stream.reg.poll_ready(cx, Interest::Writable)).await;
            if let Some(err) = sys::take_socket_error(stream.fd.as_fd())? {
                return Err(err);
            }
        }
        Ok(stream)
    }

    /// Adopts a connected `std` stream (made non-blocking here).
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        Self::from_fd(OwnedFd::from(stream))
    }

    /// Adopts a connected socket fd, e.g. one accepted on another thread and
    /// handed over by the dispatcher. Made non-blocking here.
    pub fn from_fd(fd: OwnedFd) -> io::Result<TcpStream> {
        sys::set_nonblocking(fd.as_fd(), true)?;
        Self::from_nonblocking_fd(fd)
    }

    /// Adopts a socket accepted non-blocking (`accept4` with
    /// `SOCK_NONBLOCK`, as the dispatcher accepts): [`TcpStream::from_fd`]
    /// without the `fcntl` that makes sure of it, one system call fewer
    /// per connection. A blocking fd here would make reads wait inside the
    /// event loop: debug builds check the flag.
    pub fn from_nonblocking_fd(fd: OwnedFd) -> io::Result<TcpStream> {
        debug_assert!(
            sys::is_nonblocking(fd.as_fd()).unwrap_or(true),
            "from_nonblocking_fd: a blocking socket"
        );
        // SAFETY: the stream owns `fd` and keeps it in the field after
        // `reg`, so the registration is dropped first (`into_fd` drops it
        // before giving the fd away).
        let reg = unsafe { Reactor::current().register(fd.as_fd()) }?;
        Ok(TcpStream { reg, fd })
    }

    /// [`TcpStream::from_nonblocking_fd`] for a socket just accepted: it
    /// enters epoll only at its first wait, so a connection answered on the
    /// bytes it arrived with and closed never does (see
    /// [`Reactor::register_accepted`](reactor::Reactor::register_accepted)).
    pub fn from_accepted_fd(fd: OwnedFd) -> TcpStream {
        debug_assert!(
            sys::is_nonblocking(fd.as_fd()).unwrap_or(true),
            "from_accepted_fd: a blocking socket"
        );
        // SAFETY: as in `from_nonblocking_fd`.
        let reg = unsafe { Reactor::current().register_accepted(fd.as_fd()) };
        TcpStream { reg, fd }
    }

    /// Declares that this stream is the only holder of its socket and is
    /// about to be dropped: the close takes it out of epoll, so the
    /// registration skips `EPOLL_CTL_DEL` (see
    /// [`Registration::deregister_by_close`](reactor::Registration::deregister_by_close)).
    pub fn will_close(&self) {
        self.reg.deregister_by_close();
    }

    /// Reads into `buf`; `Ok(0)` is end of stream.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_read(cx, buf)).await
    }

    /// Poll form of [`TcpStream::read`].
    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.reg.poll_read(cx, buf)
    }

    /// Reads into uninitialised memory (e.g. a buffer's spare capacity);
    /// returns how many bytes at the start of `buf` are now initialised.
    pub fn poll_read_uninit(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        self.reg.poll_read_uninit(cx, buf)
    }

    /// Sends up to `count` bytes of `file` from `*offset` with `sendfile(2)`,
    /// advancing `*offset`. `Ok(0)` means the file ended early.
    pub fn poll_sendfile(
        &self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        self.reg.poll_sendfile(cx, file, offset, count)
    }

    /// [`TcpStream::poll_sendfile`] through a copy into `scratch` (a
    /// `pread(2)` then a `send(2)`); see
    /// [`reactor::Registration::poll_send_file_copied`].
    pub fn poll_send_file_copied(
        &self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
        scratch: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.reg
            .poll_send_file_copied(cx, file, offset, count, scratch)
    }

    /// Writes some of `buf` (never raises `SIGPIPE`).
    pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_write(cx, buf)).await
    }

    /// Poll form of [`TcpStream::write`].
    pub fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.reg.poll_send(cx, buf)
    }

    /// Writes all of `buf`.
    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.write(buf).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            buf = &buf[n..];
        }
        Ok(())
    }

    /// Writes from several buffers in one `sendmsg` (a `writev`).
    pub async fn write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_write_vectored(cx, bufs)).await
    }

    /// Poll form of [`TcpStream::write_vectored`].
    pub fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.reg.poll_io(cx, Interest::Writable, || {
            sys::send_vectored(self.fd.as_fd(), bufs)
        })
    }

    /// Waits until the socket is readable (data, EOF or error) without
    /// reading: how an idle connection waits before a buffer is allocated.
    pub async fn readable(&self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.reg.poll_ready(cx, Interest::Readable)).await;
        Ok(())
    }

    /// Poll form of [`TcpStream::readable`].
    #[inline]
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.reg.poll_ready(cx, Interest::Readable).map(|_| ())
    }

    /// Waits until the socket is writable.
    pub async fn writable(&self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.reg.poll_ready(cx, Interest::Writable)).await;
        Ok(())
    }

    /// Whether the reactor believes a read would not block (readiness set
    /// and not yet cleared by an `EAGAIN` or short read). Costs no syscall
    /// and registers no waker.
    #[inline]
    pub fn is_read_ready(&self) -> bool {
        self.reg.readiness().is_ready_for(Interest::Readable)
    }

    /// One non-blocking read attempt: `WouldBlock` clears readiness, as the
    /// edge-triggered contract requires (and so does a short read).
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.try_read(buf)
    }

    /// One non-blocking read into uninitialised memory, without consulting
    /// readiness first: for callers that know the socket is readable (they
    /// were just woken for it). `WouldBlock` and short reads clear readiness,
    /// as in [`TcpStream::poll_read_uninit`].
    #[inline(always)]
    pub fn try_read_uninit(&self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        self.reg.try_read_uninit(buf)
    }

    /// One non-blocking write attempt, without consulting readiness first.
    /// `WouldBlock` and short writes (the send buffer filled) clear
    /// readiness, as in [`TcpStream::poll_write`].
    #[inline(always)]
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.try_send(buf)
    }

    /// [`TcpStream::try_write`], telling the kernel that more bytes follow
    /// at once (`MSG_MORE`): a response's head before its `sendfile` body
    /// then shares the body's first segment instead of leaving alone.
    pub fn try_write_more(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.try_send_more(buf)
    }

    /// Ready when an operation in `interest`'s direction is worth trying;
    /// otherwise registers `cx`'s waker for the next edge.
    pub fn poll_ready(&self, cx: &mut Context<'_>, interest: Interest) -> Poll<()> {
        self.reg.poll_ready(cx, interest).map(|_| ())
    }

    /// Shuts down one or both directions (`Write` sends a FIN).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        sys::shutdown(self.fd.as_fd(), how)
    }

    /// Sets `TCP_NODELAY` (no Nagle delay for small responses).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        sys::set_nodelay(self.fd.as_fd(), nodelay)
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        sys::nodelay(self.fd.as_fd())
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        sys::peer_addr(self.fd.as_fd())
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sys::local_addr(self.fd.as_fd())
    }

    /// Deregisters and returns the fd (still non-blocking).
    pub fn into_fd(self) -> OwnedFd {
        let TcpStream { reg, fd } = self;
        drop(reg);
        fd
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl IntoRawFd for TcpStream {
    fn into_raw_fd(self) -> RawFd {
        self.into_fd().into_raw_fd()
    }
}
