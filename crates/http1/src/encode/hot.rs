//! The last small response, whole, per thread.
//!
//! A benchmark (and many a health check) asks for the same small response
//! over and over, and everything in it is fixed but the `Date`, which
//! changes once a second. So each thread keeps the last such response it
//! encoded, whole, keyed by everything that shaped it; an identical one
//! costs a key compare and one fixed-size copy instead of being assembled
//! from a cached prefix, a formatted length and the body.
//!
//! There are two slots. One serves [`encode_response`]: its key holds the
//! content type by address and length, which only a
//! [`HeaderValue::from_static`] value allows (its bytes never change), and
//! the body by its bytes, since a body may be a reused buffer. The other
//! serves [`encode_static`], whose [`StaticResponse`] is identified by its
//! address alone: a `&'static` one never changes either.
//!
//! [`encode_response`]: super::encode_response
//! [`encode_static`]: super::encode_static
//! [`StaticResponse`]: super::StaticResponse

use std::cell::{Cell, RefCell};

use bytes::BytesMut;

use super::StaticResponse;
use crate::{HeaderValue, ReplyTo, Status};

/// Room for one response; copied whole on every hit (and truncated). 153
/// bytes for `/_httplite/json` and 133 for the plaintext one.
const CAP: usize = 160;
/// Longest body kept in a response; longer ones are not cached.
const BODY_CAP: usize = 32;

/// Everything a response of [`encode_response`](super::encode_response)
/// depends on, but the body's bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Key {
    /// The second its `Date` shows.
    secs: u64,
    code: u16,
    to: ReplyTo,
    /// Content type by address (0 for none) and length.
    ct_addr: usize,
    ct_len: usize,
    body_len: usize,
}

impl Key {
    const NONE: Key = Key {
        secs: u64::MAX,
        code: 0,
        to: ReplyTo::closing(),
        ct_addr: 0,
        ct_len: 0,
        body_len: usize::MAX,
    };

    /// The key of a response, if it may be cached: no content type or a
    /// static one, and a short body.
    #[inline(always)]
    pub(super) fn of(
        secs: u64,
        to: ReplyTo,
        status: Status,
        content_type: Option<HeaderValue<'_>>,
        body: &[u8],
    ) -> Option<Key> {
        let (ct_addr, ct_len) = match content_type {
            None => (0, 0),
            Some(ct) if ct.is_static => (ct.bytes.as_ptr() as usize, ct.bytes.len()),
            Some(_) => return None,
        };
        if body.len() > BODY_CAP {
            return None;
        }
        Some(Key {
            secs,
            code: status.code(),
            to,
            ct_addr,
            ct_len,
            body_len: body.len(),
        })
    }
}

/// What a response of [`encode_static`](super::encode_static) depends on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct StaticKey {
    secs: u64,
    /// The [`StaticResponse`]'s address.
    addr: usize,
    to: ReplyTo,
}

impl StaticKey {
    const NONE: StaticKey = StaticKey {
        secs: u64::MAX,
        addr: 0,
        to: ReplyTo::closing(),
    };

    #[inline(always)]
    pub(super) fn of(secs: u64, to: ReplyTo, response: &'static StaticResponse) -> StaticKey {
        StaticKey {
            secs,
            addr: std::ptr::from_ref(response) as usize,
            to,
        }
    }
}

/// A cached response.
struct Response {
    len: usize,
    bytes: [u8; CAP],
}

impl Response {
    const EMPTY: Response = Response {
        len: 0,
        bytes: [0; CAP],
    };

    /// Keeps `response`, which fits.
    fn set(&mut self, response: &[u8]) {
        self.len = response.len();
        self.bytes[..response.len()].copy_from_slice(response);
    }

