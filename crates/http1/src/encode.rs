//! Response encoding: status line, headers and body framing, appended to a
//! `BytesMut` that the connection reuses, so a response costs no allocation
//! once the buffer has grown to its working size.
//!
//! There are three ways in:
//! - [`encode_response`], the fast path for a complete, small response: one
//!   call, no validation at run time (the content type is a [`HeaderValue`]
//!   checked when it was made). A response identical to the last one (but
//!   for `Date`) is copied whole from a per-thread cache (see `hot`).
//!   Otherwise the head up to `Content-Length: ` comes from a per-thread
//!   cache of ready prefixes (see `prefix`), and the rest (length,
//!   `Connection`, empty line, a short body) is assembled in a small block:
//!   two copies in all.
//! - [`encode_static`], the same for a [`StaticResponse`] (the benchmark's
//!   plaintext endpoint), which is told from the last one by its address.
//! - [`encode_head`] for everything else: any headers (validated, so a
//!   handler cannot inject a header or a second response), a declared length
//!   or chunked streaming, and a [`BodyEncoder`] that frames the body.

use std::fmt;

use bytes::BytesMut;

use crate::date::server_and_date_lines;
use crate::request::Verb;
use crate::{Error, Request, Status, Version};

mod hot;
mod prefix;
mod small;

pub use small::{StaticResponse, encode_response, encode_static};

const CRLF: &[u8] = b"\r\n";

/// How to answer one request; usually [`ReplyTo::new`]`(&request)`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ReplyTo {
    /// The request's version: an HTTP/1.0 client needs an explicit
    /// `Connection: keep-alive` and cannot read chunked bodies.
    pub version: Version,
    /// Keep the connection open after this response. Start from
    /// [`Request::keep_alive`]; a server may clear it (shutting down, too
    /// many requests on one connection), never set it against the client.
    pub keep_alive: bool,
    /// Write the head only (the request was `HEAD`): headers, including the
    /// `Content-Length` a `GET` would get, but no body.
    pub head_only: bool,
}

impl ReplyTo {
    /// The reply settings the request asks for.
    #[inline]
    pub fn new(req: &Request) -> ReplyTo {
        ReplyTo {
            version: req.version(),
            keep_alive: req.keep_alive(),
            head_only: req.verb == Verb::Head,
        }
    }

    /// For answers without a usable request (decoding errors, timeouts):
    /// HTTP/1.1, body included, connection closed afterwards.
    #[inline]
    pub const fn closing() -> ReplyTo {
        ReplyTo {
            version: Version::Http11,
            keep_alive: false,
            head_only: false,
        }
    }
}

/// A header value known to be free of CR, LF, NUL and other control
/// characters (tab excepted), so it cannot break out of its header line.
#[derive(Clone, Copy)]
pub struct HeaderValue<'a> {
    bytes: &'a [u8],
    /// Made by [`from_static`](HeaderValue::from_static): the bytes stay
    /// where they are, unchanged, for the rest of the program, so their
    /// address and length identify them (the encoder's prefix cache uses
    /// that instead of comparing them).
    is_static: bool,
}

impl HeaderValue<'static> {
    /// A value from a constant, checked at compile time when used in a
    /// `const`:
    ///
    /// ```
    /// use http1::HeaderValue;
    /// const TEXT: HeaderValue<'static> = HeaderValue::from_static("text/plain");
    /// ```
    ///
    /// # Panics
    /// If `value` contains a control character (a compile error in `const`).
    pub const fn from_static(value: &'static str) -> HeaderValue<'static> {
        assert!(valid_value(value.as_bytes()), "invalid header value");
        HeaderValue {
            bytes: value.as_bytes(),
            is_static: true,
        }
    }
}

impl<'a> HeaderValue<'a> {
    /// Checks `value`; an error (500) names the problem.
    pub fn new(value: &'a [u8]) -> Result<HeaderValue<'a>, Error> {
        if valid_value(value) {
            Ok(HeaderValue {
                bytes: value,
                is_static: false,
            })
        } else {
            Err(Error::encode("invalid header value"))
        }
    }

    /// The value's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// Values are equal when their bytes are, however they were made.
impl PartialEq for HeaderValue<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for HeaderValue<'_> {}

impl fmt::Debug for HeaderValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HeaderValue").field(&self.bytes).finish()
    }
}

/// `text/plain`, the benchmark's content type.
pub const TEXT_PLAIN: HeaderValue<'static> = HeaderValue::from_static("text/plain");

/// How a response body is delimited.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Framing {
    /// `Content-Length: n`: exactly `n` bytes follow.
    Length(u64),
    /// `Transfer-Encoding: chunked`: a stream of unknown length. For an
    /// HTTP/1.0 client, which has no chunked coding, the body is sent raw
    /// and the connection closes to mark its end.
    Chunked,
}

