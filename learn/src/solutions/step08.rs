//! Step 8's exercises: `HEAD`, and an idle keep-alive timeout.

use std::io;
use std::time::Duration;

use crate::solutions::step07::timeout;
use crate::step06_reactor::TcpStream;
use crate::step08_http::{Response, encode_head, error_response, read_request, respond};

// ANCHOR: head
/// Exercise 8.1: `HEAD` is `GET` without the body: the same status and
/// headers, `Content-Length` included, so the client knows what a `GET`
/// would return.
pub fn respond_with_head(request: &crate::step08_http::Request) -> (Response, bool) {
    if request.method == "HEAD" {
        let get = crate::step08_http::Request {
            method: "GET".into(),
            ..request.clone()
        };
        (respond(&get), false)
    } else {
        (respond(request), true)
    }
}
// ANCHOR_END: head

// ANCHOR: connection
/// Exercises 8.1 and 8.2: step 8's connection loop, answering `HEAD`, and
/// closing the connection when no new request starts within `idle`.
pub async fn serve_connection(stream: TcpStream, idle: Duration) -> io::Result<()> {
    let mut buf = Vec::new();
    loop {
        // Only the wait for a new request is bounded: a request already
        // under way gets as long as it needs (a real server bounds it too).
        let next = if buf.is_empty() {
            match timeout(idle, first_bytes(&stream, &mut buf)).await {
                Err(_) => return Ok(()),
                Ok(read) => read?,
            }
        } else {
            true
        };
        if !next {
            return Ok(());
        }
        let Some(request) = read_request(&stream, &mut buf).await? else {
            return Ok(());
        };
        let (response, with_body, keep_alive) = match request {
            Ok(request) => {
                let (response, with_body) = respond_with_head(&request);
                (response, with_body, request.keep_alive)
            }
            Err(error) => (error_response(error), true, false),
        };
        let mut out = encode_head(&response, keep_alive);
        if with_body {
            out.extend_from_slice(&response.body);
        }
        stream.write_all(&out).await?;
        if !keep_alive {
            return Ok(());
        }
    }
}
// ANCHOR_END: connection

/// Waits for the first bytes of the next request; `false` at EOF.
async fn first_bytes(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut chunk = [0u8; 4096];
    let n = stream.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step05_executor::Executor;
    use crate::step06_reactor::TcpListener;
    use crate::step07_timers::block_on;
    use crate::step08_http::serve;
    use crate::step08_http::testing::read_response;
    use crate::testutil::{client, start};
    use std::io::{BufReader, Read, Write};
    use std::time::Instant;

    fn start_http(
        conns: usize,
        idle: Duration,
    ) -> (std::net::SocketAddr, crate::testutil::Done<io::Result<()>>) {
        start(move |l| {
            let ex = Executor::new();
            let listener = TcpListener::new(l)?;
            block_on(
                &ex,
                serve(ex.clone(), listener, conns, move |s| {
                    serve_connection(s, idle)
                }),
            )
        })
    }

    #[test]
    fn head_has_the_headers_of_get_and_no_body() {
        let (addr, done) = start_http(1, Duration::from_secs(5));
        let mut c = client(addr);
        c.write_all(b"HEAD / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut all = String::new();
        c.read_to_string(&mut all).unwrap();
        let head =
            "Content-Length: 18\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\n\r\n";
        assert!(
            all.starts_with(&format!("HTTP/1.1 200 OK\r\n{head}HTTP/1.1 200 OK\r\n")),
            "{all}"
        );
        assert!(all.ends_with("\r\n\r\nHello from step 8\n"));
        done.wait().unwrap();
    }

    #[test]
    fn an_idle_keep_alive_connection_is_closed() {
        let (addr, done) = start_http(1, Duration::from_millis(100));
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
}