    /// Appends the response.
    #[inline(always)]
    fn put(&self, buf: &mut BytesMut) {
        buf.reserve(CAP);
        let len = buf.len();
        let spare = &mut buf.spare_capacity_mut()[..CAP];
        // All `CAP` bytes in two fixed-size copies (one of all of them would
        // be a `memcpy` call, past 128 bytes, costlier than both); the bytes
        // past the response are scratch that the length leaves out.
        let (head, tail) = spare.split_at_mut(128);
        head.copy_from_slice(uninit(&self.bytes[..128]));
        tail.copy_from_slice(uninit(&self.bytes[128..]));
        // SAFETY: the first `self.len` (<= CAP) spare bytes were just written.
        unsafe { buf.set_len(len + self.len) };
    }
}

/// `bytes` as the type of uninitialised memory, to copy into spare capacity.
#[inline(always)]
fn uninit(bytes: &[u8]) -> &[std::mem::MaybeUninit<u8>] {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and every `u8` is a
    // valid `MaybeUninit<u8>`; the slice is only read.
    unsafe { &*(std::ptr::from_ref(bytes) as *const [std::mem::MaybeUninit<u8>]) }
}

thread_local! {
    // The keys in `Cell`s of their own: reading them is plain loads.
    static KEY: Cell<Key> = const { Cell::new(Key::NONE) };
    /// The response of `KEY`, and the body it was made with.
    static RESPONSE: RefCell<(Response, [u8; BODY_CAP])> = const {
        RefCell::new((Response::EMPTY, [0; BODY_CAP]))
    };
    static STATIC_KEY: Cell<StaticKey> = const { Cell::new(StaticKey::NONE) };
    static STATIC_RESPONSE: RefCell<Response> = const { RefCell::new(Response::EMPTY) };
}

/// Appends the cached response if `key` and `body` are those it was made
/// with; otherwise returns `false` having written nothing.
#[inline(always)]
pub(super) fn put(buf: &mut BytesMut, key: Key, body: &[u8]) -> bool {
    if KEY.with(Cell::get) != key {
        return false;
    }
    RESPONSE.with_borrow(|(response, kept)| {
        // `key` holds the length, so the slices are of equal length.
        let same = same_short(&kept[..body.len()], body);
        if same {
            response.put(buf);
        }
        same
    })
}

/// Keeps `response` (just encoded, under `key`, from `body`) for the next
/// [`put`], if it fits.
#[cold]
#[inline(never)]
pub(super) fn remember(key: Key, body: &[u8], response: &[u8]) {
    if response.len() > CAP {
        return;
    }
    RESPONSE.with_borrow_mut(|(kept, kept_body)| {
        kept.set(response);
        kept_body[..body.len()].copy_from_slice(body);
    });
    KEY.set(key);
}

/// Appends the cached static response if it was made under `key`;
/// otherwise returns `false` having written nothing.
#[inline(always)]
pub(super) fn put_static(buf: &mut BytesMut, key: StaticKey) -> bool {
    if STATIC_KEY.with(Cell::get) != key {
        return false;
    }
    STATIC_RESPONSE.with_borrow(|response| response.put(buf));
    true
}

/// Keeps `response`, just encoded under `key`, for the next
/// [`put_static`], if it fits.
#[cold]
#[inline(never)]
pub(super) fn remember_static(key: StaticKey, response: &[u8]) {
    if response.len() > CAP {
        return;
    }
    STATIC_RESPONSE.with_borrow_mut(|kept| kept.set(response));
    STATIC_KEY.set(key);
}

/// `a == b` for slices of equal length up to [`BODY_CAP`]: the first and
/// the last word of the largest size that fits, which overlap, instead of
/// a loop or a `memcmp` call.
#[inline(always)]
fn same_short(a: &[u8], b: &[u8]) -> bool {
    fn ends<const N: usize>(s: &[u8]) -> ([u8; N], [u8; N]) {
        let first = s[..N].try_into().unwrap_or([0; N]);
        let last = s[s.len() - N..].try_into().unwrap_or([0; N]);
        (first, last)
    }
    debug_assert!(a.len() == b.len() && a.len() <= BODY_CAP);
    match a.len() {
        16.. => ends::<16>(a) == ends::<16>(b),
        8.. => ends::<8>(a) == ends::<8>(b),
        4.. => ends::<4>(a) == ends::<4>(b),
        _ => a == b,
    }
}
