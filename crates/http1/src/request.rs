//! A parsed request head and the small types that describe it.
//!
//! A [`Request`] owns the raw bytes of its head (a `Bytes` split off the read
//! buffer, shared rather than copied) plus offsets into them. Accessors slice
//! those bytes on demand, so parsing allocates nothing. Headers are indexed
//! by where their lines start: one `u16` each for the first
//! [`INLINE_HEADERS`], which keeps a `Request` near 100 bytes (it is moved
//! on every request, so its size is a per-request cost). A line's name and
//! value are found again when asked for; the head was validated when it was
//! parsed, so that takes no more than finding the colon and trimming.

use std::fmt;

use bytes::Bytes;

mod headers;

pub(crate) use headers::HeaderIndex;
pub use headers::Headers;

/// How many header lines a [`Request`] indexes directly. Typical browser
/// requests carry 8–14 headers and benchmark clients 2–4. Later headers are
/// found by reading on from the last indexed line; no request allocates.
pub const INLINE_HEADERS: usize = 16;

/// The protocol version of a request.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Version {
    /// `HTTP/1.0`: connections close after each response unless the client
    /// asks for `Connection: keep-alive`.
    Http10,
    /// `HTTP/1.1`: connections stay open unless either side says
    /// `Connection: close`.
    Http11,
}

impl Version {
    /// `"HTTP/1.0"` or `"HTTP/1.1"`.
    #[inline]
    pub const fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        }
    }
}

/// A request method. Methods are case-sensitive tokens (RFC 9110 §9.1): `get`
/// is not `GET` but an [`Other`](Method::Other) method.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Method<'a> {
    /// `GET`
    Get,
    /// `HEAD`: like `GET`, but the response carries no body.
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `DELETE`
    Delete,
    /// `OPTIONS`
    Options,
    /// `PATCH`
    Patch,
    /// `TRACE`
    Trace,
    /// `CONNECT`
    Connect,
    /// Any other token, as sent.
    Other(&'a str),
}

impl<'a> Method<'a> {
    /// Classifies a method token.
    pub fn from_token(token: &'a str) -> Method<'a> {
        Verb::of(token.as_bytes()).method(token)
    }

    /// The method token, e.g. `"GET"`.
    pub fn as_str(&self) -> &'a str {
        match *self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Patch => "PATCH",
            Method::Trace => "TRACE",
            Method::Connect => "CONNECT",
            Method::Other(token) => token,
        }
    }
}

impl fmt::Display for Method<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the request body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum BodyKind {
    /// No `Content-Length` and no `Transfer-Encoding`: no body.
    None,
    /// `Content-Length: n`; `Length(0)` is an empty body.
    Length(u64),
    /// `Transfer-Encoding: chunked`: length unknown until the last chunk.
    Chunked,
}

/// A byte range `start..end` of the head. `u16` is enough because the
/// decoder caps a head below 64 KiB, and it halves the inline header array.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) struct Span {
    pub(crate) start: u16,
    pub(crate) end: u16,
}

impl Span {
    /// Callers guarantee `start <= end <= u16::MAX` (the head size is checked
    /// before any span is built).
    pub(crate) fn new(start: usize, end: usize) -> Span {
        debug_assert!(start <= end && end <= usize::from(u16::MAX));
        Span {
            start: start as u16,
            end: end as u16,
        }
    }

    fn get(self, head: &[u8]) -> &[u8] {
        // `get` rather than indexing: a wrong span must never panic on a
        // server, it would only yield an empty slice.
        head.get(usize::from(self.start)..usize::from(self.end))
            .unwrap_or_default()
    }
}

/// Which method, in one byte: `Method` itself is 24 bytes because of
/// `Other(&str)`, and every byte of `Request` is copied when it is returned.
/// `Other` is read back from the head.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Verb {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Options,
    Patch,
    Trace,
    Connect,
    Other,
}

impl Verb {
    pub(crate) fn of(token: &[u8]) -> Verb {
        // Array patterns compile to a length switch and word compares,
        // without the `memcmp` calls that byte-string literals become.
        match *token {
            [b'G', b'E', b'T'] => Verb::Get,
            [b'H', b'E', b'A', b'D'] => Verb::Head,
            [b'P', b'O', b'S', b'T'] => Verb::Post,
            [b'P', b'U', b'T'] => Verb::Put,
            [b'D', b'E', b'L', b'E', b'T', b'E'] => Verb::Delete,
            [b'O', b'P', b'T', b'I', b'O', b'N', b'S'] => Verb::Options,
            [b'P', b'A', b'T', b'C', b'H'] => Verb::Patch,
            [b'T', b'R', b'A', b'C', b'E'] => Verb::Trace,
            [b'C', b'O', b'N', b'N', b'E', b'C', b'T'] => Verb::Connect,
            _ => Verb::Other,
        }
    }

