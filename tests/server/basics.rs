//! Built-in endpoints, methods, HEAD, HTTP/1.0, stats, and handler panics.

use std::io;
use std::time::{Duration, Instant};

use crate::harness::{Client, Server, get_close, get_req, runtimes, wait_until};

#[test]
fn index_page_names_the_endpoints() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let r = server.get("/");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert!(
            r.header("content-type")
                .unwrap_or("")
                .starts_with("text/html"),
            "[{rt}] {r:?}"
        );
        let body = r.text();
        for endpoint in ["plaintext", "json", "stats", "echo", "sleep"] {
            assert!(
                body.contains(&format!("/_httplite/{endpoint}")),
                "[{rt}] index does not name /_httplite/{endpoint}: {body}"
            );
        }
    }
}

#[test]
fn other_paths_are_404() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        for path in [
            "/nope",
            "/index.html",
            "/_httplite/nope",
            "/_httplite/dashboard",
        ] {
            let r = server.get(path);
            assert_eq!(r.status, 404, "[{rt}] GET {path}: {r:?}");
            assert_eq!(r.reason, "Not Found", "[{rt}] GET {path}: {r:?}");
        }
    }
}

#[test]
fn plaintext_and_json() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        let r = c.get("/_httplite/plaintext");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.version, "HTTP/1.1");
        assert_eq!(r.body, b"Hello, World!", "[{rt}]");
        assert!(
            r.header("content-type")
                .unwrap_or("")
                .starts_with("text/plain"),
            "[{rt}] {r:?}"
        );
        assert_eq!(r.reason, "OK", "[{rt}] {r:?}");
        assert_eq!(r.header("content-length"), Some("13"), "[{rt}] {r:?}");
        assert_eq!(r.header_count("content-length"), 1, "[{rt}] {r:?}");
        assert!(r.header("date").is_some(), "[{rt}] no Date: {r:?}");
        // Same connection: keep-alive is the HTTP/1.1 default.
        let r = c.get("/_httplite/json");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, br#"{"message":"Hello, World!"}"#, "[{rt}]");
        assert_eq!(r.header("content-type"), Some("application/json"), "[{rt}]");
    }
}

#[test]
fn wrong_method_is_405_with_allow() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let cases: &[(&str, &str, &str)] = &[
            ("DELETE", "/_httplite/plaintext", "GET"),
            ("POST", "/_httplite/json", "GET"),
            ("PUT", "/_httplite/stats", "GET"),
            ("GET", "/_httplite/echo", "POST"),
            ("POST", "/", "GET"),
        ];
        let mut c = server.connect();
        for (method, path, allowed) in cases {
            c.send(
                format!("{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
                    .as_bytes(),
            );
            let r = c.read_response();
            assert_eq!(r.status, 405, "[{rt}] {method} {path}: {r:?}");
            let allow = r
                .header("allow")
                .unwrap_or_else(|| panic!("[{rt}] 405 without Allow: {r:?}"));
            assert!(
                allow.split(',').any(|m| m.trim() == *allowed),
                "[{rt}] {method} {path}: Allow {allow:?} lacks {allowed}"
            );
        }
        // The connection survives a 405.
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
    }
}

#[test]
fn head_has_content_length_but_no_body() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        // HEAD then GET in one write: if HEAD carried a body, the GET's
        // status line would not be where the parser expects it.
        let mut req = b"HEAD /_httplite/plaintext HTTP/1.1\r\nHost: t\r\n\r\n".to_vec();
        req.extend_from_slice(&get_req("/_httplite/json"));
        c.send(&req);
        let head = c.read_head_response();
        assert_eq!(head.status, 200, "[{rt}] {head:?}");
        assert_eq!(head.header("content-length"), Some("13"), "[{rt}] {head:?}");
        let get = c.read_response();
        assert_eq!(get.status, 200, "[{rt}] {get:?}");
        assert_eq!(get.body, br#"{"message":"Hello, World!"}"#, "[{rt}]");
        // And nothing else follows.
        c.expect_open(Duration::from_millis(100));

        let mut c = server.connect();
        c.send(b"HEAD / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let head = c.read_head_response();
        assert_eq!(head.status, 200, "[{rt}] {head:?}");
        let len: usize = head.header("content-length").unwrap().parse().unwrap();
        assert!(len > 100, "[{rt}] index Content-Length {len}");
        c.expect_closed(Duration::from_secs(2));
    }
}

