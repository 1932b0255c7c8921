use super::*;
use crate::{Decoder, Limits, Message};

fn text(buf: &BytesMut) -> String {
    String::from_utf8(buf.to_vec()).unwrap()
}

/// The response with its `Date` value replaced, for exact comparisons.
fn without_date(buf: &BytesMut) -> String {
    let s = text(buf);
    let start = s.find("Date: ").expect("every response has a Date") + "Date: ".len();
    let mut out = s.clone();
    out.replace_range(start..start + crate::HTTP_DATE_LEN, "<date>");
    out
}

const KEEP_11: ReplyTo = ReplyTo {
    version: Version::Http11,
    keep_alive: true,
    head_only: false,
};

fn request(input: &[u8]) -> Request {
    let mut buf = BytesMut::from(input);
    match Decoder::new(Limits::default()).decode(&mut buf) {
        Ok(Some(Message::Head(r))) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn fast_path_plaintext() {
    let mut buf = BytesMut::new();
    encode_response(
        &mut buf,
        KEEP_11,
        Status::OK,
        Some(TEXT_PLAIN),
        b"Hello, World!",
    );
    assert_eq!(
        without_date(&buf),
        "HTTP/1.1 200 OK\r\nServer: httplite\r\nDate: <date>\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"
    );
}

#[test]
fn connection_header_rules() {
    let mut buf = BytesMut::new();
    let close = ReplyTo {
        keep_alive: false,
        ..KEEP_11
    };
    encode_response(&mut buf, close, Status::OK, None, b"");
    assert!(text(&buf).contains("\r\nConnection: close\r\n"));

    buf.clear();
    let keep_10 = ReplyTo {
        version: Version::Http10,
        ..KEEP_11
    };
    encode_response(&mut buf, keep_10, Status::OK, None, b"");
    assert!(text(&buf).contains("\r\nConnection: keep-alive\r\n"));

    buf.clear();
    encode_response(&mut buf, KEEP_11, Status::OK, None, b"");
    assert!(!text(&buf).contains("Connection"));
    assert!(text(&buf).contains("Content-Length: 0\r\n"));
}

#[test]
fn head_gets_the_get_length_but_no_body() {
    let req = request(b"HEAD /x HTTP/1.1\r\n\r\n");
    let to = ReplyTo::new(&req);
    assert!(to.head_only);
    let mut buf = BytesMut::new();
    encode_response(&mut buf, to, Status::OK, Some(TEXT_PLAIN), b"0123456789");
    let s = text(&buf);
    assert!(s.contains("Content-Length: 10\r\n"), "{s}");
    assert!(s.ends_with("\r\n\r\n"), "{s}");

    buf.clear();
    let mut body = encode_head(&mut buf, to, Status::OK, &[], Framing::Length(5)).unwrap();
    assert!(!body.wants_body());
    body.write(&mut buf, b"hello").unwrap();
    body.finish(&mut buf).unwrap();
    assert!(text(&buf).contains("Content-Length: 5\r\n"));
    assert!(text(&buf).ends_with("\r\n\r\n"));
}

#[test]
fn reply_to_follows_the_request() {
    let to = ReplyTo::new(&request(b"GET / HTTP/1.0\r\n\r\n"));
    assert_eq!(
        to,
        ReplyTo {
            version: Version::Http10,
            keep_alive: false,
            head_only: false
        }
    );
    let to = ReplyTo::new(&request(b"GET / HTTP/1.1\r\n\r\n"));
    assert_eq!(to, KEEP_11);
}

#[test]
fn bodyless_statuses_have_no_length_or_body() {
    for status in [Status::NO_CONTENT, Status::NOT_MODIFIED, Status::CONTINUE] {
        let mut buf = BytesMut::new();
        encode_response(&mut buf, KEEP_11, status, None, b"ignored");
        let s = text(&buf);
        assert!(!s.contains("Content-Length"), "{s}");
        assert!(s.ends_with("\r\n\r\n"), "{s}");

        buf.clear();
        let mut body = encode_head(&mut buf, KEEP_11, status, &[], Framing::Chunked).unwrap();
        body.write(&mut buf, b"ignored").unwrap();
        body.finish(&mut buf).unwrap();
        let s = text(&buf);
        assert!(
            !s.contains("Transfer-Encoding") && s.ends_with("\r\n\r\n"),
            "{s}"
        );
    }
}

#[test]
fn unknown_status_codes() {
    let mut buf = BytesMut::new();
    encode_response(
        &mut buf,
        KEEP_11,
        Status::from_code(299).unwrap(),
        None,
        b"",
    );
    assert!(text(&buf).starts_with("HTTP/1.1 299 \r\n"));
}

#[test]
fn general_head_with_headers() {
    let mut buf = BytesMut::new();
    let body = encode_head(
        &mut buf,
        KEEP_11,
        Status::NOT_FOUND,
        &[("Content-Type", b"text/html"), ("X-Custom", b"a\tb")],
        Framing::Length(0),
    )
    .unwrap();
    body.finish(&mut buf).unwrap();
    assert_eq!(
        without_date(&buf),
        "HTTP/1.1 404 Not Found\r\nServer: httplite\r\nDate: <date>\r\nContent-Type: text/html\r\nX-Custom: a\tb\r\nContent-Length: 0\r\n\r\n"
    );
}

#[test]
fn header_injection_is_refused_and_writes_nothing() {
    let bad: [(&str, &[u8]); 10] = [
        ("X", b"a\r\nSet-Cookie: x"),
        ("X", b"a\nb"),
        ("X", b"a\rb"),
        ("X", b"a\0b"),
        ("X", b"a\x7fb"),
        ("X Y", b"v"),
        ("X:Y", b"v"),
        ("", b"v"),
        ("X\r\n", b"v"),
        ("content-length", b"5"),
    ];
    for (name, value) in bad {
        let mut buf = BytesMut::new();
        let err = encode_head(
            &mut buf,
            KEEP_11,
            Status::OK,
            &[(name, value)],
            Framing::Length(0),
        )
        .unwrap_err();
        assert_eq!(err.status(), Status::INTERNAL_SERVER_ERROR);
        assert!(buf.is_empty(), "{name:?}: nothing written on error");
    }
    for owned in ["Transfer-Encoding", "Connection", "Date", "Server"] {
        let mut buf = BytesMut::new();
        assert!(
            encode_head(
                &mut buf,
                KEEP_11,
                Status::OK,
                &[(owned, b"x")],
                Framing::Length(0)
            )
            .is_err()
        );
    }
    assert!(HeaderValue::new(b"fine value").is_ok());
    assert!(HeaderValue::new(b"bad\r\n").is_err());
}

#[test]
fn chunked_stream() {
    let mut buf = BytesMut::new();
    let mut body = encode_head(&mut buf, KEEP_11, Status::OK, &[], Framing::Chunked).unwrap();
    assert!(body.wants_body() && body.keep_alive());
    let head_len = buf.len();
    body.write(&mut buf, b"hello").unwrap();
    body.write(&mut buf, b"").unwrap();
    body.write(&mut buf, &[b'x'; 26]).unwrap();
    body.finish(&mut buf).unwrap();
    assert!(text(&buf).contains("Transfer-Encoding: chunked\r\n"));
    let expected = format!("5\r\nhello\r\n1a\r\n{}\r\n0\r\n\r\n", "x".repeat(26));
    assert_eq!(&text(&buf)[head_len..], expected);
}

#[test]
fn chunked_to_http10_is_close_delimited() {
    let mut buf = BytesMut::new();
    let to = ReplyTo {
        version: Version::Http10,
        ..KEEP_11
    };
    let mut body = encode_head(&mut buf, to, Status::OK, &[], Framing::Chunked).unwrap();
    assert!(!body.keep_alive());
    body.write(&mut buf, b"raw").unwrap();
    body.finish(&mut buf).unwrap();
    let s = text(&buf);
    assert!(
        !s.contains("Transfer-Encoding") && s.contains("Connection: close\r\n"),
        "{s}"
    );
    assert!(s.ends_with("\r\n\r\nraw"), "{s}");
}

#[test]
fn declared_length_is_enforced() {
    let mut buf = BytesMut::new();
    let mut body = encode_head(&mut buf, KEEP_11, Status::OK, &[], Framing::Length(4)).unwrap();
    body.write(&mut buf, b"abc").unwrap();
    let before = buf.len();
    assert!(body.write(&mut buf, b"de").is_err());
    assert_eq!(buf.len(), before);
    assert!(body.finish(&mut buf).is_err(), "one byte short");
}

#[test]
fn continue_and_error_responses() {
    let mut buf = BytesMut::new();
    encode_continue(&mut buf);
    assert_eq!(&buf[..], b"HTTP/1.1 100 Continue\r\n\r\n");

    buf.clear();
    let err = Error::new(Status::URI_TOO_LONG, "request line too long");
    encode_error(&mut buf, &err);
    assert_eq!(
        without_date(&buf),
        "HTTP/1.1 414 URI Too Long\r\nServer: httplite\r\nDate: <date>\r\nContent-Type: text/plain\r\nContent-Length: 21\r\nConnection: close\r\n\r\nrequest line too long"
    );
}

#[test]
fn integers_and_hex() {
    let mut powers: Vec<u64> = (0..20).map(|e| 10u64.pow(e)).collect();
    powers.extend(powers.clone().iter().map(|p| p - 1));
    powers.extend([0, 12345, 999, 1000, 1001, u64::MAX]);
    for n in powers {
        let mut buf = BytesMut::new();
        put_content_length(&mut buf, n);
        assert_eq!(text(&buf), format!("Content-Length: {n}\r\n"));
        buf.clear();
        put_hex(&mut buf, n);
        assert_eq!(text(&buf), format!("{n:x}"));
    }
}

#[test]
fn no_reallocation_once_the_buffer_has_grown() {
    let mut buf = BytesMut::with_capacity(4096);
    let ptr = buf.as_ptr();
    for _ in 0..10 {
        buf.clear();
        encode_response(
            &mut buf,
            KEEP_11,
            Status::OK,
            Some(TEXT_PLAIN),
            b"Hello, World!",
        );
        assert_eq!(buf.as_ptr(), ptr);
    }
}

/// `encode_response` as a plain sequence of `format!`s, for comparison.
fn reference(to: ReplyTo, status: Status, content_type: Option<&[u8]>, body: &[u8]) -> String {
    let mut s = format!("HTTP/1.1 {} {}\r\n", status.code(), status.reason());
    s.push_str("Server: httplite\r\nDate: <date>\r\n");
    if let Some(ct) = content_type {
        s.push_str(&format!(
            "Content-Type: {}\r\n",
            String::from_utf8_lossy(ct)
        ));
    }
    if status.allows_body() {
        s.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if !to.keep_alive {
        s.push_str("Connection: close\r\n");
    } else if to.version == Version::Http10 {
        s.push_str("Connection: keep-alive\r\n");
    }
    s.push_str("\r\n");
    if status.allows_body() && !to.head_only {
        s.push_str(&String::from_utf8_lossy(body));
    }
    s
}

#[test]
fn every_shape_matches_the_reference() {
    let long_ct = "x".repeat(60);
    let cts: [Option<&[u8]>; 5] = [
        None,
        Some(b"text/plain"),
        Some(b"application/json"),
        Some(b"text/html; charset=utf-8"),
        Some(long_ct.as_bytes()),
    ];
    let statuses = [
        Status::OK,
        Status::NOT_FOUND,
        Status::NO_CONTENT,
        Status::NOT_MODIFIED,
        Status::REQUEST_HEADER_FIELDS_TOO_LARGE,
        Status::from_code(299).unwrap(),
    ];
    let body: Vec<u8> = (0..200).map(|i| b'a' + (i % 26) as u8).collect();
    let mut buf = BytesMut::new();
    // Twice: the second round hits the cached prefixes of the first.
    for _ in 0..2 {
        for status in statuses {
            for ct in cts {
                for len in (0..40).chain([99, 100, 101, 200]) {
                    for (version, keep_alive, head_only) in [
                        (Version::Http11, true, false),
                        (Version::Http11, false, false),
                        (Version::Http10, true, false),
                        (Version::Http10, false, true),
                        (Version::Http11, true, true),
                    ] {
                        let to = ReplyTo {
                            version,
                            keep_alive,
                            head_only,
                        };
                        buf.clear();
                        let value = ct.map(|ct| HeaderValue::new(ct).unwrap());
                        encode_response(&mut buf, to, status, value, &body[..len]);
                        assert_eq!(
                            without_date(&buf),
                            reference(to, status, ct, &body[..len]),
                            "{to:?} {status} {ct:?} {len}"
                        );
                    }
                }
            }
        }
    }
}

/// The shapes `every_shape_matches_the_reference` runs through.
const STATUSES: [Status; 5] = [
    Status::OK,
    Status::NOT_FOUND,
    Status::NO_CONTENT,
    Status::NOT_MODIFIED,
    Status::REQUEST_HEADER_FIELDS_TOO_LARGE,
];
const REPLIES: [ReplyTo; 4] = [
    KEEP_11,
    ReplyTo::closing(),
    ReplyTo {
        version: Version::Http10,
        keep_alive: true,
        head_only: false,
    },
    ReplyTo {
        version: Version::Http11,
        keep_alive: true,
        head_only: true,
    },
];

#[test]
fn static_content_types_and_reused_bodies_are_not_mistaken() {
    // Static content types are told apart by address, bodies by content:
    // each response must match the reference although the previous one
    // had the same key but for one of them.
    let cts: [Option<HeaderValue<'static>>; 4] = [
        None,
        Some(TEXT_PLAIN),
        Some(HeaderValue::from_static("text/plain; charset=utf-8")),
        Some(HeaderValue::from_static("application/json")),
    ];
    let mut body = *b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut buf = BytesMut::new();
    for round in 0..3u8 {
        for len in [0, 1, 3, 4, 7, 8, 13, 16, 17, 31, 32, 33, 36] {
            for ct in cts {
                for to in REPLIES {
                    for status in STATUSES {
                        // Twice (a hit), then with one byte changed in the
                        // same buffer (not a hit).
                        for change in [false, false, true] {
                            if change && len > 0 {
                                body[len / 2] ^= 1 << round;
                            }
                            buf.clear();
                            encode_response(&mut buf, to, status, ct, &body[..len]);
                            let want =
                                reference(to, status, ct.map(|c| c.as_bytes()), &body[..len]);
                            assert_eq!(without_date(&buf), want, "{to:?} {status} {len}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn static_responses_match_encode_response() {
    static BODY: [u8; 300] = [b'x'; 300];
    let cts: [Option<HeaderValue<'static>>; 3] = [
        None,
        Some(TEXT_PLAIN),
        Some(HeaderValue::from_static("text/html; charset=utf-8")),
    ];
    let mut responses = Vec::new();
    for status in STATUSES {
        for ct in cts {
            for len in [0, 13, 27, 60, 300] {
                let response: &'static StaticResponse = Box::leak(Box::new(StaticResponse {
                    status,
                    content_type: ct,
                    body: &BODY[..len],
                }));
                responses.push(response);
            }
        }
    }
    let mut buf = BytesMut::new();
    let mut other = BytesMut::new();
    // Each response twice in a row (the second from the cache), then all of
    // them again interleaved with another (misses).
    for interleave in [false, true] {
        for &response in &responses {
            for to in REPLIES {
                for _ in 0..2 {
                    if interleave {
                        encode_static(&mut other, to, responses[0]);
                    }
                    buf.clear();
                    encode_static(&mut buf, to, response);
                    let want = reference(
                        to,
                        response.status,
                        response.content_type.map(|c| c.as_bytes()),
                        response.body,
                    );
                    assert_eq!(without_date(&buf), want, "{to:?} {response:?}");
                }
            }
        }
    }
}
