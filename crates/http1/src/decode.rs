//! The per-connection request decoder: heads, then bodies, then the next head.

use bytes::{Bytes, BytesMut};

use crate::chunked::{Chunk, ChunkedDecoder};
use crate::head::fast::HostCache;
use crate::head::{HeadScan, decode_head, scan_fast};
use crate::{BodyKind, Error, Request};

/// Highest accepted `max_request_line`. Together with [`MAX_HEAD_CAP`] it
/// keeps a head below 64 KiB, so header offsets fit in `u16`.
pub const MAX_REQUEST_LINE_CAP: usize = 16 * 1024;
/// Highest accepted `max_head`; see [`MAX_REQUEST_LINE_CAP`].
pub const MAX_HEAD_CAP: usize = 32 * 1024;
/// Highest accepted `max_headers`. Up to 128 headers are parsed into stack
/// slots; a higher setting costs a heap allocation per parsed head.
pub const MAX_HEADERS_CAP: usize = 1024;

/// Bounds on what a client may send; each has its own status code.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Limits {
    /// Longest request line, without its CRLF, in bytes; longer is 414.
    /// Default 8 KiB; capped at [`MAX_REQUEST_LINE_CAP`].
    pub max_request_line: usize,
    /// Longest header section (from the first header line through the final
    /// empty line, CRLFs included), in bytes; longer is 431. Also bounds the
    /// trailer section of chunked bodies. Default 16 KiB; capped at
    /// [`MAX_HEAD_CAP`].
    pub max_head: usize,
    /// Most header fields; more is 431. Default 100; capped at
    /// [`MAX_HEADERS_CAP`].
    pub max_headers: usize,
    /// Largest request body in bytes; larger is 413. Default 1 MiB.
    pub max_body: u64,
    /// Answer 400 to an HTTP/1.1 request without a `Host` header, and to any
    /// request with more than one (RFC 9112 §3.2). Servers facing clients
    /// should turn it on; it is off by default so that the minimal requests
    /// of tests and tools (`GET / HTTP/1.1` and nothing else) still parse.
    pub require_host: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_request_line: 8 * 1024,
            max_head: 16 * 1024,
            max_headers: 100,
            max_body: 1024 * 1024,
            require_host: false,
        }
    }
}

/// One step of decoding.
///
/// A request is `Head`, then — only if [`Request::has_body`] — any number of
/// `Body` pieces and one `End`. A body-less request (the common `GET`) is
/// just its `Head`: no `End` follows, so the hot path takes one `decode`
/// call per request.
#[derive(Debug)]
// `Head` is much larger than the others, but boxing it would put a heap
// allocation on every request; a `Message` lives only on the stack briefly.
#[allow(clippy::large_enum_variant)]
pub enum Message {
    /// A complete request head.
    Head(Request),
    /// The next piece of the body, never empty; shares the read buffer's
    /// memory.
    Body(Bytes),
    /// The body is complete; the next message is the next request's head.
    End,
}

#[derive(Debug)]
enum State {
    Head,
    Length { left: u64 },
    Chunked(ChunkedDecoder),
    Failed(Error),
}

/// The state after a head with this framing.
#[inline]
fn after_head(body: BodyKind) -> State {
    match body {
        BodyKind::None | BodyKind::Length(0) => State::Head,
        BodyKind::Length(n) => State::Length { left: n },
        BodyKind::Chunked => State::Chunked(ChunkedDecoder::new()),
    }
}

/// Turns the bytes of one connection into [`Message`]s.
///
/// Feed it the connection's read buffer: [`decode`](Decoder::decode) takes
/// what it can from the front and leaves the rest, so pipelined requests come
/// out one by one, in order. The buffer must be the same one between calls,
/// with new bytes only appended, because a partial head is tracked by offset.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    state: State,
    scan: HeadScan,
    /// The `Host` value of this connection's last ordinary head.
    host: HostCache,
}

