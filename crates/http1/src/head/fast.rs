//! A single-pass parser for the heads nearly every client sends, with the
//! general path (our strict request line, then httparse for the fields)
//! behind it for everything else.
//!
//! The fast path accepts only the common shape: a method token, one space,
//! an origin-form target (`/…`, visible ASCII but `#`), one space,
//! `HTTP/1.1` or `HTTP/1.0`, CRLF, then `Name: value` lines ending in CRLF,
//! then CRLF, with at most one `Host` whose value is a plain host name or
//! IPv4 address and port. In the same pass it finds the query, checks the
//! limits and shows each header's name to [`Semantics`]; only the few
//! headers whose values decide framing and persistence are read again,
//! after the loop. The `Host` value is checked once per connection
//! ([`HostCache`]), and a long header section equal to the last one the
//! thread scanned is not scanned again ([`memo`]).
//!
//! It never rejects anything: on any byte it is not sure about (a bare LF,
//! obs-fold, absolute-form, non-ASCII in the target, a control character,
//! an unusual `Host`), on a partial head, and on any error (limits,
//! framing), it returns `None` and the caller runs the general path, which
//! then decides — and gives the error its exact status. So the fast path
//! only has to agree with the general path on what it accepts, and a
//! differential property test checks exactly that.

use bytes::BytesMut;

use super::memo;
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

/// `HTTP/1.1` and `HTTP/1.0` as little-endian words.
const HTTP_11: u64 = u64::from_le_bytes(*b"HTTP/1.1");
const HTTP_10: u64 = u64::from_le_bytes(*b"HTTP/1.0");

