//! The request-head parsers of `http1`, fed arbitrary bytes.
//!
//! Input: the bytes a client sends. Limits and the split into reads are
//! drawn from a hash of the input (`fuzz_support::Knobs`).
//!
//! Checks, besides "no panic" (and http1's debug assertions):
//! - the fast single-pass parser and the httparse path agree wherever the
//!   fast one accepts: same request through every accessor, same bytes
//!   left over; where it declines it leaves the buffer alone;
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
use fuzz_support::transcript::{self, Event, HeadView};
use http1::{Limits, fuzzing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut knobs = Knobs::new(data);
    let limits = limits(&mut knobs);

    let mut fast_buf = BytesMut::from(data);
    let fast = fuzzing::parse_fast(&mut fast_buf, limits);
    let mut slow_buf = BytesMut::from(data);
    let slow = fuzzing::parse_httparse(&mut slow_buf, limits);
    let first = match (&fast, &slow) {
        (Some(f), Ok(Some(s))) => {
            let view = HeadView::of(f);
            assert_eq!(view, HeadView::of(s), "fast path and httparse disagree");
            assert_eq!(fast_buf, slow_buf, "different bytes left over");
            Some(Event::Head(Box::new(view)))
        }
        (Some(f), other) => panic!("fast path accepted {f:?}, httparse says {other:?}"),
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
            // Partial for httparse: at most a limit error from the scan.
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
