//! Malformed and oversized requests: each gets its status, then the
//! connection closes, and the server keeps serving everyone else.

use std::io::Write;
use std::time::Duration;

use crate::harness::{Client, Server, get_req, runtimes};

const CLOSE_WITHIN: Duration = Duration::from_secs(3);

/// Sends `req` on a fresh connection; expects `status` and then a close.
pub(crate) fn expect_error_and_close(server: &Server, req: &[u8], status: u16, what: &str) {
    let rt = server.runtime();
    let mut c = server.connect();
    // The server may answer and close before it has read everything we
    // send; a failed write is fine as long as the answer arrives.
    let _ = c.try_send(req);
    let r = c
        .try_read_response(false)
        .unwrap_or_else(|e| panic!("[{rt}] {what}: no response ({e})"));
    assert_eq!(r.status, status, "[{rt}] {what}: {r:?}");
    assert!(
        r.says_close(),
        "[{rt}] {what}: error response without Connection: close: {r:?}"
    );
    match c.wait_closed(CLOSE_WITHIN) {
        Some(extra) => assert!(
            extra.is_empty(),
            "[{rt}] {what}: bytes after the error response: {:?}",
            String::from_utf8_lossy(&extra)
        ),
        None => panic!("[{rt}] {what}: connection still open {CLOSE_WITHIN:?} after {status}"),
    }
}

#[test]
fn malformed_request_is_400_and_closed_while_others_are_served() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        // A keep-alive bystander on each worker, before and after.
        let mut others: Vec<Client> = (0..4).map(|_| server.connect()).collect();
        for o in &mut others {
            assert_eq!(o.get("/_httplite/plaintext").status, 200, "[{rt}]");
        }
        let cases: &[(&[u8], &str)] = &[
            (b"GARBAGE\r\n\r\n", "no version"),
            (b"GET / HTTP/1.1\r\nHost: t\r\nNo colon here\r\n\r\n", "header without colon"),
            (b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n", "non-numeric Content-Length"),
            (
                b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
                "conflicting Content-Lengths",
            ),
            (b"GET / HTTP/1.1\r\nHo st: t\r\n\r\n", "space in a header name"),
            (b"\x01\x02\x03\x04\r\n\r\n", "binary junk"),
            (
                b"POST /nope HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
                "bad chunk size",
            ),
        ];
        for (req, what) in cases {
            expect_error_and_close(&server, req, 400, what);
        }
        // A bad request after a good one on the same connection.
        let mut c = server.connect();
        let mut req = get_req("/_httplite/plaintext");
        req.extend_from_slice(b"BROKEN\r\n\r\n");
        c.send(&req);
        assert_eq!(c.read_response().status, 200, "[{rt}]");
        assert_eq!(c.read_response().status, 400, "[{rt}]");
        c.expect_closed(CLOSE_WITHIN);

        for o in &mut others {
            let r = o.get("/_httplite/json");
            assert_eq!(r.status, 200, "[{rt}] bystander after bad requests: {r:?}");
        }
        assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
        let stats = server.stats();
        assert!(
            stats.get("errors.bad_request") > cases.len() as u64,
            "[{rt}] {}",
            stats.0
        );
    }
}

#[test]
fn request_line_over_8_kib_is_414() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let long = format!("/{}", "a".repeat(9 * 1024));
        expect_error_and_close(&server, &get_req(&long), 414, "9 KiB request line");
        // Just under the limit is fine (404: no such path).
        let ok = format!("/{}", "a".repeat(8 * 1024 - 100));
        let r = server.get(&ok);
        assert_eq!(r.status, 404, "[{rt}] 8 KiB - 100 request line: {r:?}");
        assert_eq!(server.stats().get("errors.uri_too_long"), 1, "[{rt}]");
    }
}

