//! Rules of request decoding, one test per rule.

use super::*;
use crate::{Method, Version};

/// Decodes every complete request in `input`, collecting bodies.
pub(super) fn requests(input: &[u8]) -> Result<Vec<(Request, Vec<u8>)>, Error> {
    requests_with(Limits::default(), input)
}

pub(super) fn requests_with(
    limits: Limits,
    input: &[u8],
) -> Result<Vec<(Request, Vec<u8>)>, Error> {
    let mut dec = Decoder::new(limits);
    let mut buf = BytesMut::from(input);
    let mut out: Vec<(Request, Vec<u8>)> = Vec::new();
    while let Some(msg) = dec.decode(&mut buf)? {
        match msg {
            Message::Head(req) => out.push((req, Vec::new())),
            Message::Body(b) => {
                assert!(!b.is_empty());
                out.last_mut().unwrap().1.extend_from_slice(&b);
            }
            Message::End => assert!(dec.is_idle()),
        }
    }
    Ok(out)
}

pub(super) fn one(input: &[u8]) -> Request {
    let mut all = requests(input).unwrap();
    assert_eq!(all.len(), 1);
    all.remove(0).0
}

/// The status code decoding `input` fails with.
pub(super) fn status_of(input: &[u8]) -> u16 {
    status_with(Limits::default(), input)
}

pub(super) fn status_with(limits: Limits, input: &[u8]) -> u16 {
    match requests_with(limits, input) {
        Err(e) => e.status().code(),
        Ok(r) => panic!("expected an error, got {} requests", r.len()),
    }
}

/// Feeds `input` one byte at a time: the partial-head and split-body paths.
pub(super) fn bytewise(limits: Limits, input: &[u8]) -> Result<Vec<(Request, Vec<u8>)>, Error> {
    let mut dec = Decoder::new(limits);
    let mut buf = BytesMut::new();
    let mut out: Vec<(Request, Vec<u8>)> = Vec::new();
    for &b in input {
        buf.extend_from_slice(&[b]);
        while let Some(msg) = dec.decode(&mut buf)? {
            match msg {
                Message::Head(req) => out.push((req, Vec::new())),
                Message::Body(b) => out.last_mut().unwrap().1.extend_from_slice(&b),
                Message::End => {}
            }
        }
    }
    Ok(out)
}

#[test]
fn simple_get() {
    let req = one(b"GET /index.html?x=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n");
    assert_eq!(req.method(), Method::Get);
    assert_eq!(req.target(), "/index.html?x=1");
    assert_eq!(req.path(), "/index.html");
    assert_eq!(req.query(), Some("x=1"));
    assert_eq!(req.version(), Version::Http11);
    assert_eq!(req.header("host"), Some(&b"example.com"[..]));
    assert_eq!(req.header("HOST"), Some(&b"example.com"[..]));
    assert_eq!(req.header("missing"), None);
    assert_eq!(req.headers().len(), 2);
    let names: Vec<_> = req.headers().map(|(n, _)| n).collect();
    assert_eq!(names, ["Host", "Accept"]);
    assert!(req.keep_alive());
    assert!(!req.expects_continue());
    assert_eq!(req.body_kind(), BodyKind::None);
    assert!(!req.has_body());
    assert!(req.head_bytes().ends_with(b"\r\n\r\n"));
}

#[test]
fn methods_and_other_tokens() {
    for (line, m) in [
        ("GET", Method::Get),
        ("HEAD", Method::Head),
        ("POST", Method::Post),
        ("PUT", Method::Put),
        ("DELETE", Method::Delete),
        ("OPTIONS", Method::Options),
        ("PATCH", Method::Patch),
        ("TRACE", Method::Trace),
        ("CONNECT", Method::Connect),
        ("PURGE", Method::Other("PURGE")),
        ("get", Method::Other("get")),
    ] {
        // CONNECT takes an authority-form target (RFC 9112 §3.2.3).
        let target = if m == Method::Connect { "a:443" } else { "/" };
        let req = one(format!("{line} {target} HTTP/1.1\r\n\r\n").as_bytes());
        assert_eq!(req.method(), m);
    }
}

