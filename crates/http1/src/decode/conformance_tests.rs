//! RFC 9112 / RFC 9110 rules on the request line, the target's form, `Host`
//! and header fields, one test per rule, each input decoded whole and byte
//! by byte (so that the fast path, the general path and the partial-head
//! scan all give the same answer). `docs/conformance.md` maps each rule to
//! its test.

use super::tests::{bytewise, requests_with};
use super::*;
use crate::Version;

/// As the server runs: the `Host` rule on.
fn strict() -> Limits {
    Limits {
        require_host: true,
        ..Limits::default()
    }
}

/// The status `input` is rejected with, checking that byte-by-byte
/// feeding agrees.
fn rejected(input: &[u8]) -> u16 {
    let whole = match requests_with(strict(), input) {
        Err(e) => e.status().code(),
        Ok(r) => panic!("accepted {} ({} requests)", input.escape_ascii(), r.len()),
    };
    let bytewise = bytewise(strict(), input).map(|r| r.len());
    assert_eq!(
        bytewise.map_err(|e| e.status().code()),
        Err(whole),
        "{}",
        input.escape_ascii()
    );
    whole
}

/// The one request in `input`, checking that byte-by-byte feeding agrees.
fn accepted(input: &[u8]) -> Request {
    let mut all =
        requests_with(strict(), input).unwrap_or_else(|e| panic!("{}: {e}", input.escape_ascii()));
    let bytewise = bytewise(strict(), input).unwrap();
    assert_eq!(all.len(), 1, "{}", input.escape_ascii());
    assert_eq!(bytewise.len(), 1);
    assert_eq!(bytewise[0].0.target(), all[0].0.target());
    all.remove(0).0
}

fn with_host(line: &str) -> Vec<u8> {
    format!("{line}\r\nHost: example.com\r\n\r\n").into_bytes()
}

#[test]
fn separators_are_exactly_one_space() {
    for line in [
        "GET  / HTTP/1.1",
        "GET /  HTTP/1.1",
        " GET / HTTP/1.1",
        "GET / HTTP/1.1 ",
        "GET\t/ HTTP/1.1",
        "GET /\tHTTP/1.1",
        "GET /_httplite/plaintext x HTTP/1.1",
    ] {
        assert_eq!(rejected(&with_host(line)), 400, "{line:?}");
    }
}

#[test]
fn controls_and_bare_cr_in_the_line_are_400() {
    for input in [
        &b"GET /a\rb HTTP/1.1\r\nHost: a\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\r\nHost: a\r\n\r\n",
        b"GET /\x00 HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /\x1b HTTP/1.1\r\nHost: a\r\n\r\n",
        b"G\x01T / HTTP/1.1\r\nHost: a\r\n\r\n",
    ] {
        assert_eq!(rejected(input), 400, "{}", input.escape_ascii());
    }
}

#[test]
fn version_is_http_digit_dot_digit() {
    for line in [
        "GET / HTTP/1.",
        "GET / HTTP/1",
        "GET / http/1.1",
        "GET / HTTP/1.1.1",
        "GET / HTTP/11",
        "GET / HTTP/1.x",
        "GET / HTTPS/1.1",
        "GET / HTTP/ 1.1",
        "GET /",
    ] {
        assert_eq!(rejected(&with_host(line)), 400, "{line:?}");
    }
    for line in ["GET / HTTP/2.0", "GET / HTTP/0.9", "GET / HTTP/9.9"] {
        assert_eq!(rejected(&with_host(line)), 505, "{line:?}");
    }
    assert_eq!(
        accepted(&with_host("GET / HTTP/1.1")).version(),
        Version::Http11
    );
    assert_eq!(
        accepted(&with_host("GET / HTTP/1.0")).version(),
        Version::Http10
    );
    assert_eq!(
        accepted(&with_host("GET / HTTP/1.2")).version(),
        Version::Http11
    );
    assert_eq!(
        accepted(&with_host("GET / HTTP/1.9")).version(),
        Version::Http11
    );
}

#[test]
fn targets_outside_the_four_forms_are_400() {
    for line in [
        "GET ?x HTTP/1.1",
        "GET x HTTP/1.1",
        "GET http:/x HTTP/1.1",
        "GET  HTTP/1.1",
        "GET http:// HTTP/1.1",
        "GET http://user@example.com/ HTTP/1.1",
        "GET ftp://example.com/ HTTP/1.1",
        "GET /a#frag HTTP/1.1",
        "GET /a?b#frag HTTP/1.1",
    ] {
        assert_eq!(rejected(&with_host(line)), 400, "{line:?}");
    }
    let high = b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(rejected(high), 400);
}