#[test]
fn http10_without_keep_alive_is_closed_after_the_response() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        c.send(b"GET /_httplite/plaintext HTTP/1.0\r\n\r\n");
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"Hello, World!");
        assert!(
            r.header("transfer-encoding").is_none(),
            "[{rt}] chunked to HTTP/1.0: {r:?}"
        );
        c.expect_closed(Duration::from_secs(2));
    }
}

#[test]
fn http10_with_keep_alive_stays_open() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        for _ in 0..3 {
            c.send(b"GET /_httplite/plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
            let r = c.read_response();
            assert_eq!(r.status, 200, "[{rt}] {r:?}");
            assert!(
                r.header("connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case("keep-alive")),
                "[{rt}] HTTP/1.0 keep-alive answer lacks Connection: keep-alive: {r:?}"
            );
        }
        c.expect_open(Duration::from_millis(100));
    }
}

#[test]
fn connection_close_is_honoured() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        c.send(&get_close("/_httplite/plaintext"));
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert!(r.says_close(), "[{rt}] {r:?}");
        c.expect_closed(Duration::from_secs(2));
        // A request pipelined after `Connection: close` is not answered.
        let mut c = server.connect();
        let mut req = get_close("/_httplite/plaintext");
        req.extend_from_slice(&get_req("/_httplite/json"));
        c.send(&req);
        assert_eq!(c.read_response().body, b"Hello, World!", "[{rt}]");
        c.expect_closed(Duration::from_secs(2));
    }
}

/// Segments the client's kernel has received on `c` (`tcpi_segs_in`).
fn segments_in(c: &Client) -> u32 {
    use std::os::fd::AsRawFd;
    // `struct tcp_info` up to `tcpi_segs_in` (Linux 4.2), read as bytes:
    // the libc crate's struct stops short of it.
    const SEGS_IN: usize = 140;
    let mut info = [0u8; 232];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: the fd is the client's open socket; `info` is writable for
    // `len` bytes, and the kernel writes at most that and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            c.stream().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "TCP_INFO: {}", io::Error::last_os_error());
    assert!(len as usize >= SEGS_IN + 4, "TCP_INFO is {len} bytes");
    u32::from_ne_bytes(info[SEGS_IN..SEGS_IN + 4].try_into().unwrap())
}

/// A connection's last answer and the server's FIN arrive in one segment:
/// a `Connection: close` exchange costs the client exactly the segments of
/// the same answer on a connection that stays open.
#[test]
fn the_last_answer_arrives_with_the_fin() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut open = server.connect();
        assert_eq!(open.get("/_httplite/plaintext").status, 200, "[{rt}]");
        let kept = segments_in(&open);
        let mut closed = server.connect();
        closed.send(&get_close("/_httplite/plaintext"));
        assert_eq!(closed.read_response().status, 200, "[{rt}]");
        closed.expect_closed(Duration::from_secs(2));
        assert_eq!(
            segments_in(&closed),
            kept,
            "[{rt}] the answer and the FIN came in separate segments"
        );
    }
}

#[test]
fn many_requests_on_one_connection() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        for i in 0..200 {
            let r = c.get("/_httplite/plaintext");
            assert_eq!(r.status, 200, "[{rt}] request {i}: {r:?}");
            assert!(!r.says_close(), "[{rt}] request {i}: {r:?}");
        }
        let stats = server.stats();
        assert!(stats.get("requests") >= 200, "[{rt}] {}", stats.0);
    }
}

