//! Step 3: edge-triggered epoll, and draining until `EAGAIN`.
//!
//! With `EPOLLET`, epoll reports an fd when its readiness *changes*: new
//! bytes arrived, a new client connected, the send buffer gained room.
//! An fd that stays ready is not reported again. The program therefore
//! has to keep reading (or accepting, or writing) until the kernel says
//! `WouldBlock`: only then is a new edge certain to be reported. In return
//! each fd is registered once, for reading and writing, and never
//! modified: fewer syscalls, and the shape the reactor of step 6 needs.
//!
//! [`Drain::Once`] reads once per event, as step 2 did: under
//! edge-triggered epoll the bytes left in the socket are not reported
//! again, and the client waits for an echo that never comes.
//!
//! Exercises (solutions in [`crate::solutions::step03`]):
//!
//! 1. `count_reads(total, buf_len, drain)`: count the reads one readiness
//!    event allows, and show that a short drain leaves bytes unread with
//!    no further event.
//! 2. `accepted_after_one_edge(clients, drain)`: several clients connect
//!    before the server waits; how many does one edge let it accept?

use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};

use crate::step02_level_epoll::{Epoll, event_array};

/// How much work one readiness event gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Read (and accept) until `WouldBlock`: correct under edge-triggering.
    UntilWouldBlock,
    /// Read (and accept) once per event: loses edges.
    Once,
}

/// `EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET`: everything, edge-triggered.
pub const EDGE_ALL: u32 =
    (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;

const LISTENER: u64 = u64::MAX;

struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
}

// ANCHOR: serve
/// Serves `conns` echo clients with edge-triggered epoll, reading at most
/// `buf_len` bytes per `read`; returns the number of bytes echoed.
pub fn serve(
    listener: TcpListener,
    conns: usize,
    drain: Drain,
    buf_len: usize,
) -> io::Result<usize> {
    listener.set_nonblocking(true)?;
    let epoll = Epoll::new()?;
    epoll.add(
        listener.as_raw_fd(),
        (libc::EPOLLIN | libc::EPOLLET) as u32,
        LISTENER,
    )?;
    let mut clients: HashMap<u64, Conn> = HashMap::new();
    let mut events = event_array(64);
    let mut buf = vec![0u8; buf_len];
    let (mut closed, mut echoed) = (0, 0);
    while closed < conns {
        let n = epoll.wait(&mut events, -1)?;
        for event in &events[..n] {
            let token = event.u64;
            if token == LISTENER {
                // The edge announced "one or more" clients: take them all.
                loop {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            stream.set_nonblocking(true)?;
                            let fd = stream.as_raw_fd();
                            epoll.add(fd, EDGE_ALL, fd as u64)?; // once, never modified
                            clients.insert(
                                fd as u64,
                                Conn {
                                    stream,
                                    out: Vec::new(),
                                },
                            );
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e),
                    }
                    if drain == Drain::Once {
                        break;
                    }
                }
                continue;
            }
            let Some(conn) = clients.get_mut(&token) else {
                continue;
            };
            let (sent, open) = on_edge(conn, &mut buf, drain);
            echoed += sent;
            if !open {
                epoll.delete(token as RawFd)?;
                clients.remove(&token);
                closed += 1;
            }
        }
    }
    Ok(echoed)
}
// ANCHOR_END: serve

// ANCHOR: on_edge
/// Works on a client until the kernel says `WouldBlock` (or once, for
/// [`Drain::Once`]); returns the bytes sent and whether it stays open.
fn on_edge(conn: &mut Conn, buf: &mut [u8], drain: Drain) -> (usize, bool) {
    let mut sent = 0;
    loop {
        // Flush first: an EPOLLOUT edge may be why we are here.
        while !conn.out.is_empty() {
            match conn.stream.write(&conn.out) {
                Ok(n) => {
                    conn.out.drain(..n);
                    sent += n;
                }
                // Full send buffer: the next EPOLLOUT edge brings us back.
                Err(e) if e.kind() == ErrorKind::WouldBlock => return (sent, true),
                Err(_) => return (sent, false),
            }
        }
        match conn.stream.read(buf) {
            Ok(0) => return (sent, false),
            Ok(n) => conn.out.extend_from_slice(&buf[..n]),
            // Drained: the kernel will report the next arrival as an edge.
            Err(e) if e.kind() == ErrorKind::WouldBlock => return (sent, true),
            Err(_) => return (sent, false),
        }
        if drain == Drain::Once {
            // The bug: bytes may remain, and no new edge will announce them.
            let n = conn.stream.write(&conn.out).unwrap_or(0);
            conn.out.drain(..n);
            return (sent + n, true);
        }
    }
}
// ANCHOR_END: on_edge

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{client, roundtrip, start};
    use std::time::Duration;

    #[test]
    fn draining_echoes_everything_even_with_a_tiny_buffer() {
        let (addr, done) = start(|l| serve(l, 2, Drain::UntilWouldBlock, 16));
        let mut a = client(addr);
        let mut b = client(addr);
        let msg: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        assert!(roundtrip(&mut a, &msg) == msg);
        assert_eq!(roundtrip(&mut b, b"short"), b"short");
        drop((a, b));
        assert_eq!(done.wait().unwrap(), msg.len() + 5);
    }

    #[test]
    fn reading_once_per_edge_strands_the_rest() {
        // The server is left waiting for an edge that never comes; its
        // thread is abandoned when the test ends.
        let (addr, _done) = start(|l| serve(l, 1, Drain::Once, 16));
        let mut c = client(addr);
        c.write_all(&[b'x'; 100]).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut back = Vec::new();
        let mut buf = [0u8; 100];
        while let Ok(n @ 1..) = c.read(&mut buf) {
            back.extend_from_slice(&buf[..n]);
        }
        assert_eq!(
            back.len(),
            16,
            "one 16-byte read per edge, the other 84 bytes stay"
        );
    }
}
