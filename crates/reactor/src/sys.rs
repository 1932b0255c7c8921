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
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

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

/// The hot syscalls (read, send, epoll_wait) made directly.
///
/// glibc's `read`, `send` and `epoll_wait` are pthread cancellation points:
/// each call switches asynchronous cancellation on and off around the
/// syscall, about 60 instructions per call that a Rust program, which never
/// uses `pthread_cancel`, pays for nothing. Even glibc's generic `syscall(2)`
/// shuffles every argument one register over and back. So on x86_64 and
/// aarch64 these wrappers execute the trap instruction themselves (see
/// [`raw::trap`]); elsewhere they call `syscall(2)`. They keep the contracts of the
/// libc functions they replace, `-1` and `errno` on failure included.
pub mod raw {
    use libc::{c_int, c_void, size_t, ssize_t};

    /// `read(2)` without the cancellation-point wrapper.
    ///
    /// # Safety
    /// As `libc::read`: `buf` valid for `count` writable bytes.
    #[inline]
    pub unsafe fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
        // SAFETY: forwarded to the caller's contract.
        unsafe { trap::call(libc::SYS_read, [fd as usize, buf as usize, count, 0, 0, 0]) }
    }

    /// `send(2)` (as `sendto` with no address) without the wrapper.
    ///
    /// # Safety
    /// As `libc::send`: `buf` valid for `len` readable bytes.
    #[inline]
    pub unsafe fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
        // SAFETY: forwarded to the caller's contract; a null address with
        // length 0 makes sendto behave as send.
        unsafe {
            trap::call(
                libc::SYS_sendto,
                [fd as usize, buf as usize, len, flags as usize, 0, 0],
            )
        }
    }

    /// `epoll_wait(2)` (as `epoll_pwait` with no signal mask, which every
    /// architecture has) without the wrapper.
    ///
    /// # Safety
    /// As `libc::epoll_wait`: `events` valid for `maxevents` writes.
    #[inline]
    pub unsafe fn epoll_wait(
        epfd: c_int,
        events: *mut libc::epoll_event,
        maxevents: c_int,
        timeout: c_int,
    ) -> c_int {
        // Sign-extended: the kernel reads the low 32 bits of an int argument.
        let args = [
            epfd as usize,
            events as usize,
            maxevents as usize,
            timeout as isize as usize,
            0, // no signal mask: epoll_pwait is then epoll_wait
            8, // sizeof(sigset_t) as the kernel counts it
        ];
        // SAFETY: forwarded to the caller's contract.
        unsafe { trap::call(libc::SYS_epoll_pwait, args) as c_int }
    }

    /// The system call itself.
    ///
    /// Linux returns `-errno` in the result register for a failed call (a
    /// value in `-4095..=-1`); the C convention these wrappers keep is `-1`
    /// with `errno` set, so a failure stores the code where `errno` lives.
    pub mod trap {
        use libc::c_long;

        /// Calls system call `nr` with six arguments (unused ones are
        /// ignored by the kernel) and returns its result the C way.
        ///
        /// # Safety
        /// The arguments must satisfy system call `nr`'s contract (valid
        /// pointers for what it reads and writes).
        #[inline(always)]
        pub unsafe fn call(nr: c_long, args: [usize; 6]) -> isize {
            // SAFETY: forwarded to the caller's contract.
            let ret = unsafe { raw_call(nr, args) };
            if (-4095..0).contains(&ret) {
                // SAFETY: `__errno_location` returns this thread's errno.
                unsafe { *libc::__errno_location() = -ret as i32 };
                return -1;
            }
            ret
        }

        /// x86_64: number in `rax`, arguments in `rdi rsi rdx r10 r8 r9`
        /// (`r10`, not `rcx`: the `syscall` instruction overwrites `rcx`
        /// with the return address and `r11` with the flags), result in
        /// `rax`.
        #[cfg(target_arch = "x86_64")]
        #[inline(always)]
        unsafe fn raw_call(nr: c_long, a: [usize; 6]) -> isize {
            let ret: isize;
            // SAFETY: the caller upholds the call's contract. No `nomem`:
            // the kernel reads and writes memory through the arguments, so
            // the compiler must not keep values in registers across it.
            unsafe {
                std::arch::asm!(
                    "syscall",
                    inlateout("rax") nr as isize => ret,
                    in("rdi") a[0],
                    in("rsi") a[1],
                    in("rdx") a[2],
                    in("r10") a[3],
                    in("r8") a[4],
                    in("r9") a[5],
                    lateout("rcx") _,
                    lateout("r11") _,
                    options(nostack),
                );
            }
            ret
        }

        /// aarch64: number in `x8`, arguments in `x0`–`x5`, result in `x0`;
        /// `svc #0` traps into the kernel.
        #[cfg(target_arch = "aarch64")]
        #[inline(always)]
        unsafe fn raw_call(nr: c_long, a: [usize; 6]) -> isize {
            let ret: isize;
            // SAFETY: as on x86_64.
            unsafe {
                std::arch::asm!(
                    "svc #0",
                    in("x8") nr,
                    inlateout("x0") a[0] as isize => ret,
                    in("x1") a[1],
                    in("x2") a[2],
                    in("x3") a[3],
                    in("x4") a[4],
                    in("x5") a[5],
                    options(nostack),
                );
            }
            ret
        }

        /// Elsewhere: glibc's generic `syscall(2)`, already the C way (so
        /// it is mapped back to the kernel's convention for `call`).
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        #[inline(always)]
        unsafe fn raw_call(nr: c_long, a: [usize; 6]) -> isize {
            // SAFETY: forwarded to the caller's contract.
            let ret = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) } as isize;
            if ret == -1 {
                -(std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO) as isize)
            } else {
                ret
            }
        }
    }
}

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

