//! RFC 9112 / RFC 9110 conformance of the request line, the target's form,
//! `Host` and header fields, over real sockets on every runtime: each
//! malformed request gets its status, `Connection: close` and a close, is
//! counted by kind, and leaves a bystander on the same server unaffected;
//! each valid one is served. `docs/conformance.md` maps each rule here.

use std::time::Duration;

use crate::harness::{Client, Server, TempDir, runtimes};
use crate::limits::expect_error_and_close;

/// Malformed requests, with the status each must get.
const MALFORMED: &[(&[u8], u16, &str)] = &[
    // The request line: one SP between the parts, nothing else.
    (
        b"GET ?x HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "target that is no form",
    ),
    (
        b"GET x HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "bare word target",
    ),
    (
        b"GET http:/x HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "broken absolute-form",
    ),
    (b"GET  HTTP/1.1\r\nHost: t\r\n\r\n", 400, "empty target"),
    (
        b"GET /_httplite/plaintext x HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "space inside the target",
    ),
    (b"GET  / HTTP/1.1\r\nHost: t\r\n\r\n", 400, "two spaces"),
    (b"GET\t/ HTTP/1.1\r\nHost: t\r\n\r\n", 400, "tab separator"),
    (
        b"GET /a\rb HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "bare CR in the target",
    ),
    (b"GET / HTTP/1.1\r\r\nHost: t\r\n\r\n", 400, "CR CR LF"),
    (
        b"GET /a\x01 HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "control in the target",
    ),
    (b"GET /a#b HTTP/1.1\r\nHost: t\r\n\r\n", 400, "fragment"),
    (
        b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "raw non-ASCII target",
    ),
    // The version: exactly HTTP/DIGIT.DIGIT.
    (b"GET / HTTP/1.\r\nHost: t\r\n\r\n", 400, "garbled version"),
    (
        b"GET / http/1.1\r\nHost: t\r\n\r\n",
        400,
        "lower-case version",
    ),
    (
        b"GET / HTTP/11\r\nHost: t\r\n\r\n",
        400,
        "version without a dot",
    ),
    (b"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505, "HTTP/2.0"),
    // Each form with its methods only.
    (
        b"GET * HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "asterisk with GET",
    ),
    (
        b"GET t:443 HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "authority with GET",
    ),
    (
        b"CONNECT / HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "CONNECT with a path",
    ),
    (
        b"GET http://u@t/ HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        "userinfo",
    ),
    // Host.
    (b"GET / HTTP/1.1\r\n\r\n", 400, "HTTP/1.1 without Host"),
    (
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
        400,
        "two Hosts",
    ),
    (
        b"GET / HTTP/1.1\r\nHost: bad host\r\n\r\n",
        400,
        "space in Host",
    ),
    (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "slash in Host"),
    (
        b"GET / HTTP/1.1\r\nHost: u@a\r\n\r\n",
        400,
        "userinfo in Host",
    ),
    (
        b"GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n",
        400,
        "port over 65535",
    ),
    (
        b"GET / HTTP/1.1\r\nHost: a:123456\r\n\r\n",
        400,
        "six-digit port",
    ),
    (
        b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
        400,
        "unclosed IP literal",
    ),
    // Header fields.
    (
        b"GET / HTTP/1.1\r\nHost: t\r\nX : 1\r\n\r\n",
        400,
        "space before colon",
    ),
    (
        b"GET / HTTP/1.1\r\nHost: t\r\nX: 1\r\n 2\r\n\r\n",
        400,
        "obs-fold",
    ),
    (
        b"GET / HTTP/1.1\r\nHost: t\r\nX: 1\x002\r\n\r\n",
        400,
        "NUL in a value",
    ),
    (
        b"GET / HTTP/1.1\r\nHost: t\r\nX: 1\r2\r\n\r\n",
        400,
        "bare CR in a value",
    ),
    (
        b"GET / HTTP/1.1\r\nHost: t\r\nX: 1\x7f\r\n\r\n",
        400,
        "DEL in a value",
    ),
];

#[test]
fn malformed_requests_are_answered_closed_and_counted() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut bystander = server.connect();
        assert_eq!(bystander.get("/_httplite/plaintext").status, 200, "[{rt}]");
        for (req, status, what) in MALFORMED {
            expect_error_and_close(&server, req, *status, what);
        }
        let stats = server.stats();
        let count = |s: u16| MALFORMED.iter().filter(|c| c.1 == s).count() as u64;
        assert_eq!(
            stats.get("errors.bad_request"),
            count(400),
            "[{rt}] {}",
            stats.0
        );
        assert_eq!(
            stats.get("errors.version_not_supported"),
            count(505),
            "[{rt}] {}",
            stats.0
        );
        let r = bystander.get("/_httplite/json");
        assert_eq!(
            r.status, 200,
            "[{rt}] bystander after malformed requests: {r:?}"
        );
    }
}

