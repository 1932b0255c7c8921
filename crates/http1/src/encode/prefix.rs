//! Ready-made response prefixes, per thread.
//!
//! Nearly every response a busy server writes starts with one of a few byte
//! strings that change once a second:
//!
//! ```text
//! HTTP/1.1 200 OK\r\n
//! Server: httplite\r\n
//! Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n
//! Content-Type: text/plain\r\n
//! Content-Length:
//! ```
//!
//! So each thread keeps the last few it built, keyed by status, content type
//! and the second in `Date`, and a response whose key matches starts with a
//! single copy of a fixed-size block. Everything that does not fit (an
//! unknown status, a long content type) takes the piecewise path instead.

use std::cell::{Cell, RefCell};

use bytes::BytesMut;

use super::put_padded;
use crate::date::{self, LINES_LEN};
use crate::{HeaderValue, Status};

/// Room for one prefix. Copied whole on every hit (and truncated), so it is
/// kept to what common prefixes need: 114 bytes for the one above, 128 with
/// `text/html; charset=utf-8`. (Up to 128 bytes the copy is a few vector
/// moves; more becomes a `memcpy` call.)
pub(super) const PREFIX_CAP: usize = 128;
/// Longest content type a cached prefix can hold.
const CT_CAP: usize = 48;
/// Prefixes kept per thread: enough for a server's few hot responses, few
/// enough to search linearly.
const ENTRIES: usize = 4;
/// `ct_len` of an entry without `Content-Type`.
const NO_CT: usize = usize::MAX;

const CT_NAME: &[u8; 14] = b"Content-Type: ";
const CL_NAME: &[u8; 16] = b"Content-Length: ";

#[derive(Clone, Copy)]
struct Entry {
    /// The second its `Date` shows; `u64::MAX` while empty.
    secs: u64,
    code: u16,
    /// Length of the content type, or [`NO_CT`].
    ct_len: usize,
    ct: [u8; CT_CAP],
    len: usize,
    bytes: [u8; PREFIX_CAP],
}

impl Entry {
    const EMPTY: Entry = Entry {
        secs: u64::MAX,
        code: 0,
        ct_len: NO_CT,
        ct: [0; CT_CAP],
        len: 0,
        bytes: [0; PREFIX_CAP],
    };

    #[inline]
    fn matches(&self, secs: u64, code: u16, ct_len: usize, ct: &[u8]) -> bool {
        self.secs == secs
            && self.code == code
            && self.ct_len == ct_len
            && same_bytes(self.ct.get(..ct.len()).unwrap_or_default(), ct)
    }
}

/// The prefixes built so far on this thread.
struct Cache {
    entries: [Entry; ENTRIES],
    /// The entry the next miss replaces (round robin).
    next: usize,
}

/// What identifies the hot prefix without comparing bytes: the content type
/// by address and length, which only a static one allows.
#[derive(Clone, Copy, PartialEq, Eq)]
struct HotKey {
    secs: u64,
    code: u16,
    ct_addr: usize,
    ct_len: usize,
}

impl HotKey {
    const NONE: HotKey = HotKey {
        secs: u64::MAX,
        code: 0,
        ct_addr: 0,
        ct_len: 0,
    };

    /// The key, if `content_type` can be identified by address.
    #[inline(always)]
    fn of(secs: u64, status: Status, content_type: Option<HeaderValue<'_>>) -> Option<HotKey> {
        let (ct_addr, ct_len) = match content_type {
            None => (0, NO_CT),
            Some(ct) if ct.is_static => (ct.bytes.as_ptr() as usize, ct.bytes.len()),
            Some(_) => return None,
        };
        Some(HotKey {
            secs,
            code: status.code(),
            ct_addr,
            ct_len,
        })
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache { entries: [Entry::EMPTY; ENTRIES], next: 0 })
    };
    // The prefix used last, in `Cell`s: reading them is plain loads, with no
    // borrow flag and no call.
    static HOT_KEY: Cell<HotKey> = const { Cell::new(HotKey::NONE) };
    static HOT_LEN: Cell<usize> = const { Cell::new(0) };
    static HOT_BYTES: RefCell<[u8; PREFIX_CAP]> = const { RefCell::new([0; PREFIX_CAP]) };
}