/// Flags for [`accept`]: the new fd is non-blocking and close-on-exec.
const ACCEPT_FLAGS: libc::c_int = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;

/// `accept4(2)` with `SOCK_NONBLOCK | SOCK_CLOEXEC`, returning the peer address.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::accept(3);
/// ```
pub fn accept(listener: BorrowedFd<'_>) -> io::Result<(OwnedFd, SocketAddr)> {
    let mut storage = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: storage/len describe a writable sockaddr_storage, as accept4 requires.
    let fd = syscall!(unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            storage.as_mut_ptr().cast(),
            &mut len,
            ACCEPT_FLAGS,
        )
    })?;
    // SAFETY: accept4 succeeded: the fd is new, and the kernel filled `storage`.
    let fd = unsafe { owned(fd) };
    // SAFETY: zero-initialised and (partly) written by the kernel.
    let addr = sockaddr_to_std(unsafe { storage.assume_init_ref() })?;
    Ok((fd, addr))
}

/// `accept4(2)` without asking for the peer address (one copy fewer).
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::accept_fd(3);
/// ```
pub fn accept_fd(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: null address pointers are allowed and mean "don't report it".
    let fd = syscall!(unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            ACCEPT_FLAGS,
        )
    })?;
    // SAFETY: accept4 succeeded, so the fd is new and ours.
    Ok(unsafe { owned(fd) })
}

/// Options for [`tcp_listener`].
#[derive(Debug, Clone, Copy)]
pub struct ListenOptions {
    /// Length of the kernel's accept queue (capped by `net.core.somaxconn`).
    pub backlog: i32,
    /// Set `SO_REUSEPORT` so that several listeners can share the address.
    pub reuse_port: bool,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            backlog: 4096,
            reuse_port: false,
        }
    }
}