/// Parses an ordinary head at the very start of `buf` and splits it off, or
/// returns `Ok(None)` (leaving `buf` alone) for httparse to decide; never
/// an error.
#[inline]
pub(crate) fn parse(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Message>, Error> {
    match scan(buf, limits, &mut HostCache::default()) {
        Some(head) => Ok(Some(Message::Head(head.split_off(buf)))),
        None => Ok(None),
    }
}

/// Offsets and facts of an ordinary head, before it is split off. Few and
/// small fields: they are live across the header loop, where registers
/// are short.
pub(crate) struct Ordinary {
    len: usize,
    verb: Verb,
    /// The method is `0..method_end`; the target starts one byte later.
    method_end: usize,
    target_end: usize,
    /// Where the `?` is, or 0 if there is none (the target cannot start
    /// there).
    query: usize,
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
        let target_start = self.method_end + 1;
        let (path, query) = match self.query {
            0 => (Span::new(target_start, self.target_end), None),
            q => (
                Span::new(target_start, q),
                Some(Span::new(q + 1, self.target_end)),
            ),
        };
        Request {
            head: buf.split_to(self.len).freeze(),
            verb: self.verb,
            method: Span::new(0, self.method_end),
            target: Span::new(target_start, self.target_end),
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

/// The method token at the start of `b` and where it ends, if exactly one
/// space follows it. `GET` is tested for before this is called.
#[inline]
fn method(b: &[u8]) -> Option<(Verb, usize)> {
    let n = b.iter().position(|&c| !TOKEN[usize::from(c)])?;
    if n == 0 || b[n] != b' ' {
        return None;
    }
    Some((Verb::of(&b[..n]), n))
}

/// Checks that `b` starts with an ordinary head and finds everything the
/// request needs, or returns `None`.
#[inline(always)]
pub(crate) fn scan(b: &[u8], limits: &Limits, host: &mut HostCache) -> Option<Ordinary> {
    // Method, then exactly one space, then an origin-form target (`/…`).
    let (verb, method_end) = if b.starts_with(b"GET /") {
        (Verb::Get, 3)
    } else {
        let (verb, n) = method(b)?;
        // `CONNECT` takes an authority-form target, never `/…`.
        if b.get(n + 1) != Some(&b'/') || verb == Verb::Connect {
            return None;
        }
        (verb, n)
    };

    // The target: visible ASCII only, then exactly one space. The first
    // `?` splits path from query.
    let target_start = method_end + 1;
    let (mut target_end, mut stop) = find(b, target_start + 1, is_target_stop)?;
    let mut query = 0;
    if stop == b'?' {
        query = target_end;
        // Further `?` belong to the query.
        (target_end, stop) = find(b, query + 1, is_query_stop)?;
    }
    if stop != b' ' {
        return None;
    }

    // Version, CRLF.
    let version = match b.get(target_end + 1..target_end + 11)? {
        &[v0, v1, v2, v3, v4, v5, v6, v7, b'\r', b'\n'] => {
            match u64::from_le_bytes([v0, v1, v2, v3, v4, v5, v6, v7]) {
                HTTP_11 => Version::Http11,
                HTTP_10 => Version::Http10,
                _ => return None,
            }
        }
        _ => return None,
    };
    let line_len = target_end + 9;
    if line_len > limits.max_request_line {
        return None;
    }
    let line_end = line_len + 2;

    // Header lines. Every check that could fail hands the head to httparse.
    // What the loop keeps is plain locals, so that it stays in registers;
    // limits that only bound the total are checked once, after it.
    let mut count = 0;
    let mut starts = [0u16; INLINE_HEADERS];
    // `Host` lines, counted here in a register: a `Semantics` is built
    // only for heads with framing headers.
    let mut hosts = 0usize;
    // Where the (last) `Host` value starts, just after its colon.
    let mut host_value = 0;
    // Bit `i` (below 16) set: line `i` is a header whose value `Semantics`
    // must see; bit 16: some line past the indexed ones is. Those values
    // are read after the loop, so that the loop makes no calls (a call
    // would make it reload its vector constants on every line).
    let mut with_value = 0u32;
    let mut at = line_end;
    // A long section equal to the last one this thread scanned is
    // compared, not scanned: the loop starts with what it found then, at
    // the empty line. The checks after the loop run as for any head.
    let recalled = match memo::recall(b, line_end, version, &mut starts) {
        Some(lines) => {
            (at, count, hosts, with_value) = lines;
            true
        }
        None => {
            // A user agent sends `Host` first (RFC 9110 §7.2), and nearly
            // every client does. A first line with this connection's last
            // `Host` value is stepped over here: out of the loop,
            // comparing a value longer than one word costs no call and no
            // registers the loop needs (in the loop, a `Host` with a port
            // cost some 40 instructions more than one without).
            if let Some(next) = host.first_line(b, at) {
                starts[0] = at as u16;
                count = 1;
                hosts = 1;
                at = next;
            }
            false
        }
    };
    let len = loop {
        let line = b.get(at..)?;
        if line.starts_with(b"\r\n") {
            break at + 2;
        }
        // Recorded first, so that `at` is needed no further than the name
        // (a line that turns out not ordinary declines the whole head).
        // Offsets past `u16` are cut short here, but then the head is too
        // large and the check after the loop declines it.
        if let Some(start) = starts.get_mut(count) {
            *start = at as u16;
        }
        let index = count;
        count += 1;
        // Names are nearly always letters and `-`; any other byte stops
        // the run, and must be a token character or the colon.
        let mut colon = at;
        loop {
            let stop;
            (colon, stop) = find(b, colon, is_name_stop)?;
            if stop == b':' {
                break;
            }
            if !TOKEN[usize::from(stop)] {
                return None;
            }
            colon += 1;
        }
        if colon == at {
            return None;
        }
        // Where the value's CR is, when the value is known already: a
        // `Host` equal to this connection's last one, which was checked.
        let mut known_cr = None;
        match Semantics::relevance(line.get(..colon - at)?) {
            // `Connection: keep-alive` (a ten-letter name in its slot)
            // decides nothing in HTTP/1.1, where it is the default: its
            // line needs no second look.
            Relevance::Value => match keep_alive_cr(b, colon) {
                Some(cr) if colon - at == 10 && version == Version::Http11 => known_cr = Some(cr),
                _ => with_value |= 1 << index.min(INLINE_HEADERS),
            },
            Relevance::Host => {
                hosts += 1;
                known_cr = host.hit(b, colon);
                // 0: nothing left to check after the loop.
                host_value = if known_cr.is_some() { 0 } else { colon + 1 };
            }
            Relevance::None => {}
        }
        // The value, from after the colon and the one space nearly every
        // client puts there. Other spaces are no stops, and tabs are
        // stepped over, so other leading whitespace needs no loop of its
        // own (`Semantics` trims the values it reads).
        let cr = match known_cr {
            Some(cr) => cr,
            None => {
                let mut cr = colon + 1;
                if b.get(cr) == Some(&b' ') {
                    cr += 1;
                }
                loop {
                    let stop;
                    (cr, stop) = find(b, cr, is_value_stop)?;
                    if stop == b'\r' {
                        break cr;
                    }
                    if stop != b'\t' && stop < 0x80 {
                        return None;
                    }
                    cr += 1;
                }
            }
        };
        if b.get(cr + 1) != Some(&b'\n') {
            return None;
        }
        at = cr + 2;
    };
    if count > limits.max_headers || len - line_end > limits.max_head || len > usize::from(u16::MAX)
    {
        return None;
    }
    // One `Host` whose value is plainly valid; anything else (several, a
    // bracketed address, other characters) the general path decides. A
    // keep-alive client sends the same value every time: one compare with
    // the value this connection's last request had, checked then.
    if hosts > 1 {
        return None;
    }
    if host_value != 0 {
        let start = host_value + usize::from(b.get(host_value) == Some(&b' '));
        let cr = plain_host_end(b, start)?;
        host.remember(b, start, cr);
    }
    let decision = if with_value == 0 {
        Semantics::check_hosts(hosts, version, limits).ok()?;
        Decision::plain(version)
    } else {
        decide(b, &starts, with_value, hosts, version, limits)?
    };
    if !recalled && len - line_end >= memo::SECTION_MIN {
        memo::record(
            b,
            line_end,
            len,
            version,
            (count, hosts, with_value),
            &starts,
        );
    }
    Some(Ordinary {
        len,
        verb,
        method_end,
        target_end,
        query,
        version,
        headers: HeaderIndex::from_parts(count, starts, len - 2),
        decision,
    })
}

/// Where the `Host` value that starts at `at` (the line was checked by
/// [`scan`]) ends, if it is a host name or IPv4 address of letters,
/// digits, `-` and `.`, then an optional `:` and a port of at most five
/// digits and at most 65535, then CR: the shapes every client sends.
/// `None` sends the head to the general path, which checks the whole
/// grammar ([`crate::uri`]).
#[inline(always)]
fn plain_host_end(b: &[u8], at: usize) -> Option<usize> {
    match find(b, at, is_host_stop)? {
        (cr, b'\r') => Some(cr),
        (colon, b':') => plain_port_end(b, colon + 1),
        _ => None,
    }
}

/// Where the port that starts at `at` ends (at its CR): at most five
/// digits, at most 65535, none allowed (`port = *DIGIT`). Eight bytes at
/// once ([`load8`]): a port is too short for a loop to pay.
#[inline(always)]
fn plain_port_end(b: &[u8], at: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let w = load8(b, at)?;
    // Digits become 0..=9; the top bit of each byte that is not a digit is
    // set by one of the two terms (`+ 0x76` reaches 0x80 from 10; the zero
    // bytes `load8` puts past the end are no digits either). A carry
    // out of a byte that is no digit can only mark the next byte too, so
    // the first marked byte is the first that is no digit.
    let d = w ^ (ONES * 0x30);
    let not_digit = (d | d.wrapping_add(ONES * 0x76)) & (ONES * 0x80);
    let n = (not_digit.trailing_zeros() / 8) as usize;
    if n > 5 || (w >> (8 * n)) as u8 != b'\r' {
        return None;
    }
    // Five digits: as a big-endian number, the bytes compare as the port.
    if n == 5
        && (w & 0xff_ffff_ffff).swap_bytes() >> 24
            > u64::from_be_bytes([0, 0, 0, b'6', b'5', b'5', b'3', b'5'])
    {
        return None;
    }
    Some(at + n)
}

/// Where the CR is if the value after `colon` is ` keep-alive` (one space,
/// any case) and nothing else: one load, one `or`, one `and`, one compare.
#[inline(always)]
fn keep_alive_cr(b: &[u8], colon: usize) -> Option<usize> {
    const PATTERN: &[u8; 12] = b" keep-alive\r";
    const LEN: usize = PATTERN.len();
    // The pattern's bytes, and bit 5 of those that are letters.
    const WORD_FOLD: (u128, u128) = {
        let (mut word, mut fold) = ([0u8; 16], [0u8; 16]);
        let mut i = 0;
        while i < LEN {
            word[i] = PATTERN[i];
            fold[i] = if PATTERN[i].is_ascii_lowercase() {
                0x20
            } else {
                0
            };
            i += 1;
        }
        (u128::from_le_bytes(word), u128::from_le_bytes(fold))
    };
    const MASK: u128 = u128::MAX >> (8 * (16 - LEN));
    ((load16(b, colon + 1)? | WORD_FOLD.1) & MASK == WORD_FOLD.0).then_some(colon + LEN)
}

/// The decisions for a head with framing or persistence headers (`with`
/// as built by [`scan`]), or `None` if `Semantics` objects.
#[inline(never)]
fn decide(
    b: &[u8],
    starts: &[u16; INLINE_HEADERS],
    with: u32,
    hosts: usize,
    version: Version,
    limits: &Limits,
) -> Option<Decision> {
    let mut semantics = Semantics::default();
    semantics.add_hosts(u8::try_from(hosts).unwrap_or(u8::MAX));
    header_values(b, starts, with, &mut semantics)?;
    semantics.finish(version, limits).ok()
}

/// Feeds to `semantics`, in order, the header lines marked in `lines` (bit
/// `i` below 16 for the line that starts at `starts[i]`), then, if bit 16
/// is set, every line past the indexed ones whose
/// [`Semantics::relevance`] is its value; `None` if it objects. The lines
/// were checked by [`scan`]: a token name, a colon, a value with no CR in
/// it, then CRLF; the header section ends with an empty line.
fn header_values(
    b: &[u8],
    starts: &[u16; INLINE_HEADERS],
    mut lines: u32,
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
    let late = lines & 1 << INLINE_HEADERS != 0;
    lines &= (1 << INLINE_HEADERS) - 1;
    while lines != 0 {
        let i = lines.trailing_zeros() as usize;
        lines &= lines - 1;
        let (name, value, _) = split(usize::from(*starts.get(i)?))?;
        semantics.value(name, value).ok()?;
    }
    if late {
        // The first line past the index starts where the last indexed one
        // ends.
        let (_, _, mut at) = split(usize::from(starts[INLINE_HEADERS - 1]))?;
        while b.get(at..at + 2)? != b"\r\n" {
            let (name, value, next) = split(at)?;
            if matches!(Semantics::relevance(name), Relevance::Value) {
                semantics.value(name, value).ok()?;
            }
            at = next;
        }
    }
    Some(())
}

mod byte_scan;
mod host;
#[cfg(test)]
mod tests;

use byte_scan::{
    find, is_host_stop, is_name_stop, is_query_stop, is_target_stop, is_value_stop, load8, load16,
};
pub(crate) use host::HostCache;
