//! Property tests of the decoder:
//!
//! 1. However a valid pipelined stream is cut into reads, it decodes to the
//!    same requests and bodies as when fed whole, and those match what was
//!    encoded.
//! 2. Random bytes and random mutations of valid streams never panic, and
//!    every `decode` call makes progress, waits, or fails with a status.

use bytes::BytesMut;
use http1::{Decoder, Error, Limits, Message};
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// A model of valid requests and its serialisation.

#[derive(Clone, Debug)]
enum Body {
    None,
    Length(Vec<u8>),
    Chunked {
        chunks: Vec<Vec<u8>>,
        extensions: bool,
        trailers: Vec<(String, String)>,
    },
}

#[derive(Clone, Debug)]
struct Req {
    method: String,
    target: String,
    http10: bool,
    headers: Vec<(String, String)>,
    body: Body,
}

fn header_name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}".prop_filter("framing headers are chosen by the body", |n| {
        !n.eq_ignore_ascii_case("content-length") && !n.eq_ignore_ascii_case("transfer-encoding")
    })
}

fn header_value() -> impl Strategy<Value = String> {
    // No leading or trailing whitespace: the parser trims it.
    "([!-~]{1,10}( [!-~]{1,10}){0,2})?"
}

fn bytes_up_to(n: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..n)
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        Just(Body::None),
        bytes_up_to(200).prop_map(Body::Length),
        (
            prop::collection::vec(bytes_up_to(80), 0..5),
            any::<bool>(),
            prop::collection::vec((header_name(), header_value()), 0..3),
        )
            .prop_map(|(chunks, extensions, trailers)| Body::Chunked {
                chunks,
                extensions,
                trailers,
            }),
    ]
}

fn request() -> impl Strategy<Value = Req> {
    (
        prop_oneof![
            Just("GET".to_owned()),
            Just("HEAD".to_owned()),
            Just("POST".to_owned()),
            Just("PUT".to_owned()),
            "[A-Z]{1,10}",
        ],
        "/[A-Za-z0-9/._~%-]{0,30}(\\?[a-z0-9=&]{0,12})?",
        any::<bool>(),
        prop::collection::vec((header_name(), header_value()), 0..20),
        body(),
    )
        .prop_map(|(method, target, http10, headers, body)| {
            // HTTP/1.0 has no chunked coding: such a request is an error.
            let body = match body {
                Body::Chunked { chunks, .. } if http10 => Body::Length(chunks.concat()),
                b => b,
            };
            Req {
                method,
                target,
                http10,
                headers,
                body,
            }
        })
}