/// Appends the status line, `Server`, `Date`, `Content-Type` (if any) and,
/// for statuses with a body, `Content-Length: ` without its value. Returns
/// `false`, having written nothing, if this prefix cannot be cached; `buf`
/// must have room for [`PREFIX_CAP`] more bytes.
#[inline(always)]
pub(super) fn put(
    buf: &mut BytesMut,
    secs: u64,
    status: Status,
    content_type: Option<HeaderValue<'_>>,
) -> bool {
    let key = HotKey::of(secs, status, content_type);
    // A server sends the same response head over and over: the one used
    // last is the only one on the hot path.
    if key.is_some_and(|key| HOT_KEY.with(Cell::get) == key) {
        let len = HOT_LEN.with(Cell::get);
        HOT_BYTES.with_borrow(|bytes| put_padded(buf, bytes, len));
        return true;
    }
    put_other(buf, secs, status, content_type, key)
}

/// [`put`] for any other prefix: found by content among the cached ones, or
/// built. It becomes the hot one if its key allows.
#[cold]
#[inline(never)]
fn put_other(
    buf: &mut BytesMut,
    secs: u64,
    status: Status,
    content_type: Option<HeaderValue<'_>>,
    key: Option<HotKey>,
) -> bool {
    let (ct_len, ct) = match content_type {
        Some(ct) if ct.bytes.len() <= CT_CAP => (ct.bytes.len(), ct.bytes),
        Some(_) => return false,
        None => (NO_CT, &[][..]),
    };
    let code = status.code();
    let found = CACHE.with_borrow_mut(|cache| {
        let slot = match cache
            .entries
            .iter()
            .position(|e| e.matches(secs, code, ct_len, ct))
        {
            Some(hit) => hit,
            None => {
                let slot = cache.next % ENTRIES;
                if !build(&mut cache.entries[slot], secs, status, ct_len, ct) {
                    return None;
                }
                cache.next = slot + 1;
                slot
            }
        };
        Some(cache.entries[slot])
    });
    let Some(entry) = found else {
        return false;
    };
    if let Some(key) = key {
        HOT_KEY.set(key);
        HOT_LEN.set(entry.len);
        HOT_BYTES.set(entry.bytes);
    }
    put_padded(buf, &entry.bytes, entry.len);
    true
}

/// Fills `entry` with the prefix for its key, or returns `false` (leaving it
/// alone) if the prefix does not fit.
fn build(entry: &mut Entry, secs: u64, status: Status, ct_len: usize, ct: &[u8]) -> bool {
    let Some((line, line_len)) = status.padded_line() else {
        return false;
    };
    let ct_line = if ct_len == NO_CT {
        0
    } else {
        CT_NAME.len() + ct.len() + 2
    };
    let cl = if status.allows_body() {
        CL_NAME.len()
    } else {
        0
    };
    let len = line_len + LINES_LEN + ct_line + cl;
    if len > PREFIX_CAP {
        return false;
    }
    let mut at = 0;
    let mut append = |piece: &[u8]| {
        entry.bytes[at..at + piece.len()].copy_from_slice(piece);
        at += piece.len();
    };
    append(&line[..line_len]);
    append(&date::lines_at(secs));
    if ct_len != NO_CT {
        append(CT_NAME);
        append(ct);
        append(b"\r\n");
    }
    if cl != 0 {
        append(CL_NAME);
    }
    entry.len = len;
    entry.ct[..ct.len()].copy_from_slice(ct);
    entry.ct_len = ct_len;
    entry.code = status.code();
    entry.secs = secs;
    true
}

