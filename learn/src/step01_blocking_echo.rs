//! Step 1: a blocking echo server.
//!
//! Every call blocks the thread until it is done: `accept` waits for a
//! client, `read` waits for bytes, `write_all` waits until the kernel took
//! them all. The code reads top to bottom like the protocol. The price:
//! a thread can wait for only one thing at a time, so serving one client
//! at a time makes the second client wait for the first to leave, and a
//! thread per client costs a stack and a kernel thread each.
//!
//! Exercises (solutions in [`crate::solutions::step01`]):
//!
//! 1. `handle_lines(stream)`: reply to every line with its number, `"1: hello\n"`.
//!    A `read` returns whatever bytes have arrived, not a line: frame them.
//! 2. `serve_scoped(listener, n)`: serve `n` clients at once on scoped
//!    threads and return the total number of bytes echoed.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

// ANCHOR: handle
/// Echoes everything the client sends until it closes its side; returns
/// the number of bytes echoed.
pub fn handle(mut stream: TcpStream) -> io::Result<usize> {
    let mut buf = [0u8; 4096];
    let mut total = 0;
    loop {
        // Blocks until at least one byte arrived, or the peer closed (0).
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        // Blocks until the kernel accepted every byte (the socket's send
        // buffer may be full if the client does not read).
        stream.write_all(&buf[..n])?;
        total += n;
    }
}
// ANCHOR_END: handle

// ANCHOR: one_at_a_time
/// Serves `conns` clients one after the other, then returns.
pub fn serve_one_at_a_time(listener: &TcpListener, conns: usize) -> io::Result<()> {
    for _ in 0..conns {
        let (stream, _peer) = listener.accept()?;
        // While this runs, the next client waits in the listen backlog.
        handle(stream)?;
    }
    Ok(())
}
// ANCHOR_END: one_at_a_time

// ANCHOR: threaded
/// Serves `conns` clients, each on a thread of its own, and returns once
/// all of them have left.
pub fn serve_threaded(listener: &TcpListener, conns: usize) -> io::Result<()> {
    let mut threads = Vec::with_capacity(conns);
    for _ in 0..conns {
        let (stream, _peer) = listener.accept()?;
        threads.push(thread::spawn(move || handle(stream)));
    }
    for t in threads {
        // A client that reset its connection is not the server's failure.
        let _ = t.join().expect("echo thread panicked");
    }
    Ok(())
}
// ANCHOR_END: threaded

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{client, roundtrip, start};
    use std::io::ErrorKind;

    #[test]
    fn echoes_one_client() {
        let (addr, done) = start(|l| serve_one_at_a_time(&l, 1));
        let mut c = client(addr);
        assert_eq!(roundtrip(&mut c, b"hello"), b"hello");
        drop(c);
        done.wait().unwrap();
    }

    #[test]
    fn one_at_a_time_makes_the_second_client_wait() {
        let (addr, done) = start(|l| serve_one_at_a_time(&l, 2));
        let mut first = client(addr);
        assert_eq!(roundtrip(&mut first, b"a"), b"a");
        let mut second = client(addr);
        second
            .set_read_timeout(Some(std::time::Duration::from_millis(200)))
            .unwrap();
        second.write_all(b"b").unwrap();
        let mut byte = [0u8; 1];
        let err = second.read(&mut byte).unwrap_err();
        assert!(matches!(
            err.kind(),
            ErrorKind::WouldBlock | ErrorKind::TimedOut
        ));
        drop(first); // now the server gets to the second client
        second
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        second.read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"b");
        drop(second);
        done.wait().unwrap();
    }

    #[test]
    fn threads_serve_two_clients_at_once() {
        let (addr, done) = start(|l| serve_threaded(&l, 2));
        let mut first = client(addr);
        let mut second = client(addr);
        assert_eq!(roundtrip(&mut second, b"second"), b"second");
        assert_eq!(roundtrip(&mut first, b"first"), b"first");
        drop((first, second));
        done.wait().unwrap();
    }
}
