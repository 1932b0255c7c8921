//! Step 8: an HTTP/1.1 server on the runtime of steps 5 to 7.
//!
//! One task per connection. The task reads until the buffer holds a whole
//! request head (up to the blank line), parses it by hand, reads the body
//! announced by `Content-Length`, answers, and goes round again on the
//! same connection (keep-alive) unless the client or HTTP/1.0 said
//! otherwise. Bytes that arrived after one request stay in the buffer for
//! the next, so pipelined requests work for free.
//!
//! Routes: `GET /` says hello, `POST /echo` returns the body it got,
//! anything else is 404 (405 for other methods). Heads larger than 8 KiB
//! get 431, bodies larger than 1 MiB get 413; both close the connection.
//!
//! Exercises (solutions in [`crate::solutions::step08`]):
//!
//! 1. `HEAD`: answer `HEAD /` with the headers of `GET /` and no body.
//! 2. An idle keep-alive timeout: close a connection that starts no new
//!    request within a given time (use the `timeout` of exercise 7.1).

use std::future::Future;
use std::io;

use crate::step05_executor::Executor;
use crate::step06_reactor::{TcpListener, TcpStream};

/// The largest request head accepted.
pub const MAX_HEAD: usize = 8 * 1024;
/// The largest request body accepted.
pub const MAX_BODY: usize = 1024 * 1024;

// ANCHOR: parse
/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target, `/` or `/echo?x=1`.
    pub path: String,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

/// Why a request could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRequest {
    /// Not HTTP/1.x, or a malformed line: 400.
    Malformed,
    /// The head exceeds [`MAX_HEAD`]: 431.
    HeadTooLarge,
    /// The body exceeds [`MAX_BODY`]: 413.
    BodyTooLarge,
}

/// The length of the head (through the blank line), once it is complete.
pub fn head_len(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Parses a complete head; returns the request (body still empty) and
/// its `Content-Length`.
pub fn parse_head(head: &[u8]) -> Result<(Request, usize), BadRequest> {
    let head = std::str::from_utf8(head).map_err(|_| BadRequest::Malformed)?;
    let mut lines = head.split("\r\n");
    let mut parts = lines.next().unwrap_or("").split(' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest::Malformed);
    };
    let mut keep_alive = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(BadRequest::Malformed),
    };
    let mut length = 0;
    for line in lines.take_while(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').ok_or(BadRequest::Malformed)?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().map_err(|_| BadRequest::Malformed)?;
        } else if name.eq_ignore_ascii_case("connection") {
            keep_alive = match value.to_ascii_lowercase().as_str() {
                "close" => false,
                "keep-alive" => true,
                _ => keep_alive,
            };
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(BadRequest::Malformed); // chunked bodies: not in this step
        }
    }
    let request = Request {
        method: method.into(),
        path: path.into(),
        keep_alive,
        body: Vec::new(),
    };
    Ok((request, length))
}
// ANCHOR_END: parse

// ANCHOR: read_request
/// Reads the next request; `Ok(None)` when the client closed between
/// requests. `buf` keeps bytes that belong to the following request.
pub async fn read_request(
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
        match stream.read(&mut chunk).await? {
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
        match stream.read(&mut chunk).await? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
    request.body = buf.drain(..body_len).collect();
    Ok(Some(Ok(request)))
}
// ANCHOR_END: read_request

// ANCHOR: respond
/// A response before encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code and its reason, `200 OK`.
    pub status: &'static str,
    /// The body; its length becomes `Content-Length`.
    pub body: Vec<u8>,
}

/// The route table.
pub fn respond(request: &Request) -> Response {
    let (status, body) = match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/") => ("200 OK", b"Hello from step 8\n".to_vec()),
        ("POST", "/echo") => ("200 OK", request.body.clone()),
        ("GET" | "POST", _) => ("404 Not Found", b"not found\n".to_vec()),
        _ => ("405 Method Not Allowed", b"method not allowed\n".to_vec()),
    };
    Response { status, body }
}

/// The status line and headers of `response`.
pub fn encode_head(response: &Response, keep_alive: bool) -> Vec<u8> {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    format!(
        "HTTP/1.1 {}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\nConnection: {connection}\r\n\r\n",
        response.status,
        response.body.len()
    )
    .into_bytes()
}

/// The response for a request that could not be read; the connection closes.
pub fn error_response(error: BadRequest) -> Response {
    let status = match error {
        BadRequest::Malformed => "400 Bad Request",
        BadRequest::HeadTooLarge => "431 Request Header Fields Too Large",
        BadRequest::BodyTooLarge => "413 Content Too Large",
    };
    Response {
        status,
        body: Vec::new(),
    }
}
// ANCHOR_END: respond

