//! Byte ranges (RFC 9110 §14): parsing a `Range` header against a file's
//! size, `If-Range`, and the layout of a `multipart/byteranges` body.
//!
//! The layout is computed up front, so the head carries the exact
//! `Content-Length`: each part is its header block (boundary, Content-Type,
//! Content-Range) then the part's bytes, and a closing boundary ends the
//! body. The plan copies each header block into the write buffer and sends
//! the bytes after it (copied or by `sendfile`), part after part.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use http1::Request;

use crate::httpdate::parse_http_date;

/// More ranges than this in one request are answered with the whole file
/// (a many-range request costs more than it saves; RFC 9110 §14.2 lets a
/// server ignore it).
pub const MAX_RANGES: usize = 16;

/// What a `Range` header asks of a file of a given size.
#[derive(Debug, PartialEq, Eq)]
pub enum RangeSpec {
    /// One range: inclusive byte positions.
    Single(u64, u64),
    /// Several satisfiable, non-overlapping ranges (inclusive), in the
    /// client's order.
    Multi(Vec<(u64, u64)>),
    /// No range is satisfiable: 416 with `Content-Range: bytes */size`.
    Unsatisfiable,
    /// Malformed, overlapping or too many ranges, or a unit other than
    /// bytes: serve the whole file (allowed by RFC 9110 §14.2).
    Ignore,
}

/// One range of `spec`: `Some(None)` if well-formed but not satisfiable.
fn one(spec: &str, size: u64) -> Option<Option<(u64, u64)>> {
    let (a, b) = spec.trim().split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        // Suffix: the last `b` bytes.
        let n = b.parse::<u64>().ok()?;
        if n == 0 || size == 0 {
            return Some(None);
        }
        return Some(Some((size.saturating_sub(n), size - 1)));
    }
    let start = a.parse::<u64>().ok()?;
    let end = if b.is_empty() {
        u64::MAX
    } else {
        match b.parse::<u64>() {
            Ok(e) if e >= start => e,
            _ => return None,
        }
    };
    if start >= size {
        return Some(None);
    }
    Some(Some((start, end.min(size - 1))))
}

/// Parses a `Range` header for a file of `size` bytes.
pub fn parse_ranges(header: &[u8], size: u64) -> RangeSpec {
    let Ok(h) = std::str::from_utf8(header) else {
        return RangeSpec::Ignore;
    };
    let Some(set) = h.trim().strip_prefix("bytes=") else {
        return RangeSpec::Ignore;
    };
    let mut ranges = Vec::new();
    let mut count = 0;
    // Empty list elements are allowed (RFC 9110 §5.6.1).
    for spec in set.split(',').filter(|s| !s.trim().is_empty()) {
        count += 1;
        if count > MAX_RANGES {
            return RangeSpec::Ignore;
        }
        match one(spec, size) {
            Some(Some(r)) => ranges.push(r),
            Some(None) => {}
            None => return RangeSpec::Ignore,
        }
    }
    match ranges.len() {
        0 if count == 0 => RangeSpec::Ignore,
        0 => RangeSpec::Unsatisfiable,
        1 => RangeSpec::Single(ranges[0].0, ranges[0].1),
        _ if overlapping(&ranges) => RangeSpec::Ignore,
        _ => RangeSpec::Multi(ranges),
    }
}

/// Whether any two of `ranges` share a byte.
fn overlapping(ranges: &[(u64, u64)]) -> bool {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[1].0 <= w[0].1)
}

/// A range is honoured only if `If-Range` is absent or still matches: an
/// entity tag compared strongly (a weak one never matches), or a date equal
/// to the file's modification time (RFC 9110 §13.1.5).
pub fn if_range_allows(req: &Request, etag: &str, mtime: u64) -> bool {
    match req.header("if-range") {
        None => true,
        Some(v) if v.starts_with(b"\"") => v == etag.as_bytes(),
        Some(v) if v.starts_with(b"W/") => false,
        Some(v) => parse_http_date(v) == Some(mtime),
    }
}

/// One part of a `multipart/byteranges` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The part's header block, boundary line included (and the CRLF that
    /// ends the previous part's bytes, for every part but the first).
    pub head: Vec<u8>,
    /// First byte of the file.
    pub offset: u64,
    /// Bytes of the file.
    pub len: u64,
}

/// The layout of a `multipart/byteranges` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multipart {
    boundary: String,
    /// The parts, in the client's order.
    pub parts: Vec<Part>,
    /// The closing boundary.
    pub closing: Vec<u8>,
}

impl Multipart {
    /// The body for `ranges` (inclusive) of a file of `size` bytes whose
    /// type is `content_type`, with a fresh boundary.
    pub fn new(ranges: &[(u64, u64)], size: u64, content_type: &str) -> Multipart {
        Multipart::with_boundary(ranges, size, content_type, fresh_boundary())
    }

    /// As [`Multipart::new`] with a given boundary (tests).
    pub fn with_boundary(
        ranges: &[(u64, u64)],
        size: u64,
        content_type: &str,
        boundary: String,
    ) -> Multipart {
        let parts = ranges
            .iter()
            .enumerate()
            .map(|(i, &(start, end))| {
                let sep = if i == 0 { "" } else { "\r\n" };
                let head = format!(
                    "{sep}--{boundary}\r\nContent-Type: {content_type}\r\n\
                     Content-Range: bytes {start}-{end}/{size}\r\n\r\n"
                );
                Part {
                    head: head.into_bytes(),
                    offset: start,
                    len: end - start + 1,
                }
            })
            .collect();
        let closing = format!("\r\n--{boundary}--\r\n").into_bytes();
        Multipart {
            boundary,
            parts,
            closing,
        }
    }

