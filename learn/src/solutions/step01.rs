//! Step 1's exercises: a line-numbered echo, and scoped threads.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use crate::step01_blocking_echo::handle;

// ANCHOR: handle_lines
/// Exercise 1.1: answers every line with its number, `"1: hello\n"`.
///
/// A `read` returns the bytes that have arrived, which may be half a line
/// or three lines: `BufReader::read_line` keeps the remainder for the
/// next call. Returns the number of lines answered.
pub fn handle_lines(stream: TcpStream) -> io::Result<usize> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut count = 0;
    while reader.read_line(&mut line)? > 0 {
        count += 1;
        write!(writer, "{count}: {line}")?;
        line.clear();
    }
    Ok(count)
}
// ANCHOR_END: handle_lines

// ANCHOR: serve_scoped
/// Exercise 1.2: serves `n` clients at once on scoped threads and returns
/// the total bytes echoed. Scoped threads may borrow (here, nothing but
/// the sum is shared) and are all joined when the scope ends.
pub fn serve_scoped(listener: &TcpListener, n: usize) -> io::Result<usize> {
    thread::scope(|scope| {
        let mut threads = Vec::new();
        for _ in 0..n {
            let (stream, _) = listener.accept()?;
            threads.push(scope.spawn(move || handle(stream).unwrap_or(0)));
        }
        Ok(threads
            .into_iter()
            .map(|t| t.join().expect("echo thread panicked"))
            .sum())
    })
}
// ANCHOR_END: serve_scoped

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{client, roundtrip, start};
    use std::io::Read;

    #[test]
    fn lines_are_numbered_however_they_arrive() {
        let (addr, done) = start(|l| handle_lines(l.accept()?.0));
        let mut c = client(addr);
        c.write_all(b"he").unwrap();
        c.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        c.write_all(b"llo\nworld\n").unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = String::new();
        c.read_to_string(&mut back).unwrap();
        assert_eq!(back, "1: hello\n2: world\n");
        assert_eq!(done.wait().unwrap(), 2);
    }

    #[test]
    fn scoped_threads_serve_clients_together() {
        let (addr, done) = start(|l| serve_scoped(&l, 3));
        let mut cs: Vec<_> = (0..3).map(|_| client(addr)).collect();
        for c in cs.iter_mut().rev() {
            assert_eq!(roundtrip(c, b"1234"), b"1234");
        }
        drop(cs);
        assert_eq!(done.wait().unwrap(), 12);
    }
}
