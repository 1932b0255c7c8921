//! Finding and parsing a request head: request line, headers, empty line.
//!
//! The common case is one read that holds a whole, ordinary head, so the
//! first attempt is the fast path ([`fast`]), which scans the bytes once
//! and also works out framing and keep-alive on the way. Anything it is not
//! sure about goes to the general path, which has the last word on what is
//! valid: our own strict request-line parser ([`line`], RFC 9112 §3), then
//! `httparse` for the header fields. Only when that reports a partial head
//! does the decoder fall back to its
//! own scan, which remembers how far it got, so a head trickling in one byte
//! per read costs linear, not quadratic, time. The same scan enforces the
//! size limits while the head is still incomplete: a client that never ends
//! its headers is rejected once it passes the limit, not buffered forever.

pub(crate) mod fast;
mod line;
pub(crate) mod memo;

use bytes::{Buf, BytesMut};

use crate::framing::Semantics;
use crate::request::{HeaderIndex, split_target};
use crate::{Error, Limits, Message, Request, Status};

/// Header slots that live on the stack on the general path. Larger
/// `max_headers` settings fall back to a `Vec`.
const STACK_SLOTS: usize = 128;

const URI_TOO_LONG: Error = Error::new(Status::URI_TOO_LONG, "request line too long");
const HEAD_TOO_LARGE: Error = Error::new(
    Status::REQUEST_HEADER_FIELDS_TOO_LARGE,
    "header section too large",
);
const TOO_MANY_HEADERS: Error =
    Error::new(Status::REQUEST_HEADER_FIELDS_TOO_LARGE, "too many headers");

/// Progress of the scan through a partial head. All positions are offsets in
/// the read buffer, whose start does not move while a head is partial.
#[derive(Default, Debug)]
pub(crate) struct HeadScan {
    /// A partial head is buffered; `false` between requests.
    active: bool,
    /// Bytes already searched for line feeds.
    pos: usize,
    /// End of the request line including its LF; 0 while not yet seen.
    line_end: usize,
    /// Start of the header line being scanned.
    field_start: usize,
    /// Complete header lines seen.
    fields: usize,
}

impl HeadScan {
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.active
    }
}

/// Decodes one request head from the front of `buf`, splitting it off: the
/// general path, after [`decode_fast`] has declined.
///
/// Returns a whole [`Message`] (always `Head`) rather than a `Request`, so
/// the request is not copied into a `Message` afterwards.
pub(crate) fn decode_head(
    buf: &mut BytesMut,
    limits: &Limits,
    scan: &mut HeadScan,
) -> Result<Option<Message>, Error> {
    // httparse has seen the request line (or its start) whenever it ran on
    // this call; no need to run it again for early validation.
    let parsed_now = !scan.active;
    if parsed_now {
        let skipped = skip_empty_lines(buf);
        // A lone CR may be the start of one more empty line.
        if buf.is_empty() || buf[..] == b"\r"[..] {
            return Ok(None);
        }
        // The decoder has tried the fast path already, unless empty lines
        // were in its way.
        let parsed = if skipped {
            parse(buf, limits)
        } else {
            parse_slow(buf, limits)
        };
        if !matches!(parsed, Ok(None)) {
            return parsed;
        }
        *scan = HeadScan {
            active: true,
            ..HeadScan::default()
        };
    }
    let had_line = scan.line_end != 0;
    let complete = scan.advance(buf, limits)?;
    let line_just_ended = !had_line && scan.line_end != 0 && !parsed_now;
    if complete.is_none() && !line_just_ended {
        return Ok(None);
    }
    // Either the head is complete, or its request line just ended: parse
    // now, which also rejects a malformed request line before the headers
    // have arrived.
    match parse(buf, limits) {
        Ok(None) if complete.is_some() => Err(Error::bad_request("malformed request head")),
        Ok(None) => Ok(None),
        done => {
            *scan = HeadScan::default();
            done
        }
    }
}

/// RFC 9112 §2.2: a server SHOULD ignore empty lines before a request line
/// (some clients send an extra CRLF after a POST body).
/// Returns whether there were any.
#[inline]
fn skip_empty_lines(buf: &mut BytesMut) -> bool {
    let mut n = 0;
    loop {
        match &buf[n..] {
            [b'\r', b'\n', ..] => n += 2,
            [b'\n', ..] => n += 1,
            _ => break,
        }
    }
    if n > 0 {
        buf.advance(n);
    }
    n > 0
}

