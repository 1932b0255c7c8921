//! Pipelining, partial writes, half-closed clients, request bodies
//! (`Content-Length`, chunked, `Expect: 100-continue`).

use std::io::Write;
use std::time::Duration;

use crate::harness::{Client, Server, echo_req, get_req, runtimes};

/// What the `i`-th of a pipelined batch asks for, and what it must get.
fn mixed_request(i: usize) -> (Vec<u8>, u16, Vec<u8>) {
    match i % 4 {
        0 => {
            let body = format!("request number {i}").into_bytes();
            (echo_req(&body), 200, body)
        }
        1 => (
            get_req("/_httplite/plaintext"),
            200,
            b"Hello, World!".to_vec(),
        ),
        2 => (
            get_req("/_httplite/json"),
            200,
            br#"{"message":"Hello, World!"}"#.to_vec(),
        ),
        _ => (
            get_req(&format!("/missing-{i}")),
            404,
            b"404 Not Found\n".to_vec(),
        ),
    }
}

#[test]
fn thirty_two_pipelined_requests_answered_in_order() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        let mut all = Vec::new();
        let mut expected = Vec::new();
        for i in 0..32 {
            let (req, status, body) = mixed_request(i);
            all.extend_from_slice(&req);
            expected.push((status, body));
        }
        c.send(&all); // one write
        for (i, (status, body)) in expected.iter().enumerate() {
            let r = c.read_response();
            assert_eq!(r.status, *status, "[{rt}] response {i}: {r:?}");
            assert_eq!(
                r.text(),
                String::from_utf8_lossy(body),
                "[{rt}] response {i} out of order or wrong"
            );
        }
        // The connection is still usable, and nothing extra arrived.
        c.expect_open(Duration::from_millis(50));
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
    }
}

#[test]
fn many_pipelined_requests_in_one_write() {
    // Larger than one read buffer and one write batch.
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        let n = 1000;
        let mut all = Vec::new();
        for i in 0..n {
            all.extend_from_slice(&get_req(&format!("/_httplite/plaintext?i={i}")));
        }
        // Write from another thread so that a server that answers while we
        // write cannot deadlock us.
        let mut w = c.stream().try_clone().unwrap();
        let writer = std::thread::spawn(move || w.write_all(&all));
        for i in 0..n {
            let r = c.read_response();
            assert_eq!(r.status, 200, "[{rt}] response {i}: {r:?}");
            assert_eq!(r.body, b"Hello, World!", "[{rt}] response {i}");
        }
        writer.join().unwrap().expect("writing the pipelined batch");
    }
}

#[test]
fn request_written_one_byte_at_a_time() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        c.stream().set_nodelay(true).unwrap();
        let mut bytes = echo_req(b"one byte at a time");
        bytes.extend_from_slice(&get_req("/_httplite/plaintext"));
        bytes.extend_from_slice(
            b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        );
        for b in &bytes {
            c.send(std::slice::from_ref(b));
            // Let most bytes travel as their own segment.
            std::thread::sleep(Duration::from_micros(200));
        }
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"one byte at a time", "[{rt}]");
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"Hello, World!", "[{rt}]");
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"hello world", "[{rt}]");
    }
}

/// One keep-alive connection, one request at a time, moving between the
/// kinds of answer that take different paths through a connection (answered
/// at once; waiting on a timer; reading a body; a head in two pieces; an
/// error that closes): every answer comes back whole and in order.
#[test]
fn one_connection_moves_between_quick_and_waiting_answers() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        c.stream().set_nodelay(true).unwrap();
        for round in 0..3 {
            c.send(&get_req("/_httplite/plaintext"));
            assert_eq!(c.read_response().body, b"Hello, World!", "[{rt}] {round}");
            c.send(&get_req("/_httplite/sleep?ms=20"));
            assert_eq!(c.read_response().status, 200, "[{rt}] {round}");
            c.send(&get_req("/_httplite/json"));
            let r = c.read_response();
            assert_eq!(r.body, br#"{"message":"Hello, World!"}"#, "[{rt}] {round}");
            let body = format!("round {round}").into_bytes();
            c.send(&echo_req(&body));
            assert_eq!(c.read_response().body, body, "[{rt}] {round}");
            let head = get_req("/_httplite/plaintext");
            let (first, rest) = head.split_at(10);
            c.send(first);
            std::thread::sleep(Duration::from_millis(20));
            c.send(rest);
            assert_eq!(c.read_response().body, b"Hello, World!", "[{rt}] {round}");
        }
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n");
        assert_eq!(c.read_response().status, 400, "[{rt}]");
        c.expect_closed(Duration::from_secs(2));
    }
}

