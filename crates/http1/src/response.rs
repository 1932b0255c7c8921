//! Decoding responses: what a proxy reads from the server behind it.
//!
//! The mirror of [`Decoder`](crate::Decoder), for the other direction: bytes
//! an upstream server sent in, [`ResponseMessage`]s out (a head, body
//! pieces, the end). Where the body ends follows RFC 9112 §6.3, which for a
//! response depends on the request too:
//!
//! ```text
//!   answer to HEAD, or status 1xx / 204 / 304  ─▶ no body
//!   Transfer-Encoding ending in chunked         ─▶ chunked
//!   Content-Length                              ─▶ that many bytes
//!   anything else                               ─▶ until the server closes
//! ```
//!
//! A proxy that guesses where an upstream's body ends can splice one
//! response into the next client's, so every ambiguous head is an error
//! here (a proxy answers it 502): both `Transfer-Encoding` and
//! `Content-Length`, two different lengths, a coding after `chunked`, an
//! obsolete line folding, a head over the size limit. An interim response
//! (`100 Continue`, `103 Early Hints`) is a head of its own, after which
//! the real one follows; `101 Switching Protocols` ends HTTP on the
//! connection.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::chunked::{Chunk, ChunkedDecoder};
use crate::{Error, Status, Version};

/// Most header lines in a response head.
const MAX_RESPONSE_HEADERS: usize = 128;

/// How a response's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseBody {
    /// None (an answer to HEAD, 1xx, 204, 304).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection (which then cannot be
    /// reused).
    UntilClose,
}

/// A decoded response head. Header lines are kept as ranges into the head's
/// bytes, which are split off the read buffer without a copy.
#[derive(Clone, Debug)]
pub struct ResponseHead {
    bytes: Bytes,
    status: u16,
    version: Version,
    reason: Range<usize>,
    headers: Vec<(Range<usize>, Range<usize>)>,
    body: ResponseBody,
    keep_alive: bool,
}

impl ResponseHead {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The protocol version of the status line.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The reason phrase (may be empty).
    pub fn reason(&self) -> &[u8] {
        &self.bytes[self.reason.clone()]
    }

    /// The header lines, in order, as (name, value).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.headers.iter().map(|(n, v)| {
            // Names were checked as tokens by the parser: ASCII.
            let name = std::str::from_utf8(&self.bytes[n.clone()]).unwrap_or("");
            (name, &self.bytes[v.clone()])
        })
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// How the body is framed.
    pub fn body(&self) -> ResponseBody {
        self.body
    }

    /// Whether the connection may carry another request after this
    /// response (the version's default, `Connection: close` or
    /// `keep-alive`, and a body that does not end with the connection).
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// An interim response (1xx other than 101): the final one follows.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }

    /// The whole head as received, status line to the empty line.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }
}

/// What [`ResponseDecoder::decode`] produced.
#[derive(Debug)]
pub enum ResponseMessage {
    /// A response head (an interim one, or the final one).
    Head(ResponseHead),
    /// A piece of the body.
    Body(Bytes),
    /// The body ended (or there was none): the connection may carry the
    /// next request if the head said [`keep_alive`](ResponseHead::keep_alive).
    End,
}

#[derive(Debug)]
enum State {
    Head,
    Length {
        left: u64,
    },
    Chunked(ChunkedDecoder),
    UntilClose,
    /// After `101`, or after the end of a response: nothing more is
    /// decoded until [`ResponseDecoder::expect`] is called again.
    Done,
    Failed(Error),
}

/// Decodes the responses to requests sent on one upstream connection.
#[derive(Debug)]
pub struct ResponseDecoder {
    state: State,
    /// The request was `HEAD`: the response has no body whatever it says.
    head_request: bool,
    max_head: usize,
    max_body: u64,
}

impl ResponseDecoder {
    /// A decoder for heads of at most `max_head` bytes and bodies of at
    /// most `max_body` (`u64::MAX`: no bound; a proxy streams them).
    pub fn new(max_head: usize, max_body: u64) -> ResponseDecoder {
        ResponseDecoder {
            state: State::Done,
            head_request: false,
            max_head,
            max_body,
        }
    }

    /// Readies the decoder for the response to the next request; `head`
    /// when that request is a `HEAD`.
    pub fn expect(&mut self, head: bool) {
        self.state = State::Head;
        self.head_request = head;
    }

