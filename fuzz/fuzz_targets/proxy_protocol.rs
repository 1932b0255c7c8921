//! The PROXY protocol parser (`httplite::proxy_protocol`, versions 1 and
//! 2) on arbitrary bytes.
//!
//! Checks, besides "no panic": a header it accepts fits in the input and
//! within the format's bounds; and the answer does not change when bytes
//! are added after a complete header (what follows the header is the
//! connection's own data), nor, for an incomplete one, does a prefix of
//! the input ever claim a complete header that the whole input refutes.
//! The drivers' reader ([`HeaderReader`]) is driven over the same bytes
//! arriving in two pieces (the split from the first byte): it must reach
//! the parser's verdict and never read a byte past the header.

#![no_main]

use httplite::proxy_protocol::{HeaderReader, Parsed, Step, parse};
use libfuzzer_sys::fuzz_target;

/// Drives a reader over `data`, of which `avail` bytes have arrived at
/// first and the rest after a wait; returns its verdict and how many bytes
/// it consumed.
fn read(data: &[u8], first: usize) -> (Step, usize) {
    let mut r = HeaderReader::default();
    let (mut pos, mut avail) = (0, first.min(data.len()));
    loop {
        let peeked = (avail - pos).min(r.spare().len());
        r.spare()[..peeked].copy_from_slice(&data[pos..pos + peeked]);
        match r.step(peeked) {
            Step::Read(max) => {
                assert!(max >= 1);
                if avail == pos {
                    if avail == data.len() {
                        return (Step::Read(max), pos); // waits for more
                    }
                    avail = data.len();
                }
                let n = max.min(avail - pos);
                r.spare()[..n].copy_from_slice(&data[pos..pos + n]);
                r.consumed(n);
                pos += n;
            }
            Step::Done { consume, source } => {
                assert!(pos + consume <= avail, "asked for bytes not seen");
                return (Step::Done { consume: 0, source }, pos + consume);
            }
            invalid => return (invalid, pos),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let whole = parse(data);
    let first = data.first().map_or(0, |&b| usize::from(b));
    let (step, consumed) = read(data, first);
    match whole {
        Parsed::Done { len, source } => {
            assert_eq!(step, Step::Done { consume: 0, source });
            assert_eq!(consumed, len, "read past (or short of) the header");
        }
        Parsed::Invalid(_) => assert!(matches!(step, Step::Invalid(_)), "{step:?}"),
        Parsed::Incomplete => assert!(matches!(step, Step::Read(_)), "{step:?}"),
    }
    if let Parsed::Done { len, .. } = whole {
        assert!(len <= data.len());
        assert!(len <= 16 + 2048, "header of {len} bytes");
        let mut more = data.to_vec();
        more.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(
            parse(&more),
            whole,
            "bytes after the header changed the answer"
        );
        // Every prefix shorter than the header is incomplete or the same
        // verdict on the bytes it has: never a different complete header.
        for cut in 0..len {
            if let Parsed::Done { len: l, source } = parse(&data[..cut]) {
                panic!("prefix of {cut} bytes parsed as a header of {l} ({source:?})");
            }
        }
    }
});
