//! Step 2's exercises: the `EPOLLOUT` busy loop, and a one-slot event array.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::step02_level_epoll::{Epoll, event_array};

// ANCHOR: wakeups
/// Exercise 2.1: how many times `epoll_wait` returns within `window` for
/// one idle, connected socket registered level-triggered for `EPOLLIN`,
/// plus `EPOLLOUT` if `with_epollout`.
///
/// An empty send buffer is "ready to write" for as long as it stays
/// empty, so level-triggered `EPOLLOUT` makes every wait return at once:
/// the thread spins at 100% CPU with nothing to do.
pub fn wakeups(with_epollout: bool, window: Duration) -> io::Result<usize> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let _client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    let epoll = Epoll::new()?;
    let mut interest = libc::EPOLLIN as u32;
    if with_epollout {
        interest |= libc::EPOLLOUT as u32;
    }
    epoll.add(server.as_raw_fd(), interest, 1)?;
    let mut events = event_array(8);
    let (mut count, end) = (0, Instant::now() + window);
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        if epoll.wait(&mut events, left.as_millis().max(1) as i32)? > 0 {
            count += 1;
        }
    }
    Ok(count)
}
// ANCHOR_END: wakeups

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step02_level_epoll::serve_with;
    use crate::testutil::{client, roundtrip, start};

    #[test]
    fn epollout_on_an_idle_socket_spins() {
        let window = Duration::from_millis(50);
        assert_eq!(wakeups(false, window).unwrap(), 0);
        assert!(wakeups(true, window).unwrap() > 100);
    }

    // Exercise 2.2: with room for one event per wait, every ready fd is
    // still served: level-triggered epoll reports the others again on the
    // next wait (and epoll rotates its ready list, so none starves).
    #[test]
    fn one_event_slot_starves_nobody() {
        let (addr, done) = start(|l| serve_with(l, 5, 1));
        let mut cs: Vec<_> = (0..5).map(|_| client(addr)).collect();
        for c in cs.iter_mut() {
            std::io::Write::write_all(c, b"ping").unwrap();
        }
        for c in cs.iter_mut() {
            assert_eq!(roundtrip(c, b"!"), b"p");
            let mut rest = [0u8; 4];
            std::io::Read::read_exact(c, &mut rest).unwrap();
            assert_eq!(&rest, b"ing!");
        }
        drop(cs);
        assert_eq!(done.wait().unwrap(), 25);
    }
}