/// Encodes a response head with arbitrary headers and returns the
/// [`BodyEncoder`] that frames the body.
///
/// `headers` are `(name, value)`; names must be tokens and values must pass
/// [`HeaderValue::new`]. The encoder owns `Content-Length`,
/// `Transfer-Encoding`, `Connection`, `Date` and `Server`, so passing any of
/// those is an error too. On error nothing is written.
///
/// ```
/// use bytes::BytesMut;
/// use http1::{encode_head, Framing, ReplyTo, Status, Version};
///
/// let to = ReplyTo { version: Version::Http11, keep_alive: true, head_only: false };
/// let mut buf = BytesMut::new();
/// let mut body = encode_head(&mut buf, to, Status::OK, &[("Content-Type", b"text/plain")], Framing::Chunked)?;
/// body.write(&mut buf, b"hello")?;
/// body.finish(&mut buf)?;
/// assert!(buf.ends_with(b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
/// # Ok::<(), http1::Error>(())
/// ```
pub fn encode_head(
    buf: &mut BytesMut,
    to: ReplyTo,
    status: Status,
    headers: &[(&str, &[u8])],
    framing: Framing,
) -> Result<BodyEncoder, Error> {
    for &(name, value) in headers {
        check_header(name, value)?;
    }
    Ok(head_with(buf, to, status, framing, |buf| {
        put_headers(buf, headers)
    }))
}

/// `Name: value\r\n` for each header (already checked).
pub(crate) fn put_headers(buf: &mut BytesMut, headers: &[(&str, &[u8])]) {
    for &(name, value) in headers {
        buf.extend_from_slice(name.as_bytes());
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(value);
        buf.extend_from_slice(CRLF);
    }
}

/// A response head whose caller's header lines (`lines`) are known to be
/// valid: the status line, `Server` and `Date`, the lines, the framing and
/// `Connection`.
pub(crate) fn head_with(
    buf: &mut BytesMut,
    to: ReplyTo,
    status: Status,
    framing: Framing,
    lines: impl FnOnce(&mut BytesMut),
) -> BodyEncoder {
    put_common(buf, status);
    lines(buf);
    let mut keep_alive = to.keep_alive;
    let mode = if !status.allows_body() {
        Mode::Discard
    } else {
        match framing {
            Framing::Length(n) => {
                put_content_length(buf, n);
                Mode::Length { left: n }
            }
            Framing::Chunked if to.version == Version::Http10 => {
                keep_alive = false;
                Mode::Raw
            }
            Framing::Chunked => {
                buf.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                Mode::Chunked
            }
        }
    };
    let mode = if to.head_only { Mode::Discard } else { mode };
    put_connection(buf, to.version, keep_alive);
    buf.extend_from_slice(CRLF);
    BodyEncoder { mode, keep_alive }
}

/// Frames the body of a response started by [`encode_head`].
#[derive(Debug)]
#[must_use = "a chunked body needs `finish` to write its last chunk"]
pub struct BodyEncoder {
    mode: Mode,
    keep_alive: bool,
}

#[derive(Debug, PartialEq, Eq)]
enum Mode {
    /// `HEAD` or a status without a body: body bytes are dropped.
    Discard,
    Length {
        left: u64,
    },
    Chunked,
    /// Close-delimited, for HTTP/1.0 clients of a streamed body.
    Raw,
}

impl BodyEncoder {
    /// Appends a piece of the body, framed as needed. Writing more than a
    /// declared `Content-Length` is an error (500) and writes nothing.
    pub fn write(&mut self, buf: &mut BytesMut, data: &[u8]) -> Result<(), Error> {
        match &mut self.mode {
            Mode::Discard => {}
            Mode::Length { left } => {
                if data.len() as u64 > *left {
                    return Err(Error::encode("body longer than its Content-Length"));
                }
                *left -= data.len() as u64;
                buf.extend_from_slice(data);
            }
            Mode::Chunked => encode_chunk(buf, data),
            Mode::Raw => buf.extend_from_slice(data),
        }
        Ok(())
    }