#[test]
fn header_section_over_16_kib_is_431() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut req = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: t\r\n".to_vec();
        for i in 0..20 {
            req.extend_from_slice(format!("X-Filler-{i}: {}\r\n", "v".repeat(1000)).as_bytes());
        }
        req.extend_from_slice(b"\r\n");
        expect_error_and_close(&server, &req, 431, "20 KB of headers");

        // One huge header, never terminated: refused before the end.
        let mut req = b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: ".to_vec();
        req.extend_from_slice(&vec![b'x'; 40 * 1024]);
        expect_error_and_close(&server, &req, 431, "unterminated 40 KB header");

        // Under the limit is fine.
        let mut req = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: t\r\n".to_vec();
        for i in 0..10 {
            req.extend_from_slice(format!("X-Filler-{i}: {}\r\n", "v".repeat(1000)).as_bytes());
        }
        req.extend_from_slice(b"\r\n");
        let mut c = server.connect();
        c.send(&req);
        assert_eq!(c.read_response().status, 200, "[{rt}] 10 KB of headers");
        assert!(
            server.stats().get("errors.headers_too_large") >= 2,
            "[{rt}]"
        );
    }
}

#[test]
fn more_than_100_headers_is_431() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let with_headers = |n: usize| {
            let mut req = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: t\r\n".to_vec();
            for i in 0..n - 1 {
                req.extend_from_slice(format!("X-H{i}: {i}\r\n").as_bytes());
            }
            req.extend_from_slice(b"\r\n");
            req
        };
        expect_error_and_close(&server, &with_headers(101), 431, "101 headers");
        expect_error_and_close(&server, &with_headers(150), 431, "150 headers");
        let mut c = server.connect();
        c.send(&with_headers(100));
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] exactly 100 headers: {r:?}");
    }
}

#[test]
fn body_over_max_body_is_413() {
    for rt in runtimes() {
        let server = Server::start(rt, &["--max-body", "1KiB"]);
        let body = vec![b'b'; 1025];
        let mut req = format!(
            "POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(&body);
        expect_error_and_close(&server, &req, 413, "1025-byte body, max 1 KiB");

        // Announced but not sent: refused from the head alone.
        expect_error_and_close(
            &server,
            b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100000000\r\n\r\n",
            413,
            "100 MB Content-Length, max 1 KiB",
        );
        // On a path that would ignore the body too.
        expect_error_and_close(
            &server,
            b"POST /nope HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n",
            413,
            "5000-byte body to a 404 path",
        );

        // At the limit: echoed.
        let mut c = server.connect();
        let body = vec![b'k'; 1024];
        c.send(&crate::harness::echo_req(&body));
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] 1024-byte body: {r:?}");
        assert_eq!(r.body, body, "[{rt}]");
        assert!(server.stats().get("errors.body_too_large") >= 3, "[{rt}]");
    }
}

/// A chunked body that grows past `--max-body` is cut off: the server
/// never echoes more than the limit and closes the connection (a 413 if
/// nothing was sent yet; a truncated response if the echo had begun). A
/// connection still open after `IO_TIMEOUT` fails: it is not a "truncation".
#[test]
fn chunked_body_over_max_body_is_cut_off() {
    for rt in runtimes() {
        let server = Server::start(rt, &["--max-body", "1KiB"]);
        // To a handler that discards the body: nothing sent yet, so 413.
        let mut req =
            b"POST /nope HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..4 {
            req.extend_from_slice(format!("200\r\n{}\r\n", "z".repeat(0x200)).as_bytes());
        }
        req.extend_from_slice(b"0\r\n\r\n");
        expect_error_and_close(&server, &req, 413, "2 KiB chunked body to a 404 path");

        // To the echo: at most 1 KiB comes back, then the connection ends.
        let mut c = server.connect();
        let mut req =
            b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec();
        for _ in 0..8 {
            req.extend_from_slice(format!("200\r\n{}\r\n", "z".repeat(0x200)).as_bytes());
        }
        req.extend_from_slice(b"0\r\n\r\n");
        let mut w = c.stream().try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = w.write_all(&req);
        });
        // Everything up to the close; a connection still open after the
        // bound is a failure, not a "truncated" response.
        let raw = c
            .wait_closed(crate::harness::IO_TIMEOUT)
            .unwrap_or_else(|| {
                panic!(
                    "[{rt}] connection still open {:?} after an oversized chunked body",
                    crate::harness::IO_TIMEOUT
                )
            });
        check_cut_off_echo(rt, &raw, 1024);
        writer.join().unwrap();
        assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
    }
}

