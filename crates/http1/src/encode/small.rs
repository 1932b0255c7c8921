//! Complete small responses in one call: [`encode_response`] and, for
//! responses fixed at compile time, [`encode_static`].

use bytes::BytesMut;

use super::{
    CRLF, HeaderValue, ReplyTo, connection_line, hot, prefix, put_common, put_padded, write_decimal,
};
use crate::{Status, date};

/// Encodes a complete response with a small in-memory body: the hot path.
///
/// Writes the status line, `Server`, `Date`, `Content-Type` (if given),
/// `Content-Length`, `Connection` as needed, then the body — unless
/// `to.head_only` or the status has no body (1xx, 204, 304, which also get
/// no `Content-Length`).
pub fn encode_response(
    buf: &mut BytesMut,
    to: ReplyTo,
    status: Status,
    content_type: Option<HeaderValue<'_>>,
    body: &[u8],
) {
    let secs = date::current_secs();
    let key = hot::Key::of(secs, to, status, content_type, body);
    // The commonest case: the same response as last time, in one copy.
    if let Some(key) = key
        && hot::put(buf, key, body)
    {
        return;
    }
    encode_new_response(buf, secs, to, status, content_type, body);
}

/// A complete response fixed at compile time, for endpoints that always
/// answer the same (a health check, a benchmark's plaintext):
///
/// ```
/// use http1::{StaticResponse, Status, TEXT_PLAIN};
/// static HELLO: StaticResponse = StaticResponse {
///     status: Status::OK,
///     content_type: Some(TEXT_PLAIN),
///     body: b"Hello, World!",
/// };
/// ```
#[derive(Debug)]
pub struct StaticResponse {
    /// Status.
    pub status: Status,
    /// `Content-Type`, if any.
    pub content_type: Option<HeaderValue<'static>>,
    /// Body.
    pub body: &'static [u8],
}

/// Encodes `response` exactly as [`encode_response`] would.
///
/// Faster when the same one is sent again and again: being `'static`, it is
/// identified by its address, so the last one encoded on this thread (kept
/// whole, with its `Date`) is found with a few compares, without looking at
/// its bytes, and copied whole.
#[inline(always)]
pub fn encode_static(buf: &mut BytesMut, to: ReplyTo, response: &'static StaticResponse) {
    let secs = date::current_secs();
    let key = hot::StaticKey::of(secs, to, response);
    if !hot::put_static(buf, key) {
        encode_new_static(buf, secs, to, response);
    }
}

/// [`encode_static`] for another response than last time.
#[inline(never)]
fn encode_new_static(
    buf: &mut BytesMut,
    secs: u64,
    to: ReplyTo,
    response: &'static StaticResponse,
) {
    let key = hot::StaticKey::of(secs, to, response);
    let start = buf.len();
    let StaticResponse {
        status,
        content_type,
        body,
    } = *response;
    assemble_response(buf, secs, to, status, content_type, body);
    hot::remember_static(key, &buf[start..]);
}

/// [`encode_response`] for a response other than the last one: assembled,
/// then kept for next time if it may be. Out of line, so that the hot path
/// above needs few registers.
#[inline(never)]
fn encode_new_response(
    buf: &mut BytesMut,
    secs: u64,
    to: ReplyTo,
    status: Status,
    content_type: Option<HeaderValue<'_>>,
    body: &[u8],
) {
    let start = buf.len();
    assemble_response(buf, secs, to, status, content_type, body);
    if let Some(key) = hot::Key::of(secs, to, status, content_type, body) {
        hot::remember(key, body, &buf[start..]);
    }
}

/// [`encode_response`] piece by piece, with the `Date` of `secs`.
#[inline(always)]
fn assemble_response(
    buf: &mut BytesMut,
    secs: u64,
    to: ReplyTo,
    status: Status,
    content_type: Option<HeaderValue<'_>>,
    body: &[u8],
) {
    let framed = status.allows_body();
    let sent = if framed && !to.head_only { body } else { &[] };
    // One reservation up front so the appends below never reallocate.
    let ct_len = content_type.map_or(0, |ct| ct.bytes.len());
    buf.reserve(HEAD_RESERVE + ct_len + sent.len());
    // The common case: status line to `Content-Length: ` in one copy.
    if !prefix::put(buf, secs, status, content_type) {
        put_common(buf, status);
        if let Some(ct) = content_type {
            buf.extend_from_slice(b"Content-Type: ");
            buf.extend_from_slice(ct.bytes);
            buf.extend_from_slice(CRLF);
        }
        if framed {
            buf.extend_from_slice(b"Content-Length: ");
        }
    }
    // The length, `Connection` as needed, the empty line and a short body,
    // also in one copy.
    let mut tail = [0u8; TAIL_CAP];
    let mut len = 0;
    if framed {
        len = write_decimal(&mut tail, body.len() as u64);
        tail[len..len + 2].copy_from_slice(CRLF);
        len += 2;
    }
    if let Some(line) = connection_line(to.version, to.keep_alive) {
        tail[len..len + line.len()].copy_from_slice(line);
        len += line.len();
    }
    tail[len..len + 2].copy_from_slice(CRLF);
    len += 2;
    if sent.len() <= SHORT_BODY {
        copy_short(&mut tail[len..], sent);
        put_padded(buf, &tail, len + sent.len());
    } else {
        put_padded(buf, &tail, len);
        buf.extend_from_slice(sent);
    }
}

/// Bodies up to this long are copied along with the end of the head.
const SHORT_BODY: usize = 16;
/// Room for a length (20 digits), CRLF, the longest `Connection` line (24),
/// the empty line and a short body.
const TAIL_CAP: usize = 64;
const _: () = assert!(TAIL_CAP >= 20 + 2 + 24 + 2 + SHORT_BODY);

/// Copies `src`, at most [`SHORT_BODY`] bytes, to the start of `dst`, which
/// has room for [`SHORT_BODY`]: with two overlapping fixed-size copies rather
/// than a `memcpy` call.
#[inline]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..n].copy_from_slice(&src[n - 8..]);
    } else if n >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[n - 4..n].copy_from_slice(&src[n - 4..]);
    } else {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
    }
}

/// Room for everything `encode_response` writes besides the content type and
/// the body, rounded up.
const HEAD_RESERVE: usize = 256;
const _: () = assert!(HEAD_RESERVE >= prefix::PREFIX_CAP + TAIL_CAP);
