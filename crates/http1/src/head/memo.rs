//! The last long header section this thread scanned, and what the scan
//! found in it.
//!
//! A client that keeps its connection open sends the same header lines on
//! request after request: a browser fetching a page's images, an API client
//! with its fixed `User-Agent`, `Accept` and tokens. Only the request line
//! changes. The fast path ([`super::fast`]) scans each line of a section
//! (some 1,300 instructions for a 600-byte browser head); comparing the
//! section with the one scanned last, byte for byte, costs a `memcmp`.
//!
//! What the scan finds (where each line starts, how many `Host` lines,
//! which lines' values decide framing) depends on nothing but the
//! section's bytes and the version: equal bytes and version, equal
//! findings. The line offsets move with the request line's length, and are
//! shifted. Everything the scan's caller checks after the loop (limits,
//! framing values) it checks again on a recalled section.
//!
//! One memo per thread, like the encoder's caches: a worker serving many
//! connections keeps one section (at most [`SECTION_CAP`] bytes), not one
//! per connection, so an idle connection holds none of it. Sections shorter
//! than [`SECTION_MIN`] are not kept: a `Host` line alone, as load
//! generators send it, costs less through the `Host` shortcut than through
//! the memo (wrk's head: 1,153 instructions a request against 1,221 when
//! kept), while curl's three lines already cost less through the memo
//! (1,229 against 1,354).
//!
//! A section that does not match is not kept at once: copying it costs
//! about as much as a tenth of its scan, and when heads alternate (a
//! page, then an image, then the page again) each copy would evict the
//! section that the request after next could have used. The memo is
//! replaced after [`REPLACE_AFTER`] misses in a row instead, so that it
//! keeps serving one of several heads that take turns, and follows a
//! client whose head changed for good a few requests later.

use std::cell::{Cell, RefCell};

use crate::Version;
use crate::request::INLINE_HEADERS;

/// Sections shorter than this are scanned every time: `Host` and the
/// empty line, with room for a long host name.
pub(crate) const SECTION_MIN: usize = 48;
/// Longest section kept.
pub(crate) const SECTION_CAP: usize = 1024;
/// Long sections in a row that did not match before the memo takes one.
const REPLACE_AFTER: u32 = 8;

/// What the header loop of [`super::fast::scan`] keeps, but the line
/// starts: the lines counted, the `Host` lines counted, and the lines
/// whose values must be read again (its `with_value` bits).
pub(crate) type Found = (usize, usize, u32);

struct Memo {
    bytes: [u8; SECTION_CAP],
    version: Version,
    /// Where the section started when it was scanned: `starts` count from
    /// the start of that head.
    line_end: usize,
    starts: [u16; INLINE_HEADERS],
    found: Found,
}

thread_local! {
    /// The length of the section in `MEMO`; 0 while it holds none. In a
    /// `Cell` of its own: the test for an empty memo is a plain load.
    static LEN: Cell<usize> = const { Cell::new(0) };
    /// Long sections scanned since the memo last matched or was replaced.
    static MISSES: Cell<u32> = const { Cell::new(0) };
    static MEMO: RefCell<Memo> = const {
        RefCell::new(Memo {
            bytes: [0; SECTION_CAP],
            version: Version::Http11,
            line_end: 0,
            starts: [0; INLINE_HEADERS],
            found: (0, 0, 0),
        })
    };
}

/// If the head in `b` goes on at `line_end` (after its request line) with
/// the remembered section, fills `starts` with its line starts and returns
/// where its empty line starts and what else the scan found.
#[inline(always)]
pub(crate) fn recall(
    b: &[u8],
    line_end: usize,
    version: Version,
    starts: &mut [u16; INLINE_HEADERS],
) -> Option<(usize, usize, usize, u32)> {
    let len = LEN.get();
    if len == 0 {
        return None;
    }
    let section = b.get(line_end..line_end + len)?;
    recall_section(section, line_end, version, starts)
}