#[test]
fn repeated_headers_and_many_headers_spill() {
    let mut input = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..40 {
        input.extend_from_slice(format!("X-H{i}: v{i}\r\n").as_bytes());
    }
    input.extend_from_slice(b"X-H0: again\r\n\r\n");
    let req = one(&input);
    assert_eq!(req.headers().len(), 41);
    assert_eq!(req.header("x-h39"), Some(&b"v39"[..]));
    assert_eq!(req.header("x-h0"), Some(&b"v0"[..]));
    let h0: Vec<_> = req
        .headers()
        .filter(|(n, _)| *n == "X-H0")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(h0, [&b"v0"[..], b"again"]);
}

#[test]
fn obs_text_in_values_and_whitespace_trimmed() {
    let req = one(b"GET / HTTP/1.1\r\nX-A:  caf\xc3\xa9 \t\r\nX-B:\r\n\r\n");
    assert_eq!(req.header("x-a"), Some(&b"caf\xc3\xa9"[..]));
    assert_eq!(req.header("x-b"), Some(&b""[..]));
}

#[test]
fn partial_heads_wait_and_are_idle_only_between_requests() {
    let input = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::new();
    assert!(dec.is_idle());
    for (i, &b) in input.iter().enumerate() {
        buf.extend_from_slice(&[b]);
        let msg = dec.decode(&mut buf).unwrap();
        if i + 1 < input.len() {
            assert!(msg.is_none(), "complete after {} bytes", i + 1);
            assert!(!dec.is_idle());
            assert_eq!(buf.len(), i + 1, "partial head must stay buffered");
        } else {
            assert!(matches!(msg, Some(Message::Head(_))));
        }
    }
    assert!(dec.is_idle());
    assert!(buf.is_empty());
}

#[test]
fn leading_empty_lines_are_ignored() {
    let all = requests(b"\r\n\r\nGET /a HTTP/1.1\r\n\r\n\r\nGET /b HTTP/1.1\r\n\r\n").unwrap();
    let paths: Vec<_> = all.iter().map(|(r, _)| r.path().to_owned()).collect();
    assert_eq!(paths, ["/a", "/b"]);
    // A lone CR between requests waits rather than failing.
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::from(&b"\r"[..]);
    assert!(dec.decode(&mut buf).unwrap().is_none());
    assert!(dec.is_idle());
    buf.extend_from_slice(b"\nGET / HTTP/1.1\r\n\r\n");
    assert!(matches!(dec.decode(&mut buf), Ok(Some(Message::Head(_)))));
}

#[test]
fn bare_lf_line_ends_in_head() {
    let req = one(b"GET /lf HTTP/1.1\nHost: x\n\n");
    assert_eq!(req.path(), "/lf");
    assert_eq!(req.header("host"), Some(&b"x"[..]));
}