/// `a == b` for short slices, a word at a time and without a `memcmp` call.
#[inline]
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    let word = |s: &[u8], at: usize| {
        let mut w = [0; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_ne_bytes(w)
    };
    let mut at = 0;
    while at + 8 < n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    // The last word may overlap the one before.
    word(a, n - 8) == word(b, n - 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_is_slice_equality() {
        let data: Vec<u8> = (0..40u8).collect();
        for len in 0..40 {
            let a = &data[..len];
            assert!(same_bytes(a, a), "{len}");
            for i in 0..len {
                let mut b = a.to_vec();
                b[i] ^= 1;
                assert!(!same_bytes(a, &b), "{len} {i}");
            }
            assert!(!same_bytes(a, &data[..len + 1]));
        }
    }

    #[test]
    fn prefixes_are_cached_and_keyed() {
        std::thread::spawn(|| {
            crate::refresh_date();
            let mut buf = BytesMut::with_capacity(4 * PREFIX_CAP);
            let plain = Some(crate::TEXT_PLAIN);
            assert!(put(&mut buf, date::current_secs(), Status::OK, plain));
            let first = buf.split().freeze();
            // A hit writes the same bytes; so does an equal value that is not
            // static (found by content).
            assert!(put(&mut buf, date::current_secs(), Status::OK, plain));
            assert_eq!(buf.split().freeze(), first);
            let owned = b"text/plain".to_vec();
            assert!(put(
                &mut buf,
                date::current_secs(),
                Status::OK,
                Some(HeaderValue::new(&owned).unwrap())
            ));
            assert_eq!(buf.split().freeze(), first);
            assert!(first.starts_with(b"HTTP/1.1 200 OK\r\nServer: httplite\r\nDate: "));
            assert!(first.ends_with(b"\r\nContent-Type: text/plain\r\nContent-Length: "));

            // Other keys get their own prefixes, more than fit at once, and
            // static and other values alternate in the hot slot.
            let mut other = b"text/plaiN".to_vec();
            for round in 0..3 {
                // Same address, new content: must not be taken for the old.
                other[9] = b"nNx"[round];
                let cts = [
                    Some(HeaderValue::from_static("text/plain")),
                    Some(HeaderValue::new(&other).unwrap()),
                    None,
                    Some(HeaderValue::from_static("text/html")),
                ];
                for (status, ct) in [
                    (Status::NOT_FOUND, cts[0]),
                    (Status::OK, cts[1]),
                    (Status::OK, cts[2]),
                    (Status::NO_CONTENT, cts[3]),
                    (Status::OK, cts[0]),
                    (Status::OK, cts[1]),
                ] {
                    for _ in 0..2 {
                        buf.reserve(PREFIX_CAP);
                        assert!(put(&mut buf, date::current_secs(), status, ct));
                        let got = buf.split();
                        let line = format!("HTTP/1.1 {status}\r\n");
                        assert!(got.starts_with(line.as_bytes()), "{got:?}");
                        let ct_line = ct.map(|ct| [&CT_NAME[..], ct.as_bytes(), b"\r\n"].concat());
                        let tail = match (ct_line, status.allows_body()) {
                            (Some(l), true) => [&l[..], CL_NAME].concat(),
                            (Some(l), false) => l,
                            (None, true) => CL_NAME.to_vec(),
                            (None, false) => Vec::new(),
                        };
                        assert!(got.ends_with(&tail), "{got:?}");
                        assert_eq!(got.len(), line.len() + LINES_LEN + tail.len());
                    }
                }
            }

            // What does not fit is left to the caller.
            buf.reserve(PREFIX_CAP);
            let long = [b'x'; CT_CAP + 1];
            assert!(!put(
                &mut buf,
                date::current_secs(),
                Status::OK,
                Some(HeaderValue::new(&long).unwrap())
            ));
            assert!(!put(
                &mut buf,
                date::current_secs(),
                Status::from_code(299).unwrap(),
                None
            ));
            assert!(buf.is_empty());
        })
        .join()
        .unwrap();
    }
}