fn serialize(reqs: &[Req]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in reqs {
        let version = if r.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
        out.extend_from_slice(format!("{} {} {version}\r\n", r.method, r.target).as_bytes());
        for (n, v) in &r.headers {
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        match &r.body {
            Body::None => out.extend_from_slice(b"\r\n"),
            Body::Length(b) => {
                out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
            }
            Body::Chunked {
                chunks,
                extensions,
                trailers,
            } => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                for c in chunks.iter().filter(|c| !c.is_empty()) {
                    let ext = if *extensions {
                        ";name=\"v;x\";flag"
                    } else {
                        ""
                    };
                    out.extend_from_slice(format!("{:X}{ext}\r\n", c.len()).as_bytes());
                    out.extend_from_slice(c);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n");
                for (n, v) in trailers {
                    out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
                }
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    out
}

fn body_bytes(b: &Body) -> Vec<u8> {
    match b {
        Body::None => Vec::new(),
        Body::Length(b) => b.clone(),
        Body::Chunked { chunks, .. } => chunks.concat(),
    }
}

// ---------------------------------------------------------------------------
// Driving the decoder.

/// What came out for one request, in a form independent of read boundaries.
#[derive(Debug, PartialEq, Eq)]
struct Decoded {
    head: Vec<u8>,
    method: String,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    ended: bool,
}

#[derive(Debug, PartialEq, Eq)]
struct Run {
    requests: Vec<Decoded>,
    error: Option<Error>,
}

/// Decodes everything currently decodable in `buf`, checking progress.
fn drain(dec: &mut Decoder, buf: &mut BytesMut, out: &mut Vec<Decoded>) -> Result<(), Error> {
    let mut calls = 0;
    let budget = 2 * buf.len() + 4;
    loop {
        let before = buf.len();
        let was_in_body = dec.in_body();
        let msg = match dec.decode(buf) {
            Ok(None) => return Ok(()),
            Ok(Some(msg)) => msg,
            Err(e) => {
                assert!(
                    matches!(e.status().code(), 400 | 413 | 414 | 431 | 501 | 505),
                    "unexpected status {e}"
                );
                assert_eq!(dec.decode(buf).err(), Some(e), "errors are sticky");
                return Err(e);
            }
        };
        calls += 1;
        assert!(calls <= budget, "decode loops without progress");
        match msg {
            Message::Head(req) => {
                assert!(!was_in_body);
                assert!(buf.len() < before, "a head consumes bytes");
                out.push(Decoded {
                    head: req.head_bytes().to_vec(),
                    method: req.method().as_str().to_owned(),
                    target: req.target().to_owned(),
                    headers: req
                        .headers()
                        .map(|(n, v)| (n.to_owned(), v.to_vec()))
                        .collect(),
                    body: Vec::new(),
                    ended: !req.has_body(),
                });
                assert_eq!(dec.is_idle(), !req.has_body());
            }
            Message::Body(piece) => {
                assert!(was_in_body && !piece.is_empty());
                assert!(buf.len() < before, "a body piece consumes bytes");
                out.last_mut()
                    .expect("body after a head")
                    .body
                    .extend_from_slice(&piece);
            }
            Message::End => {
                assert!(was_in_body);
                assert!(dec.is_idle());
                let last = out.last_mut().expect("end after a head");
                assert!(!last.ended);
                last.ended = true;
            }
        }
    }
}

/// Feeds `input` in pieces of the given sizes (cycled), then the rest.
fn run(input: &[u8], sizes: &[usize]) -> Run {
    let mut dec = Decoder::new(Limits::default());
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    let mut rest = input;
    let mut sizes = sizes.iter().copied().cycle();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        if let Err(error) = drain(&mut dec, &mut buf, &mut requests) {
            return Run {
                requests,
                error: Some(error),
            };
        }
    }
    Run {
        requests,
        error: None,
    }
}

fn splits() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..48, 1..20)
}

// ---------------------------------------------------------------------------
// Properties.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn any_split_decodes_like_the_whole(
        reqs in prop::collection::vec(request(), 1..6),
        sizes in splits(),
    ) {
        let input = serialize(&reqs);
        let whole = run(&input, &[]);
        let split = run(&input, &sizes);
        prop_assert_eq!(&whole, &split);
        prop_assert_eq!(whole.error, None);
        prop_assert_eq!(whole.requests.len(), reqs.len());
        for (got, want) in whole.requests.iter().zip(&reqs) {
            prop_assert_eq!(&got.method, &want.method);
            prop_assert_eq!(&got.target, &want.target);
            prop_assert!(got.ended);
            prop_assert_eq!(&got.body, &body_bytes(&want.body));
            let sent: Vec<(String, Vec<u8>)> = want
                .headers
                .iter()
                .map(|(n, v)| (n.clone(), v.clone().into_bytes()))
                .collect();
            prop_assert_eq!(&got.headers[..sent.len()], &sent[..]);
        }
    }

    #[test]
    fn random_bytes_never_panic(input in noise(), sizes in splits()) {
        let _ = run(&input, &sizes);
    }

    #[test]
    fn mutated_requests_never_panic(
        reqs in prop::collection::vec(request(), 1..4),
        edits in prop::collection::vec((any::<usize>(), 0u8..4, interesting_byte()), 1..6),
        sizes in splits(),
    ) {
        let mut input = serialize(&reqs);
        for (pos, kind, byte) in edits {
            mutate(&mut input, pos, kind, byte);
        }
        let whole = run(&input, &[]);
        let split = run(&input, &sizes);
        // Where the bytes make sense whole, they make the same sense in
        // pieces. (Errors may differ: a partial head is checked for its
        // limits before httparse sees its bad bytes.)
        if whole.error.is_none() {
            prop_assert_eq!(whole, split);
        }
    }
}

fn interesting_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        any::<u8>(),
        Just(b'\r'),
        Just(b'\n'),
        Just(b' '),
        Just(b':'),
        Just(b';'),
        Just(b','),
        Just(b'0'),
        Just(b'9'),
        Just(b'f'),
        Just(0u8),
    ]
}

fn mutate(input: &mut Vec<u8>, pos: usize, kind: u8, byte: u8) {
    if input.is_empty() {
        input.push(byte);
        return;
    }
    let i = pos % input.len();
    match kind {
        0 => input[i] = byte,
        1 => input.insert(i, byte),
        2 => {
            input.remove(i);
        }
        _ => {
            // Duplicate a short range: repeated headers, doubled CRLFs.
            let end = (i + 1 + pos % 16).min(input.len());
            let copy = input[i..end].to_vec();
            input.splice(i..i, copy);
        }
    }
}

/// Random bytes, biased towards the pieces HTTP is made of so that the
/// decoder gets past the first byte often enough to be exercised.
fn noise() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        bytes_up_to(8),
        Just(b"GET / HTTP/1.1\r\n".to_vec()),
        Just(b"POST /x HTTP/1.0\r\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"Content-Length: 3\r\n".to_vec()),
        Just(b"Content-Length: 1, 1\r\n".to_vec()),
        Just(b"Transfer-Encoding: chunked\r\n".to_vec()),
        Just(b"Connection: close\r\n".to_vec()),
        Just(b"Expect: 100-continue\r\n".to_vec()),
        Just(b"5;x\r\nhello\r\n".to_vec()),
        Just(b"0\r\n\r\n".to_vec()),
        Just(b"HTTP/2.0".to_vec()),
    ];
    prop::collection::vec(piece, 0..24).prop_map(|p| p.concat())
}