#[test]
fn half_closed_client_is_still_answered() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        // One request, then FIN.
        let mut c = server.connect();
        c.send(&get_req("/_httplite/plaintext"));
        c.shutdown_write();
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"Hello, World!");
        c.expect_closed(Duration::from_secs(2));

        // Several pipelined requests with a body, then FIN.
        let mut c = server.connect();
        let mut req = get_req("/_httplite/json");
        req.extend_from_slice(&echo_req(b"before the FIN"));
        req.extend_from_slice(&get_req("/_httplite/plaintext"));
        c.send(&req);
        c.shutdown_write();
        assert_eq!(c.read_response().status, 200, "[{rt}]");
        assert_eq!(c.read_response().body, b"before the FIN", "[{rt}]");
        assert_eq!(c.read_response().body, b"Hello, World!", "[{rt}]");
        c.expect_closed(Duration::from_secs(2));

        // A slow handler: the FIN arrives long before the answer.
        let mut c = server.connect();
        c.send(&get_req("/_httplite/sleep?ms=200"));
        c.shutdown_write();
        let r = c.read_response();
        assert_eq!(
            r.status, 200,
            "[{rt}] half-closed during a slow request: {r:?}"
        );
        c.expect_closed(Duration::from_secs(2));
    }
}

#[test]
fn expect_100_continue_gets_interim_response_first() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        c.send(
            b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\
              Expect: 100-continue\r\n\r\n",
        );
        // The body is not sent until the server says so.
        let interim = c.read_response();
        assert_eq!(interim.status, 100, "[{rt}] {interim:?}");
        c.send(b"hello there");
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"hello there", "[{rt}]");
        // Keep-alive continues.
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");

        // Chunked with Expect too.
        c.send(
            b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\
              Expect: 100-continue\r\n\r\n",
        );
        assert_eq!(c.read_response().status, 100, "[{rt}]");
        c.send(b"3\r\nabc\r\n0\r\n\r\n");
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"abc", "[{rt}]");
    }
}

/// RFC 9110 §10.1.1: a server that gets `Expect: 100-continue` MUST either
/// answer at once with the final status (when the head decides it) or send
/// `100 Continue`; it must not sit waiting for a body the client holds back.
#[test]
fn expect_100_continue_is_answered_when_the_body_is_not_wanted() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        for (path, status) in [("/nope", 404), ("/_httplite/plaintext", 405)] {
            let mut c = server.connect();
            c.send(
                format!(
                    "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\
                     Expect: 100-continue\r\n\r\n"
                )
                .as_bytes(),
            );
            c.stream()
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            let r = c.try_read_response(false).unwrap_or_else(|e| {
                panic!(
                    "[{rt}] POST {path} with Expect: 100-continue: neither 100 Continue nor \
                     a final status within 2 s ({e})"
                )
            });
            c.stream()
                .set_read_timeout(Some(crate::harness::IO_TIMEOUT))
                .unwrap();
            if r.status == 100 {
                c.send(b"hello");
                assert_eq!(c.read_response().status, status, "[{rt}] POST {path}");
            } else {
                assert_eq!(r.status, status, "[{rt}] POST {path}: {r:?}");
            }
        }
    }
}

