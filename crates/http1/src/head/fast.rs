//! A single-pass parser for the heads nearly every client sends, with
//! httparse behind it for everything else.
//!
//! The fast path accepts only the common shape: a method token, one space,
//! an origin-form target (`/…`, visible ASCII), one space, `HTTP/1.1` or
//! `HTTP/1.0`, CRLF, then `Name: value` lines ending in CRLF, then CRLF. In
//! the same pass it finds the query, checks the limits and shows each
//! header's name to [`Semantics`]; only the few headers whose values decide
//! framing and persistence are read again, after the loop.
//!
//! It never rejects anything: on any byte it is not sure about (a bare LF,
//! obs-fold, absolute-form, non-ASCII in the target, a control character),
//! on a partial head, and on any error (limits, framing), it returns `None`
//! and the caller runs the httparse path, which then decides — and gives the
//! error its exact status. So the fast path only has to agree with httparse
//! on what it accepts, and a differential property test checks exactly that.

use bytes::BytesMut;

use crate::framing::{Decision, Relevance, Semantics};
use crate::request::{HeaderIndex, INLINE_HEADERS, Span, Verb};
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
/// test of each byte becomes a few vector compares that set each byte of a
/// 16-byte mask to `0xff` or `0`, and [`first_set`] finds the first `0xff`.
/// No branch per byte. The last, partial block goes byte by byte: padding it
/// to 16 would take a `memcpy` call, and any call in the header loop makes
/// it reload all its vector constants on every line.
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
    while let Some(&b) = buf.get(at) {
        if stop(b) {
            return Some((at, b));
        }
        at += 1;
    }
    None
}

/// Index of the first byte of `block` that `stop` is true for; 16 if none.
#[inline(always)]
fn first_stop(block: &[u8; 16], stop: impl Fn(u8) -> bool) -> usize {
    let mut mask = [0u8; 16];
    for (m, &b) in mask.iter_mut().zip(block) {
        *m = 0u8.wrapping_sub(u8::from(stop(b)));
    }
    first_set(mask)
}

/// Index of the first byte of `mask` (each byte `0` or `0xff`) that is set;
/// 16 if none.
#[inline(always)]
fn first_set(mask: [u8; 16]) -> usize {
    #[cfg(target_arch = "x86_64")]
    let bits = movemask_sse2(mask);
    #[cfg(not(target_arch = "x86_64"))]
    let bits = movemask_portable(mask);
    // Bit 16 stands for "none": the count stops there.
    (bits | 1 << 16).trailing_zeros() as usize
}

/// The top bit of each byte of `mask`, gathered into the low 16 bits: SSE2's
/// `pmovmskb`, which keeps the mask in the vector register it was computed
/// in. (Without it, the mask is stored, reloaded as a `u128` and counted in
/// two halves: a dozen more instructions for every 16 bytes scanned.) SSE2
/// is part of the x86_64 baseline, so no feature detection is needed.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn movemask_sse2(mask: [u8; 16]) -> u32 {
    use std::arch::x86_64::{__m128i, _mm_movemask_epi8};
    // SAFETY: `[u8; 16]` and `__m128i` are both 16 bytes of plain data,
    // valid for any bit pattern, so the transmute is a reinterpretation
    // (which the compiler leaves in the register the mask is in). The
    // intrinsic needs SSE2, which every x86_64 target has.
    unsafe { _mm_movemask_epi8(std::mem::transmute::<[u8; 16], __m128i>(mask)) as u32 }
}

/// [`movemask_sse2`] for other targets, and for tests to compare with.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn movemask_portable(mask: [u8; 16]) -> u32 {
    mask.iter()
        .enumerate()
        .fold(0, |bits, (i, &m)| bits | u32::from(m >> 7) << i)
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
    // The count and the line starts are plain locals, so that the count
    // stays in a register; they become a `HeaderIndex` at the end.
    let mut count = 0;
    let mut starts = [0u16; INLINE_HEADERS];
    // `Host` lines, counted here rather than in a `Semantics`, which would
    // be in memory (its address is taken below).
    let mut hosts = 0u8;
    // Bit `i` set: line `i` is a header whose value `Semantics` must see.
    // Those are fed to it after the loop, so that the loop makes no calls
    // (a call would make it reload its vector constants on every line).
    let mut with_value = 0u16;
    // Where the first such line past the first `INLINE_HEADERS` starts, if
    // any (0 if none).
    let mut late = 0;
    let mut at = line_end;
    let len = loop {
        if b.get(at..at + 2)? == b"\r\n" {
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
        // The value, from after the colon and the one space nearly every
        // client puts there. Other spaces are no stops, and tabs are
        // stepped over, so other leading whitespace needs no loop of its
        // own (`Semantics` trims the values it reads).
        let mut cr = colon + 1;
        if b.get(cr) == Some(&b' ') {
            cr += 1;
        }
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
        if count >= limits.max_headers {
            return None;
        }
        match Semantics::relevance(&b[name.0..name.1]) {
            Relevance::Value => match u32::try_from(count).ok().and_then(|n| 1u16.checked_shl(n)) {
                Some(bit) => with_value |= bit,
                // Past the indexed lines (rare): from here on, every line
                // is looked at again after the loop.
                None if late == 0 => late = at,
                None => {}
            },
            Relevance::Host => hosts = hosts.saturating_add(1),
            Relevance::None => {}
        }
        // Offsets past `u16` are cut short here, but then the head is too
        // large and the check after the loop declines it.
        if let Some(start) = starts.get_mut(count) {
            *start = at as u16;
        }
        count += 1;
        at = cr + 2;
        if at - line_end > limits.max_head {
            return None;
        }
    };
    if len - line_end > limits.max_head || len > usize::from(u16::MAX) {
        return None;
    }
    let mut semantics = Semantics::default();
    semantics.add_hosts(hosts);
    if with_value != 0 || late != 0 {
        header_values(b, &starts, with_value, late, &mut semantics)?;
    }
    let decision = semantics.finish(version, limits).ok()?;
    let headers = HeaderIndex::from_parts(count, starts, len - 2);
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

/// Feeds to `semantics`, in order, the header lines marked in `lines` (bit
/// `i` for the line that starts at `starts[i]`), then, from `late` on (if
/// not 0), every line whose [`Semantics::relevance`] is its value; `None`
/// if it objects. The lines were checked by [`scan`]: a token name, a
/// colon, a value with no CR in it, then CRLF; the header section ends
/// with an empty line.
#[inline(never)]
fn header_values(
    b: &[u8],
    starts: &[u16; INLINE_HEADERS],
    mut lines: u16,
    late: usize,
    semantics: &mut Semantics,
) -> Option<()> {
    // The line at `start`: its name, its value, and where the next starts.
    let split = |start: usize| {
        let (colon, _) = find(b, start, |c| c == b':')?;
        let (cr, _) = find(b, colon, |c| c == b'\r')?;
        // Surrounding spaces and tabs are still on the value; `Semantics`
        // trims.
        Some((b.get(start..colon)?, b.get(colon + 1..cr)?, cr + 2))
    };
    while lines != 0 {
        let i = lines.trailing_zeros() as usize;
        lines &= lines - 1;
        let (name, value, _) = split(usize::from(*starts.get(i)?))?;
        semantics.value(name, value).ok()?;
    }
    let mut at = late;
    while at != 0 && b.get(at..at + 2)? != b"\r\n" {
        let (name, value, next) = split(at)?;
        if matches!(Semantics::relevance(name), Relevance::Value) {
            semantics.value(name, value).ok()?;
        }
        at = next;
    }
    Some(())
}

#[cfg(test)]
mod tests;
