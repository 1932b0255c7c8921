//! Sockets: listening, accepting, connecting, their options and their
//! addresses, each call on a borrowed fd and each new fd owned, under the
//! same rules as the rest of the syscall layer.

use std::io;
use std::mem::{self, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use super::owned;

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