// ANCHOR: connection
/// Serves requests on one connection until either side closes it.
pub async fn serve_connection(stream: TcpStream) -> io::Result<()> {
    let mut buf = Vec::new();
    while let Some(request) = read_request(&stream, &mut buf).await? {
        let (response, keep_alive) = match request {
            Ok(request) => (respond(&request), request.keep_alive),
            Err(error) => (error_response(error), false),
        };
        // One write for head and body: no small-packet delay in between.
        let mut out = encode_head(&response, keep_alive);
        out.extend_from_slice(&response.body);
        stream.write_all(&out).await?;
        if !keep_alive {
            break;
        }
    }
    Ok(())
}

/// Accepts `conns` connections, runs `handler` on each in a task of its
/// own, and waits for all of them.
pub async fn serve<H, F>(
    executor: Executor,
    listener: TcpListener,
    conns: usize,
    handler: H,
) -> io::Result<()>
where
    H: Fn(TcpStream) -> F,
    F: Future<Output = io::Result<()>> + Send + 'static,
{
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let stream = listener.accept().await?;
        tasks.push(executor.spawn(handler(stream)));
    }
    for task in tasks {
        let _ = task.await; // a client that vanished is its own problem
    }
    Ok(())
}
// ANCHOR_END: connection

/// Test helpers shared with the solutions' tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::io::{BufRead, BufReader, Read};
    use std::net::TcpStream;

    /// Reads one response: status line, headers, `Content-Length` bytes.
    pub fn read_response(reader: &mut BufReader<TcpStream>) -> (String, Vec<String>, Vec<u8>) {
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        let mut headers = Vec::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end().to_string();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length: ") {
                length = v.parse().unwrap();
            }
            headers.push(line);
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
        (status.trim_end().to_string(), headers, body)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::read_response;
    use super::*;
    use crate::step07_timers::block_on;
    use crate::testutil::{client, start};
    use std::io::{BufReader, Read, Write};

    fn start_http(conns: usize) -> (std::net::SocketAddr, crate::testutil::Done<io::Result<()>>) {
        start(move |l| {
            let ex = Executor::new();
            let listener = TcpListener::new(l)?;
            block_on(&ex, serve(ex.clone(), listener, conns, serve_connection))
        })
    }

    #[test]
    fn parses_a_head() {
        let head =
            b"GET /a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\n";
        assert_eq!(head_len(&head[..]), Some(head.len()));
        let (request, length) = parse_head(head).unwrap();
        assert_eq!(
            (
                request.method.as_str(),
                request.path.as_str(),
                request.keep_alive,
                length
            ),
            ("GET", "/a", true, 3)
        );
        assert_eq!(
            parse_head(b"GET / HTTP/2\r\n\r\n"),
            Err(BadRequest::Malformed)
        );
        assert_eq!(
            parse_head(b"GET /  HTTP/1.1\r\n\r\n"),
            Err(BadRequest::Malformed)
        );
    }

    #[test]
    fn keep_alive_and_pipelining() {
        let (addr, done) = start_http(1);
        let c = client(addr);
        let mut reader = BufReader::new(c.try_clone().unwrap());
        let mut w = c;
        // Two requests in one write, then a third with a body.
        w.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let (status, headers, body) = read_response(&mut reader);
        assert_eq!(
            (status.as_str(), body.as_slice()),
            ("HTTP/1.1 200 OK", &b"Hello from step 8\n"[..])
        );
        assert!(headers.contains(&"Connection: keep-alive".to_string()));
        assert_eq!(read_response(&mut reader).0, "HTTP/1.1 404 Not Found");
        w.write_all(b"POST /echo HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhel")
            .unwrap();
        w.write_all(b"lo").unwrap();
        let (status, headers, body) = read_response(&mut reader);
        assert_eq!(
            (status.as_str(), body.as_slice()),
            ("HTTP/1.1 200 OK", &b"hello"[..])
        );
        assert!(headers.contains(&"Connection: close".to_string()));
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap(); // the server closed
        assert!(rest.is_empty());
        done.wait().unwrap();
    }

    #[test]
    fn errors_close_the_connection() {
        let (addr, done) = start_http(3);
        for (request, status) in [
            (
                b"BREW / HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec(),
                "HTTP/1.1 405 Method Not Allowed",
            ),
            (b"GET / HTTP/3\r\n\r\n".to_vec(), "HTTP/1.1 400 Bad Request"),
            (
                format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD)).into_bytes(),
                "HTTP/1.1 431 Request Header Fields Too Large",
            ),
        ] {
            let mut c = client(addr);
            c.write_all(&request).unwrap();
            let mut reader = BufReader::new(c);
            assert_eq!(read_response(&mut reader).0, status);
        }
        done.wait().unwrap();
    }

    #[test]
    fn many_clients_at_once() {
        let (addr, done) = start_http(20);
        let clients: Vec<_> = (0..20)
            .map(|_| {
                let mut c = client(addr);
                c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
                c
            })
            .collect();
        for c in clients {
            let (status, _, _) = read_response(&mut BufReader::new(c));
            assert_eq!(status, "HTTP/1.1 200 OK");
        }
        done.wait().unwrap();
    }
}
