//! `--proxy-protocol` and `--trusted-proxy` at run time: which
//! connections must open with a PROXY header, who may send one, and the
//! pieces every driver uses to read it (the peek, the peer, the admission
//! check, the blocking designs' read loop; the stackless driver's loop is
//! `stackless::proxied`).
//!
//! A connection on a PROXY listener is admitted only from a trusted peer
//! (else closed unread, counted `proxy_untrusted`), then must send a
//! valid header within `--header-timeout` (else closed unanswered,
//! counted `proxy_header`). A v2 `LOCAL` header (a balancer's health
//! check) or a v1 `UNKNOWN` one keeps the socket's own peer. Where the
//! header is whole, the connection carries on with HTTP (or TLS) as on any
//! listener, and its client address is the header's.

use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, RawFd};

use dispatch::ListenAddr;

use crate::blocking::{BlockingIo, Deadline};
use crate::forwarded::{Peer, Trusted};
use crate::proxy_protocol::{HeaderReader, Step};
use site::stats::{ErrorKind, WorkerStats};

/// Which listeners take the PROXY protocol.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Listeners {
    /// None (no `--proxy-protocol`).
    #[default]
    None,
    /// Every listener (`--proxy-protocol` without a value).
    All,
    /// These (`--proxy-protocol=ADDR`, naming `--bind`s).
    Some(Vec<ListenAddr>),
}

/// The PROXY protocol and trusted-proxy settings of the whole server.
#[derive(Debug, Clone, Default)]
pub struct Proxy {
    /// Listeners whose connections open with a PROXY header.
    pub listeners: Listeners,
    /// `--trusted-proxy`.
    pub trusted: Trusted,
}

/// Why a connection was refused before its first request.
#[derive(Debug)]
pub enum Refused {
    /// Its peer is not a trusted proxy.
    Untrusted(Peer),
    /// No valid header in time.
    Header(&'static str),
    /// The socket failed or closed (`proxy_header` too, unless the peer
    /// simply went away).
    Io(io::Error),
}

impl Refused {
    /// Counts it in the stats (a peer that disconnected is not an error).
    pub fn count(&self, stats: &WorkerStats) {
        match self {
            Refused::Untrusted(_) => stats.error(ErrorKind::ProxyUntrusted),
            Refused::Io(e) if crate::driver::is_disconnect(e) => {}
            Refused::Header(_) | Refused::Io(_) => stats.error(ErrorKind::ProxyHeader),
        }
    }

    /// Its trace line.
    pub fn trace(&self, fd: RawFd) {
        reactor::trace!("http", "fd={fd} PROXY refused: {self:?}");
    }
}

impl Proxy {
    /// Whether the connection on `fd` must open with a PROXY header: the
    /// one case that costs a syscall is a mix of listeners with and
    /// without the option (the accepted socket's own address says which
    /// listener it came from).
    pub fn expects_header(&self, fd: RawFd) -> bool {
        match &self.listeners {
            Listeners::None => false,
            Listeners::All => true,
            // SAFETY: `fd` is the caller's connection, open for this call.
            Listeners::Some(addrs) => dispatch::listen_addr(unsafe { BorrowedFd::borrow_raw(fd) })
                .is_ok_and(|local| addrs.iter().any(|l| accepted_on(&local, l))),
        }
    }

    /// Whether the connection on `fd` may send a PROXY header at all.
    pub fn admit(&self, fd: RawFd) -> Result<(), Refused> {
        let peer = peer_of(fd);
        match self.trusted.trusts(peer) {
            true => Ok(()),
            false => Err(Refused::Untrusted(peer)),
        }
    }

