use bytes::BytesMut;

use super::*;

/// Every message `bytes` decodes to (the request was HEAD if `head`), and
/// the end by close if the server closed after them.
fn decode_all(bytes: &[u8], head: bool, closed: bool) -> Result<Vec<ResponseMessage>, Error> {
    let mut d = ResponseDecoder::new(16 * 1024, u64::MAX);
    d.expect(head);
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Some(m) = d.decode(&mut buf)? {
        let end = matches!(m, ResponseMessage::End);
        out.push(m);
        if end {
            return Ok(out);
        }
    }
    if closed {
        out.extend(d.eof()?);
    }
    Ok(out)
}

fn head_of(out: &[ResponseMessage]) -> &ResponseHead {
    match &out[0] {
        ResponseMessage::Head(h) => h,
        m => panic!("not a head: {m:?}"),
    }
}

fn body_of(out: &[ResponseMessage]) -> Vec<u8> {
    out.iter()
        .filter_map(|m| match m {
            ResponseMessage::Body(b) => Some(&b[..]),
            _ => None,
        })
        .flatten()
        .copied()
        .collect()
}

#[test]
fn a_content_length_body_and_keep_alive() {
    let out = decode_all(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhelloNEXT",
        false,
        false,
    )
    .unwrap();
    let h = head_of(&out);
    assert_eq!(h.status(), 200);
    assert_eq!(h.reason(), b"OK");
    assert_eq!(h.body(), ResponseBody::Length(5));
    assert!(h.keep_alive());
    assert_eq!(h.header("x-a"), Some(&b"b"[..]));
    assert_eq!(body_of(&out), b"hello");
    assert!(matches!(out.last(), Some(ResponseMessage::End)));
}

#[test]
fn a_chunked_body_is_decoded() {
    let out = decode_all(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        false,
        false,
    )
    .unwrap();
    assert_eq!(head_of(&out).body(), ResponseBody::Chunked);
    assert_eq!(body_of(&out), b"abcde");
    assert!(matches!(out.last(), Some(ResponseMessage::End)));
}

#[test]
fn a_body_without_framing_ends_with_the_connection() {
    let out = decode_all(b"HTTP/1.1 200 OK\r\n\r\nall of it", false, true).unwrap();
    let h = head_of(&out);
    assert_eq!(h.body(), ResponseBody::UntilClose);
    assert!(!h.keep_alive(), "the connection ends the body");
    assert_eq!(body_of(&out), b"all of it");
    assert!(matches!(out.last(), Some(ResponseMessage::End)));
}

#[test]
fn head_1xx_204_and_304_have_no_body_whatever_they_say() {
    let out = decode_all(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true, false).unwrap();
    assert_eq!(head_of(&out).body(), ResponseBody::None);
    assert!(matches!(out.last(), Some(ResponseMessage::End)));
    for status in ["204 No Content", "304 Not Modified"] {
        let text = format!("HTTP/1.1 {status}\r\nContent-Length: 9\r\n\r\n");
        let out = decode_all(text.as_bytes(), false, false).unwrap();
        assert_eq!(head_of(&out).body(), ResponseBody::None, "{status}");
        assert_eq!(out.len(), 2, "{status}: head and end");
    }
}

#[test]
fn an_interim_response_is_followed_by_the_final_one() {
    let mut d = ResponseDecoder::new(1024, u64::MAX);
    d.expect(false);
    let mut buf = BytesMut::from(
        &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"[..],
    );
    let Some(ResponseMessage::Head(h)) = d.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert!(h.is_interim());
    let Some(ResponseMessage::Head(h)) = d.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(h.status(), 201);
    assert!(matches!(
        d.decode(&mut buf).unwrap(),
        Some(ResponseMessage::End)
    ));
    assert!(d.is_done());
}

#[test]
fn switching_protocols_ends_http_and_leaves_the_bytes() {
    let mut d = ResponseDecoder::new(1024, u64::MAX);
    d.expect(false);
    let mut buf = BytesMut::from(
        &b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello"[..],
    );
    let Some(ResponseMessage::Head(h)) = d.decode(&mut buf).unwrap() else {
        panic!()
    };
    assert_eq!(h.status(), 101);
    assert!(!h.keep_alive());
    assert!(d.decode(&mut buf).unwrap().is_none());
    assert_eq!(&buf[..], b"\x81\x05hello", "the tunnel's first bytes stay");
}

#[test]
fn ambiguous_framing_is_a_bad_gateway() {
    for bad in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"SSH-2.0-OpenSSH\r\n\r\n",
    ] {
        let e = decode_all(bad, false, false).unwrap_err();
        assert_eq!(e.status().code(), 502, "{:?}", String::from_utf8_lossy(bad));
    }
    // The same length twice is one length.
    let out = decode_all(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
        false,
        false,
    )
    .unwrap();
    assert_eq!(body_of(&out), b"ok");
}

#[test]
fn a_head_over_the_limit_is_refused_before_it_ends() {
    let mut d = ResponseDecoder::new(64, u64::MAX);
    d.expect(false);
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\n"[..]);
    buf.extend_from_slice(&[b'X'; 100]);
    assert_eq!(d.decode(&mut buf).unwrap_err().status().code(), 502);
}

#[test]
fn a_response_cut_short_is_an_error_at_eof() {
    let e = decode_all(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
        false,
        true,
    )
    .unwrap_err();
    assert_eq!(e.status().code(), 502);
    let e = decode_all(b"HTTP/1.1 200 OK\r\nContent-Le", false, true).unwrap_err();
    assert_eq!(e.status().code(), 502);
}

#[test]
fn persistence_follows_the_version_and_connection() {
    let cases: [(&[u8], bool); 4] = [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true),
        (
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            false,
        ),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false),
        (
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
            true,
        ),
    ];
    for (bytes, keep) in cases {
        let out = decode_all(bytes, false, false).unwrap();
        assert_eq!(
            head_of(&out).keep_alive(),
            keep,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn how_the_bytes_arrive_never_changes_what_they_mean() {
    let whole: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    for split in 0..whole.len() {
        let mut d = ResponseDecoder::new(1024, u64::MAX);
        d.expect(false);
        let mut buf = BytesMut::from(&whole[..split]);
        let (mut heads, mut body, mut ended) = (0, Vec::new(), false);
        for rest in [&whole[split..], &[][..]] {
            while let Some(m) = d.decode(&mut buf).unwrap() {
                match m {
                    ResponseMessage::Head(_) => heads += 1,
                    ResponseMessage::Body(b) => body.extend_from_slice(&b),
                    ResponseMessage::End => ended = true,
                }
            }
            buf.extend_from_slice(rest);
        }
        assert_eq!(
            (heads, &body[..], ended),
            (2, &b"hello"[..], true),
            "split at {split}"
        );
    }
}

#[test]
fn broken_chunked_framing_is_a_bad_gateway_too() {
    let e = decode_all(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        false,
        false,
    )
    .unwrap_err();
    assert_eq!(e.status().code(), 502);
    assert_eq!(e.reason(), "invalid chunk size");
}