#[test]
fn chunked_echo_round_trip() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        c.stream().set_nodelay(true).unwrap();
        c.send(
            b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nContent-Type: text/x-test\r\n\
              Transfer-Encoding: chunked\r\n\r\n",
        );
        let pieces: [&[u8]; 5] = [b"first ", b"second ", b"", b"third with ext ", b"last"];
        let mut expected = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            if p.is_empty() {
                continue;
            }
            expected.extend_from_slice(p);
            let ext = if i == 3 { ";name=value" } else { "" };
            c.send(format!("{:x}{ext}\r\n", p.len()).as_bytes());
            std::thread::sleep(Duration::from_millis(5));
            c.send(p);
            c.send(b"\r\n");
        }
        c.send(b"0\r\nX-Trailer: yes\r\n\r\n");
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert!(
            r.chunked,
            "[{rt}] chunked request must get a chunked echo: {r:?}"
        );
        assert!(r.header("content-length").is_none(), "[{rt}] {r:?}");
        assert_eq!(r.text(), String::from_utf8_lossy(&expected), "[{rt}]");
        assert_eq!(r.header("content-type"), Some("text/x-test"), "[{rt}]");

        // A large chunked body, written while we read.
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut req =
            b"POST /_httplite/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec();
        for part in big.chunks(7_000) {
            req.extend_from_slice(format!("{:X}\r\n", part.len()).as_bytes());
            req.extend_from_slice(part);
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"0\r\n\r\n");
        let mut w = c.stream().try_clone().unwrap();
        let writer = std::thread::spawn(move || w.write_all(&req));
        let r = c.read_response();
        writer.join().unwrap().expect("writing the chunked body");
        assert_eq!(r.status, 200, "[{rt}]");
        assert!(r.chunked, "[{rt}]");
        assert!(
            r.body == big,
            "[{rt}] chunked echo of 300,000 bytes differs"
        );
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
    }
}

#[test]
fn content_length_echo_streams_a_large_body() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        let big: Vec<u8> = (0..900_000u32).map(|i| (i * 7 % 256) as u8).collect();
        let req = echo_req(&big);
        let mut w = c.stream().try_clone().unwrap();
        let writer = std::thread::spawn(move || w.write_all(&req));
        let r = c.read_response();
        writer.join().unwrap().expect("writing the body");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert!(!r.chunked, "[{rt}] sized request must get a sized echo");
        assert_eq!(
            r.header("content-length"),
            Some(big.len().to_string().as_str()),
            "[{rt}]"
        );
        assert!(r.body == big, "[{rt}] echo of 900,000 bytes differs");
        // Empty body.
        c.send(&echo_req(b""));
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert!(r.body.is_empty(), "[{rt}]");
        assert_eq!(r.header("content-length"), Some("0"), "[{rt}]");
    }
}

/// A client that sends a body the handler does not read: the body is
/// skipped, and the next pipelined request is answered.
#[test]
fn unread_request_body_is_discarded() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c: Client = server.connect();
        let mut req =
            b"POST /nope HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n0123456789".to_vec();
        req.extend_from_slice(
            b"DELETE /_httplite/plaintext HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
              4\r\nGET \r\n0\r\n\r\n",
        );
        req.extend_from_slice(&get_req("/_httplite/plaintext"));
        c.send(&req);
        assert_eq!(c.read_response().status, 404, "[{rt}]");
        assert_eq!(c.read_response().status, 405, "[{rt}]");
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"Hello, World!", "[{rt}]");
    }
}

/// A GET and a POST whose 6-byte body is still to come (found by fuzzing:
/// the GET's answer sat in the write buffer while the body was awaited).
const GET_THEN_POST_HEAD: &[u8] = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: a\r\n\r\n\
POST /_httplite/plaintext HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\nabc";

#[test]
fn earlier_answers_go_out_while_a_later_body_is_awaited() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        c.send(GET_THEN_POST_HEAD);
        // Without the rest of the POST's body: the GET's answer must come.
        let r = c.read_response();
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "Hello, World!"),
            "[{rt}]"
        );
        c.send(b"def");
        assert_eq!(c.read_response().status, 405, "[{rt}]");
    }
}

#[test]
fn a_client_leaving_mid_body_still_gets_the_earlier_answers() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        c.send(GET_THEN_POST_HEAD);
        c.shutdown_write();
        let rest = c
            .wait_closed(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("[{rt}] connection left open"));
        let text = String::from_utf8_lossy(&rest);
        assert!(
            text.starts_with("HTTP/1.1 200 OK\r\n") && text.contains("\r\n\r\nHello, World!"),
            "[{rt}] {text:?}"
        );
    }
}

#[test]
fn a_bad_body_of_a_head_request_gets_a_400_without_a_body() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        c.send(b"HEAD / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        let r = c.read_head_response();
        assert_eq!(r.status, 400, "[{rt}]");
        assert!(r.says_close(), "[{rt}]");
        // Nothing after the head: a body would read as the next response.
        c.expect_closed(Duration::from_secs(5));
    }
}