/// Creates a non-blocking, close-on-exec TCP listener bound to `addr`, with
/// `SO_REUSEADDR` (and `SO_REUSEPORT` if asked).
pub fn tcp_listener(addr: SocketAddr, opts: ListenOptions) -> io::Result<OwnedFd> {
    let sock = tcp_socket(addr)?;
    setsockopt_int(sock.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if opts.reuse_port {
        setsockopt_int(sock.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    let (storage, len) = std_to_sockaddr(&addr);
    // SAFETY: storage/len describe a valid sockaddr for the socket's family.
    syscall!(unsafe {
        libc::bind(
            sock.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    })?;
    // SAFETY: no pointers.
    syscall!(unsafe { libc::listen(sock.as_raw_fd(), opts.backlog) })?;
    Ok(sock)
}

/// Creates a non-blocking, close-on-exec TCP socket for `addr`'s family.
pub fn tcp_socket(addr: SocketAddr) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: no pointers; returns a new fd or -1.
    let fd = syscall!(unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: the fd was just created and is ours.
    Ok(unsafe { owned(fd) })
}

/// Starts a non-blocking `connect(2)`. `Ok(true)` means connected at once;
/// `Ok(false)` means in progress: wait for writability, then check
/// [`take_socket_error`].
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::connect(3, "127.0.0.1:1".parse().unwrap());
/// ```
pub fn connect(fd: BorrowedFd<'_>, addr: SocketAddr) -> io::Result<bool> {
    let (storage, len) = std_to_sockaddr(&addr);
    // SAFETY: storage/len describe a valid sockaddr for the socket's family.
    match syscall!(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    }) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads and clears `SO_ERROR`: the outcome of a non-blocking connect.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::take_socket_error(3);
/// ```
pub fn take_socket_error(fd: BorrowedFd<'_>) -> io::Result<Option<io::Error>> {
    let err = getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_ERROR)?;
    Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
}

/// Sets an integer socket option.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::setsockopt_int(3, 1, 2, 1);
/// ```
pub fn setsockopt_int(fd: BorrowedFd<'_>, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` is a live int and the length says so.
    syscall!(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            mem::size_of::<i32>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Reads an integer socket option.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::getsockopt_int(3, 1, 4);
/// ```
pub fn getsockopt_int(fd: BorrowedFd<'_>, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: value/len describe a writable int.
    syscall!(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut i32).cast(),
            &mut len,
        )
    })?;
    Ok(value)
}

/// Sets `TCP_NODELAY` (no Nagle delay for small writes).
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::set_nodelay(3, true);
/// ```
pub fn set_nodelay(fd: BorrowedFd<'_>, nodelay: bool) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, i32::from(nodelay))
}

/// Whether `TCP_NODELAY` is set.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::nodelay(3);
/// ```
pub fn nodelay(fd: BorrowedFd<'_>) -> io::Result<bool> {
    Ok(getsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY)? != 0)
}

/// `shutdown(2)`.
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::shutdown(3, std::net::Shutdown::Both);
/// ```
pub fn shutdown(fd: BorrowedFd<'_>, how: std::net::Shutdown) -> io::Result<()> {
    let how = match how {
        std::net::Shutdown::Read => libc::SHUT_RD,
        std::net::Shutdown::Write => libc::SHUT_WR,
        std::net::Shutdown::Both => libc::SHUT_RDWR,
    };
    // SAFETY: no pointers.
    syscall!(unsafe { libc::shutdown(fd.as_raw_fd(), how) })?;
    Ok(())
}

/// The address a socket is bound to (`getsockname`).
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::local_addr(3);
/// ```
pub fn local_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    sock_name(fd, false)
}

/// The address of a socket's peer (`getpeername`).
///
/// The fd is borrowed from its owner, not named by number:
///
/// ```compile_fail,E0308
/// let _ = reactor::sys::peer_addr(3);
/// ```
pub fn peer_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    sock_name(fd, true)
}

fn sock_name(fd: BorrowedFd<'_>, peer: bool) -> io::Result<SocketAddr> {
    let mut storage = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let ptr = storage.as_mut_ptr().cast();
    if peer {
        // SAFETY: storage/len describe a writable sockaddr_storage.
        syscall!(unsafe { libc::getpeername(fd.as_raw_fd(), ptr, &mut len) })?;
    } else {
        // SAFETY: as above.
        syscall!(unsafe { libc::getsockname(fd.as_raw_fd(), ptr, &mut len) })?;
    }
    // SAFETY: zero-initialised and written by the kernel.
    sockaddr_to_std(unsafe { storage.assume_init_ref() })
}

/// Converts a kernel socket address into a `std` one.
fn sockaddr_to_std(storage: &libc::sockaddr_storage) -> io::Result<SocketAddr> {
    match storage.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, and
            // sockaddr_storage is large and aligned enough for it.
            let a = unsafe { &*(storage as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Ok(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(storage as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "unsupported address family",
        )),
    }
}

/// Converts a `std` socket address into the kernel's representation.
fn std_to_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for sockaddr_in.
            let sin = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn sockaddr_round_trip() {
        for s in ["127.0.0.1:8080", "[::1]:443", "[fe80::1%2]:1"] {
            let addr: SocketAddr = s.parse().unwrap();
            let (storage, _) = std_to_sockaddr(&addr);
            assert_eq!(sockaddr_to_std(&storage).unwrap(), addr);
        }
    }

    #[test]
    fn listener_accepts_nonblocking_connections() {
        let l = tcp_listener("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = local_addr(l.as_fd()).unwrap();
        assert_eq!(
            accept_fd(l.as_fd()).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        let _c = std::net::TcpStream::connect(addr).unwrap();
        let (fd, peer) = loop {
            match accept(l.as_fd()) {
                Ok(x) => break x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(peer, _c.local_addr().unwrap());
        // SAFETY: F_GETFL takes no pointer.
        let fl = syscall!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) }).unwrap();
        assert_ne!(fl & libc::O_NONBLOCK, 0);
    }
}