#[test]
fn stats_document_has_every_field() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        for _ in 0..3 {
            assert_eq!(server.get("/_httplite/plaintext").status, 200);
        }
        assert_eq!(server.get("/nope").status, 404);
        let r = server.get("/_httplite/stats");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert!(
            r.header("content-type").unwrap_or("").contains("json"),
            "[{rt}] {r:?}"
        );
        let s = crate::harness::Stats(r.text());
        assert!(s.0.starts_with('{') && s.0.ends_with('}'), "[{rt}] {}", s.0);
        assert!(s.has("uptime_seconds"), "[{rt}] {}", s.0);
        for path in [
            "connections.open",
            "connections.total",
            "requests",
            "responses.1xx",
            "responses.2xx",
            "responses.3xx",
            "responses.4xx",
            "responses.5xx",
            "timeouts.header",
            "timeouts.idle",
            "timeouts.write",
            "errors.handler_panic",
            "errors.bad_request",
        ] {
            assert!(s.try_get(path).is_some(), "[{rt}] no {path}: {}", s.0);
        }
        assert!(s.has("workers"), "[{rt}] {}", s.0);
        // 3 plaintext + 1 404 + this stats request.
        assert!(s.get("requests") >= 5, "[{rt}] {}", s.0);
        assert!(s.get("connections.total") >= 5, "[{rt}] {}", s.0);
        assert!(s.get("responses.2xx") >= 3, "[{rt}] {}", s.0);
        assert!(s.get("responses.4xx") >= 1, "[{rt}] {}", s.0);
        // Two workers listed (fork: one, the parent and its children).
        let workers = if crate::harness::is_fork(rt) { 1 } else { 2 };
        assert_eq!(s.0.matches("\"id\":").count(), workers, "[{rt}] {}", s.0);
    }
}

#[test]
fn sleep_endpoint_waits() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let t = Instant::now();
        let r = server.get("/_httplite/sleep?ms=200");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert!(
            t.elapsed() >= Duration::from_millis(200),
            "[{rt}] answered after {:?}",
            t.elapsed()
        );
        let r = server.get("/_httplite/sleep");
        assert_eq!(r.status, 400, "[{rt}] sleep without ms: {r:?}");
        let r = server.get("/_httplite/sleep?ms=abc");
        assert_eq!(r.status, 400, "[{rt}] sleep?ms=abc: {r:?}");
    }
}

/// A sleeping request does not hold up another connection's request on the
/// same (or the other) worker: with the sleepers in the server, ten other
/// requests are answered while none of the sleepers has been (they sleep
/// 30 s, so an answer held up behind them would have shown). Checked on the
/// events, not against a time limit.
#[test]
fn sleep_does_not_block_other_connections() {
    for rt in runtimes() {
        // A short grace: the sleepers are abandoned at the end.
        let server = Server::start(rt, &["--shutdown-timeout", "1s"]);
        let mut sleepers: Vec<Client> = (0..4).map(|_| server.connect()).collect();
        for c in &mut sleepers {
            c.send(&get_req("/_httplite/sleep?ms=30000"));
        }
        // The server has read the four sleeps (each stats request counts
        // itself too).
        let mut polls = 0u64;
        let in_server = wait_until(Duration::from_secs(10), Duration::from_millis(5), || {
            polls += 1;
            server.stats().get("requests") >= 4 + polls
        });
        assert!(in_server, "[{rt}] the sleepers never reached the server");
        for _ in 0..10 {
            assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
        }
        for (i, c) in sleepers.iter().enumerate() {
            c.stream().set_nonblocking(true).unwrap();
            let mut b = [0u8; 1];
            let e = c
                .stream()
                .peek(&mut b)
                .expect_err("a sleeper was answered before the other requests");
            assert_eq!(
                e.kind(),
                io::ErrorKind::WouldBlock,
                "[{rt}] sleeper {i}: {e}"
            );
        }
    }
}

