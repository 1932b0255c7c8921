//! Step 9: the same HTTP server on stackful coroutines.
//!
//! Step 8's connection code, with every `.await` removed. Each connection
//! runs on a coroutine of the workspace's `coroutine` crate: a function
//! with a call stack of its own (an `mmap`ed region with a guard page).
//! When a read would block, the coroutine parks its waker in a reactor
//! like step 6's and *switches stacks* to the scheduler, which runs
//! another coroutine; when the fd is ready, the scheduler switches back
//! and the `read` call simply returns. The code looks like step 1's; it
//! runs like step 8's, on one thread.
//!
//! The parser and the routes are step 8's own functions: they never did
//! I/O, so they do not care which runtime calls them.
//!
//! Exercises (solutions in [`crate::solutions::step09`]):
//!
//! 1. An idle keep-alive timeout with a read deadline
//!    (`TcpStream::read_until`) instead of step 7's `timeout` combinator.
//! 2. Recursion that blocks: read a nested expression `(()(()))` from the
//!    socket with a recursive function that reads as it recurses, and
//!    answer its depth. Why would the `async` version need a `Box`?

use std::io;
use std::net;

use coroutine::net::{TcpListener, TcpStream};

use crate::step08_http::{
    BadRequest, MAX_BODY, MAX_HEAD, Request, encode_head, error_response, head_len, parse_head,
    respond,
};

// ANCHOR: read_request
/// Step 8's `read_request`, blocking-style: the same loop, no `.await`.
pub fn read_request(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
) -> io::Result<Option<Result<Request, BadRequest>>> {
    let mut chunk = [0u8; 4096];
    let len = loop {
        match head_len(buf) {
            Some(len) if len <= MAX_HEAD => break len,
            Some(_) => return Ok(Some(Err(BadRequest::HeadTooLarge))),
            None => {}
        }
        if buf.len() > MAX_HEAD {
            return Ok(Some(Err(BadRequest::HeadTooLarge)));
        }
        // Parks this coroutine (not the thread) until the fd is readable.
        match stream.read(&mut chunk)? {
            0 if buf.is_empty() => return Ok(None),
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let (mut request, body_len) = match parse_head(&buf[..len]) {
        Ok(parsed) => parsed,
        Err(e) => return Ok(Some(Err(e))),
    };
    if body_len > MAX_BODY {
        return Ok(Some(Err(BadRequest::BodyTooLarge)));
    }
    buf.drain(..len);
    while buf.len() < body_len {
        match stream.read(&mut chunk)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
    request.body = buf.drain(..body_len).collect();
    Ok(Some(Ok(request)))
}
// ANCHOR_END: read_request

// ANCHOR: serve
/// Step 8's connection loop, blocking-style.
pub fn serve_connection(stream: TcpStream) -> io::Result<()> {
    let mut buf = Vec::new();
    while let Some(request) = read_request(&stream, &mut buf)? {
        let (response, keep_alive) = match request {
            Ok(request) => (respond(&request), request.keep_alive),
            Err(error) => (error_response(error), false),
        };
        let mut out = encode_head(&response, keep_alive);
        out.extend_from_slice(&response.body);
        stream.write_all(&out)?;
        if !keep_alive {
            break;
        }
    }
    Ok(())
}

/// Serves `conns` connections, one coroutine each, on a coroutine runtime
/// on the current thread; returns once all of them are done.
pub fn serve<H>(listener: net::TcpListener, conns: usize, handler: H) -> io::Result<()>
where
    H: Fn(TcpStream) -> io::Result<()> + Clone + 'static,
{
    coroutine::run(move || {
        let listener = TcpListener::from_std(listener)?;
        let mut connections = Vec::new();
        for _ in 0..conns {
            let (stream, _peer) = listener.accept()?;
            let handler = handler.clone();
            connections.push(coroutine::spawn(move || handler(stream)));
        }
        for connection in connections {
            // A client that vanished, or a handler that panicked, is that
            // connection's problem only.
            let _ = connection.join();
        }
        Ok(())
    })
}
// ANCHOR_END: serve

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step08_http::testing::read_response;
    use crate::testutil::{client, start};
    use std::io::{BufReader, Write};

    #[test]
    fn keep_alive_pipelining_and_a_body() {
        let (addr, done) = start(|l| serve(l, 1, serve_connection));
        let c = client(addr);
        let mut reader = BufReader::new(c.try_clone().unwrap());
        let mut w = c;
        w.write_all(b"GET / HTTP/1.1\r\n\r\nPOST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nab")
            .unwrap();
        let (status, _, body) = read_response(&mut reader);
        assert_eq!(
            (status.as_str(), body.as_slice()),
            ("HTTP/1.1 200 OK", &b"Hello from step 8\n"[..])
        );
        w.write_all(b"c").unwrap();
        assert_eq!(read_response(&mut reader).2, b"abc");
        drop((w, reader));
        done.wait().unwrap();
    }

    #[test]
    fn many_connections_on_one_thread() {
        let (addr, done) = start(|l| serve(l, 20, serve_connection));
        let clients: Vec<_> = (0..20)
            .map(|_| {
                let mut c = client(addr);
                c.write_all(b"GET /missing HTTP/1.0\r\n\r\n").unwrap();
                c
            })
            .collect();
        for c in clients {
            assert_eq!(
                read_response(&mut BufReader::new(c)).0,
                "HTTP/1.1 404 Not Found"
            );
        }
        done.wait().unwrap();
    }
}