#[test]
fn each_form_only_with_its_methods() {
    // asterisk-form: OPTIONS only.
    assert_eq!(accepted(&with_host("OPTIONS * HTTP/1.1")).path(), "*");
    for m in ["GET", "HEAD", "POST", "PURGE"] {
        assert_eq!(rejected(&with_host(&format!("{m} * HTTP/1.1"))), 400, "{m}");
    }
    // authority-form: CONNECT only, and CONNECT only with it.
    let connect = accepted(&with_host("CONNECT example.com:443 HTTP/1.1"));
    assert_eq!(connect.host(), Some("example.com:443"));
    for line in [
        "GET example.com:443 HTTP/1.1",
        "CONNECT / HTTP/1.1",
        "CONNECT http://example.com/ HTTP/1.1",
        "CONNECT example.com HTTP/1.1",
        "CONNECT * HTTP/1.1",
    ] {
        assert_eq!(rejected(&with_host(line)), 400, "{line:?}");
    }
    // origin-form: every other method.
    assert_eq!(accepted(&with_host("OPTIONS /a HTTP/1.1")).path(), "/a");
}

#[test]
fn absolute_form_authority_wins_over_host() {
    let req = accepted(b"GET http://Other.example:8080/p?q HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(req.host(), Some("Other.example:8080"));
    assert_eq!(req.path(), "/p");
    assert_eq!(req.query(), Some("q"));
    let req = accepted(b"GET https://[::1]?q HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(req.host(), Some("[::1]"));
    assert_eq!(req.path(), "/");
    // The Host header is still required in HTTP/1.1 (RFC 9112 §3.2).
    assert_eq!(rejected(b"GET http://a/ HTTP/1.1\r\n\r\n"), 400);
}

#[test]
fn host_is_required_once_in_http11() {
    assert_eq!(rejected(b"GET / HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(
        rejected(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"),
        400
    );
    assert_eq!(
        rejected(b"GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"),
        400
    );
    // HTTP/1.0 without Host keeps working.
    assert_eq!(accepted(b"GET / HTTP/1.0\r\n\r\n").host(), None);
    assert_eq!(
        accepted(b"GET / HTTP/1.1\r\nHost: a.b\r\n\r\n").host(),
        Some("a.b")
    );
}

#[test]
fn host_values_follow_the_uri_grammar() {
    for value in [
        "bad host", "a/b", "user@a", "a:65536", "a:123456", "a:8x", "a:1:2", "[::1", "[::1]x",
        "[nope]", "a%zz", "a?b", "a#b", "a\tb", "a,b c",
    ] {
        let input = format!("GET / HTTP/1.1\r\nHost: {value}\r\n\r\n");
        assert_eq!(rejected(input.as_bytes()), 400, "{value:?}");
    }
    assert_eq!(
        rejected(b"GET / HTTP/1.1\r\nHost: caf\xc3\xa9\r\n\r\n"),
        400
    );
    for value in [
        "",
        "a",
        "localhost:8080",
        "127.0.0.1:65535",
        "[::1]:80",
        "[2001:db8::1]",
        "xn--bcher-kva.example",
        "a:",
        "a_b.example",
        "a%41",
        "  example.com\t",
    ] {
        let input = format!("GET / HTTP/1.1\r\nHost: {value}\r\n\r\n");
        accepted(input.as_bytes());
    }
}

#[test]
fn header_field_syntax() {
    for input in [
        // Space or colon problems in the name.
        &b"GET / HTTP/1.1\r\nHost: a\r\nX Y: 1\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: a\r\nX : 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX\t: 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n: 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX(: 1\r\n\r\n",
        // obs-fold.
        b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\t2\r\n\r\n",
        // NUL, bare CR and other controls in values.
        b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\x002\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r2\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\x072\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\x7f2\r\n\r\n",
    ] {
        assert_eq!(rejected(input), 400, "{}", input.escape_ascii());
    }
    // HTAB and obs-text are allowed in values.
    let req = accepted(b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\t2 \xe9\r\n\r\n");
    assert_eq!(req.header("x"), Some(&b"1\t2 \xe9"[..]));
}

#[test]
fn smuggling_rules_still_hold() {
    for input in [
        &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
    ] {
        assert_eq!(rejected(input), 400, "{}", input.escape_ascii());
    }
}