#[test]
fn handler_panic_gives_500_and_closes_only_that_connection() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        // Bystanders on both workers, opened before the panic.
        let mut others: Vec<Client> = (0..4).map(|_| server.connect()).collect();
        for o in &mut others {
            assert_eq!(o.get("/_httplite/plaintext").status, 200, "[{rt}]");
        }
        let mut c = server.connect();
        c.send(&get_req("/_httplite/panic"));
        let r = c.read_response();
        assert_eq!(r.status, 500, "[{rt}] {r:?}");
        assert!(
            r.says_close(),
            "[{rt}] 500 without Connection: close: {r:?}"
        );
        c.expect_closed(Duration::from_secs(2));

        for o in &mut others {
            let r = o.get("/_httplite/json");
            assert_eq!(r.status, 200, "[{rt}] bystander after the panic: {r:?}");
        }
        // Pipelined requests after a panic are not answered; new
        // connections are served.
        let mut c = server.connect();
        let mut req = get_req("/_httplite/panic");
        req.extend_from_slice(&get_req("/_httplite/plaintext"));
        c.send(&req);
        assert_eq!(c.read_response().status, 500, "[{rt}]");
        c.expect_closed(Duration::from_secs(2));
        for _ in 0..4 {
            assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
        }
        let stats = server.stats();
        assert_eq!(stats.get("errors.handler_panic"), 2, "[{rt}] {}", stats.0);
    }
}

/// The 500 sent for a panic is a response like any other and is counted
/// under `responses.5xx`.
#[test]
fn handler_panic_is_counted_as_a_5xx_response() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        assert_eq!(server.get("/_httplite/panic").status, 500, "[{rt}]");
        let stats = server.stats();
        assert_eq!(stats.get("errors.handler_panic"), 1, "[{rt}] {}", stats.0);
        assert_eq!(
            stats.get("responses.5xx"),
            1,
            "[{rt}] the 500 answer to a handler panic is not counted in responses.5xx: {}",
            stats.0
        );
    }
}

#[test]
fn panic_endpoint_is_off_without_the_env_var() {
    for rt in runtimes() {
        let server = Server::start_without_test_endpoints(rt, &[]);
        let r = server.get("/_httplite/panic");
        assert_eq!(r.status, 404, "[{rt}] {r:?}");
    }
}

#[test]
fn reuseport_dispatch_serves_too() {
    for rt in runtimes() {
        if crate::harness::is_fork(rt) {
            // Not under fork: the parent accepts, there is no dispatcher.
            crate::harness::assert_fork_refuses(&["--dispatch", "reuseport"], "--dispatch");
            continue;
        }
        let server = Server::start(rt, &["--dispatch", "reuseport"]);
        let mut conns: Vec<Client> = (0..8).map(|_| server.connect()).collect();
        for _ in 0..5 {
            for c in &mut conns {
                let r = c.get("/_httplite/plaintext");
                assert_eq!(r.status, 200, "[{rt}] {r:?}");
                assert_eq!(r.body, b"Hello, World!", "[{rt}]");
            }
        }
        let stats = server.stats();
        assert!(stats.get("requests") >= 40, "[{rt}] {}", stats.0);
        let mut server = server;
        assert_eq!(
            server.terminate().code(),
            Some(0),
            "[{rt}] {}",
            server.stderr()
        );
    }
}

#[test]
fn access_log_has_a_common_log_format_line_per_request() {
    for rt in runtimes() {
        let dir = crate::harness::TempDir::new("access-log");
        let log = dir.path().join("access.log");
        let mut server = Server::start(rt, &["--access-log", log.to_str().unwrap()]);
        assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
        assert_eq!(server.get("/nope").status, 404, "[{rt}]");
        assert_eq!(
            server.terminate().code(),
            Some(0),
            "[{rt}] {}",
            server.stderr()
        );
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "[{rt}] access log: {text:?}");
        assert!(lines[0].starts_with("127.0.0.1 - - ["), "[{rt}] {text:?}");
        assert!(
            lines
                .iter()
                .any(|l| l.ends_with("\"GET /_httplite/plaintext HTTP/1.1\" 200 13")),
            "[{rt}] {text:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("\"GET /nope HTTP/1.1\" 404 ")),
            "[{rt}] {text:?}"
        );
    }
}
