//! Listening sockets: TCP over IPv4 or IPv6, Unix stream sockets, and
//! sockets inherited from whoever started the process (systemd's socket
//! activation, or the previous binary during an upgrade).
//!
//! A [`Listener`] is one address with one listening socket, or, in
//! reuseport mode, one socket per worker (an `SO_REUSEPORT` group). Unix
//! sockets cannot form such a group (a path is bound once), so in reuseport
//! mode every worker watches the same one: the kernel then wakes each of
//! them for every connection and one wins the `accept` (the herd the crate
//! docs describe), which is the price of a Unix socket in that mode.
//!
//! Every fd is non-blocking and close-on-exec, inherited ones included.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::mem::{self, MaybeUninit};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::sys::syscall;

/// What to listen on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A TCP address; an IPv6 one is bound with `IPV6_V6ONLY`, so that
    /// `0.0.0.0:P` and `[::]:P` can both be bound.
    Tcp(SocketAddr),
    /// A Unix stream socket at this path.
    Unix {
        /// The socket file.
        path: PathBuf,
        /// Permission bits given to the socket file before it listens
        /// (`None`: what the umask leaves).
        mode: Option<u32>,
    },
}

/// Where a listener listens, as its socket says (`getsockname`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ListenAddr {
    /// A TCP address (with the real port when 0 was asked for).
    Tcp(SocketAddr),
    /// A Unix socket's path (empty for an unnamed or abstract socket).
    Unix(PathBuf),
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(a) => write!(f, "{a}"),
            ListenAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// One listening address: one socket, or one per worker (reuseport).
#[derive(Debug)]
pub struct Listener {
    fds: Vec<OwnedFd>,
    addr: ListenAddr,
}

impl Listener {
    /// Binds `endpoint`. For TCP with `copies > 1`, binds an `SO_REUSEPORT`
    /// group of `copies` sockets (port 0: the first picks the port, the
    /// others join it); a Unix socket is always one socket.
    pub fn bind(endpoint: &Endpoint, copies: usize, backlog: i32) -> io::Result<Listener> {
        match endpoint {
            Endpoint::Tcp(addr) => {
                let reuse_port = copies > 1;
                let first = tcp_listener(*addr, backlog, reuse_port)?;
                let bound = reactor::sys::local_addr(first.as_fd())?;
                let mut fds = vec![first];
                for _ in 1..copies {
                    fds.push(tcp_listener(bound, backlog, true)?);
                }
                Ok(Listener {
                    fds,
                    addr: ListenAddr::Tcp(bound),
                })
            }
            Endpoint::Unix { path, mode } => {
                let fd = unix_listener(path, *mode, backlog)?;
                Ok(Listener {
                    fds: vec![fd],
                    addr: ListenAddr::Unix(path.clone()),
                })
            }
        }
    }

    /// Takes listening sockets another process made (socket activation, an
    /// upgrade): all must listen on the same address. Makes them
    /// non-blocking and close-on-exec.
    pub fn from_fds(fds: Vec<OwnedFd>) -> io::Result<Listener> {
        let first = fds
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no fds"))?;
        let addr = listen_addr(first.as_fd())?;
        for fd in &fds {
            let fd = fd.as_fd();
            if reactor::sys::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_ACCEPTCONN)? != 1 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("fd {} is not a listening socket", fd.as_raw_fd()),
                ));
            }
            if listen_addr(fd)? != addr {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("fd {} does not listen on {addr}", fd.as_raw_fd()),
                ));
            }
            reactor::sys::set_nonblocking(fd, true)?;
            set_cloexec(fd, true)?;
        }
        Ok(Listener { fds, addr })
    }

    /// Where it listens.
    pub fn addr(&self) -> &ListenAddr {
        &self.addr
    }

    /// Its sockets: one, or one per worker.
    pub fn fds(&self) -> &[OwnedFd] {
        &self.fds
    }

    /// Copies of the sockets (`dup`, close-on-exec): the same kernel
    /// sockets, kept open for as long as the copy lives.
    pub fn try_clone(&self) -> io::Result<Listener> {
        let fds = self
            .fds
            .iter()
            .map(|fd| fd.try_clone())
            .collect::<io::Result<_>>()?;
        Ok(Listener {
            fds,
            addr: self.addr.clone(),
        })
    }

    pub(crate) fn into_fds(self) -> Vec<OwnedFd> {
        self.fds
    }
}

/// Sets or clears `FD_CLOEXEC` (cleared only to pass a socket to a program
/// this process runs).
pub fn set_cloexec(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFD takes no argument and touches no memory.
    let flags = syscall!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) })?;
    let new = match on {
        true => flags | libc::FD_CLOEXEC,
        false => flags & !libc::FD_CLOEXEC,
    };
    if new != flags {
        // SAFETY: F_SETFD takes an int argument; no memory is passed.
        syscall!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, new) })?;
    }
    Ok(())
}

