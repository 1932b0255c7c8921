//! The thin syscall layer: every raw `libc` call of the runtime crates that
//! deals in file descriptors goes through here.
//!
//! Rules this module enforces, so callers cannot forget them:
//! - a failed call (`-1`) becomes an [`io::Error`] through [`syscall!`](crate::syscall);
//! - every fd it creates is `CLOEXEC` and non-blocking, and comes back as an
//!   [`OwnedFd`] so that it is closed exactly once;
//! - every fd it acts on is a [`BorrowedFd`], so that safe code acts only on
//!   fds it holds open, never on a number that may since name something
//!   else (I/O safety). Raw numbers go only to the `unsafe` [`raw`] calls.

use std::io;
use std::mem::{self, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Turns the C convention of a syscall's result (`-1` and `errno`) into an
/// `io::Result` carrying the return value.
///
/// It takes the call as an expression, `syscall!(unsafe { libc::close(fd) })`,
/// so that the `unsafe` block stays at the call site, right under the
/// `// SAFETY:` comment that justifies its arguments.
#[macro_export]
macro_rules! syscall {
    ($call:expr) => {
        $crate::sys::cvt($call)
    };
}

/// Syscall return types that signal failure with `-1`.
pub trait MinusOne: Copy + PartialEq {
    /// The failure value.
    const MINUS_ONE: Self;
}

impl MinusOne for i32 {
    const MINUS_ONE: Self = -1;
}

impl MinusOne for isize {
    const MINUS_ONE: Self = -1;
}

impl MinusOne for i64 {
    const MINUS_ONE: Self = -1;
}

/// `-1` becomes the thread's `errno` as an `io::Error`; anything else is `Ok`.
#[inline]
pub fn cvt<T: MinusOne>(res: T) -> io::Result<T> {
    if res == T::MINUS_ONE {
        Err(io::Error::last_os_error())
    } else {
        Ok(res)
    }
}

pub mod raw;
mod socket;

pub use socket::{
    ListenOptions, accept, accept_fd, connect, getsockopt_int, local_addr, nodelay, peer_addr,
    set_nodelay, setsockopt_int, shutdown, take_socket_error, tcp_listener, tcp_socket,
};

/// Takes ownership of a freshly created fd.
///
/// # Safety
/// `fd` must be an open descriptor that nothing else owns.
unsafe fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: forwarded to the caller's contract.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Puts `fd` in non-blocking mode (and leaves its other flags alone).
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::set_nonblocking(0, true);
/// ```
pub fn set_nonblocking(fd: BorrowedFd<'_>, nonblocking: bool) -> io::Result<()> {
    // SAFETY: F_GETFL takes no pointer; a bad fd only yields EBADF.
    let flags = syscall!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    let new = if nonblocking {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    if new != flags {
        // SAFETY: F_SETFL with an int argument; no memory is passed.
        syscall!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, new) })?;
    }
    Ok(())
}

/// Whether `fd` has `O_NONBLOCK` set.
pub fn is_nonblocking(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: F_GETFL takes no pointer; a bad fd only yields EBADF.
    let flags = syscall!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    Ok(flags & libc::O_NONBLOCK != 0)
}

/// Creates a non-blocking, close-on-exec eventfd with a zero counter.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; the kernel returns a new fd or -1.
    let fd = syscall!(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: the fd was just created and is owned by nobody else.
    Ok(unsafe { owned(fd) })
}

/// Creates a non-blocking, close-on-exec pipe: `(read end, write end)`.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid, writable array of two ints, as pipe2 requires.
    syscall!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both fds are new and owned by us alone.
    Ok(unsafe { (owned(fds[0]), owned(fds[1])) })
}

/// `read(2)` into `buf`; `Ok(0)` means end of file.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::read(3, &mut [0u8; 4]);
/// ```
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let n = syscall!(unsafe { raw::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })?;
    Ok(n as usize)
}

/// `read(2)` into uninitialised memory (a buffer's spare capacity), so that
/// callers need not zero it first. Returns how many bytes, from the start of
/// `buf`, the kernel initialised.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::read_uninit(3, &mut [std::mem::MaybeUninit::uninit(); 4]);
/// ```
pub fn read_uninit(fd: BorrowedFd<'_>, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes; the kernel only
    // writes, never reads, that memory.
    let n = syscall!(unsafe { raw::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })?;
    Ok(n as usize)
}

/// `recv(2)` with `MSG_DONTWAIT` into uninitialised memory: what has
/// arrived, without blocking even on a socket in blocking mode
/// (`WouldBlock` if nothing has). Returns how many bytes, from the start
/// of `buf`, the kernel initialised; `Ok(0)` is the end of the stream.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::recv_nowait(3, &mut [std::mem::MaybeUninit::uninit(); 4]);
/// ```
pub fn recv_nowait(fd: BorrowedFd<'_>, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes; the kernel only
    // writes, never reads, that memory.
    let n = syscall!(unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    })?;
    Ok(n as usize)
}

/// `sendfile(2)`: copies up to `count` bytes of `in_fd` from `*offset` to the
/// socket `out_fd` inside the kernel, advancing `*offset`.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::sendfile(3, 4, &mut 0, 1);
/// ```
pub fn sendfile(
    out_fd: BorrowedFd<'_>,
    in_fd: BorrowedFd<'_>,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    let mut off = i64::try_from(*offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    // SAFETY: `off` is a valid, writable off_t for the duration of the call.
    let n = syscall!(unsafe {
        libc::sendfile(out_fd.as_raw_fd(), in_fd.as_raw_fd(), &mut off, count)
    })?;
    *offset = off as u64;
    Ok(n as usize)
}