    fn method(self, token: &str) -> Method<'_> {
        match self {
            Verb::Get => Method::Get,
            Verb::Head => Method::Head,
            Verb::Post => Method::Post,
            Verb::Put => Method::Put,
            Verb::Delete => Method::Delete,
            Verb::Options => Method::Options,
            Verb::Patch => Method::Patch,
            Verb::Trace => Method::Trace,
            Verb::Connect => Method::Connect,
            Verb::Other => Method::Other(token),
        }
    }
}

/// A parsed request head: request line, headers, and what the decoder
/// derived from them (body framing, keep-alive, `Expect: 100-continue`).
///
/// Cheap to move and to keep: it holds one reference-counted `Bytes` and
/// offsets. The body, if any, follows as [`Message::Body`](crate::Message)
/// pieces from the decoder.
#[derive(Clone)]
pub struct Request {
    pub(crate) head: Bytes,
    pub(crate) verb: Verb,
    pub(crate) method: Span,
    pub(crate) target: Span,
    pub(crate) path: Span,
    pub(crate) query: Option<Span>,
    pub(crate) version: Version,
    pub(crate) body: BodyKind,
    pub(crate) keep_alive: bool,
    pub(crate) expects_continue: bool,
    pub(crate) headers: HeaderIndex,
}

impl Request {
    /// The request method.
    #[inline]
    pub fn method(&self) -> Method<'_> {
        match self.verb {
            Verb::Other => Method::Other(self.str_of(self.method)),
            known => known.method(""),
        }
    }

    /// The request target exactly as sent, e.g. `/search?q=x`.
    #[inline]
    pub fn target(&self) -> &str {
        self.str_of(self.target)
    }

    /// The path of the target, without the query and still percent-encoded
    /// (see [`percent_decode`](crate::percent_decode)).
    ///
    /// For an absolute-form target (`http://host/p?q`) this is `/p` (or `/`
    /// when the URI has no path); for `*` it is `*`; for an authority-form
    /// `CONNECT` target it is the whole target.
    #[inline]
    pub fn path(&self) -> &str {
        let path = self.str_of(self.path);
        if path.is_empty() { "/" } else { path }
    }

    /// The query after `?`, without the `?`; `None` if there is no `?`.
    #[inline]
    pub fn query(&self) -> Option<&str> {
        self.query.map(|q| self.str_of(q))
    }

    /// The host (and port, if given) the request is for: the authority of
    /// an absolute-form target, which takes the place of `Host` (RFC 9112
    /// §3.2.2), or a `CONNECT`'s authority-form target, or else the `Host`
    /// header; `None` if there is none (HTTP/1.0, or a decoder that does
    /// not [require](crate::Limits::require_host) it).
    ///
    /// The decoder checked either form against the URI grammar, so the
    /// value is ASCII.
    pub fn host(&self) -> Option<&str> {
        let target = self.target();
        if !target.starts_with('/') && target != "*" {
            if self.verb == Verb::Connect {
                return Some(target);
            }
            if let Some(scheme_end) = target.find("://") {
                let authority = &target[scheme_end + 3..];
                let end = authority.find(['/', '?']).unwrap_or(authority.len());
                return Some(&authority[..end]);
            }
        }
        self.header("host")
            .and_then(|h| std::str::from_utf8(h).ok())
    }

    /// `HTTP/1.0` or `HTTP/1.1` (a higher HTTP/1 minor version is served as
    /// HTTP/1.1, RFC 9110 §2.5).
    #[inline]
    pub fn version(&self) -> Version {
        self.version
    }

    /// Whether the connection may stay open after the response, by the
    /// version's default and the `Connection` header (RFC 9112 §9.3).
    #[inline]
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// `true` when an HTTP/1.1 client sent `Expect: 100-continue` with a
    /// body: it waits for [`encode_continue`](crate::encode_continue) (or a
    /// final response) before sending the body. Never true for HTTP/1.0,
    /// which has no interim responses, nor without a body to wait for.
    #[inline]
    pub fn expects_continue(&self) -> bool {
        self.expects_continue
    }

    /// How the body is framed.
    #[inline]
    pub fn body_kind(&self) -> BodyKind {
        self.body
    }

    /// `true` if [`Message::Body`](crate::Message) pieces and a
    /// [`Message::End`](crate::Message) follow this head; `false` for
    /// [`BodyKind::None`] and `Length(0)`, where the head is the whole
    /// request.
    #[inline]
    pub fn has_body(&self) -> bool {
        !matches!(self.body, BodyKind::None | BodyKind::Length(0))
    }

    /// The raw head, request line to the empty line included.
    #[inline]
    pub fn head_bytes(&self) -> &Bytes {
        &self.head
    }

    #[inline]
    fn str_of(&self, span: Span) -> &str {
        ascii_str(span.get(&self.head))
    }
}