/// Sends one request and reads its answer (not HEAD).
fn exchange(c: &mut Client, req: &[u8]) -> crate::harness::Response {
    c.send(req);
    c.read_response()
}

#[test]
fn valid_requests_of_every_form_are_served() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut c = server.connect();
        // absolute-form: routed by its path, its authority wins over a
        // Host that disagrees (not an error).
        let r = exchange(
            &mut c,
            b"GET http://elsewhere.example:81/_httplite/plaintext HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "Hello, World!"),
            "[{rt}] {r:?}"
        );
        // A later minor version is served as HTTP/1.1.
        let r = exchange(
            &mut c,
            b"GET /_httplite/plaintext HTTP/1.2\r\nHost: t\r\n\r\n",
        );
        assert_eq!(
            (r.status, r.version.as_str()),
            (200, "HTTP/1.1"),
            "[{rt}] {r:?}"
        );
        assert!(!r.says_close(), "[{rt}] {r:?}");
        // Valid Host shapes the fast path leaves to the general one.
        for host in ["[::1]:8080", "a_b.example", "", "  t\t", "t:"] {
            let req = format!("GET /_httplite/plaintext HTTP/1.1\r\nHost: {host}\r\n\r\n");
            let r = exchange(&mut c, req.as_bytes());
            assert_eq!(r.status, 200, "[{rt}] Host {host:?}: {r:?}");
        }
        // asterisk-form: the server's methods, no body.
        let r = exchange(&mut c, b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(
            r.header("allow"),
            Some("GET, HEAD, POST, PUT, DELETE, OPTIONS"),
            "[{rt}]"
        );
        assert_eq!(r.header("content-length"), Some("0"), "[{rt}] {r:?}");
        assert!(r.body.is_empty(), "[{rt}]");
        // OPTIONS on a path: what that path supports.
        for (path, allow) in [
            ("/_httplite/plaintext", "GET, HEAD, OPTIONS"),
            ("/_httplite/echo", "POST, PUT, OPTIONS"),
            ("/_httplite/jobs", "POST, OPTIONS"),
            ("/_httplite/jobs/7", "GET, HEAD, DELETE, OPTIONS"),
            ("/", "GET, HEAD, OPTIONS"),
        ] {
            let req = format!("OPTIONS {path} HTTP/1.1\r\nHost: t\r\n\r\n");
            let r = exchange(&mut c, req.as_bytes());
            assert_eq!(
                (r.status, r.header("allow")),
                (200, Some(allow)),
                "[{rt}] {path}"
            );
        }
        let r = exchange(&mut c, b"OPTIONS /nothing-here HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(r.status, 404, "[{rt}] {r:?}");
        // authority-form: a well-formed CONNECT, but we are no proxy.
        let r = exchange(
            &mut c,
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        );
        assert_eq!(r.status, 405, "[{rt}] {r:?}");
        assert_eq!(
            r.header("allow"),
            Some("GET, HEAD, POST, PUT, DELETE, OPTIONS"),
            "[{rt}]"
        );
        // All of that on one connection, which is still open.
        assert_eq!(c.get("/_httplite/json").status, 200, "[{rt}]");
        // HTTP/1.0 without Host keeps working.
        let mut old = server.connect();
        let r = exchange(&mut old, b"GET /_httplite/plaintext HTTP/1.0\r\n\r\n");
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "Hello, World!"),
            "[{rt}] {r:?}"
        );
        assert_eq!(server.stats().get("errors.bad_request"), 0, "[{rt}]");
    }
}

#[test]
fn absolute_form_and_percent_decoding_in_file_lookup() {
    let dir = TempDir::new("conformance");
    dir.write("docs/café.txt", b"accent");
    dir.write("plain.txt", b"plain");
    let root = dir.path().to_str().unwrap().to_owned();
    for rt in runtimes() {
        let server = Server::start(rt, &["--root", &root]);
        let mut c = server.connect();
        let r = exchange(
            &mut c,
            b"GET http://other.example/plain.txt HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "plain"),
            "[{rt}] {r:?}"
        );
        let r = exchange(
            &mut c,
            b"GET /docs/caf%C3%A9.txt HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "accent"),
            "[{rt}] {r:?}"
        );
        // Decoded, these are no UTF-8 path, or hold a NUL: 400.
        for path in ["/docs/caf%C3.txt", "/%FF%FE", "/plain%00.txt"] {
            let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
            let r = exchange(&mut c, req.as_bytes());
            assert_eq!(r.status, 400, "[{rt}] {path}: {r:?}");
            if r.says_close() {
                c = server.connect();
            }
        }
        let r = exchange(&mut c, b"OPTIONS /plain.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(
            r.header("allow"),
            Some("GET, HEAD, OPTIONS"),
            "[{rt}] {r:?}"
        );
        c.expect_open(Duration::from_millis(50));
    }
}
