//! What an `http1::Decoder` makes of a byte stream fed in given reads, in
//! a form that can be compared across different splits of the same bytes.

use std::ops::Range;

use bytes::BytesMut;
use http1::{BodyKind, Decoder, Limits, Message, Request};

/// A request head, as everything its API tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadView {
    /// The raw head bytes.
    pub raw: Vec<u8>,
    /// Method, target, path, query.
    pub line: (String, String, String, Option<String>),
    /// `HTTP/1.x`.
    pub version: &'static str,
    /// All headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Framing and persistence.
    pub body: BodyKind,
    /// Keep-alive.
    pub keep_alive: bool,
    /// `Expect: 100-continue` with a body.
    pub expects_continue: bool,
}

impl HeadView {
    /// Everything `req` tells, checking on the way that its accessors
    /// agree with each other.
    pub fn of(req: &Request) -> HeadView {
        let headers: Vec<(String, Vec<u8>)> = req
            .headers()
            .map(|(n, v)| (n.to_string(), v.to_vec()))
            .collect();
        assert_eq!(req.headers().len(), headers.len(), "Headers::len");
        for (name, value) in &headers {
            // `header` finds the first of that name, case-insensitively.
            let first = headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_slice());
            assert_eq!(req.header(name), first, "header({name:?})");
            let ws = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
            assert!(
                !ws(value.first()) && !ws(value.last()),
                "value {value:?} not trimmed"
            );
        }
        assert_eq!(
            req.has_body(),
            !matches!(req.body_kind(), BodyKind::None | BodyKind::Length(0))
        );
        let raw = req.head_bytes().to_vec();
        assert!(raw.ends_with(b"\n"), "a head ends with its empty line");
        assert!(!req.target().is_empty(), "empty target");
        HeadView {
            raw,
            line: (
                req.method().as_str().to_string(),
                req.target().to_string(),
                req.path().to_string(),
                req.query().map(str::to_string),
            ),
            version: req.version().as_str(),
            headers,
            body: req.body_kind(),
            keep_alive: req.keep_alive(),
            expects_continue: req.expects_continue(),
        }
    }
}

/// One step of a transcript. Consecutive body pieces are merged, since how
/// a body is cut into pieces depends on the reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A request head.
    Head(Box<HeadView>),
    /// Body bytes.
    Body(Vec<u8>),
    /// The end of a body.
    End,
    /// A decoding error with this status; always the last event.
    Error(u16),
}

/// The decoder's reading of the stream, and what it left in the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// What came out, in order.
    pub events: Vec<Event>,
    /// The bytes left in the buffer at the end (none after an error).
    pub rest: Vec<u8>,
}

impl Transcript {
    /// Whether `self` and `other`, two readings of the same bytes in
    /// different reads, mean the same: the same events and the same bytes
    /// left, up to the status of a final error; or one has found an error
    /// in a request the other is still waiting to see complete (a bad byte
    /// in a partial head is found when its line ends, not when it arrives).
    pub fn agrees_with(&self, other: &Transcript) -> bool {
        if self.without_status() == other.without_status() {
            return self.rest == other.rest;
        }
        let pending = |failed: &Transcript, waiting: &Transcript| {
            matches!(failed.events.last(), Some(Event::Error(_)))
                && failed.events[..failed.events.len() - 1] == waiting.events[..]
                && !waiting.rest.is_empty()
        };
        pending(self, other) || pending(other, self)
    }

    /// The events, with the status of a final error reduced to "an error":
    /// which limit or rule a bad request hits first may depend on how far
    /// it had arrived when it was looked at.
    pub fn without_status(&self) -> Vec<Event> {
        let mut events = self.events.clone();
        if let Some(Event::Error(code)) = events.last_mut() {
            *code = 0;
        }
        events
    }
}

/// [`run`] with the whole input arriving in one read.
pub fn run_at_once(input: &[u8], limits: Limits, first_only: bool) -> Transcript {
    let all: Vec<Range<usize>> = std::iter::once(0..input.len()).collect();
    run(input, &all, limits, first_only)
}

/// Feeds `input` to a new decoder in the reads `splits`, decoding all it
/// can after each. `first_only` stops after the first whole request (its
/// body-less head, or its body's `End`), leaving the rest buffered.
pub fn run(input: &[u8], splits: &[Range<usize>], limits: Limits, first_only: bool) -> Transcript {
    let mut decoder = Decoder::new(limits);
    let mut buf = BytesMut::new();
    let mut events: Vec<Event> = Vec::new();
    let mut done = false;
    for range in splits {
        buf.extend_from_slice(&input[range.clone()]);
        // Each message consumes bytes, except `End` after a sized body;
        // more steps than bytes plus heads means no progress.
        let mut steps = 0;
        while !done {
            steps += 1;
            assert!(
                steps <= 2 * input.len() + 4,
                "the decoder makes no progress"
            );
            let before = buf.len();
            match decoder.decode(&mut buf) {
                Ok(None) => break,
                Ok(Some(Message::Head(req))) => {
                    assert!(buf.len() < before, "a head consumed nothing");
                    assert_eq!(decoder.in_body(), req.has_body());
                    events.push(Event::Head(Box::new(HeadView::of(&req))));
                    done = first_only && !req.has_body();
                }
                Ok(Some(Message::Body(piece))) => {
                    assert!(!piece.is_empty(), "an empty body piece");
                    assert!(decoder.in_body());
                    match events.last_mut() {
                        Some(Event::Body(b)) => b.extend_from_slice(&piece),
                        _ => events.push(Event::Body(piece.to_vec())),
                    }
                }
                Ok(Some(Message::End)) => {
                    assert!(!decoder.in_body());
                    events.push(Event::End);
                    done = first_only;
                }
                Err(e) => {
                    let code = e.status().code();
                    assert!(
                        matches!(code, 400 | 413 | 414 | 431 | 501 | 505),
                        "unexpected error status {code}"
                    );
                    // A failed decoder stays failed.
                    assert_eq!(decoder.decode(&mut buf).err(), Some(e));
                    events.push(Event::Error(code));
                    return Transcript {
                        events,
                        rest: Vec::new(),
                    };
                }
            }
        }
    }
    Transcript {
        events,
        rest: buf.to_vec(),
    }
}