/// The address a socket of any family is bound to.
pub fn listen_addr(fd: BorrowedFd<'_>) -> io::Result<ListenAddr> {
    let domain = reactor::sys::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)?;
    if domain != libc::AF_UNIX {
        return reactor::sys::local_addr(fd).map(ListenAddr::Tcp);
    }
    let mut sun = MaybeUninit::<libc::sockaddr_un>::zeroed();
    let mut len = mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: `sun`/`len` describe a writable sockaddr_un.
    syscall!(unsafe { libc::getsockname(fd.as_raw_fd(), sun.as_mut_ptr().cast(), &mut len) })?;
    // SAFETY: zero-initialised and written by the kernel.
    let sun = unsafe { sun.assume_init() };
    let header = mem::size_of::<libc::sa_family_t>();
    let n = (len as usize)
        .saturating_sub(header)
        .min(sun.sun_path.len());
    let bytes: Vec<u8> = sun.sun_path[..n].iter().map(|&c| c as u8).collect();
    // A path is NUL-terminated; an abstract name starts with NUL.
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(ListenAddr::Unix(PathBuf::from(OsStr::from_bytes(
        &bytes[..end],
    ))))
}

fn tcp_listener(addr: SocketAddr, backlog: i32, reuse_port: bool) -> io::Result<OwnedFd> {
    let sock = reactor::sys::tcp_socket(addr)?;
    let fd = sock.as_fd();
    reactor::sys::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if reuse_port {
        reactor::sys::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    if addr.is_ipv6() {
        // `[::]:P` takes IPv6 only, so `0.0.0.0:P` can be bound beside it.
        reactor::sys::setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
    }
    let (storage, len) = sockaddr_of(&addr);
    // SAFETY: storage/len describe a valid sockaddr for the socket's family.
    syscall!(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    })?;
    // SAFETY: no pointers.
    syscall!(unsafe { libc::listen(fd.as_raw_fd(), backlog) })?;
    Ok(sock)
}

fn sockaddr_of(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for
            // sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn sockaddr_un_of(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut sun: libc::sockaddr_un = unsafe { mem::zeroed() };
    sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    // One byte stays for the terminating NUL.
    if bytes.is_empty() || bytes.len() >= sun.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "unix socket path must be 1 to {} bytes without NUL",
                sun.sun_path.len() - 1
            ),
        ));
    }
    for (dst, &src) in sun.sun_path.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    let len = mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((sun, len as libc::socklen_t))
}

/// Binds and listens on a Unix socket. A socket file left at `path` by a
/// process that is gone (connecting to it is refused) is removed first; one
/// that something still listens on, or a file that is not a socket, is an
/// error (`AddrInUse`).
fn unix_listener(path: &Path, mode: Option<u32>, backlog: i32) -> io::Result<OwnedFd> {
    let (sun, len) = sockaddr_un_of(path)?;
    remove_stale_socket(path)?;
    // SAFETY: no pointers; returns a new fd or -1.
    let fd = syscall!(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: the fd was just created and is ours.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `sun`/`len` describe a valid sockaddr_un.
    syscall!(unsafe { libc::bind(fd, (&sun as *const libc::sockaddr_un).cast(), len) })?;
    // The mode is set before listen(2), so that no client can connect
    // through looser permissions in between.
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    // SAFETY: no pointers.
    syscall!(unsafe { libc::listen(fd.as_raw_fd(), backlog) })?;
    Ok(sock)
}

fn remove_stale_socket(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("something already listens on {}", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::fs::remove_file(path),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_path(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("dispatch-listen-{tag}-{}", std::process::id()))
    }

    #[test]
    fn tcp_group_shares_a_port() {
        let ep = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
        let l = Listener::bind(&ep, 3, 16).unwrap();
        assert_eq!(l.fds().len(), 3);
        let ListenAddr::Tcp(a) = l.addr() else {
            panic!("not tcp")
        };
        assert_ne!(a.port(), 0);
        for fd in l.fds() {
            assert_eq!(listen_addr(fd.as_fd()).unwrap(), *l.addr());
        }
    }

    #[test]
    fn v4_and_v6_wildcards_do_not_collide() {
        let v6 = Listener::bind(&Endpoint::Tcp("[::]:0".parse().unwrap()), 1, 16);
        let Ok(v6) = v6 else { return }; // no IPv6 on this machine
        let ListenAddr::Tcp(a) = v6.addr() else {
            panic!()
        };
        let v4 = SocketAddr::from(([0, 0, 0, 0], a.port()));
        Listener::bind(&Endpoint::Tcp(v4), 1, 16).unwrap();
    }

    #[test]
    fn unix_socket_stale_file_and_live_listener() {
        let path = temp_path("unix");
        let _ = std::fs::remove_file(&path);
        let ep = Endpoint::Unix {
            path: path.clone(),
            mode: Some(0o660),
        };
        let l = Listener::bind(&ep, 4, 16).unwrap();
        assert_eq!(l.fds().len(), 1);
        assert_eq!(l.addr(), &ListenAddr::Unix(path.clone()));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o660);
        // Something listens: not removed.
        let e = Listener::bind(&ep, 1, 16).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        // Gone: the stale file is replaced.
        drop(l);
        let l = Listener::bind(&ep, 1, 16).unwrap();
        let copy = Listener::from_fds(vec![l.fds()[0].try_clone().unwrap()]).unwrap();
        assert_eq!(copy.addr(), l.addr());
        drop((l, copy));
        // Not a socket: left alone.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"x").unwrap();
        assert!(Listener::bind(&ep, 1, 16).is_err());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn inherited_fds_must_listen() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(Listener::from_fds(vec![OwnedFd::from(a)]).is_err());
        assert!(Listener::from_fds(Vec::new()).is_err());
    }
}