impl HeadScan {
    /// Scans new bytes for line ends; returns the head length once the empty
    /// line is found. Enforces the limits on partial heads.
    fn advance(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, Error> {
        if self.pos > buf.len() {
            // The caller swapped or cleared the buffer mid-head: start over
            // rather than index out of bounds.
            *self = HeadScan {
                active: true,
                ..HeadScan::default()
            };
        }
        while let Some(off) = buf[self.pos..].iter().position(|&b| b == b'\n') {
            let lf = self.pos + off;
            self.pos = lf + 1;
            if self.line_end == 0 {
                if line_content_len(&buf[..lf]) > limits.max_request_line {
                    return Err(URI_TOO_LONG);
                }
                self.line_end = lf + 1;
                self.field_start = lf + 1;
                continue;
            }
            if lf + 1 - self.line_end > limits.max_head {
                return Err(HEAD_TOO_LARGE);
            }
            if matches!(&buf[self.field_start..lf], b"" | b"\r") {
                return Ok(Some(lf + 1));
            }
            self.fields += 1;
            if self.fields > limits.max_headers {
                return Err(TOO_MANY_HEADERS);
            }
            self.field_start = lf + 1;
        }
        self.pos = buf.len();
        if self.line_end == 0 {
            if line_content_len(buf) > limits.max_request_line {
                return Err(URI_TOO_LONG);
            }
        } else if buf.len() - self.line_end > limits.max_head {
            return Err(HEAD_TOO_LARGE);
        }
        Ok(None)
    }
}

/// Length of a line without its CR (a CR at the very end may be half of the
/// CRLF still arriving).
fn line_content_len(line: &[u8]) -> usize {
    line.len() - usize::from(line.last() == Some(&b'\r'))
}

/// The fast path for a request head: checks that `buf` starts with an
/// ordinary head and finds everything the request needs in one pass,
/// without splitting it off yet. `None` means "not handled": a partial or
/// unusual head (empty lines before it included), for [`decode_head`] to
/// take over.
#[inline(always)]
pub(crate) fn scan_fast(
    buf: &[u8],
    limits: &Limits,
    host: &mut fast::HostCache,
) -> Option<fast::Ordinary> {
    fast::scan(buf, limits, host)
}

/// Parses a head at the start of `buf`; on a complete head, checks limits
/// and framing, builds the [`Request`] and splits its bytes off `buf`.
fn parse(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Message>, Error> {
    let fast = fast::parse(buf, limits);
    if matches!(fast, Ok(None)) {
        parse_slow(buf, limits)
    } else {
        fast
    }
}

/// [`parse`] for every head the fast path leaves alone, including all
/// partial and all invalid ones: our own strict request line ([`line`]),
/// then httparse for the header fields. Kept out of line, so that its
/// kilobytes of header slots are not reserved on the fast path's stack.
#[inline(never)]
pub(crate) fn parse_slow(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Message>, Error> {
    let Some(line) = line::parse(buf, limits)? else {
        return Ok(None);
    };
    let mut stack = [httparse::EMPTY_HEADER; STACK_SLOTS];
    let mut heap;
    let slots = if limits.max_headers <= STACK_SLOTS {
        &mut stack[..limits.max_headers]
    } else {
        heap = vec![httparse::EMPTY_HEADER; limits.max_headers];
        &mut heap[..]
    };
    let (fields_len, fields) = match httparse::parse_headers(&buf[line.end..], slots) {
        Ok(httparse::Status::Complete(done)) => done,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(map_httparse_error(e)),
    };
    let len = line.end + fields_len;
    if fields_len > limits.max_head {
        return Err(HEAD_TOO_LARGE);
    }
    if len > usize::from(u16::MAX) {
        // Unreachable with the capped limits; keeps `Span` sound regardless.
        return Err(HEAD_TOO_LARGE);
    }

    let base = buf.as_ptr() as usize;
    let mut semantics = Semantics::default();
    let mut headers = HeaderIndex::new();
    for h in fields.iter() {
        semantics.header(h.name.as_bytes(), h.value)?;
        // httparse's names point into `buf`, and no whitespace may precede
        // a name, so it starts the line.
        headers.push((h.name.as_ptr() as usize).wrapping_sub(base));
    }
    // The head ends with its empty line, CRLF or a bare LF.
    headers.set_end(len - 1 - usize::from(len >= 2 && buf[len - 2] == b'\r'));
    let decision = semantics.finish(line.version, limits)?;
    let target = &buf[usize::from(line.target.start)..usize::from(line.target.end)];
    let (path, query) = split_target(target, usize::from(line.target.start));

    Ok(Some(Message::Head(Request {
        head: buf.split_to(len).freeze(),
        verb: line.verb,
        method: line.method,
        target: line.target,
        path,
        query,
        version: line.version,
        body: decision.body,
        keep_alive: decision.keep_alive,
        expects_continue: decision.expects_continue,
        headers,
    })))
}

fn map_httparse_error(e: httparse::Error) -> Error {
    match e {
        httparse::Error::TooManyHeaders => TOO_MANY_HEADERS,
        httparse::Error::HeaderName => Error::bad_request("invalid header name"),
        httparse::Error::HeaderValue => Error::bad_request("invalid header value"),
        // Only the line checks report the others, and they run elsewhere.
        _ => Error::bad_request("invalid line ending"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_lines_before_request_are_skipped() {
        let mut buf = BytesMut::from(&b"\r\n\n\r\nGET"[..]);
        assert!(skip_empty_lines(&mut buf));
        assert_eq!(&buf[..], b"GET");
        let mut buf = BytesMut::from(&b"\r\r\n"[..]);
        assert!(!skip_empty_lines(&mut buf));
        assert_eq!(&buf[..], b"\r\r\n");
    }

    #[test]
    fn scan_counts_lines_incrementally() {
        let limits = Limits {
            max_headers: 2,
            ..Limits::default()
        };
        let mut scan = HeadScan::default();
        let input = b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n";
        let mut result = Ok(None);
        for end in 1..=input.len() {
            result = scan.advance(&input[..end], &limits);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(TOO_MANY_HEADERS));
    }
}
