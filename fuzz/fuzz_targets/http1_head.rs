//! The request-head parsers of `http1`, fed arbitrary bytes.
//!
//! Input: the bytes a client sends. Limits and the split into reads are
//! drawn from a hash of the input (`fuzz_support::Knobs`).
//!
//! Checks, besides "no panic" (and http1's debug assertions):
//! - the fast single-pass parser and the general path (http1's strict
//!   request line, then httparse for the header fields) agree wherever the
//!   fast one accepts: same request through every accessor, same bytes
//!   left over; where it declines it leaves the buffer alone;
//! - the general path agrees with an independent reading of the request
//!   line and the `Host` rules (`fuzz_support::rfc_line`, written from the
//!   RFCs): a head it accepts has a valid line with the same method,
//!   target and version, and valid `Host` values, one where required; a
//!   line the reference finds malformed and ended is an error, 400 or 505
//!   as the reference says when within the line limit; a line that can
//!   still become valid is waited for;
//! - a `Decoder` fed the whole input at once starts with exactly what the
//!   two parsers say (a head, an error, or nothing yet);
//! - a `Decoder` fed the same bytes in arbitrary reads produces the same
//!   heads, bodies and ends, fails at the same point (the status may
//!   differ: a limit can be hit before a bad byte arrives), and leaves the
//!   same bytes buffered; except that a bad byte in a head that has not
//!   ended may be found by one reading and not yet by the other.
#![no_main]

use bytes::BytesMut;
use fuzz_support::Knobs;
use fuzz_support::rfc_line::{self, Line};
use fuzz_support::transcript::{self, Event, HeadView};
use http1::{Limits, fuzzing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut knobs = Knobs::new(data);
    let limits = limits(&mut knobs);

    let mut fast_buf = BytesMut::from(data);
    let fast = fuzzing::parse_fast(&mut fast_buf, limits);
    let mut slow_buf = BytesMut::from(data);
    // `parse_httparse` is the general path: our line parser, then httparse
    // for the header fields.
    let slow = fuzzing::parse_httparse(&mut slow_buf, limits);
    check_line(
        data,
        http1::Decoder::new(limits).limits(),
        &slow
            .as_ref()
            .map(|s| s.as_ref().map(HeadView::of))
            .map_err(|e| e.status().code()),
    );
    let first = match (&fast, &slow) {
        (Some(f), Ok(Some(s))) => {
            let view = HeadView::of(f);
            assert_eq!(view, HeadView::of(s), "fast path and general path disagree");
            assert_eq!(fast_buf, slow_buf, "different bytes left over");
            Some(Event::Head(Box::new(view)))
        }
        (Some(f), other) => panic!("fast path accepted {f:?}, general path says {other:?}"),
        (None, result) => {
            assert_eq!(&fast_buf[..], data, "a declining fast path consumed bytes");
            match result {
                Ok(Some(s)) => Some(Event::Head(Box::new(HeadView::of(s)))),
                Ok(None) => None,
                Err(e) => Some(Event::Error(e.status().code())),
            }
        }
    };

    let whole = transcript::run_at_once(data, limits, false);
    // The decoder skips empty lines first; the parsers alone do not.
    if !data.starts_with(b"\r") && !data.starts_with(b"\n") {
        match first {
            Some(event) => assert_eq!(whole.events.first(), Some(&event)),
            // Partial for the general path: at most a limit error from the
            // scan.
            None => assert!(matches!(
                whole.events.as_slice(),
                [] | [Event::Error(414 | 431)]
            )),
        }
    }

    let splits = knobs.splits(data.len());
    let split = transcript::run(data, &splits, limits, false);
    assert!(
        whole.agrees_with(&split),
        "the reads changed the meaning:\n{whole:?}\n{split:?}"
    );
});

/// The server's limits half the time, small ones otherwise (so that every
/// limit is within reach of short inputs).
fn limits(knobs: &mut Knobs) -> Limits {
    let require_host = knobs.one_in(2);
    if knobs.one_in(2) {
        return Limits {
            require_host,
            ..Limits::default()
        };
    }
    Limits {
        max_request_line: knobs.pick(&[8, 16, 40, 100, 1000]),
        max_head: knobs.pick(&[0, 10, 30, 100, 1000]),
        max_headers: knobs.pick(&[0, 1, 2, 5, 129]),
        max_body: knobs.pick(&[0, 1, 10, 1000]),
        require_host,
    }
}

/// The general path's answer on `data` (a head, nothing yet, or an error
/// status) against the reference reading of its request line and `Host`
/// rules; see the top. `limits` are the capped ones the parser used.
fn check_line(data: &[u8], limits: &Limits, general: &Result<Option<HeadView>, u16>) {
    let first = data.split(|&b| b == b'\n').next().unwrap_or_default();
    let line_len = first.len() - usize::from(first.last() == Some(&b'\r'));
    let within = line_len <= limits.max_request_line;
    let reference = rfc_line::request_line(data);
    let fail = |why: &str| -> ! {
        panic!(
            "{why}\ninput: {}\nreference: {reference:?}\ngeneral path: {general:?}",
            data.escape_ascii()
        )
    };
    match (&reference, general) {
        (
            Line::Valid {
                method,
                target,
                http11,
                ..
            },
            Ok(Some(view)),
        ) => {
            if view.line.0.as_bytes() != *method || view.line.1.as_bytes() != *target {
                fail("another method or target");
            }
            if view.version != if *http11 { "HTTP/1.1" } else { "HTTP/1.0" } {
                fail("another version");
            }
            let hosts: Vec<&[u8]> = view
                .headers
                .iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case("host"))
                .map(|(_, value)| value.as_slice())
                .collect();
            if !hosts.iter().all(|v| rfc_line::is_host_value(v)) {
                fail("an invalid Host value accepted");
            }
            if limits.require_host && hosts.len() != 1 && (hosts.len() > 1 || *http11) {
                fail("a missing or repeated Host accepted");
            }
        }
        (_, Ok(Some(_))) => fail("a request line the reference rejects accepted"),
        (Line::Valid { .. }, Err(505)) => fail("a valid request line answered 505"),
        // The header fields decide, or a limit.
        (Line::Valid { .. }, _) => {}
        (Line::Partial, Ok(None)) => {}
        (Line::Partial, Err(_)) => fail("a line that may still become valid rejected"),
        (Line::Bad { ended: true, .. }, Ok(None)) => fail("a malformed line waited on"),
        (
            Line::Bad {
                status,
                ended: true,
            },
            Err(code),
        ) => {
            if within && code != status {
                fail("another status");
            }
        }
        (Line::Bad { ended: false, .. }, Ok(None) | Err(400)) => {}
        (Line::Bad { ended: false, .. }, Err(_)) => fail("an early error other than 400"),
    }
}
