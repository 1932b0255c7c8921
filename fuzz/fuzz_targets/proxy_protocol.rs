//! The PROXY protocol parser (`httplite::proxy_protocol`, versions 1 and
//! 2) on arbitrary bytes.
//!
//! Checks, besides "no panic": a header it accepts fits in the input and
//! within the format's bounds; and the answer does not change when bytes
//! are added after a complete header (what follows the header is the
//! connection's own data), nor, for an incomplete one, does a prefix of
//! the input ever claim a complete header that the whole input refutes.

#![no_main]

use httplite::proxy_protocol::{Parsed, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = parse(data);
    if let Parsed::Done { len, .. } = whole {
        assert!(len <= data.len());
        assert!(len <= 16 + 2048, "header of {len} bytes");
        let mut more = data.to_vec();
        more.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(parse(&more), whole, "bytes after the header changed the answer");
        // Every prefix shorter than the header is incomplete or the same
        // verdict on the bytes it has: never a different complete header.
        for cut in 0..len {
            if let Parsed::Done { len: l, source } = parse(&data[..cut]) {
                panic!("prefix of {cut} bytes parsed as a header of {l} ({source:?})");
            }
        }
    }
});