    /// Whether the response in hand ended (or none was expected yet).
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Takes the next message from the front of `buf`; `Ok(None)` means
    /// more bytes are needed. After an `Err` the connection must be closed;
    /// the decoder then returns the same error.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<ResponseMessage>, Error> {
        let result = self.step(buf);
        if let Err(e) = &result {
            self.state = State::Failed(*e);
        }
        result
    }

    /// The server closed the connection after `buf`'s bytes (which
    /// [`decode`](ResponseDecoder::decode) has taken all it could from):
    /// the end of a body framed by the close, or an error if the response
    /// was cut short.
    pub fn eof(&mut self) -> Result<Option<ResponseMessage>, Error> {
        match self.state {
            State::UntilClose => {
                self.state = State::Done;
                Ok(Some(ResponseMessage::End))
            }
            State::Done => Ok(None),
            State::Failed(e) => Err(e),
            _ => {
                let e = Error::new(Status::BAD_GATEWAY, "upstream closed mid-response");
                self.state = State::Failed(e);
                Err(e)
            }
        }
    }

    fn step(&mut self, buf: &mut BytesMut) -> Result<Option<ResponseMessage>, Error> {
        match &mut self.state {
            State::Head => {
                let Some(head) = parse_head(buf, self.max_head, self.head_request)? else {
                    return Ok(None);
                };
                self.state = match head.body {
                    _ if head.is_interim() => State::Head,
                    _ if head.status == 101 => State::Done,
                    ResponseBody::None | ResponseBody::Length(0) => State::Length { left: 0 },
                    ResponseBody::Length(n) => State::Length { left: n },
                    ResponseBody::Chunked => State::Chunked(ChunkedDecoder::new()),
                    ResponseBody::UntilClose => State::UntilClose,
                };
                Ok(Some(ResponseMessage::Head(head)))
            }
            State::Length { left: 0 } => {
                self.state = State::Done;
                Ok(Some(ResponseMessage::End))
            }
            State::Length { left } => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                *left -= n as u64;
                Ok(Some(ResponseMessage::Body(buf.split_to(n).freeze())))
            }
            State::Chunked(chunked) => match chunked
                .decode(buf, self.max_body, self.max_head)
                .map_err(|e| bad(e.reason()))?
            {
                None => Ok(None),
                Some(Chunk::Data(data)) => Ok(Some(ResponseMessage::Body(data))),
                Some(Chunk::End) => {
                    self.state = State::Done;
                    Ok(Some(ResponseMessage::End))
                }
            },
            State::UntilClose if buf.is_empty() => Ok(None),
            State::UntilClose => Ok(Some(ResponseMessage::Body(buf.split().freeze()))),
            State::Done => Ok(None),
            State::Failed(e) => Err(*e),
        }
    }
}

const fn bad(reason: &'static str) -> Error {
    Error::new(Status::BAD_GATEWAY, reason)
}

/// Parses a head at the front of `buf` and splits it off; `None` if it is
/// not whole yet.
fn parse_head(
    buf: &mut BytesMut,
    max_head: usize,
    head_request: bool,
) -> Result<Option<ResponseHead>, Error> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut parsed = httparse::Response::new(&mut slots);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() > max_head => {
            return Err(bad("upstream response head too large"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(bad("too many upstream headers")),
        Err(_) => return Err(bad("malformed upstream response head")),
    };
    if len > max_head {
        return Err(bad("upstream response head too large"));
    }
    let status = parsed.code.unwrap_or(0);
    let version = match parsed.version {
        Some(1) => Version::Http11,
        _ => Version::Http10,
    };
    let base = buf.as_ptr() as usize;
    let offset = |s: &[u8]| {
        let start = s.as_ptr() as usize - base;
        start..start + s.len()
    };
    let reason = parsed.reason.map_or(0..0, |r| offset(r.as_bytes()));
    let mut headers = Vec::with_capacity(parsed.headers.len());
    let mut framing = Framing::default();
    for h in parsed.headers.iter() {
        framing.header(h.name, h.value)?;
        headers.push((offset(h.name.as_bytes()), offset(h.value)));
    }
    let no_body = head_request || (100..200).contains(&status) || status == 204 || status == 304;
    let body = if no_body {
        ResponseBody::None
    } else {
        framing.body()?
    };
    let persistent = match version {
        Version::Http11 => !framing.close,
        Version::Http10 => framing.keep_alive && !framing.close,
    };
    let keep_alive = persistent && body != ResponseBody::UntilClose && status != 101;
    let bytes = buf.split_to(len).freeze();
    Ok(Some(ResponseHead {
        bytes,
        status,
        version,
        reason,
        headers,
        body,
        keep_alive,
    }))
}

/// What the framing headers of a response said.
#[derive(Default)]
struct Framing {
    length: Option<u64>,
    te: bool,
    te_chunked_last: bool,
    close: bool,
    keep_alive: bool,
}

impl Framing {
    fn header(&mut self, name: &str, value: &[u8]) -> Result<(), Error> {
        if name.eq_ignore_ascii_case("content-length") {
            // A list of equal lengths is one length (RFC 9110 §8.6); any
            // other difference is a smuggling attempt or a broken server.
            for part in value.split(|&b| b == b',') {
                let n = parse_length(trim(part)).ok_or(bad("invalid upstream Content-Length"))?;
                if self.length.is_some_and(|l| l != n) {
                    return Err(bad("conflicting upstream Content-Length"));
                }
                self.length = Some(n);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            for coding in value.split(|&b| b == b',').map(trim) {
                if coding.is_empty() {
                    continue;
                }
                if self.te_chunked_last {
                    // `chunked` must be the last coding, and only once.
                    return Err(bad("upstream coding after chunked"));
                }
                self.te = true;
                self.te_chunked_last = coding.eq_ignore_ascii_case(b"chunked");
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',').map(trim) {
                self.close |= token.eq_ignore_ascii_case(b"close");
                self.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
        Ok(())
    }

    fn body(&self) -> Result<ResponseBody, Error> {
        match (self.te, self.length) {
            (true, Some(_)) => Err(bad("upstream sent Transfer-Encoding and Content-Length")),
            (true, None) if self.te_chunked_last => Ok(ResponseBody::Chunked),
            // Another coding last: the body ends with the connection.
            (true, None) => Ok(ResponseBody::UntilClose),
            (false, Some(n)) => Ok(ResponseBody::Length(n)),
            (false, None) => Ok(ResponseBody::UntilClose),
        }
    }
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !matches!(b, b' ' | b'\t'));
    let end = s.iter().rposition(|b| !matches!(b, b' ' | b'\t'));
    match (start, end) {
        (Some(a), Some(b)) => &s[a..=b],
        _ => &[],
    }
}

/// A decimal length: digits only, at most 19 of them (no overflow).
fn parse_length(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
}

#[cfg(test)]
mod tests;
