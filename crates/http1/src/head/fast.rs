//! A single-pass parser for the heads nearly every client sends, with
//! httparse behind it for everything else.
//!
//! The fast path accepts only the common shape: a method token, one space,
//! an origin-form target (`/…`, visible ASCII), one space, `HTTP/1.1` or
//! `HTTP/1.0`, CRLF, then `Name: value` lines ending in CRLF, then CRLF. In
//! the same pass it finds the query, checks the limits and feeds each header
//! to [`Semantics`], so nothing is scanned twice.
//!
//! It never rejects anything: on any byte it is not sure about (a bare LF,
//! obs-fold, absolute-form, non-ASCII in the target, a control character),
//! on a partial head, and on any error (limits, framing), it returns `None`
//! and the caller runs the httparse path, which then decides — and gives the
//! error its exact status. So the fast path only has to agree with httparse
//! on what it accepts, and a differential property test checks exactly that.

use bytes::BytesMut;

use crate::framing::{Decision, Semantics};
use crate::request::{HeaderIndex, Span, Verb};
use crate::{BodyKind, Error, Limits, Message, Request, Version};

/// `tchar` (RFC 9110 §5.6.2): what method tokens and header names are made
/// of. The same set as httparse's.
static TOKEN: [bool; 256] = {
    let mut map = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        map[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    map
};

/// Whether `b` may appear in a token (method, header name).
#[inline]
pub(crate) fn is_tchar(b: u8) -> bool {
    TOKEN[usize::from(b)]
}

/// Where a header name's common run ends: anything but ASCII letters,
/// digits and `-` (other token characters take a byte-by-byte loop).
#[inline(always)]
fn is_name_stop(b: u8) -> bool {
    !(b.is_ascii_alphanumeric() || b == b'-')
}

/// Where the path ends: anything but visible ASCII, and `?`.
#[inline(always)]
fn is_target_stop(b: u8) -> bool {
    !(0x21..0x7f).contains(&b) || b == b'?'
}

/// Where the query ends: anything but visible ASCII.
#[inline(always)]
fn is_query_stop(b: u8) -> bool {
    !(0x21..0x7f).contains(&b)
}

/// Where a run of header-value characters ends: controls (tab included,
/// the caller steps over it) and `0x7f`. Bytes from `0x80` up are
/// obs-text, which httparse allows in values.
#[inline(always)]
fn is_value_stop(b: u8) -> bool {
    b < 0x20 || b == 0x7f
}

/// Index and value of the first byte at or after `from` that `stop` is true
/// for; `None` if the buffer ends first.
///
/// Sixteen bytes at a time, written so that the compiler vectorizes it: the
/// test of each byte becomes a few vector compares, which set the bytes of
/// a 128-bit mask, whose trailing zeros count to the first stop. No
/// branch per byte, no `unsafe`, no intrinsics (other targets get the
/// same answer from scalar code). All `stop` tests are true for 0, so the
/// zero padding of the last, partial block marks the buffer's end.
#[inline(always)]
fn find(buf: &[u8], from: usize, stop: impl Fn(u8) -> bool) -> Option<(usize, u8)> {
    let mut at = from;
    while let Some(block) = buf.get(at..at + 16) {
        let block: &[u8; 16] = block.try_into().ok()?;
        let i = first_stop(block, &stop);
        if i < 16 {
            return Some((at + i, block[i]));
        }
        at += 16;
    }
    let rest = buf.get(at..)?;
    let mut block = [0; 16];
    block[..rest.len()].copy_from_slice(rest);
    let i = first_stop(&block, &stop);
    (i < rest.len()).then(|| (at + i, block[i]))
}

/// Index of the first byte of `block` that `stop` is true for; 16 if none.
#[inline(always)]
fn first_stop(block: &[u8; 16], stop: impl Fn(u8) -> bool) -> usize {
    let mut mask = [0u8; 16];
    for (m, &b) in mask.iter_mut().zip(block) {
        *m = 0u8.wrapping_sub(u8::from(stop(b)));
    }
    (u128::from_le_bytes(mask).trailing_zeros() / 8) as usize
}

/// `HTTP/1.1` and `HTTP/1.0` as little-endian words.
const HTTP_11: u64 = u64::from_le_bytes(*b"HTTP/1.1");
const HTTP_10: u64 = u64::from_le_bytes(*b"HTTP/1.0");

/// Parses an ordinary head at the very start of `buf` and splits it off, or
/// returns `Ok(None)` (leaving `buf` alone) for httparse to decide; never
/// an error.
#[inline]
pub(crate) fn parse(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Message>, Error> {
    match scan(buf, limits) {
        Some(head) => Ok(Some(Message::Head(head.split_off(buf)))),
        None => Ok(None),
    }
}

/// Offsets and facts of an ordinary head, before it is split off.
pub(crate) struct Ordinary {
    len: usize,
    verb: Verb,
    method_end: usize,
    target_start: usize,
    target_end: usize,
    /// Where the `?` is, if any.
    query: Option<usize>,
    version: Version,
    headers: HeaderIndex,
    decision: Decision,
}

impl Ordinary {
    /// What the body framing says comes after the head.
    #[inline]
    pub(crate) fn body_kind(&self) -> BodyKind {
        self.decision.body
    }

    /// Splits the head off `buf` into a [`Request`].
    #[inline(always)]
    pub(crate) fn split_off(self, buf: &mut BytesMut) -> Request {
        let (path, query) = match self.query {
            Some(q) => (
                Span::new(self.target_start, q),
                Some(Span::new(q + 1, self.target_end)),
            ),
            None => (Span::new(self.target_start, self.target_end), None),
        };
        Request {
            head: buf.split_to(self.len).freeze(),
            verb: self.verb,
            method: Span::new(0, self.method_end),
            target: Span::new(self.target_start, self.target_end),
            path,
            query,
            version: self.version,
            body: self.decision.body,
            keep_alive: self.decision.keep_alive,
            expects_continue: self.decision.expects_continue,
            headers: self.headers,
        }
    }
}

/// Checks that `b` starts with an ordinary head and finds everything the
/// request needs, or returns `None`.
#[inline(always)]
pub(crate) fn scan(b: &[u8], limits: &Limits) -> Option<Ordinary> {
    // Method, then exactly one space.
    let (verb, method_end) = if b.starts_with(b"GET ") {
        (Verb::Get, 3)
    } else {
        let n = b.iter().position(|&c| !TOKEN[usize::from(c)])?;
        if n == 0 || b[n] != b' ' {
            return None;
        }
        (Verb::of(&b[..n]), n)
    };

    // Origin-form target, visible ASCII only, then exactly one space. The
    // first `?` splits path from query.
    let target_start = method_end + 1;
    if b.get(target_start) != Some(&b'/') {
        return None;
    }
    let (mut target_end, mut stop) = find(b, target_start + 1, is_target_stop)?;
    let query = if stop == b'?' {
        let q = target_end;
        // Further `?` belong to the query.
        (target_end, stop) = find(b, q + 1, is_query_stop)?;
        Some(q)
    } else {
        None
    };
    if stop != b' ' {
        return None;
    }

    // Version, CRLF.
    let line_len = target_end + 9;
    let version = match b.get(target_end + 1..line_len + 2)? {
        &[v0, v1, v2, v3, v4, v5, v6, v7, b'\r', b'\n'] => {
            match u64::from_le_bytes([v0, v1, v2, v3, v4, v5, v6, v7]) {
                HTTP_11 => Version::Http11,
                HTTP_10 => Version::Http10,
                _ => return None,
            }
        }
        _ => return None,
    };
    if line_len > limits.max_request_line {
        return None;
    }
    let line_end = line_len + 2;

    // Header lines. Every check that could fail hands the head to httparse.
    let mut headers = HeaderIndex::new();
    let mut semantics = Semantics::default();
    let mut at = line_end;
    let len = loop {
        let line = b.get(at..)?;
        if line.starts_with(b"\r\n") {
            headers.set_end(at);
            break at + 2;
        }
        // Names are nearly always letters, digits and `-`; other token
        // characters take the byte-by-byte loop.
        let (mut colon, mut stop) = find(b, at, is_name_stop)?;
        while stop != b':' {
            if !TOKEN[usize::from(stop)] {
                return None;
            }
            colon += 1;
            stop = *b.get(colon)?;
        }
        if colon == at {
            return None;
        }
        let name = (at, colon);
        let ows = b[colon + 1..]
            .iter()
            .position(|&c| c != b' ' && c != b'\t')?;
        let value_start = colon + 1 + ows;
        let mut cr = value_start;
        loop {
            let stop;
            (cr, stop) = find(b, cr, is_value_stop)?;
            match stop {
                b'\t' => cr += 1,
                b'\r' => break,
                _ => return None,
            }
        }
        if b.get(cr + 1) != Some(&b'\n') {
            return None;
        }
        if headers.len() >= limits.max_headers {
            return None;
        }
        // Trailing spaces are still on the value; `Semantics` trims.
        semantics
            .header(&b[name.0..name.1], &b[value_start..cr])
            .ok()?;
        headers.push(name.0);
        at = cr + 2;
        if at - line_end > limits.max_head {
            return None;
        }
    };
    if len - line_end > limits.max_head || len > usize::from(u16::MAX) {
        return None;
    }
    let decision = semantics.finish(version, limits).ok()?;
    Some(Ordinary {
        len,
        verb,
        method_end,
        target_start,
        target_end,
        query,
        version,
        headers,
        decision,
    })
}

#[cfg(test)]
mod tests;
