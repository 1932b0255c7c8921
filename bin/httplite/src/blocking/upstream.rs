//! A connection to an upstream server in blocking style, for the reverse
//! proxy of the blocking designs. The socket is non-blocking either way;
//! what differs between designs is how a call that would block waits
//! ([`UpstreamWaits`]): `poll(2)` on the thread (threads, threadpool, fork),
//! or parking the coroutine until the reactor's next edge (stackful).
//!
//! The connect is non-blocking too: `connect(2)` answers `EINPROGRESS`, the
//! socket turns writable when the handshake ends either way, and
//! `SO_ERROR` says which (`ECONNREFUSED`, `ETIMEDOUT`...), all under
//! `--proxy-timeout-connect`.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Instant;

use bytes::BytesMut;
use reactor::sys;
use site::reverse_proxy::UpstreamAddr;

/// Which side of a tunnel can be read without waiting
/// ([`crate::blocking::BlockingIo::wait_either`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client's connection (bytes, its end, or an error).
    Client,
    /// The upstream's.
    Upstream,
}

/// How a design waits on an upstream socket.
pub trait UpstreamWaits {
    /// What a socket needs to be waited on (a reactor registration, or
    /// nothing for `poll`).
    type Reg;
    /// Readies `fd` (non-blocking, connected or connecting) for waits.
    fn register(fd: BorrowedFd<'_>) -> io::Result<Self::Reg>;
    /// Runs `op` (a non-blocking call on `fd`) until it does not say
    /// `EAGAIN`, waiting for readability (or writability, with `write`)
    /// between tries, until `deadline` (then `TimedOut`).
    fn io<R>(
        reg: &Self::Reg,
        fd: BorrowedFd<'_>,
        write: bool,
        deadline: Instant,
        op: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R>;
    /// Waits until `fd` is writable (a connect has ended), until `deadline`.
    fn wait_writable(reg: &Self::Reg, fd: BorrowedFd<'_>, deadline: Instant) -> io::Result<()>;
}

/// Waits with `poll(2)` on the calling thread (a thread or process that is
/// the connection's alone).
#[derive(Debug)]
pub struct PollWaits;

impl PollWaits {
    fn poll(fd: BorrowedFd<'_>, write: bool, deadline: Instant) -> io::Result<()> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: if write { libc::POLLOUT } else { libc::POLLIN },
            revents: 0,
        };
        let ms = super::poll_timeout_ms(left);
        // SAFETY: `pfd` is one valid pollfd for the duration of the call.
        match reactor::syscall!(unsafe { libc::poll(&mut pfd, 1, ms) }) {
            Ok(0) => Err(io::ErrorKind::TimedOut.into()),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl UpstreamWaits for PollWaits {
    type Reg = ();

    fn register(_: BorrowedFd<'_>) -> io::Result<()> {
        Ok(())
    }

    fn io<R>(
        _: &(),
        fd: BorrowedFd<'_>,
        write: bool,
        deadline: Instant,
        mut op: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            match op() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Self::poll(fd, write, deadline)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    fn wait_writable(_: &(), fd: BorrowedFd<'_>, deadline: Instant) -> io::Result<()> {
        Self::poll(fd, true, deadline)
    }
}

/// Parks the running coroutine until the reactor reports the socket ready
/// (stackful); the worker runs other coroutines meanwhile.
#[derive(Debug)]
pub struct CoroutineWaits;

impl UpstreamWaits for CoroutineWaits {
    type Reg = reactor::Registration;

    fn register(fd: BorrowedFd<'_>) -> io::Result<reactor::Registration> {
        // SAFETY: the registration is kept in the `Upstream` that owns
        // the fd, declared before it so that it is dropped first (and taken
        // out before the fd is given away: `Upstream::into_idle`).
        unsafe { reactor::Reactor::current().register(fd) }
    }

    fn io<R>(
        reg: &reactor::Registration,
        _: BorrowedFd<'_>,
        write: bool,
        deadline: Instant,
        op: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        let interest = if write {
            reactor::Interest::Writable
        } else {
            reactor::Interest::Readable
        };
        coroutine::io::blocking_io(reg, interest, Some(deadline), op)
    }

    fn wait_writable(
        reg: &reactor::Registration,
        _: BorrowedFd<'_>,
        deadline: Instant,
    ) -> io::Result<()> {
        coroutine::io::wait_writable(reg, Some(deadline)).map(drop)
    }
}

/// One connection to an upstream.
pub struct Upstream<W: UpstreamWaits> {
    /// Declared before `fd`: dropped first (see [`CoroutineWaits`]).
    reg: W::Reg,
    fd: OwnedFd,
    /// Taken from the idle pool (a request on it may meet a close that
    /// crossed it on the wire, and be retried).
    pub reused: bool,
}

impl<W: UpstreamWaits> std::fmt::Debug for Upstream<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("fd", &self.fd)
            .field("reused", &self.reused)
            .finish_non_exhaustive()
    }
}

impl<W: UpstreamWaits> Upstream<W> {
    /// Connects to `addr`, giving up at `deadline` (`TimedOut`).
    pub fn connect(addr: &UpstreamAddr, deadline: Instant) -> io::Result<Upstream<W>> {
        let (fd, connected) = start_connect(addr)?;
        let up = Upstream::adopt(fd, false)?;
        if !connected {
            W::wait_writable(&up.reg, up.fd.as_fd(), deadline)?;
            if let Some(e) = sys::take_socket_error(up.fd.as_fd())? {
                return Err(e);
            }
        }
        Ok(up)
    }

    /// Takes a connected non-blocking socket (from the idle pool).
    pub fn adopt(fd: OwnedFd, reused: bool) -> io::Result<Upstream<W>> {
        Ok(Upstream {
            reg: W::register(fd.as_fd())?,
            fd,
            reused,
        })
    }

    /// Reads what the upstream sent into `buf`'s spare room (see
    /// [`crate::upstream::exchange::room_for_answer`]); 0 at end of stream.
    pub fn read(&self, buf: &mut BytesMut, deadline: Instant) -> io::Result<usize> {
        crate::upstream::exchange::room_for_answer(buf);
        let spare: &mut [MaybeUninit<u8>] = buf.spare_capacity_mut();
        let n = W::io(&self.reg, self.fd.as_fd(), false, deadline, || {
            sys::recv_nowait(self.fd.as_fd(), spare)
        })?;
        // SAFETY: `recv_nowait` initialised the first `n` bytes of the
        // spare capacity, and `n` is at most its length.
        unsafe { buf.set_len(buf.len() + n) };
        Ok(n)
    }

    /// Writes all of `bytes`.
    pub fn write_all(&self, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
        while !bytes.is_empty() {
            let n = W::io(&self.reg, self.fd.as_fd(), true, deadline, || {
                sys::send(self.fd.as_fd(), bytes)
            })?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// The socket.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// What waits need of the socket (its reactor registration, under
    /// stackful).
    pub fn waits(&self) -> &W::Reg {
        &self.reg
    }

    /// The socket, for the idle pool (its registration, if any, ends
    /// here).
    pub fn into_idle(self) -> OwnedFd {
        let Upstream { reg, fd, .. } = self;
        drop(reg);
        fd
    }
}

/// A new non-blocking socket with its connect to `addr` begun: the socket,
/// and whether the connect is done already (else it ends when the socket
/// turns writable, and `SO_ERROR` says how). Every design's proxy starts
/// its connects here.
pub(crate) fn start_connect(addr: &UpstreamAddr) -> io::Result<(OwnedFd, bool)> {
    match addr {
        UpstreamAddr::Tcp(a) => {
            let fd = sys::tcp_socket(*a)?;
            let connected = sys::connect(fd.as_fd(), *a)?;
            // A head and then a body are two writes: no Nagle delay
            // between them.
            sys::set_nodelay(fd.as_fd(), true)?;
            Ok((fd, connected))
        }
        UpstreamAddr::Unix(path) => unix_connect(path),
    }
}

/// A non-blocking Unix stream socket connected to `path`: at once, or
/// `EAGAIN` when the server's backlog is full (refused, as nginx takes it).
fn unix_connect(path: &std::path::Path) -> io::Result<(OwnedFd, bool)> {
    use std::os::unix::ffi::OsStrExt as _;
    // SAFETY: an all-zero sockaddr_un is valid; the family and path are
    // set below.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "Unix socket path too long",
        ));
    }
    for (d, &s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    // SAFETY: plain socket(2) call; the result is checked.
    let raw = reactor::syscall!(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: socket(2) succeeded: the fd is new and ours alone.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: `addr` is a valid sockaddr_un of `len` bytes.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    };
    if rc == 0 {
        return Ok((fd, true));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINPROGRESS) => Ok((fd, false)),
        Some(libc::EAGAIN) => Err(io::Error::from_raw_os_error(libc::ECONNREFUSED)),
        _ => Err(e),
    }
}