/// Views bytes of the head that the parser has checked to be UTF-8 as a
/// `str`, without checking again: `path()` and `target()` are on every
/// request's path, and checking twice costs more than the rest of them.
///
/// Every caller passes a span made by a parser: the method, the target, or
/// the path or query, which are the target split at an ASCII byte (`?`,
/// `/`, `:`). The fast parser accepts only ASCII in those; httparse hands
/// the method and the target out as `&str`, so the type guarantees them.
/// `Span::get` returns an empty slice rather than a wrong range, and the
/// head is immutable `Bytes`.
#[inline]
fn ascii_str(bytes: &[u8]) -> &str {
    debug_assert!(std::str::from_utf8(bytes).is_ok(), "{bytes:?}");
    // SAFETY: as documented above, `bytes` is valid UTF-8: the parser that
    // made the span checked it (as ASCII, or httparse as a `&str`), and only
    // splits at ASCII bytes cut it further.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method())
            .field("target", &self.target())
            .field("version", &self.version)
            .field("body", &self.body)
            .field("keep_alive", &self.keep_alive)
            .field("expects_continue", &self.expects_continue)
            .field("headers", &self.headers().len())
            .finish()
    }
}

/// Splits a request target into (path, query) spans relative to the head.
pub(crate) fn split_target(target: &[u8], offset: usize) -> (Span, Option<Span>) {
    let end = target.len();
    // Origin form (`/path?query`) is nearly every request: test it first.
    let absolute = match target.first() {
        Some(b'/') => None,
        _ => absolute_form_path(target),
    };
    let (path_start, rest) = match absolute {
        Some(start) => (start, &target[start..]),
        None => (0, target),
    };
    match rest.iter().position(|&b| b == b'?') {
        Some(q) => {
            let q = path_start + q;
            (
                Span::new(offset + path_start, offset + q),
                Some(Span::new(offset + q + 1, offset + end)),
            )
        }
        None => (Span::new(offset + path_start, offset + end), None),
    }
}

/// For `scheme://authority/path`, the index where the path (or `?`) starts.
fn absolute_form_path(target: &[u8]) -> Option<usize> {
    if target
        .first()
        .is_none_or(|&b| b == b'/' || !b.is_ascii_alphabetic())
    {
        return None;
    }
    let colon = target.iter().position(|&b| b == b':')?;
    let scheme_ok = target[..colon]
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok || !target[colon + 1..].starts_with(b"//") {
        return None;
    }
    let authority = colon + 3;
    let len = target[authority..]
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(target.len() - authority);
    Some(authority + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(t: &str) -> (&str, Option<&str>) {
        let (p, q) = split_target(t.as_bytes(), 0);
        let s = |sp: Span| &t[usize::from(sp.start)..usize::from(sp.end)];
        (s(p), q.map(s))
    }

    #[test]
    fn origin_form() {
        assert_eq!(split("/a/b"), ("/a/b", None));
        assert_eq!(split("/a?x=1&y"), ("/a", Some("x=1&y")));
        assert_eq!(split("/?"), ("/", Some("")));
        assert_eq!(split("/a?b?c"), ("/a", Some("b?c")));
    }

    #[test]
    fn absolute_authority_and_asterisk_forms() {
        assert_eq!(split("http://h.example:80/p?q"), ("/p", Some("q")));
        assert_eq!(split("https://h.example"), ("", None));
        assert_eq!(split("http://h?q"), ("", Some("q")));
        assert_eq!(split("*"), ("*", None));
        assert_eq!(split("example.com:443"), ("example.com:443", None));
    }

    #[test]
    fn methods_round_trip() {
        for m in [
            "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT",
        ] {
            let parsed = Method::from_token(m);
            assert!(!matches!(parsed, Method::Other(_)), "{m}");
            assert_eq!(parsed.as_str(), m);
        }
        assert_eq!(Method::from_token("get"), Method::Other("get"));
        assert_eq!(Method::from_token("PURGE").to_string(), "PURGE");
    }
}