    /// The address to log for `req`: the connection's `client` (the PROXY
    /// header's source, if it gave one) or its socket's peer (`peer`,
    /// asked only if needed), then the forwarding headers if that is a
    /// trusted proxy (see [`crate::forwarded`]).
    #[inline]
    pub fn client_of(
        &self,
        client: Option<SocketAddr>,
        fd: RawFd,
        req: &http1::Request,
        peer: impl FnOnce() -> Option<SocketAddr>,
    ) -> Option<SocketAddr> {
        if self.trusted.is_empty() {
            return client.or_else(peer);
        }
        let peer = match client {
            Some(a) => Peer::Ip(a),
            None => peer_of(fd),
        };
        self.trusted.client(peer, req.headers())
    }
}

/// Whether a socket whose own address is `local` was accepted on the
/// listener at `listener` (a wildcard listener's sockets have the
/// address the client reached).
pub(crate) fn accepted_on(local: &ListenAddr, listener: &ListenAddr) -> bool {
    match (local, listener) {
        (ListenAddr::Tcp(l), ListenAddr::Tcp(want)) => {
            l.port() == want.port()
                && (l.ip() == want.ip()
                    || (want.ip().is_unspecified() && l.is_ipv4() == want.is_ipv4()))
        }
        (ListenAddr::Unix(l), ListenAddr::Unix(want)) => l == want,
        _ => false,
    }
}

/// The socket's peer (one `getpeername`).
pub fn peer_of(fd: RawFd) -> Peer {
    // SAFETY: `fd` is the caller's connection, open for this call.
    match reactor::sys::peer_addr(unsafe { BorrowedFd::borrow_raw(fd) }) {
        Ok(a) => Peer::Ip(a),
        // The one other family our listeners accept.
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => Peer::Unix,
        Err(_) => Peer::Unknown,
    }
}

/// Peeks at what has arrived on `fd`, without waiting or consuming it:
/// `Ok(0)` when nothing has (end of stream shows in the read that
/// follows).
pub fn peek(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for `buf.len()` bytes; MSG_PEEK leaves the
    // bytes queued and MSG_DONTWAIT never blocks, whatever the socket's mode.
    let n = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n >= 0 {
        return Ok(n as usize);
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
        _ => Err(e),
    }
}

/// Reads the PROXY header of a blocking-style connection (threads,
/// thread pool, stackful, fork), within `deadline`; the client it names,
/// if any.
pub fn read_blocking<I: BlockingIo>(
    proxy: &Proxy,
    io: &mut I,
    deadline: Deadline,
) -> Result<Option<SocketAddr>, Refused> {
    let fd = io.fd();
    let refused = |r: Refused| {
        r.trace(fd);
        r
    };
    proxy.admit(fd).map_err(refused)?;
    let mut reader = HeaderReader::default();
    loop {
        let peeked = peek(fd, reader.spare()).map_err(|e| refused(Refused::Io(e)))?;
        match reader.step(peeked) {
            Step::Done { consume, source } => {
                read_exact(io, &mut reader, consume, deadline).map_err(refused)?;
                trace_accepted(fd, source);
                return Ok(source);
            }
            Step::Invalid(why) => return Err(refused(Refused::Header(why))),
            Step::Read(max) => {
                let n = read_some(io, &mut reader.spare()[..max], deadline).map_err(refused)?;
                if n == 0 {
                    return Err(refused(Refused::Header(
                        "closed before a whole PROXY header",
                    )));
                }
                reader.consumed(n);
            }
        }
    }
}

/// Reads the PROXY header of an event-loop connection (stackless, uring):
/// peek at what has arrived, then take exactly the header's bytes with
/// `read`, which reads at most its buffer's length and waits for the
/// first byte as the driver waits. The client it names, if any.
pub async fn read_header(
    fd: RawFd,
    mut read: impl AsyncFnMut(&mut [u8]) -> io::Result<usize>,
) -> Result<Option<SocketAddr>, Refused> {
    let mut reader = HeaderReader::default();
    loop {
        let peeked = peek(fd, reader.spare()).map_err(Refused::Io)?;
        let (max, done) = match reader.step(peeked) {
            Step::Invalid(why) => return Err(Refused::Header(why)),
            Step::Read(max) => (max, None),
            Step::Done { consume, source } => (consume, Some(source)),
        };
        // `Read`: at most `max` bytes, waiting for the first. `Done`:
        // exactly `max` more, which have arrived (the peek saw them).
        let mut left = max;
        while left > 0 {
            let n = read(&mut reader.spare()[..left])
                .await
                .map_err(Refused::Io)?;
            if n == 0 {
                return Err(Refused::Header("closed inside the PROXY header"));
            }
            reader.consumed(n);
            left = match done {
                Some(_) => left - n,
                None => 0,
            };
        }
        if let Some(source) = done {
            return Ok(source);
        }
    }
}

/// The trace line of an accepted header: which client the fd stands for.
pub fn trace_accepted(fd: RawFd, source: Option<SocketAddr>) {
    match source {
        Some(a) => reactor::trace!("http", "fd={fd} PROXY client={a}"),
        None => reactor::trace!("http", "fd={fd} PROXY local (peer kept)"),
    }
}

fn read_exact<I: BlockingIo>(
    io: &mut I,
    reader: &mut HeaderReader,
    mut n: usize,
    deadline: Deadline,
) -> Result<(), Refused> {
    while n > 0 {
        let got = read_some(io, &mut reader.spare()[..n], deadline)?;
        if got == 0 {
            return Err(Refused::Header("closed inside the PROXY header"));
        }
        reader.consumed(got);
        n -= got;
    }
    Ok(())
}

fn read_some<I: BlockingIo>(
    io: &mut I,
    buf: &mut [u8],
    deadline: Deadline,
) -> Result<usize, Refused> {
    // SAFETY: `MaybeUninit<u8>` has `u8`'s layout, and the slice is
    // initialised already; `read_uninit` only writes initialised bytes
    // into it (the trait's contract), so it stays initialised.
    let uninit = unsafe { &mut *(std::ptr::from_mut(buf) as *mut [MaybeUninit<u8>]) };
    match io.read_uninit(uninit, deadline) {
        Ok(n) => Ok(n.min(buf.len())),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => Err(Refused::Header(
            "no whole PROXY header within --header-timeout",
        )),
        Err(e) => Err(Refused::Io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_listeners_match_their_sockets() {
        let tcp = |s: &str| ListenAddr::Tcp(s.parse().unwrap());
        assert!(accepted_on(&tcp("127.0.0.1:80"), &tcp("0.0.0.0:80")));
        assert!(accepted_on(&tcp("127.0.0.1:80"), &tcp("127.0.0.1:80")));
        assert!(!accepted_on(&tcp("127.0.0.1:81"), &tcp("0.0.0.0:80")));
        assert!(!accepted_on(&tcp("127.0.0.2:80"), &tcp("127.0.0.1:80")));
        assert!(!accepted_on(&tcp("[::1]:80"), &tcp("0.0.0.0:80")));
        assert!(accepted_on(&tcp("[::1]:80"), &tcp("[::]:80")));
        let unix = |s: &str| ListenAddr::Unix(s.into());
        assert!(accepted_on(&unix("/run/a"), &unix("/run/a")));
        assert!(!accepted_on(&unix("/run/a"), &unix("/run/b")));
        assert!(!accepted_on(&unix("/run/a"), &tcp("0.0.0.0:80")));
    }

    #[test]
    fn peek_sees_without_consuming() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(peek(b.as_raw_fd(), &mut buf).unwrap(), 0, "nothing yet");
        a.write_all(b"PROXY").unwrap();
        assert_eq!(peek(b.as_raw_fd(), &mut buf).unwrap(), 5);
        assert_eq!(peek(b.as_raw_fd(), &mut buf).unwrap(), 5, "still there");
        assert_eq!(peer_of(b.as_raw_fd()), Peer::Unix);
    }
}
