//! The answer to a connection the queue has no room for: 503 with
//! `Connection: close`, written at once, then what the client sent is read
//! and discarded for a few ms (never parsed) before the socket is closed.

use std::io;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::{Owner, ThreadPool};

/// How long a refused connection is drained after its 503. Closing a
/// socket with unread input sends a reset instead of a FIN, and a reset
/// can cost the client the 503 (and fails its writes); reading what it
/// sent first makes the close a clean one.
const LINGER: Duration = Duration::from_millis(5);
/// Most bytes read from one refused connection; a client still sending
/// beyond that gets its reset.
const LINGER_BYTES: usize = 8 * 1024;
/// Most refused connections one worker keeps draining at once; beyond,
/// one is closed after reading only what has arrived.
pub(super) const LINGER_MAX: usize = 64;

/// Answers a connection the queue has no room for: a 503 written with one
/// non-blocking send (the socket is new, so its buffer has room), then the
/// write side shut down. The request is never parsed; the caller drains and
/// closes the connection ([`Refused`]).
pub(super) fn reject(fd: OwnedFd, owner: Arc<Owner>, pool: &ThreadPool) -> Refused {
    pool.shared.rejected.fetch_add(1, Ordering::Relaxed);
    let mut wbuf = BytesMut::with_capacity(512);
    site::respond::overloaded(&mut wbuf, &owner.ctx.stats);
    let _ = reactor::sys::send(fd.as_fd(), &wbuf);
    let _ = reactor::sys::shutdown(fd.as_fd(), Shutdown::Write);
    Refused {
        fd,
        owner,
        until: Instant::now() + LINGER,
        read: 0,
    }
}

/// A refused connection whose 503 is written, being drained until the
/// client ends its side, [`LINGER_BYTES`] or [`LINGER`], on the worker's
/// thread without blocking it; then [`Refused::close`]d.
pub(super) struct Refused {
    fd: OwnedFd,
    owner: Arc<Owner>,
    pub(super) until: Instant,
    read: usize,
}

/// What a [`Refused::drain`] left.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Drained {
    /// Nothing more to read for now: the client may still send.
    More,
    /// The client's end of stream, an error, or the byte budget spent.
    Done,
}

impl Refused {
    /// Reads and discards what has arrived, without blocking.
    pub(super) fn drain(&mut self) -> Drained {
        let mut buf = [0u8; 2048];
        while self.read < LINGER_BYTES {
            match reactor::sys::read(self.fd.as_fd(), &mut buf) {
                Ok(0) => return Drained::Done,
                Ok(n) => self.read += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Drained::More,
                Err(_) => return Drained::Done,
            }
        }
        Drained::Done
    }

    /// The socket.
    pub(super) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Closes the socket and counts the close.
    pub(super) fn close(self) {
        drop(self.fd);
        self.owner.closed();
    }
}

/// Connection mode: waits until the port has connections or a refused
/// connection has input or is due, then drains those and closes the ones
/// that are done.
pub(super) fn wait_lingering(port: RawFd, refused: &mut Vec<Refused>) -> io::Result<()> {
    let poll = |fd: RawFd, events: libc::c_short| libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let mut pfds = Vec::with_capacity(refused.len() + 1);
    pfds.push(poll(port, libc::POLLIN));
    let input = libc::POLLIN | libc::POLLRDHUP;
    pfds.extend(refused.iter().map(|r| poll(r.fd(), input)));
    let first = refused
        .iter()
        .map(|r| r.until)
        .min()
        .unwrap_or_else(Instant::now);
    let ms = crate::blocking::poll_timeout_ms(first.saturating_duration_since(Instant::now()));
    // SAFETY: `pfds` holds `pfds.len()` valid pollfds for the call.
    let polled =
        reactor::syscall!(unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) });
    match polled {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    let now = Instant::now();
    // Backwards, so that `swap_remove` moves only entries already seen.
    for i in (0..refused.len()).rev() {
        let r = &mut refused[i];
        let ended = pfds[i + 1].revents != 0 && r.drain() == Drained::Done;
        let due = !ended && now >= r.until;
        if due {
            // One last read, so that nothing that came since is unread.
            r.drain();
        }
        if ended || due {
            refused.swap_remove(i).close();
        }
    }
    Ok(())
}
