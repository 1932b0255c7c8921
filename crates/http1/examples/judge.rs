//! The `http1` judge of the differential conformance test
//! (`scripts/conformance.sh`, `tests/conformance/`).
//!
//! Reads stdin, one hex-encoded request head per line, feeds each to a fresh
//! `Decoder` with `require_host: true` (as a server facing clients runs it)
//! and prints one line per head:
//!
//! - `accept <METHOD> <target as hex> <version>` for a head, version `1.0`
//!   or `1.1`;
//! - `reject <status code>` for an error;
//! - `incomplete` when the decoder wants more bytes;
//! - `bad-input` for a line that is not valid hex.
//!
//! The reference judges (`judge_h11.py`, `judge_llhttp.js`) speak the same
//! protocol, so `compare.py` can put the three verdicts side by side.
//!
//! Run with
//! `printf '474554202f20485454502f312e310d0a486f73743a20610d0a0d0a\n' | cargo run -q -p http1 --example judge`.

use std::io::{self, BufRead, BufWriter, Write};

use bytes::BytesMut;
use http1::{Decoder, Limits, Message, Version};

fn main() -> io::Result<()> {
    let stdin = io::stdin();
    let mut out = BufWriter::new(io::stdout().lock());
    for line in stdin.lock().lines() {
        let line = line?;
        let verdict = match unhex(line.trim()) {
            Some(bytes) => judge(&bytes),
            None => "bad-input".to_string(),
        };
        writeln!(out, "{verdict}")?;
    }
    out.flush()
}

/// The verdict of a fresh decoder on one buffer holding exactly `head`.
fn judge(head: &[u8]) -> String {
    let mut decoder = Decoder::new(Limits {
        require_host: true,
        ..Default::default()
    });
    let mut buf = BytesMut::from(head);
    match decoder.decode(&mut buf) {
        Ok(Some(Message::Head(req))) => {
            let version = match req.version() {
                Version::Http10 => "1.0",
                Version::Http11 => "1.1",
            };
            format!(
                "accept {} {} {version}",
                req.method().as_str(),
                hex(req.target().as_bytes())
            )
        }
        // A fresh decoder's first message is always a head.
        Ok(Some(other)) => format!("unexpected {other:?}"),
        Ok(None) => "incomplete".to_string(),
        Err(err) => format!("reject {}", err.status().code()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
