//! Step 2: non-blocking sockets and level-triggered epoll.
//!
//! One thread, many clients. Every socket is non-blocking: a `read` with
//! nothing to read returns `WouldBlock` (`EAGAIN`) at once instead of
//! parking the thread. To know *which* socket to try, the thread asks the
//! kernel with `epoll_wait`: "block until one of these fds is ready, and
//! tell me which". Level-triggered (the default) means epoll reports an fd
//! again on every `epoll_wait` for as long as it is ready: unread bytes,
//! a connection in the backlog, room in the send buffer.
//!
//! Exercises (solutions in [`crate::solutions::step02`]):
//!
//! 1. `wakeups(with_epollout, window)`: count how often `epoll_wait`
//!    returns in `window` when an idle connection is registered for
//!    `EPOLLIN | EPOLLOUT`, and for `EPOLLIN` alone. Why does the server
//!    below ask for `EPOLLOUT` only while it has bytes to send?
//! 2. Serve five clients with an event array of one slot
//!    ([`serve_with`]`(listener, 5, 1)`): does a client starve? Why not?

use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// ANCHOR: epoll
/// An epoll instance: the kernel's set of watched fds and their readiness.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// Creates an epoll instance.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: no pointers are passed; the result is checked below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    /// Starts watching `fd` for `events`; `epoll_wait` hands back `token`.
    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Changes the events watched on `fd`.
    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Stops watching `fd` (closing it does too, if no other fd refers to
    /// the same open file).
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn ctl(&self, op: i32, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event { events, u64: token };
        // SAFETY: `event` is valid for the call; the kernel copies it.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut event) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Blocks until an fd is ready or `timeout_ms` passed (-1: no limit),
    /// fills `events` from the front and returns how many it filled.
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        let max = events.len().min(i32::MAX as usize) as i32;
        // SAFETY: the kernel writes at most `max` entries into `events`.
        let n =
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), max, timeout_ms) };
        match n {
            n if n >= 0 => Ok(n as usize),
            // A signal interrupted the wait: report nothing ready.
            _ if io::Error::last_os_error().kind() == ErrorKind::Interrupted => Ok(0),
            _ => Err(io::Error::last_os_error()),
        }
    }
}

/// A zeroed event array of `n` slots for [`Epoll::wait`].
pub fn event_array(n: usize) -> Vec<libc::epoll_event> {
    vec![libc::epoll_event { events: 0, u64: 0 }; n]
}
// ANCHOR_END: epoll

const LISTENER: u64 = u64::MAX;
const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;

/// One client: its socket and the bytes read but not yet written back.
struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
}

/// Serves `conns` clients with an event array of 64 slots; returns the
/// number of bytes echoed.
pub fn serve(listener: TcpListener, conns: usize) -> io::Result<usize> {
    serve_with(listener, conns, 64)
}

// ANCHOR: serve
/// Serves `conns` clients on one thread, asking epoll for at most
/// `max_events` ready fds per wait; returns the number of bytes echoed.
pub fn serve_with(listener: TcpListener, conns: usize, max_events: usize) -> io::Result<usize> {
    listener.set_nonblocking(true)?;
    let epoll = Epoll::new()?;
    epoll.add(listener.as_raw_fd(), IN, LISTENER)?;
    let mut clients: HashMap<u64, Conn> = HashMap::new();
    let mut events = event_array(max_events);
    let (mut closed, mut echoed) = (0, 0);
    while closed < conns {
        let n = epoll.wait(&mut events, -1)?;
        for event in &events[..n] {
            let token = event.u64;
            if token == LISTENER {
                // One accept per report: if more clients wait in the
                // backlog, the listener is still ready and the next wait
                // reports it again (level-triggered).
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(true)?;
                        let fd = stream.as_raw_fd();
                        epoll.add(fd, IN, fd as u64)?;
                        clients.insert(
                            fd as u64,
                            Conn {
                                stream,
                                out: Vec::new(),
                            },
                        );
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                continue;
            }
            let Some(conn) = clients.get_mut(&token) else {
                continue;
            };
            match on_ready(conn, &epoll, token)? {
                Some(sent) => echoed += sent,
                None => {
                    epoll.delete(token as RawFd)?;
                    clients.remove(&token); // drops the stream: closes the fd
                    closed += 1;
                }
            }
        }
    }
    Ok(echoed)
}
// ANCHOR_END: serve

// ANCHOR: on_ready
/// Does one read or one write for a ready client; returns the bytes sent,
/// or `None` when the connection is over.
fn on_ready(conn: &mut Conn, epoll: &Epoll, token: u64) -> io::Result<Option<usize>> {
    let mut buf = [0u8; 4096];
    if conn.out.is_empty() {
        // One read: whatever is left makes the fd ready again next wait.
        match conn.stream.read(&mut buf) {
            Ok(0) => return Ok(None),
            Ok(n) => conn.out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Some(0)),
            Err(_) => return Ok(None), // reset by the peer
        }
    }
    let sent = match conn.stream.write(&conn.out) {
        Ok(n) => n,
        Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
        Err(_) => return Ok(None),
    };
    conn.out.drain(..sent);
    // Level-triggered EPOLLOUT is reported whenever the send buffer has
    // room, which is almost always: ask for it only while bytes wait, and
    // stop reading meanwhile so a client that never reads cannot make us
    // buffer without limit.
    let interest = if conn.out.is_empty() { IN } else { OUT };
    epoll.modify(conn.stream.as_raw_fd(), interest, token)?;
    Ok(Some(sent))
}
// ANCHOR_END: on_ready

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{client, roundtrip, start};

    #[test]
    fn echoes_three_clients_at_once_on_one_thread() {
        let (addr, done) = start(|l| serve(l, 3));
        let mut cs: Vec<_> = (0..3).map(|_| client(addr)).collect();
        for round in 0..3 {
            for (i, c) in cs.iter_mut().enumerate().rev() {
                let msg = format!("client {i} round {round}");
                assert_eq!(roundtrip(c, msg.as_bytes()), msg.as_bytes());
            }
        }
        let expected: usize = (0..3)
            .map(|i| 3 * format!("client {i} round 0").len())
            .sum();
        drop(cs);
        assert_eq!(done.wait().unwrap(), expected);
    }

    #[test]
    fn a_large_message_comes_back_whole() {
        // Bigger than the socket buffers: the server must wait for EPOLLOUT.
        let (addr, done) = start(|l| serve(l, 1));
        let mut c = client(addr);
        let msg: Vec<u8> = (0..4_000_000u32).map(|i| i as u8).collect();
        let mut reader = c.try_clone().unwrap();
        let len = msg.len();
        let back = std::thread::spawn(move || {
            let mut back = vec![0u8; len];
            reader.read_exact(&mut back).unwrap();
            back
        });
        c.write_all(&msg).unwrap();
        assert!(back.join().unwrap() == msg);
        drop(c);
        assert_eq!(done.wait().unwrap(), len);
    }
}