impl Decoder {
    /// A decoder for a new connection. Limits above the caps
    /// ([`MAX_REQUEST_LINE_CAP`], [`MAX_HEAD_CAP`], [`MAX_HEADERS_CAP`]) are
    /// lowered to them.
    pub fn new(limits: Limits) -> Decoder {
        let limits = Limits {
            max_request_line: limits.max_request_line.min(MAX_REQUEST_LINE_CAP),
            max_head: limits.max_head.min(MAX_HEAD_CAP),
            max_headers: limits.max_headers.min(MAX_HEADERS_CAP),
            ..limits
        };
        Decoder {
            limits,
            state: State::Head,
            scan: HeadScan::default(),
            host: HostCache::default(),
        }
    }

    /// The limits in force (after capping).
    #[inline]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Takes the next message from the front of `buf`.
    ///
    /// `Ok(None)` means more bytes are needed: read more, append them to
    /// `buf`, call again. An `Err` means answer its status and close; the
    /// decoder then stays failed and returns the same error.
    #[inline]
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, Error> {
        // After the last buffered request, a server asks once more and
        // finds the buffer empty: answer that without a call.
        if buf.is_empty() && self.is_idle() {
            return Ok(None);
        }
        self.decode_buffered(buf)
    }

    fn decode_buffered(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, Error> {
        let ordinary = if self.is_idle() {
            scan_fast(buf, &self.limits, &mut self.host)
        } else {
            None
        };
        if let Some(head) = ordinary {
            // The state is `Head` already (idle); it changes only for a body.
            if !matches!(head.body_kind(), BodyKind::None | BodyKind::Length(0)) {
                self.state = after_head(head.body_kind());
            }
            // Built in the return slot, not moved there through layers.
            return Ok(Some(Message::Head(head.split_off(buf))));
        }
        self.decode_general(buf)
    }

    /// Everything but ordinary heads: partial or unusual heads, bodies,
    /// errors.
    ///
    /// `cold`, although bodies come through here: it tells the compiler
    /// that the fast path's many ways out to here are rare, so that it
    /// keeps the header loop's state in registers and saves what this call
    /// needs outside the loop instead (ten instructions per request). The
    /// body paths measured no slower for it.
    #[cold]
    #[inline(never)]
    fn decode_general(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, Error> {
        let result = self.step(buf);
        match &result {
            Ok(Some(Message::Head(req))) => self.state = after_head(req.body_kind()),
            Err(e) => self.state = State::Failed(*e),
            Ok(_) => {}
        }
        result
    }

    fn step(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, Error> {
        match &mut self.state {
            // `decode_buffered` moves on to the body, if any.
            State::Head => decode_head(buf, &self.limits, &mut self.scan),
            State::Length { left: 0 } => {
                self.state = State::Head;
                Ok(Some(Message::End))
            }
            State::Length { left } => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                *left -= n as u64;
                Ok(Some(Message::Body(buf.split_to(n).freeze())))
            }
            State::Chunked(chunked) => {
                match chunked.decode(buf, self.limits.max_body, self.limits.max_head)? {
                    None => Ok(None),
                    Some(Chunk::Data(data)) => Ok(Some(Message::Body(data))),
                    Some(Chunk::End) => {
                        self.state = State::Head;
                        Ok(Some(Message::End))
                    }
                }
            }
            State::Failed(e) => Err(*e),
        }
    }

    /// `true` between requests: the last message ended and no byte of the
    /// next head has been seen. Combine with an empty read buffer to tell a
    /// clean end of connection (or an idle keep-alive timeout) from one in
    /// the middle of a request.
    #[inline]
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Head) && !self.scan.is_active()
    }

    /// `true` after [`decode`](Decoder::decode) returned a `Head` with a
    /// body and before it returned that body's `End`.
    #[inline]
    pub fn in_body(&self) -> bool {
        matches!(self.state, State::Length { .. } | State::Chunked(_))
    }
}

#[cfg(test)]
mod conformance_tests;
#[cfg(test)]
mod limit_tests;
#[cfg(test)]
mod tests;