/// What an echo cut off at `--max-body` (= `limit` bytes) may look like:
/// either a whole `413` with `Connection: close` (nothing was sent yet),
/// or a `200` chunked head whose body is at most `limit` bytes of the
/// request's `z`s and never reaches its last chunk (the close cut it).
fn check_cut_off_echo(rt: &str, raw: &[u8], limit: usize) {
    let text = String::from_utf8_lossy(raw);
    let Some(head_end) = crate::harness::find(raw, b"\r\n\r\n") else {
        panic!("[{rt}] closed without a whole response head: {text:?}");
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let mut body = &raw[head_end + 4..];
    if head.starts_with("http/1.1 413 ") {
        assert!(
            head.contains("\r\nconnection: close"),
            "[{rt}] 413 without Connection: close: {text:?}"
        );
        let cl: usize = head
            .split("\r\n")
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("[{rt}] 413 without Content-Length: {text:?}"));
        assert_eq!(body.len(), cl, "[{rt}] 413 body not whole: {text:?}");
        return;
    }
    assert!(
        head.starts_with("http/1.1 200 ") && head.contains("\r\ntransfer-encoding: chunked"),
        "[{rt}] neither a 413 nor a chunked 200 echo head: {text:?}"
    );
    // Decode the chunks that arrived; the last one may be cut anywhere.
    let mut echoed = 0usize;
    // Stops where the cut was: inside a size line (or right after a
    // chunk), or inside a chunk's data.
    while let Some(eol) = crate::harness::find(body, b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&body[..eol]).unwrap_or("?"), 16)
            .unwrap_or_else(|_| panic!("[{rt}] bad chunk size line in {text:?}"));
        assert_ne!(size, 0, "[{rt}] the cut-off echo completed: {text:?}");
        let data = &body[eol + 2..];
        let got = data.len().min(size);
        assert!(
            data[..got].iter().all(|&b| b == b'z'),
            "[{rt}] echoed bytes are not the request's: {text:?}"
        );
        echoed += got;
        if data.len() < size + 2 {
            break; // cut inside this chunk
        }
        assert_eq!(&data[size..size + 2], b"\r\n", "[{rt}] chunk without CRLF");
        body = &data[size + 2..];
    }
    assert!(
        echoed <= limit,
        "[{rt}] echoed {echoed} bytes, more than --max-body {limit}"
    );
}

#[test]
fn http_2_request_line_is_505() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        expect_error_and_close(
            &server,
            b"GET /_httplite/plaintext HTTP/2.0\r\nHost: t\r\n\r\n",
            505,
            "HTTP/2.0",
        );
        expect_error_and_close(
            &server,
            b"GET /_httplite/plaintext HTTP/3.0\r\nHost: t\r\n\r\n",
            505,
            "HTTP/3.0",
        );
        // The HTTP/2 connection preface: well-formed, another major version.
        expect_error_and_close(
            &server,
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            505,
            "HTTP/2 preface",
        );
        assert!(
            server.stats().get("errors.version_not_supported") == 3,
            "[{rt}]"
        );
    }
}

#[test]
fn content_length_with_transfer_encoding_is_400() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        expect_error_and_close(
            &server,
            b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\
              Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            400,
            "Content-Length + Transfer-Encoding",
        );
        expect_error_and_close(
            &server,
            b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\
              Content-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            400,
            "Transfer-Encoding + Content-Length",
        );
        // The smuggled request after it is never answered (checked by
        // expect_error_and_close: nothing follows the 400).
        expect_error_and_close(
            &server,
            b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\
              Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /_httplite/json HTTP/1.1\r\nHost: t\r\n\r\n",
            400,
            "CL.TE smuggling attempt",
        );
    }
}