    /// Ends the body: writes the last chunk of a chunked body. An error
    /// (500) if fewer bytes than the declared `Content-Length` were written:
    /// the response is then truncated and the connection must close.
    pub fn finish(self, buf: &mut BytesMut) -> Result<(), Error> {
        match self.mode {
            Mode::Length { left } if left > 0 => {
                Err(Error::encode("body shorter than its Content-Length"))
            }
            Mode::Chunked => {
                encode_last_chunk(buf);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Whether the connection stays open after this response. Can be
    /// `false` even if [`ReplyTo::keep_alive`] was set: a streamed body to
    /// an HTTP/1.0 client ends by closing.
    #[inline]
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// `false` when body bytes are dropped (`HEAD`, 1xx, 204, 304), so the
    /// caller can skip producing them (or skip the `sendfile`).
    #[inline]
    pub fn wants_body(&self) -> bool {
        self.mode != Mode::Discard
    }
}

/// Appends one chunk: size in hex, CRLF, data, CRLF. Empty data writes
/// nothing, since an empty chunk would mean end of body.
pub fn encode_chunk(buf: &mut BytesMut, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    buf.reserve(20 + data.len());
    put_hex(buf, data.len() as u64);
    buf.extend_from_slice(CRLF);
    buf.extend_from_slice(data);
    buf.extend_from_slice(CRLF);
}

/// Appends the last chunk and the empty trailer section: `0\r\n\r\n`.
#[inline]
pub fn encode_last_chunk(buf: &mut BytesMut) {
    buf.extend_from_slice(b"0\r\n\r\n");
}

/// Appends the interim `HTTP/1.1 100 Continue` response that tells a client
/// sending `Expect: 100-continue` to go on with its body.
#[inline]
pub fn encode_continue(buf: &mut BytesMut) {
    buf.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
}

/// Appends the response to a decoding error: its status, its reason as a
/// plain-text body, and `Connection: close`.
pub fn encode_error(buf: &mut BytesMut, err: &Error) {
    encode_response(
        buf,
        ReplyTo::closing(),
        err.status(),
        Some(TEXT_PLAIN),
        err.reason().as_bytes(),
    );
}

/// Status line, `Server` and `Date`: what every response starts with.
fn put_common(buf: &mut BytesMut, status: Status) {
    match status.padded_line() {
        Some((line, len)) => put_padded(buf, line, len),
        None => {
            let code = status.code();
            buf.extend_from_slice(b"HTTP/1.1 ");
            buf.extend_from_slice(&[
                b'0' + (code / 100 % 10) as u8,
                b'0' + (code / 10 % 10) as u8,
                b'0' + (code % 10) as u8,
                b' ',
            ]);
            buf.extend_from_slice(status.reason().as_bytes());
            buf.extend_from_slice(CRLF);
        }
    }
    buf.extend_from_slice(&server_and_date_lines());
}

/// Appends the first `len` bytes of `block`. Copying the whole fixed-size
/// block and truncating is cheaper for short pieces than a variable-length
/// copy, which is a `memcpy` call.
#[inline]
fn put_padded<const N: usize>(buf: &mut BytesMut, block: &[u8; N], len: usize) {
    let end = buf.len() + len;
    buf.extend_from_slice(block);
    buf.truncate(end);
}

/// `Content-Length: <n>\r\n`.
fn put_content_length(buf: &mut BytesMut, n: u64) {
    const PREFIX: &[u8; 16] = b"Content-Length: ";
    let mut line = [0u8; 40];
    line[..PREFIX.len()].copy_from_slice(PREFIX);
    let digits = write_decimal(&mut line[PREFIX.len()..], n);
    let end = PREFIX.len() + digits;
    line[end..end + 2].copy_from_slice(CRLF);
    put_padded(buf, &line, end + 2);
}

/// Writes `n` in decimal at the start of `out` (at least 20 bytes long) and
/// returns the number of digits. Bodies are mostly short, so up to three
/// digits take no loop.
#[inline]
fn write_decimal(out: &mut [u8], n: u64) -> usize {
    let digit = |d: u64| b'0' + d as u8;
    if n < 10 {
        out[0] = digit(n);
        return 1;
    }
    if n < 100 {
        out[0] = digit(n / 10);
        out[1] = digit(n % 10);
        return 2;
    }
    if n < 1000 {
        out[0] = digit(n / 100);
        out[1] = digit(n / 10 % 10);
        out[2] = digit(n % 10);
        return 3;
    }
    let mut len = 1;
    let mut rest = n / 10;
    while rest > 0 {
        len += 1;
        rest /= 10;
    }
    let mut n = n;
    for slot in out[..len].iter_mut().rev() {
        *slot = digit(n % 10);
        n /= 10;
    }
    len
}

/// HTTP/1.1 persists by default, so only `close` needs saying; HTTP/1.0
/// closes by default, so only `keep-alive` does.
#[inline]
fn connection_line(version: Version, keep_alive: bool) -> Option<&'static [u8]> {
    if !keep_alive {
        Some(b"Connection: close\r\n")
    } else if version == Version::Http10 {
        Some(b"Connection: keep-alive\r\n")
    } else {
        None
    }
}

fn put_connection(buf: &mut BytesMut, version: Version, keep_alive: bool) {
    if let Some(line) = connection_line(version, keep_alive) {
        buf.extend_from_slice(line);
    }
}

fn put_hex(buf: &mut BytesMut, mut n: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = HEX[(n & 0xf) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

pub(crate) fn check_header(name: &str, value: &[u8]) -> Result<(), Error> {
    if !valid_token(name.as_bytes()) {
        return Err(Error::encode("invalid header name"));
    }
    const OWNED: [&str; 5] = [
        "content-length",
        "transfer-encoding",
        "connection",
        "date",
        "server",
    ];
    if OWNED.iter().any(|owned| owned.eq_ignore_ascii_case(name)) {
        return Err(Error::encode("header is written by the encoder"));
    }
    HeaderValue::new(value).map(|_| ())
}

const fn valid_value(value: &[u8]) -> bool {
    let mut i = 0;
    while i < value.len() {
        let b = value[i];
        if (b < 0x20 && b != b'\t') || b == 0x7f {
            return false;
        }
        i += 1;
    }
    true
}

/// RFC 9110 §5.6.2: `token = 1*tchar`.
fn valid_token(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| crate::head::fast::is_tchar(b))
}

#[cfg(test)]
mod tests;