#[cold]
#[inline(never)]
fn recall_section(
    section: &[u8],
    line_end: usize,
    version: Version,
    starts: &mut [u16; INLINE_HEADERS],
) -> Option<(usize, usize, usize, u32)> {
    MEMO.with_borrow(|m| {
        // The head's offsets are `u16`; a longer request line than last
        // time may push the section's end past them (the scan's caller
        // declines such a head, but only after the shifts).
        let fits = line_end + section.len() <= usize::from(u16::MAX);
        if !(fits && m.version == version && section == &m.bytes[..section.len()]) {
            return None;
        }
        MISSES.set(0);
        // Offsets only grow by as much as the request line did: as `u16`s,
        // wrapping adds of the difference. Unused slots stay 0, as the
        // scan leaves them.
        let delta = line_end.wrapping_sub(m.line_end) as u16;
        let (count, hosts, with_value) = m.found;
        for (i, (start, &then)) in starts.iter_mut().zip(&m.starts).enumerate() {
            if i < count {
                *start = then.wrapping_add(delta);
            }
        }
        Some((line_end + section.len() - 2, count, hosts, with_value))
    })
}

/// Counts a miss for the section `b[line_end..len]` (at least
/// [`SECTION_MIN`] bytes; the caller checks) that the scan has just
/// accepted, and remembers it with what the scan found in it if the memo
/// is empty or has missed [`REPLACE_AFTER`] times in a row.
#[cold]
#[inline(never)]
pub(crate) fn record(
    b: &[u8],
    line_end: usize,
    len: usize,
    version: Version,
    found: Found,
    starts: &[u16; INLINE_HEADERS],
) {
    let misses = MISSES.get() + 1;
    if LEN.get() != 0 && misses < REPLACE_AFTER {
        MISSES.set(misses);
        return;
    }
    MISSES.set(0);
    let Some(section) = b.get(line_end..len).filter(|s| s.len() <= SECTION_CAP) else {
        return;
    };
    MEMO.with_borrow_mut(|m| {
        m.bytes[..section.len()].copy_from_slice(section);
        m.version = version;
        m.line_end = line_end;
        m.starts = *starts;
        m.found = found;
    });
    LEN.set(section.len());
}

/// Forgets the remembered section (tests start from an empty memo).
#[cfg(test)]
pub(crate) fn forget() {
    LEN.set(0);
    MISSES.set(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;
    use crate::head::fast::{HostCache, scan};

    fn head(accept: &str) -> Vec<u8> {
        format!(
            "GET /x HTTP/1.1\r\nHost: example.com\r\nAccept: {accept}\r\n\
             User-Agent: {}\r\n\r\n",
            "u".repeat(150)
        )
        .into_bytes()
    }

    /// Whether scanning `input` recalled its section: the memo stays
    /// what it was and counts no miss.
    fn scanned(input: &[u8]) {
        assert!(scan(input, &Limits::default(), &mut HostCache::default()).is_some());
    }

    /// `Connection: keep-alive` decides nothing in HTTP/1.1 and keeps an
    /// HTTP/1.0 connection open: a section scanned with one version is not
    /// recalled for the other.
    #[test]
    fn a_section_is_recalled_for_its_version_only() {
        let keep_alive = |version: &str| {
            let input = format!(
                "GET / HTTP/{version}\r\nHost: a\r\nConnection: keep-alive\r\nX: {}\r\n\r\n",
                "x".repeat(SECTION_MIN)
            );
            let mut buf = bytes::BytesMut::from(input.as_bytes());
            match crate::head::fast::parse(&mut buf, &Limits::default()) {
                Ok(Some(crate::Message::Head(req))) => req.keep_alive,
                other => panic!("{other:?}"),
            }
        };
        forget();
        for _ in 0..2 {
            assert!(keep_alive("1.1"));
            assert!(keep_alive("1.0"));
        }
    }

    #[test]
    fn a_section_is_replaced_only_after_misses_in_a_row() {
        forget();
        let (a, b) = (head("text/html"), head("image/png"));
        scanned(&a);
        let a_len = LEN.get();
        assert!(a_len >= SECTION_MIN);
        // Heads taking turns: `a` stays, and each of its turns matches.
        for _ in 0..3 * REPLACE_AFTER {
            scanned(&b);
            assert_eq!(MISSES.get(), 1);
            scanned(&a);
            assert_eq!(MISSES.get(), 0);
        }
        // `b` alone, for good: it is taken at the last of the misses.
        for i in 1..REPLACE_AFTER {
            scanned(&b);
            assert_eq!(MISSES.get(), i);
        }
        scanned(&b);
        assert_eq!(MISSES.get(), 0);
        scanned(&b);
        assert_eq!(MISSES.get(), 0, "b matches now");
        scanned(&a);
        assert_eq!(MISSES.get(), 1);
    }
}