    /// The response's `Content-Type`.
    pub fn content_type(&self) -> String {
        format!("multipart/byteranges; boundary={}", self.boundary)
    }

    /// The whole body's length: the `Content-Length`.
    pub fn content_length(&self) -> u64 {
        let parts: u64 = self.parts.iter().map(|p| p.head.len() as u64 + p.len).sum();
        parts + self.closing.len() as u64
    }
}

/// A boundary no file is likely to hold: 20 random hex digits after a
/// prefix (RFC 2046 §5.1.1 allows up to 70 characters).
fn fresh_boundary() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // `RandomState` is seeded from the OS once per thread, then varied.
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    format!("httplite-{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_ranges() {
        assert_eq!(parse_ranges(b"bytes=0-9", 100), RangeSpec::Single(0, 9));
        assert_eq!(parse_ranges(b"bytes=90-", 100), RangeSpec::Single(90, 99));
        assert_eq!(parse_ranges(b"bytes=-10", 100), RangeSpec::Single(90, 99));
        assert_eq!(parse_ranges(b"bytes=-1000", 100), RangeSpec::Single(0, 99));
        assert_eq!(
            parse_ranges(b"bytes=50-1000", 100),
            RangeSpec::Single(50, 99)
        );
        assert_eq!(parse_ranges(b"bytes=100-", 100), RangeSpec::Unsatisfiable);
        assert_eq!(parse_ranges(b"bytes=-0", 100), RangeSpec::Unsatisfiable);
        assert_eq!(parse_ranges(b"bytes=5-1", 100), RangeSpec::Ignore);
        assert_eq!(parse_ranges(b"items=0-1", 100), RangeSpec::Ignore);
        assert_eq!(parse_ranges(b"bytes=", 100), RangeSpec::Ignore);
        assert_eq!(parse_ranges(b"bytes=x-1", 100), RangeSpec::Ignore);
    }

    #[test]
    fn multiple_ranges() {
        assert_eq!(
            parse_ranges(b"bytes=0-9,20-29", 100),
            RangeSpec::Multi(vec![(0, 9), (20, 29)])
        );
        // The client's order is kept; adjacent is not overlapping.
        assert_eq!(
            parse_ranges(b"bytes=50-59, 0-9 ,10-19", 100),
            RangeSpec::Multi(vec![(50, 59), (0, 9), (10, 19)])
        );
        assert_eq!(
            parse_ranges(b"bytes=0-0,-1", 100),
            RangeSpec::Multi(vec![(0, 0), (99, 99)])
        );
        // Unsatisfiable ones are dropped; one left is a single range.
        assert_eq!(
            parse_ranges(b"bytes=0-9,200-300", 100),
            RangeSpec::Single(0, 9)
        );
        assert_eq!(
            parse_ranges(b"bytes=200-300,400-", 100),
            RangeSpec::Unsatisfiable
        );
        // Overlapping: the whole file.
        assert_eq!(parse_ranges(b"bytes=0-9,5-14", 100), RangeSpec::Ignore);
        assert_eq!(parse_ranges(b"bytes=20-29,0-", 100), RangeSpec::Ignore);
        assert_eq!(parse_ranges(b"bytes=0-9,-95", 100), RangeSpec::Ignore);
        // One malformed range spoils the set.
        assert_eq!(parse_ranges(b"bytes=0-9,x", 100), RangeSpec::Ignore);
        // At most MAX_RANGES.
        let sixteen: Vec<String> = (0..16).map(|i| format!("{}-{}", i * 2, i * 2)).collect();
        let h = format!("bytes={}", sixteen.join(","));
        assert!(matches!(parse_ranges(h.as_bytes(), 100), RangeSpec::Multi(r) if r.len() == 16));
        let h = format!("bytes={},40-41", sixteen.join(","));
        assert_eq!(parse_ranges(h.as_bytes(), 100), RangeSpec::Ignore);
    }

    #[test]
    fn multipart_layout() {
        let m = Multipart::with_boundary(&[(0, 9), (20, 29)], 100, "text/plain", "B".into());
        assert_eq!(m.content_type(), "multipart/byteranges; boundary=B");
        assert_eq!(m.parts.len(), 2);
        assert_eq!(
            m.parts[0].head,
            b"--B\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-9/100\r\n\r\n"
        );
        assert_eq!((m.parts[0].offset, m.parts[0].len), (0, 10));
        assert_eq!(
            m.parts[1].head,
            b"\r\n--B\r\nContent-Type: text/plain\r\nContent-Range: bytes 20-29/100\r\n\r\n"
        );
        assert_eq!((m.parts[1].offset, m.parts[1].len), (20, 10));
        assert_eq!(m.closing, b"\r\n--B--\r\n");
        // The body, assembled, is exactly Content-Length long.
        let file: Vec<u8> = (0..100u8).collect();
        let mut body = Vec::new();
        for p in &m.parts {
            body.extend_from_slice(&p.head);
            body.extend_from_slice(&file[p.offset as usize..(p.offset + p.len) as usize]);
        }
        body.extend_from_slice(&m.closing);
        assert_eq!(body.len() as u64, m.content_length());
    }

    #[test]
    fn boundaries_differ() {
        let a = Multipart::new(&[(0, 0), (2, 2)], 3, "x/y").content_type();
        let b = Multipart::new(&[(0, 0), (2, 2)], 3, "x/y").content_type();
        assert_ne!(a, b);
        assert!(a.len() < 70 + 40);
    }
}
