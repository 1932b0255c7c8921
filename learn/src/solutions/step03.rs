//! Step 3's exercises: reads per readiness event, and accepts per edge.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use crate::step02_level_epoll::{Epoll, event_array};
use crate::step03_edge_epoll::{Drain, EDGE_ALL};

/// What one readiness event allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadCount {
    /// `read` calls made for the event, the final `WouldBlock` included.
    pub reads: usize,
    /// Bytes those reads returned.
    pub bytes: usize,
    /// Whether a second wait (100 ms) reported the socket again.
    pub reported_again: bool,
}

// ANCHOR: count_reads
/// Exercise 3.1: a client sends `total` bytes at once; the server side,
/// registered edge-triggered, waits for one event and reads `buf_len`
/// bytes at a time, until `WouldBlock` or just once.
pub fn count_reads(total: usize, buf_len: usize, drain: Drain) -> io::Result<ReadCount> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut client = TcpStream::connect(listener.local_addr()?)?;
    let (mut server, _) = listener.accept()?;
    server.set_nonblocking(true)?;
    let epoll = Epoll::new()?;
    epoll.add(
        server.as_raw_fd(),
        (libc::EPOLLIN | libc::EPOLLET) as u32,
        1,
    )?;
    client.write_all(&vec![b'x'; total])?;
    let mut events = event_array(8);
    epoll.wait(&mut events, 5000)?;
    // Loopback delivers the write at once, but let it all land.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (mut reads, mut bytes, mut buf) = (0, 0, vec![0u8; buf_len]);
    loop {
        reads += 1;
        match server.read(&mut buf) {
            Ok(n) => bytes += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
        if drain == Drain::Once {
            break;
        }
    }
    let reported_again = epoll.wait(&mut events, 100)? > 0;
    Ok(ReadCount {
        reads,
        bytes,
        reported_again,
    })
}
// ANCHOR_END: count_reads

// ANCHOR: accepted_after_one_edge
/// Exercise 3.2: `clients` connect before the server's first wait; returns
/// how many the server accepted on that edge, and whether a second wait
/// (100 ms) reported the listener again.
pub fn accepted_after_one_edge(clients: usize, drain: Drain) -> io::Result<(usize, bool)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let epoll = Epoll::new()?;
    epoll.add(listener.as_raw_fd(), EDGE_ALL, 1)?;
    let addr = listener.local_addr()?;
    // The kernel completes the handshakes; the clients wait in the backlog.
    let _clients: Vec<_> = (0..clients)
        .map(|_| TcpStream::connect(addr))
        .collect::<Result<_, _>>()?;
    let mut events = event_array(8);
    epoll.wait(&mut events, 5000)?;
    let mut accepted = Vec::new();
    loop {
        match listener.accept() {
            Ok((stream, _)) => accepted.push(stream),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
        if drain == Drain::Once {
            break;
        }
    }
    Ok((accepted.len(), epoll.wait(&mut events, 100)? > 0))
}
// ANCHOR_END: accepted_after_one_edge

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draining_reads_everything_then_one_would_block() {
        let count = count_reads(1000, 16, Drain::UntilWouldBlock).unwrap();
        assert_eq!(
            count,
            ReadCount {
                reads: 1000usize.div_ceil(16) + 1,
                bytes: 1000,
                reported_again: false
            }
        );
    }

    #[test]
    fn a_short_drain_strands_bytes_with_no_new_event() {
        let count = count_reads(1000, 16, Drain::Once).unwrap();
        assert_eq!(
            count,
            ReadCount {
                reads: 1,
                bytes: 16,
                reported_again: false
            }
        );
    }

    #[test]
    fn one_edge_announces_every_waiting_client() {
        assert_eq!(
            accepted_after_one_edge(3, Drain::UntilWouldBlock).unwrap(),
            (3, false)
        );
        assert_eq!(accepted_after_one_edge(3, Drain::Once).unwrap(), (1, false));
    }
}
