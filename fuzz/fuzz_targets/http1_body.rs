//! Body framing in `http1`: `Content-Length` and chunked bodies (chunk
//! extensions, trailers) fed in arbitrary reads, against the reference
//! decoder in `fuzz_support::chunked_ref`.
//!
//! Input: one control byte, then the body bytes as the client sends them
//! after the head. The control byte picks the framing (bit 0: chunked,
//! else `Content-Length`), the body limit (bits 1–3), the header limit
//! that bounds trailers (bits 4–5) and the `Content-Length` (bits 6–7: 0,
//! half the body, all of it, one more byte than sent). The split into
//! reads is drawn from a hash of the input.
//!
//! Checks: the decoder, fed the synthesized head and the body in any
//! split, yields exactly the reference's decoding (same data, same end,
//! same error status at the same point) and leaves exactly the bytes after
//! the body in the buffer; no body ever exceeds the body limit.
#![no_main]

use fuzz_support::Knobs;
use fuzz_support::chunked_ref::{self, ChunkedEnd};
use fuzz_support::transcript::{self, Event, Transcript};
use http1::{BodyKind, Limits};
use libfuzzer_sys::fuzz_target;

const MAX_BODY: [u64; 8] = [0, 1, 5, 16, 100, 4096, 65536, 1 << 20];
const MAX_HEAD: [usize; 4] = [40, 100, 1000, 16384];

fuzz_target!(|data: &[u8]| {
    let Some((&control, body)) = data.split_first() else {
        return;
    };
    let chunked = control & 1 == 1;
    let limits = Limits {
        max_body: MAX_BODY[usize::from(control >> 1 & 7)],
        max_head: MAX_HEAD[usize::from(control >> 4 & 3)],
        ..Limits::default()
    };
    let length = match control >> 6 {
        0 => 0,
        1 => body.len() / 2,
        2 => body.len(),
        _ => body.len() + 1,
    } as u64;

    let head = if chunked {
        "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_string()
    } else {
        format!("POST /b HTTP/1.1\r\nContent-Length: {length}\r\n\r\n")
    };
    let input = [head.as_bytes(), body].concat();
    let expected = reference(body, chunked, length, &limits);

    let whole = transcript::run_at_once(&input, limits, true);
    check(&whole, &expected, &limits, "whole");
    let splits = Knobs::new(data).splits(input.len());
    let split = transcript::run(&input, &splits, limits, true);
    check(&split, &expected, &limits, "split");
});

/// What the decoder must make of the head and `body`: the head's framing
/// (`None`: the head itself is refused, with 413), then the events after
/// the head and the bytes left.
struct Expected {
    head: Option<BodyKind>,
    after: Transcript,
}

fn reference(body: &[u8], chunked: bool, length: u64, limits: &Limits) -> Expected {
    let mut events = Vec::new();
    let (data, rest) = if chunked {
        let (data, end) = chunked_ref::decode(body, limits.max_body, limits.max_head);
        match end {
            ChunkedEnd::Complete(n) => (data, Some(body[n..].to_vec())),
            ChunkedEnd::NeedMore => (data, None),
            ChunkedEnd::Error(code) => {
                push_body(&mut events, data);
                events.push(Event::Error(code));
                let after = Transcript {
                    events,
                    rest: Vec::new(),
                };
                return Expected {
                    head: Some(BodyKind::Chunked),
                    after,
                };
            }
        }
    } else if length > limits.max_body {
        let after = Transcript {
            events: vec![Event::Error(413)],
            rest: Vec::new(),
        };
        return Expected { head: None, after };
    } else {
        let n = (length as usize).min(body.len());
        (
            body[..n].to_vec(),
            (n as u64 == length).then(|| body[n..].to_vec()),
        )
    };
    push_body(&mut events, data);
    let rest = match rest {
        // A zero-length body has no `End`: the head is the whole request.
        Some(rest) if length == 0 && !chunked => rest,
        Some(rest) => {
            events.push(Event::End);
            rest
        }
        None => Vec::new(),
    };
    let head = Some(if chunked {
        BodyKind::Chunked
    } else {
        BodyKind::Length(length)
    });
    Expected {
        head,
        after: Transcript { events, rest },
    }
}

fn push_body(events: &mut Vec<Event>, data: Vec<u8>) {
    if !data.is_empty() {
        events.push(Event::Body(data));
    }
}

/// `got` against `expected`.
fn check(got: &Transcript, expected: &Expected, limits: &Limits, how: &str) {
    let after = match (expected.head, got.events.first()) {
        (Some(kind), Some(Event::Head(h))) => {
            assert_eq!(h.body, kind, "{how}: wrong framing");
            &got.events[1..]
        }
        (None, _) => &got.events[..],
        (Some(_), other) => panic!("{how}: no head but {other:?}"),
    };
    assert_eq!(after, expected.after.events, "{how}: decoded differently");
    assert_eq!(got.rest, expected.after.rest, "{how}: different bytes left");
    let total: usize = after
        .iter()
        .map(|e| match e {
            Event::Body(b) => b.len(),
            _ => 0,
        })
        .sum();
    assert!(
        total as u64 <= limits.max_body,
        "{how}: body over the limit"
    );
}
