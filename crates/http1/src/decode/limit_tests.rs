//! The size limits: each at exactly the limit (accepted) and one past
//! (rejected with its status), whole and byte by byte, complete and not.

use super::tests::{bytewise, one, requests, requests_with, status_of, status_with};
use super::*;

fn request_line_of(len: usize) -> Vec<u8> {
    // "GET " + target + " HTTP/1.1" is `len` bytes long.
    let target_len = len - "GET ".len() - " HTTP/1.1".len();
    let mut line = b"GET /".to_vec();
    line.extend(std::iter::repeat_n(b'a', target_len - 1));
    line.extend_from_slice(b" HTTP/1.1");
    assert_eq!(line.len(), len);
    line
}

#[test]
fn request_line_limit_exact_and_one_past() {
    let mut ok = request_line_of(8192);
    ok.extend_from_slice(b"\r\n\r\n");
    assert_eq!(requests(&ok).unwrap().len(), 1);
    assert_eq!(bytewise(Limits::default(), &ok).unwrap().len(), 1);

    let mut long = request_line_of(8193);
    long.extend_from_slice(b"\r\n\r\n");
    assert_eq!(status_of(&long), 414);
    let err = bytewise(Limits::default(), &long).unwrap_err();
    assert_eq!(err.status().code(), 414);
}

#[test]
fn request_line_limit_triggers_while_incomplete() {
    // No line end ever arrives: rejected once past the limit, not buffered.
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::from(&request_line_of(8192)[..]);
    assert!(dec.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(b"\r");
    assert!(
        dec.decode(&mut buf).unwrap().is_none(),
        "CR may be half of CRLF"
    );
    buf.extend_from_slice(b"x");
    assert_eq!(dec.decode(&mut buf).unwrap_err().status().code(), 414);
}

/// A head whose header section (header lines plus the final CRLF) is
/// exactly `size` bytes.
fn head_with_section(size: usize) -> Vec<u8> {
    let mut head = b"GET / HTTP/1.1\r\n".to_vec();
    // One header "X: <pad>\r\n" plus the final "\r\n".
    let pad = size - "X: \r\n".len() - 2;
    head.extend_from_slice(b"X: ");
    head.extend(std::iter::repeat_n(b'v', pad));
    head.extend_from_slice(b"\r\n\r\n");
    head
}

#[test]
fn header_section_limit_exact_and_one_past() {
    let ok = head_with_section(16384);
    assert_eq!(requests(&ok).unwrap().len(), 1);
    assert_eq!(bytewise(Limits::default(), &ok).unwrap().len(), 1);
    let big = head_with_section(16385);
    assert_eq!(status_of(&big), 431);
    assert_eq!(
        bytewise(Limits::default(), &big)
            .unwrap_err()
            .status()
            .code(),
        431
    );
}

#[test]
fn endless_header_is_rejected_once_past_the_limit() {
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nX-Endless: "[..]);
    let mut fed = buf.len();
    let chunk = [b'a'; 1000];
    let err = loop {
        match dec.decode(&mut buf) {
            Ok(None) => {
                buf.extend_from_slice(&chunk);
                fed += chunk.len();
                assert!(fed < 20_000, "never rejected");
            }
            Ok(Some(_)) => panic!("a head without end completed"),
            Err(e) => break e,
        }
    };
    assert_eq!(err.status().code(), 431);
    assert!(fed > 16384);
}

fn head_with_headers(n: usize) -> Vec<u8> {
    let mut head = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..n {
        head.extend_from_slice(format!("H{i}: x\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    head
}

#[test]
fn header_count_limit_exact_and_one_past() {
    assert_eq!(one(&head_with_headers(100)).headers().len(), 100);
    assert_eq!(
        bytewise(Limits::default(), &head_with_headers(100))
            .unwrap()
            .len(),
        1
    );
    assert_eq!(status_of(&head_with_headers(101)), 431);
    let err = bytewise(Limits::default(), &head_with_headers(101)).unwrap_err();
    assert_eq!(err.status().code(), 431);
    // Counted while incomplete too.
    let mut partial = head_with_headers(101);
    partial.truncate(partial.len() - 2);
    assert_eq!(status_of(&partial), 431);
}

#[test]
fn header_count_above_stack_slots_uses_heap() {
    let limits = Limits {
        max_headers: 300,
        max_head: MAX_HEAD_CAP,
        ..Limits::default()
    };
    assert_eq!(
        requests_with(limits, &head_with_headers(300)).unwrap()[0]
            .0
            .headers()
            .len(),
        300
    );
    assert_eq!(status_with(limits, &head_with_headers(301)), 431);
}

#[test]
fn body_limit_for_content_length_is_checked_at_the_head() {
    let limits = Limits {
        max_body: 10,
        ..Limits::default()
    };
    let ok = b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789";
    assert_eq!(requests_with(limits, ok).unwrap()[0].1.len(), 10);
    // Rejected before any body byte has arrived.
    assert_eq!(
        status_with(limits, b"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n"),
        413
    );
}

#[test]
fn body_limit_for_chunked_counts_the_running_total() {
    let limits = Limits {
        max_body: 10,
        ..Limits::default()
    };
    let ok = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n";
    assert_eq!(requests_with(limits, ok).unwrap()[0].1.len(), 10);
    let over = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n01234\r\n6\r\n";
    assert_eq!(status_with(limits, over), 413);
}

#[test]
fn limits_are_capped() {
    let dec = Decoder::new(Limits {
        max_request_line: usize::MAX,
        max_head: usize::MAX,
        max_headers: usize::MAX,
        max_body: u64::MAX,
        require_host: false,
    });
    assert_eq!(dec.limits().max_request_line, MAX_REQUEST_LINE_CAP);
    assert_eq!(dec.limits().max_head, MAX_HEAD_CAP);
    assert_eq!(dec.limits().max_headers, MAX_HEADERS_CAP);
    // The largest possible head still decodes.
    let limits = *dec.limits();
    let mut head = request_line_of(MAX_REQUEST_LINE_CAP);
    head.extend_from_slice(b"\r\n");
    head.extend_from_slice(&head_with_section(MAX_HEAD_CAP)[b"GET / HTTP/1.1\r\n".len()..]);
    assert_eq!(requests_with(limits, &head).unwrap().len(), 1);
}

#[test]
fn huge_complete_heads_are_rejected_without_overflowing_offsets() {
    // Larger than the u16 offsets can address, and complete in one read.
    let mut line = request_line_of(70_000);
    line.extend_from_slice(b"\r\n\r\n");
    assert_eq!(status_of(&line), 414);
    let limits = Limits {
        max_head: usize::MAX,
        ..Limits::default()
    };
    assert_eq!(status_with(limits, &head_with_section(70_000)), 431);
}