/// `pread(2)`: reads into `buf` from `offset` of `fd` without moving its
/// file position (one open file is shared by many connections).
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::pread(3, &mut [0u8; 4], 0);
/// ```
pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let off = i64::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let n =
        syscall!(unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off) })?;
    Ok(n as usize)
}

/// The copying counterpart of [`sendfile`]: `pread(2)`s up to `count` bytes
/// of `in_fd` from `*offset` into `scratch` and sends them to the socket
/// `out_fd`, advancing `*offset` by what the socket took. Returns
/// `(sent, read)`: `read == 0` means the file ended early; `sent < read`
/// means the send buffer is full (the rest is read again next time, so
/// the caller keeps no copy). A full send buffer is `WouldBlock`.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::send_file_copied(3, 4, &mut 0, 1, &mut [0u8; 4]);
/// ```
pub fn send_file_copied(
    out_fd: BorrowedFd<'_>,
    in_fd: BorrowedFd<'_>,
    offset: &mut u64,
    count: usize,
    scratch: &mut [u8],
) -> io::Result<(usize, usize)> {
    let want = count.min(scratch.len());
    let read = pread(in_fd, &mut scratch[..want], *offset)?;
    if read == 0 {
        return Ok((0, 0));
    }
    let sent = send(out_fd, &scratch[..read])?;
    *offset += sent as u64;
    Ok((sent, read))
}

/// `write(2)` from `buf`. For sockets prefer [`send`], which never raises
/// `SIGPIPE`.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::write(3, b"x");
/// ```
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
    let n = syscall!(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) })?;
    Ok(n as usize)
}

/// `send(2)` with `MSG_NOSIGNAL`: a vanished peer gives `EPIPE`, not a signal.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::send(3, b"x");
/// ```
pub fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
    let n = syscall!(unsafe {
        raw::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_NOSIGNAL,
        )
    })?;
    Ok(n as usize)
}

/// [`send`] with `MSG_MORE` as well: the kernel holds a partial segment back
/// for what the caller sends next (a `sendfile` body after its head), so the
/// two leave in full segments, as `TCP_CORK` (nginx's `tcp_nopush`) would
/// make them, without the two `setsockopt` calls a cork costs.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::send_more(3, b"x");
/// ```
pub fn send_more(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    let flags = libc::MSG_NOSIGNAL | libc::MSG_MORE;
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
    let n = syscall!(unsafe { raw::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), flags) })?;
    Ok(n as usize)
}

/// `sendmsg(2)` of several buffers at once with `MSG_NOSIGNAL` (a `writev`
/// that cannot raise `SIGPIPE`).
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::send_vectored(3, &[]);
/// ```
pub fn send_vectored(fd: BorrowedFd<'_>, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr is a valid "no address, no control" header.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    // IoSlice is guaranteed ABI-compatible with `struct iovec` on Unix.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize) as _;
    // SAFETY: msg points at `bufs`, which lives for the call and is only read.
    let n = syscall!(unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) })?;
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn pipe_is_nonblocking_and_cloexec() {
        let (r, w) = pipe().unwrap();
        for fd in [r.as_raw_fd(), w.as_raw_fd()] {
            // SAFETY: F_GETFL takes no pointer.
            let fl = syscall!(unsafe { libc::fcntl(fd, libc::F_GETFL) }).unwrap();
            assert_ne!(fl & libc::O_NONBLOCK, 0);
            // SAFETY: F_GETFD takes no pointer.
            let fdfl = syscall!(unsafe { libc::fcntl(fd, libc::F_GETFD) }).unwrap();
            assert_ne!(fdfl & libc::FD_CLOEXEC, 0);
        }
        let mut buf = [0u8; 4];
        let err = read(r.as_fd(), &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(write(w.as_fd(), b"hi").unwrap(), 2);
        assert_eq!(read(r.as_fd(), &mut buf).unwrap(), 2);
    }

    /// The direct system calls follow the C convention: bytes on success,
    /// `-1` and `errno` on failure.
    #[test]
    fn direct_syscalls_report_like_libc() {
        let (r, w) = pipe().unwrap();
        let mut buf = [0u8; 8];
        // SAFETY: `buf` is valid for 8 writable bytes.
        let n = unsafe { raw::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        assert_eq!(n, -1);
        assert_eq!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EAGAIN)
        );
        assert_eq!(write(w.as_fd(), b"abc").unwrap(), 3);
        // SAFETY: as above.
        let n = unsafe { raw::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        assert_eq!(n, 3);
        assert_eq!(&buf[..3], b"abc");
        // SAFETY: as above; the fd is not open (fds stay far below this).
        let n = unsafe { raw::read(1 << 29, buf.as_mut_ptr().cast(), buf.len()) };
        assert_eq!(n, -1);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EBADF));
        // send on a pipe is not a socket operation.
        // SAFETY: `buf` is valid for 8 readable bytes.
        let n = unsafe { raw::send(w.as_raw_fd(), buf.as_ptr().cast(), 1, libc::MSG_NOSIGNAL) };
        assert_eq!(n, -1);
        assert_eq!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOTSOCK)
        );
    }
}
