//! A reference decoder for chunked bodies, written from RFC 9112 §7.1 and
//! http1's documented policy, over the whole input at once. It shares no
//! code with `http1`: the fuzz targets check that the incremental decoder,
//! fed the same bytes in any split, says exactly what this one says.
//!
//! Policy (http1's, documented in its `chunked` module): line ends are CRLF
//! only; whitespace after the size may only lead to `;`; a chunk extension
//! is skipped up to its CR, must hold no LF or NUL and at most 4096 bytes
//! after the `;`; trailer lines are skipped, bounded by the header limit
//! (bytes other than line ends); the announced total is checked against the
//! body limit (413) when a size line ends.

/// Longest chunk extension after the `;`, in bytes.
pub const MAX_EXTENSION: usize = 4096;

/// How decoding a chunked body ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkedEnd {
    /// The body ended after this many input bytes.
    Complete(usize),
    /// The input ran out first.
    NeedMore,
    /// The body is invalid: answer this status.
    Error(u16),
}

/// Decodes the chunked body at the start of `input`: the data decoded
/// before the end (or the error, or the end of input), and how it ended.
pub fn decode(input: &[u8], max_body: u64, max_trailer: usize) -> (Vec<u8>, ChunkedEnd) {
    let mut data = Vec::new();
    let end = run(input, max_body, max_trailer, &mut data);
    (data, end)
}

/// Why [`run`] stopped early.
enum Stop {
    NeedMore,
    Error(u16),
}

impl From<Stop> for ChunkedEnd {
    fn from(s: Stop) -> ChunkedEnd {
        match s {
            Stop::NeedMore => ChunkedEnd::NeedMore,
            Stop::Error(code) => ChunkedEnd::Error(code),
        }
    }
}

fn run(input: &[u8], max_body: u64, max_trailer: usize, data: &mut Vec<u8>) -> ChunkedEnd {
    let mut at = 0;
    let mut total: u64 = 0;
    loop {
        let size = match size_line(input, &mut at) {
            Ok(size) => size,
            Err(stop) => return stop.into(),
        };
        if size == 0 {
            return match trailers(input, at, max_trailer) {
                Ok(end) => ChunkedEnd::Complete(end),
                Err(stop) => stop.into(),
            };
        }
        total = match total.checked_add(size) {
            Some(t) if t <= max_body => t,
            _ => return ChunkedEnd::Error(413),
        };
        let available = (input.len() - at) as u64;
        if available < size {
            data.extend_from_slice(&input[at..]);
            return ChunkedEnd::NeedMore;
        }
        let end = at + size as usize;
        data.extend_from_slice(&input[at..end]);
        at = end;
        if let Err(stop) = crlf(input, &mut at) {
            return stop.into();
        }
    }
}

/// `chunk-size [ chunk-ext ] CRLF`, returning the size.
fn size_line(input: &[u8], at: &mut usize) -> Result<u64, Stop> {
    let mut size: u64 = 0;
    let mut digits = 0;
    while let Some(&b) = input.get(*at) {
        let Some(d) = (b as char).to_digit(16) else {
            break;
        };
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(d)))
            .ok_or(Stop::Error(400))?;
        digits += 1;
        *at += 1;
    }
    let Some(&next) = input.get(*at) else {
        return Err(Stop::NeedMore);
    };
    if digits == 0 {
        return Err(Stop::Error(400));
    }
    let mut next = next;
    while next == b' ' || next == b'\t' {
        *at += 1;
        next = *input.get(*at).ok_or(Stop::NeedMore)?;
        if !matches!(next, b' ' | b'\t' | b';') {
            return Err(Stop::Error(400));
        }
    }
    match next {
        b';' => {
            *at += 1;
            let start = *at;
            loop {
                let b = *input.get(*at).ok_or(Stop::NeedMore)?;
                match b {
                    b'\r' => break,
                    b'\n' | 0 => return Err(Stop::Error(400)),
                    _ if *at - start >= MAX_EXTENSION => return Err(Stop::Error(400)),
                    _ => *at += 1,
                }
            }
        }
        b'\r' => {}
        _ => return Err(Stop::Error(400)),
    }
    crlf(input, at)?;
    Ok(size)
}

/// The CRLF at `*at`.
fn crlf(input: &[u8], at: &mut usize) -> Result<(), Stop> {
    for want in [b'\r', b'\n'] {
        match input.get(*at) {
            None => return Err(Stop::NeedMore),
            Some(&b) if b == want => *at += 1,
            Some(_) => return Err(Stop::Error(400)),
        }
    }
    Ok(())
}

/// Trailer lines, then the final empty line; returns where the body ends.
fn trailers(input: &[u8], mut at: usize, max_trailer: usize) -> Result<usize, Stop> {
    let mut len = 0usize;
    loop {
        // One line: content up to CR (no LF), then CRLF.
        let start = at;
        loop {
            match *input.get(at).ok_or(Stop::NeedMore)? {
                b'\r' => break,
                b'\n' => return Err(Stop::Error(400)),
                _ => {
                    len += 1;
                    if len > max_trailer {
                        return Err(Stop::Error(431));
                    }
                    at += 1;
                }
            }
        }
        let empty = at == start;
        crlf(input, &mut at)?;
        if empty {
            return Ok(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &[u8]) -> (Vec<u8>, ChunkedEnd) {
        decode(s, 100, 20)
    }

    #[test]
    fn valid_bodies() {
        assert_eq!(dec(b"0\r\n\r\n"), (vec![], ChunkedEnd::Complete(5)));
        assert_eq!(
            dec(b"3;a=b\r\nabc\r\n1 ;x\r\nd\r\n0\r\nT: v\r\n\r\nNEXT"),
            (b"abcd".to_vec(), ChunkedEnd::Complete(32))
        );
        assert_eq!(dec(b"A\r\n0123456789\r\n0\r\n\r\n").0.len(), 10);
    }

    #[test]
    fn partial_and_invalid_bodies() {
        assert_eq!(dec(b"5\r\nab"), (b"ab".to_vec(), ChunkedEnd::NeedMore));
        assert_eq!(dec(b"5"), (vec![], ChunkedEnd::NeedMore));
        assert_eq!(dec(b"5 \r\n").1, ChunkedEnd::Error(400));
        assert_eq!(dec(b"\r\n").1, ChunkedEnd::Error(400));
        assert_eq!(dec(b"5\nabcde").1, ChunkedEnd::Error(400));
        assert_eq!(dec(b"1\r\nab").1, ChunkedEnd::Error(400));
        assert_eq!(dec(b"65\r\n").1, ChunkedEnd::Error(413));
        assert_eq!(
            dec(b"0\r\n123456789012345678901\r\n").1,
            ChunkedEnd::Error(431)
        );
        assert_eq!(dec(b"0\r\nT: v\n").1, ChunkedEnd::Error(400));
        assert_eq!(dec(b"1;\0\r\n").1, ChunkedEnd::Error(400));
        assert_eq!(dec(b"fffffffffffffffff\r\n").1, ChunkedEnd::Error(400));
    }
}
