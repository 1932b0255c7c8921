//! Step 9's exercises: an idle timeout with a read deadline, and
//! recursion that blocks.

use std::io;
use std::time::{Duration, Instant};

use coroutine::net::TcpStream;

use crate::step08_http::{encode_head, error_response, respond};
use crate::step09_coroutine::read_request;

// ANCHOR: idle
/// Exercise 9.1: step 9's connection loop, closing a connection on which
/// no new request starts within `idle`. A deadline on the read replaces
/// step 7's `timeout` combinator: the read itself gives up (`TimedOut`).
pub fn serve_connection(stream: TcpStream, idle: Duration) -> io::Result<()> {
    let mut buf = Vec::new();
    loop {
        if buf.is_empty() {
            // Only the wait for a new request's first bytes is bounded.
            let mut chunk = [0u8; 4096];
            match stream.read_until(&mut chunk, Some(Instant::now() + idle)) {
                Ok(0) => return Ok(()),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        let Some(request) = read_request(&stream, &mut buf)? else {
            return Ok(());
        };
        let (response, keep_alive) = match request {
            Ok(request) => (respond(&request), request.keep_alive),
            Err(error) => (error_response(error), false),
        };
        let mut out = encode_head(&response, keep_alive);
        out.extend_from_slice(&response.body);
        stream.write_all(&out)?;
        if !keep_alive {
            return Ok(());
        }
    }
}
// ANCHOR_END: idle

// ANCHOR: nested
/// Exercise 9.2: reads one balanced expression such as `(()(()))` from
/// `stream`, a byte at a time, and returns its depth. Each `(` is a
/// recursive call, and every call may block in `read`: the coroutine's
/// stack holds the pending calls. An `async fn` cannot call itself
/// directly: its state machine would contain itself and have no finite
/// size, so each level would need a `Box::pin`.
pub fn read_nested(stream: &TcpStream) -> io::Result<usize> {
    match next_byte(stream)? {
        b'(' => nested_after_open(stream),
        _ => Err(io::ErrorKind::InvalidData.into()),
    }
}

/// The depth of an expression whose `(` was just read.
fn nested_after_open(stream: &TcpStream) -> io::Result<usize> {
    let mut deepest_child = 0;
    loop {
        match next_byte(stream)? {
            b'(' => deepest_child = deepest_child.max(nested_after_open(stream)?),
            b')' => return Ok(deepest_child + 1),
            _ => return Err(io::ErrorKind::InvalidData.into()),
        }
    }
}

fn next_byte(stream: &TcpStream) -> io::Result<u8> {
    let mut byte = [0u8];
    match stream.read(&mut byte)? {
        0 => Err(io::ErrorKind::UnexpectedEof.into()),
        _ => Ok(byte[0]),
    }
}
// ANCHOR_END: nested

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step08_http::testing::read_response;
    use crate::step09_coroutine::serve;
    use crate::testutil::{client, start};
    use std::io::{BufReader, Read, Write};

    #[test]
    fn an_idle_keep_alive_connection_is_closed() {
        let idle = Duration::from_millis(100);
        let (addr, done) = start(move |l| serve(l, 1, move |s| serve_connection(s, idle)));
        let c = client(addr);
        let mut reader = BufReader::new(c.try_clone().unwrap());
        (&c).write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut reader).0, "HTTP/1.1 200 OK");
        let start = Instant::now();
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty() && start.elapsed() >= Duration::from_millis(90));
        done.wait().unwrap();
    }

    #[test]
    fn recursion_across_blocking_reads() {
        let (addr, done) = start(|l| {
            serve(l, 1, |s| {
                let depth = read_nested(&s)?;
                s.write_all(format!("{depth}\n").as_bytes())
            })
        });
        let mut c = client(addr);
        c.write_all(b"(()((").unwrap();
        std::thread::sleep(Duration::from_millis(30)); // the recursion waits mid-way
        c.write_all(b"())))").unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        assert_eq!(answer, "4\n");
        done.wait().unwrap();
    }
}
