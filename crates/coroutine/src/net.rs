//! Blocking-style TCP: calls that look like `std::net`'s and park the
//! coroutine, not the thread, on `EAGAIN`.
//!
//! Each object owns its fd and its [`Registration`]; the registration is
//! declared first so that it drops first (the fd leaves epoll before it is
//! closed). Reads and writes take `&self`, so one coroutine can read while
//! another writes the same stream (they wait in separate waker slots). Two
//! coroutines *reading* one stream at once would replace each other's waker:
//! keep one reader and one writer per stream.
//!
//! **Deadlines** are absolute [`Instant`]s, the shape a server's header,
//! idle and write timeouts have: `read_until(buf, deadline)` for one call,
//! or [`TcpStream::set_read_deadline`] for every later `read`. A timer is
//! armed only when a call actually has to wait; an expired deadline gives
//! `io::ErrorKind::TimedOut`.

use std::cell::Cell;
use std::io::{self, IoSlice, Read, Write};
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};
use std::time::Instant;

use reactor::sys::{self, ListenOptions};
use reactor::{Interest, Reactor, Registration};

use crate::io::{blocking_io, wait_readable, wait_writable};

/// A listening socket whose `accept` parks the coroutine.
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

    /// Waits for a connection; the stream is non-blocking, close-on-exec and
    /// registered with this thread's reactor.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        self.accept_until(None)
    }

    /// Like [`TcpListener::accept`], giving up at `deadline` (`TimedOut`).
    pub fn accept_until(&self, deadline: Option<Instant>) -> io::Result<(TcpStream, SocketAddr)> {
        let (fd, addr) = self.accept_fd(deadline)?;
        Ok((TcpStream::from_fd(fd)?, addr))
    }

    /// Waits (until `deadline`, if any) for a connection and returns its fd
    /// unregistered: what a dispatcher hands to another thread.
    pub fn accept_fd(&self, deadline: Option<Instant>) -> io::Result<(OwnedFd, SocketAddr)> {
        blocking_io(&self.reg, Interest::Readable, deadline, || {
            sys::accept(self.fd.as_fd())
        })
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

/// A connected TCP socket with blocking-style reads and writes.
#[derive(Debug)]
pub struct TcpStream {
    reg: Registration,
    fd: OwnedFd,
    read_deadline: Cell<Option<Instant>>,
    write_deadline: Cell<Option<Instant>>,
}

impl TcpStream {
    /// Connects to `addr`, parking the coroutine during the handshake.
    pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        Self::connect_until(addr, None)
    }

    /// Like [`TcpStream::connect`], giving up at `deadline`.
    pub fn connect_until(addr: SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
        let fd = sys::tcp_socket(addr)?;
        let connected = sys::connect(fd.as_fd(), addr)?;
        let stream = TcpStream::from_fd(fd)?;
        if !connected {
            // Writable means the handshake finished, one way or the other.
            wait_writable(&stream.reg, deadline)?;
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
    ///
    /// # Panics
    /// Outside a thread with a current reactor (a runtime).
    pub fn from_fd(fd: OwnedFd) -> io::Result<TcpStream> {
        sys::set_nonblocking(fd.as_fd(), true)?;
        Self::from_nonblocking_fd(fd)
    }

    /// Adopts a socket accepted non-blocking (`accept4` with
    /// `SOCK_NONBLOCK`, as the dispatcher accepts): [`TcpStream::from_fd`]
    /// without the `fcntl` that makes sure of it. A blocking fd here would
    /// stall every coroutine of the thread: debug builds check the flag.
    ///
    /// # Panics
    /// Outside a thread with a current reactor (a runtime).
    pub fn from_nonblocking_fd(fd: OwnedFd) -> io::Result<TcpStream> {
        debug_assert!(
            sys::is_nonblocking(fd.as_fd()).unwrap_or(true),
            "from_nonblocking_fd: a blocking socket"
        );
        // SAFETY: the stream owns `fd` and keeps it in the field after
        // `reg`, so the registration is dropped first (`into_fd` drops it
        // before giving the fd away).
        let reg = unsafe { Reactor::current().register(fd.as_fd()) }?;
        Ok(TcpStream {
            reg,
            fd,
            read_deadline: Cell::new(None),
            write_deadline: Cell::new(None),
        })
    }

    /// [`TcpStream::from_nonblocking_fd`] for a socket just accepted: it
    /// enters epoll only at its first wait (see
    /// [`Reactor::register_accepted`](reactor::Reactor::register_accepted)).
    ///
    /// # Panics
    /// Outside a thread with a current reactor (a runtime).
    pub fn from_accepted_fd(fd: OwnedFd) -> TcpStream {
        debug_assert!(
            sys::is_nonblocking(fd.as_fd()).unwrap_or(true),
            "from_accepted_fd: a blocking socket"
        );
        // SAFETY: as in `from_nonblocking_fd`.
        let reg = unsafe { Reactor::current().register_accepted(fd.as_fd()) };
        TcpStream {
            reg,
            fd,
            read_deadline: Cell::new(None),
            write_deadline: Cell::new(None),
        }
    }

    /// Declares that this stream is the only holder of its socket and is
    /// about to be dropped: the close takes it out of epoll, so the
    /// registration skips `EPOLL_CTL_DEL` (see
    /// [`Registration::deregister_by_close`](reactor::Registration::deregister_by_close)).
    pub fn will_close(&self) {
        self.reg.deregister_by_close();
    }

    /// The deadline every later read-side call without one of its own
    /// (`read`, `read_uninit`, `readable`, `std::io::Read`) gives up at.
    pub fn set_read_deadline(&self, deadline: Option<Instant>) {
        self.read_deadline.set(deadline);
    }

    /// The current read deadline.
    pub fn read_deadline(&self) -> Option<Instant> {
        self.read_deadline.get()
    }

    /// Like [`TcpStream::set_read_deadline`] for writes and `sendfile`.
    pub fn set_write_deadline(&self, deadline: Option<Instant>) {
        self.write_deadline.set(deadline);
    }

    /// The current write deadline.
    pub fn write_deadline(&self) -> Option<Instant> {
        self.write_deadline.get()
    }

    /// Reads into `buf`; `Ok(0)` is end of stream. Waits at most until the
    /// read deadline.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_until(buf, self.read_deadline.get())
    }

    /// Reads into `buf`, giving up at `deadline` (`TimedOut`).
    pub fn read_until(&self, buf: &mut [u8], deadline: Option<Instant>) -> io::Result<usize> {
        let len = buf.len();
        let fd = self.fd.as_fd();
        let res = blocking_io(&self.reg, Interest::Readable, deadline, || {
            sys::read(fd, buf)
        });
        self.reg.after_read(&res, len);
        res
    }

    /// Reads into uninitialised memory (a buffer's spare capacity); returns
    /// how many bytes at the start of `buf` are now initialised.
    pub fn read_uninit(&self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        self.read_uninit_until(buf, self.read_deadline.get())
    }

    /// [`TcpStream::read_uninit`] with its own deadline.
    pub fn read_uninit_until(
        &self,
        buf: &mut [MaybeUninit<u8>],
        deadline: Option<Instant>,
    ) -> io::Result<usize> {
        let len = buf.len();
        let fd = self.fd.as_fd();
        let res = blocking_io(&self.reg, Interest::Readable, deadline, || {
            sys::read_uninit(fd, buf)
        });
        self.reg.after_read(&res, len);
        res
    }

    /// Writes some of `buf` (never raises `SIGPIPE`). Waits at most until the
    /// write deadline.
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.write_until(buf, self.write_deadline.get())
    }

    /// Writes some of `buf`, giving up at `deadline` (`TimedOut`).
    pub fn write_until(&self, buf: &[u8], deadline: Option<Instant>) -> io::Result<usize> {
        let fd = self.fd.as_fd();
        let res = blocking_io(&self.reg, Interest::Writable, deadline, || {
            sys::send(fd, buf)
        });
        self.reg.after_write(&res, buf.len());
        res
    }

    /// Writes all of `buf`, waiting at most until the write deadline.
    pub fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        self.write_all_until(buf, self.write_deadline.get())
    }

    /// Writes all of `buf`, giving up at `deadline` (`TimedOut`; some bytes
    /// may have been sent).
    pub fn write_all_until(&self, mut buf: &[u8], deadline: Option<Instant>) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_until(buf, deadline)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => buf = &buf[n..],
            }
        }
        Ok(())
    }

    /// Writes from several buffers in one `sendmsg` (a `writev`), waiting at
    /// most until the write deadline.
    pub fn write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let fd = self.fd.as_fd();
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let res = blocking_io(
            &self.reg,
            Interest::Writable,
            self.write_deadline.get(),
            || sys::send_vectored(fd, bufs),
        );
        self.reg.after_write(&res, total);
        res
    }

    /// Sends up to `count` bytes of `file` from `*offset` with `sendfile(2)`,
    /// advancing `*offset`; waits at most until the write deadline. `Ok(0)`
    /// means the file ended early.
    pub fn sendfile(&self, file: &impl AsFd, offset: &mut u64, count: usize) -> io::Result<usize> {
        self.sendfile_until(file, offset, count, self.write_deadline.get())
    }

    /// [`TcpStream::sendfile`] with its own deadline.
    pub fn sendfile_until(
        &self,
        file: &impl AsFd,
        offset: &mut u64,
        count: usize,
        deadline: Option<Instant>,
    ) -> io::Result<usize> {
        let (out, input) = (self.fd.as_fd(), file.as_fd());
        blocking_io(&self.reg, Interest::Writable, deadline, || {
            sys::sendfile(out, input, offset, count)
        })
    }

    /// Waits until the socket is readable (data, EOF or error) without
    /// reading, at most until `deadline`: how an idle connection waits before
    /// it takes a buffer.
    pub fn readable(&self, deadline: Option<Instant>) -> io::Result<()> {
        wait_readable(&self.reg, deadline).map(drop)
    }

    /// Waits until the socket is writable, at most until `deadline`.
    pub fn writable(&self, deadline: Option<Instant>) -> io::Result<()> {
        wait_writable(&self.reg, deadline).map(drop)
    }

    /// Whether the reactor believes a read would not block. No syscall.
    #[inline]
    pub fn is_read_ready(&self) -> bool {
        self.reg.readiness().is_ready_for(Interest::Readable)
    }

    /// One non-blocking read attempt; `WouldBlock` clears readiness, as the
    /// edge-triggered contract requires (and so does a short read).
    #[inline]
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.try_read(buf)
    }

    /// [`TcpStream::try_read`] into uninitialised memory; returns how many
    /// bytes at the start of `buf` are now initialised.
    #[inline]
    pub fn try_read_uninit(&self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        self.reg.try_read_uninit(buf)
    }

    /// One non-blocking write attempt; `WouldBlock` clears readiness (and
    /// so does a short write).
    #[inline]
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.try_send(buf)
    }

    /// [`TcpStream::try_write`] with `MSG_MORE`: more bytes follow at once
    /// (a file body after its head), so the kernel holds a short segment.
    pub fn try_write_more(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.try_send_more(buf)
    }

    /// Reads into `buf` if the fd is ready; otherwise stores `cx`'s waker
    /// for the next edge. For code that waits its own way (with a timer it
    /// keeps across calls, say) through [`crate::wait`].
    pub fn poll_read_uninit(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        self.reg.poll_read_uninit(cx, buf)
    }

    /// Like [`TcpStream::poll_read_uninit`] for a write of some of `buf`.
    pub fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.reg.poll_send(cx, buf)
    }

    /// Like [`TcpStream::poll_read_uninit`] for [`TcpStream::sendfile`] from
    /// the open file `file`.
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

    /// Ready when the socket is readable (data, EOF or error); otherwise
    /// stores `cx`'s waker for the next edge.
    #[inline]
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.reg.poll_ready(cx, Interest::Readable).map(drop)
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

    /// The registration, for code that follows the contract itself.
    pub fn registration(&self) -> &Registration {
        &self.reg
    }

    /// Deregisters and returns the fd (still non-blocking).
    pub fn into_fd(self) -> OwnedFd {
        let TcpStream { reg, fd, .. } = self;
        drop(reg);
        fd
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        TcpStream::read(self, buf)
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        TcpStream::read(self, buf)
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        TcpStream::write(self, buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        TcpStream::write_vectored(self, bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        TcpStream::write(self, buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        TcpStream::write_vectored(self, bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
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