#[test]
fn pipelined_requests_come_out_one_by_one() {
    let input = b"GET /1 HTTP/1.1\r\n\r\nPOST /2 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPUT /3 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\nGET /4 HTTP/1.1\r\n\r\nGET /5";
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::from(&input[..]);
    let Some(Message::Head(r1)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(r1.path(), "/1");
    assert!(
        buf.starts_with(b"POST /2"),
        "following bytes stay in the buffer"
    );
    let Some(Message::Head(r2)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(r2.body_kind(), BodyKind::Length(3));
    assert!(!dec.is_idle());
    assert!(dec.in_body());
    let Some(Message::Body(b)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(&b[..], b"abc");
    assert!(matches!(dec.decode(&mut buf), Ok(Some(Message::End))));
    assert!(dec.is_idle());
    let Some(Message::Head(r3)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(r3.body_kind(), BodyKind::Chunked);
    let Some(Message::Body(b)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(&b[..], b"de");
    assert!(matches!(dec.decode(&mut buf), Ok(Some(Message::End))));
    let Some(Message::Head(r4)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(r4.path(), "/4");
    assert!(dec.decode(&mut buf).unwrap().is_none());
    assert_eq!(&buf[..], b"GET /5");
}

#[test]
fn same_requests_whole_or_bytewise() {
    let input = b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloPOST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;e=1\r\nworld\r\n1\r\n!\r\n0\r\nT: 1\r\n\r\nGET /c HTTP/1.0\r\n\r\n";
    let whole = requests(input).unwrap();
    let split = bytewise(Limits::default(), input).unwrap();
    assert_eq!(whole.len(), 3);
    assert_eq!(whole.len(), split.len());
    for ((a, ab), (b, bb)) in whole.iter().zip(&split) {
        assert_eq!(a.target(), b.target());
        assert_eq!(a.head_bytes(), b.head_bytes());
        assert_eq!(ab, bb);
    }
    assert_eq!(whole[0].1, b"hello");
    assert_eq!(whole[1].1, b"world!");
}

#[test]
fn content_length_body_streams_in_pieces() {
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::from(&b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123"[..]);
    assert!(matches!(dec.decode(&mut buf), Ok(Some(Message::Head(_)))));
    let Some(Message::Body(b)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(&b[..], b"0123");
    assert!(dec.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(b"456789GET");
    let Some(Message::Body(b)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(&b[..], b"456789");
    assert!(matches!(dec.decode(&mut buf), Ok(Some(Message::End))));
    assert_eq!(&buf[..], b"GET");
}

#[test]
fn zero_length_body_is_just_a_head() {
    let mut dec = Decoder::new(Limits::default());
    let mut buf =
        BytesMut::from(&b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\nGET / HTTP/1.1\r\n\r\n"[..]);
    let Some(Message::Head(r)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(r.body_kind(), BodyKind::Length(0));
    assert!(!r.has_body());
    assert!(dec.is_idle());
    assert!(matches!(dec.decode(&mut buf), Ok(Some(Message::Head(_)))));
}

#[test]
fn chunked_with_extensions_and_trailers() {
    let all = requests(
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;a=b;c\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0;end\r\nExpires: soon\r\nX-Trailer: 1\r\n\r\n",
    )
    .unwrap();
    assert_eq!(all[0].1, b"Wikipedia in\r\n\r\nchunks.");
}

#[test]
fn keep_alive_rules() {
    let ka = |s: &[u8]| one(s).keep_alive();
    assert!(ka(b"GET / HTTP/1.1\r\n\r\n"));
    assert!(!ka(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
    assert!(!ka(b"GET / HTTP/1.1\r\nConnection: TE, Close\r\n\r\n"));
    assert!(ka(b"GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n"));
    assert!(!ka(b"GET / HTTP/1.0\r\n\r\n"));
    assert!(ka(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
    assert!(!ka(
        b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"
    ));
    assert_eq!(one(b"GET / HTTP/1.0\r\n\r\n").version(), Version::Http10);
}

#[test]
fn expect_100_continue() {
    let input = b"PUT /f HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::from(&input[..]);
    let Some(Message::Head(req)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert!(req.expects_continue());
    // The body comes only after the server says 100 Continue.
    assert!(dec.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(b"data");
    assert!(matches!(dec.decode(&mut buf), Ok(Some(Message::Body(_)))));
    assert!(
        !one(b"PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n")
            .expects_continue()
    );
    assert!(!one(b"GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n").expects_continue());
}

#[test]
fn framing_rejections_are_400() {
    let cases: [&[u8]; 8] = [
        b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ];
    for input in cases {
        assert_eq!(status_of(input), 400, "{}", String::from_utf8_lossy(input));
    }
    assert_eq!(
        status_of(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n"),
        400
    );
    assert_eq!(
        status_of(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n"),
        400
    );
    assert_eq!(
        status_of(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
        501
    );
}

#[test]
fn identical_repeated_lengths_are_fine() {
    for input in [
        &b"POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello"[..],
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    ] {
        let all = requests(input).unwrap();
        assert_eq!(all[0].1, b"hello");
    }
}

#[test]
fn malformed_heads_are_400() {
    for input in [
        &b"GET\r\n\r\n"[..],
        b"GET /\r\n\r\n",
        b"GET / HTTP/1.1 extra\r\n\r\n",
        b"G(T / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
        b"GET / HTTP/1.1\r\n: empty\r\n\r\n",
        b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n",
        b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
        b"GET / HTTP/1.1\r\n folded: x\r\n\r\n",
        b"GET / FTP/1.1\r\n\r\n",
        b"GET / HTTP/1.x\r\n\r\n",
        b"\rX",
    ] {
        assert_eq!(status_of(input), 400, "{}", String::from_utf8_lossy(input));
    }
}

#[test]
fn other_versions_are_505() {
    assert_eq!(status_of(b"GET / HTTP/2.0\r\n\r\n"), 505);
    assert_eq!(status_of(b"GET / HTTP/0.9\r\n\r\n"), 505);
    assert_eq!(status_of(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 505);
    // Not `HTTP/` DIGIT `.` DIGIT: malformed, not another version.
    assert_eq!(status_of(b"GET / HTTP/3\r\n\r\n"), 400);
    assert_eq!(status_of(b"GET / HTTP/10.0\r\n\r\n"), 400);
    // A higher minor version is served as HTTP/1.1 (RFC 9110 §2.5).
    assert_eq!(one(b"GET / HTTP/1.2\r\n\r\n").version(), Version::Http11);
    assert_eq!(one(b"GET / HTTP/1.9\n\n").version(), Version::Http11);
    // Detected as soon as the line ends, before the head completes.
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::from(&b"GET / HTTP/2.0\r\n"[..]);
    assert_eq!(dec.decode(&mut buf).unwrap_err().status().code(), 505);
}

#[test]
fn errors_are_sticky() {
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::from(&b"BAD\x01 / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n"[..]);
    let first = dec.decode(&mut buf).unwrap_err();
    assert_eq!(dec.decode(&mut buf).unwrap_err(), first);
    assert!(!dec.is_idle());
}

#[test]
fn absolute_form_target() {
    let req = one(b"GET http://example.com:8080/p/q?x HTTP/1.1\r\n\r\n");
    assert_eq!(req.path(), "/p/q");
    assert_eq!(req.query(), Some("x"));
    assert_eq!(req.target(), "http://example.com:8080/p/q?x");
    assert_eq!(one(b"GET http://example.com HTTP/1.1\r\n\r\n").path(), "/");
    assert_eq!(one(b"OPTIONS * HTTP/1.1\r\n\r\n").path(), "*");
}

#[test]
fn head_shares_the_read_buffer() {
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::with_capacity(4096);
    buf.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
    let start = buf.as_ptr();
    let Some(Message::Head(req)) = dec.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(req.head_bytes().as_ptr(), start, "head must not be copied");
}

#[test]
fn swapped_buffer_mid_head_does_not_panic() {
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a-long-host-name"[..]);
    assert!(dec.decode(&mut buf).unwrap().is_none());
    let mut other = BytesMut::from(&b"GET"[..]);
    assert!(dec.decode(&mut other).unwrap().is_none());
    other.extend_from_slice(b" /x HTTP/1.1\r\n\r\n");
    let Some(Message::Head(req)) = dec.decode(&mut other).unwrap() else {
        panic!()
    };
    assert_eq!(req.path(), "/x");
}

#[test]
fn bad_request_line_is_rejected_when_its_line_ends_not_at_the_head_end() {
    // Fed byte by byte, httparse first sees only a prefix; the scan re-checks
    // the request line as soon as its LF arrives, before any header ends.
    let err = bytewise(Limits::default(), b"GET / HTTP/2.0\r\nX: y").unwrap_err();
    assert_eq!(err.status().code(), 505);
    let err = bytewise(Limits::default(), b"G\x01T / HTTP/1.1\r\nX: y").unwrap_err();
    assert_eq!(err.status().code(), 400);
}
