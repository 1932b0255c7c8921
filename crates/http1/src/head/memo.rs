//! The last long header section this thread parsed, and what it decided.
//!
//! A client that keeps its connection open sends the same header lines on
//! request after request: a browser fetching a page's images, an API client
//! with its fixed `User-Agent`, `Accept` and tokens. Only the request line
//! changes. The fast path ([`super::fast`]) scans each line of a section
//! (some 1,300 instructions for a 600-byte browser head); comparing the
//! section with the one parsed last, byte for byte, costs a `memcmp`.
//!
//! What a section decides depends on nothing but its bytes, the version
//! and the [`Limits`]; equal bytes, version and limits give equal answers.
//! Its line offsets move with the request line's length, and are shifted.
//!
//! One memo per thread, like the encoder's caches: a worker serving many
//! connections keeps one section (at most [`SECTION_CAP`] bytes), not one
//! per connection, so an idle connection holds none of it. Sections shorter
//! than [`SECTION_MIN`] are not kept: they scan faster than they compare.

use std::cell::{Cell, RefCell};

use crate::framing::Decision;
use crate::request::HeaderIndex;
use crate::{Limits, Version};

/// Sections shorter than this are scanned every time.
pub(crate) const SECTION_MIN: usize = 128;
/// Longest section kept.
pub(crate) const SECTION_CAP: usize = 1024;

struct Memo {
    bytes: [u8; SECTION_CAP],
    version: Version,
    limits: Limits,
    /// Where the section started when it was parsed: the offsets in
    /// `headers` count from the start of that head.
    line_end: usize,
    headers: HeaderIndex,
    decision: Decision,
}

thread_local! {
    /// The length of the section in `MEMO`; 0 while it holds none. In a
    /// `Cell` of its own: the test for an empty memo is a plain load.
    static LEN: Cell<usize> = const { Cell::new(0) };
    static MEMO: RefCell<Memo> = const {
        RefCell::new(Memo {
            bytes: [0; SECTION_CAP],
            version: Version::Http11,
            limits: Limits {
                max_request_line: 0,
                max_head: 0,
                max_headers: 0,
                max_body: 0,
                require_host: false,
            },
            line_end: 0,
            headers: HeaderIndex::new(),
            decision: Decision::plain(Version::Http11),
        })
    };
}

/// What a remembered section decided, for a head whose section starts at
/// `line_end` (after its request line) in `b`: the section's length, its
/// header index and its decisions; `None` if `b` does not go on with the
/// remembered section (or none is remembered).
#[inline(always)]
pub(crate) fn recall(
    b: &[u8],
    line_end: usize,
    version: Version,
    limits: &Limits,
) -> Option<(usize, HeaderIndex, Decision)> {
    let len = LEN.get();
    if len == 0 {
        return None;
    }
    let section = b.get(line_end..line_end + len)?;
    recall_section(section, line_end, version, limits)
}

#[cold]
#[inline(never)]
fn recall_section(
    section: &[u8],
    line_end: usize,
    version: Version,
    limits: &Limits,
) -> Option<(usize, HeaderIndex, Decision)> {
    MEMO.with_borrow(|m| {
        // The head's offsets are `u16`; a longer request line than last
        // time may push the section's end past them.
        let fits = line_end + section.len() <= usize::from(u16::MAX);
        (fits
            && m.version == version
            && m.limits == *limits
            && section == &m.bytes[..section.len()])
            .then(|| {
                // Offsets only grow by as much as the request line did:
                // as `u16`s, wrapping adds of the difference.
                let delta = line_end.wrapping_sub(m.line_end) as u16;
                (section.len(), m.headers.shifted(delta), m.decision)
            })
    })
}

/// Remembers the section `b[line_end..len]`, which the fast path has just
/// parsed into `headers` and `decision` (the caller checks that it is at
/// least [`SECTION_MIN`] bytes long).
#[cold]
#[inline(never)]
pub(crate) fn record(
    b: &[u8],
    line_end: usize,
    len: usize,
    version: Version,
    limits: &Limits,
    headers: &HeaderIndex,
    decision: &Decision,
) {
    let Some(section) = b.get(line_end..len).filter(|s| s.len() <= SECTION_CAP) else {
        return;
    };
    MEMO.with_borrow_mut(|m| {
        m.bytes[..section.len()].copy_from_slice(section);
        m.version = version;
        m.limits = *limits;
        m.line_end = line_end;
        m.headers = *headers;
        m.decision = *decision;
    });
    LEN.set(section.len());
}

/// Forgets the remembered section (tests start from an empty memo).
#[cfg(test)]
pub(crate) fn forget() {
    LEN.set(0);
}
