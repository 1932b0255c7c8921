//! The request line, to the letter of RFC 9112 §3: the general path's parser
//! (the fast path accepts only the common shape and leaves the rest here).
//!
//! ```text
//! request-line = method SP request-target SP HTTP-version CRLF
//! HTTP-version = "HTTP/" DIGIT "." DIGIT
//! ```
//!
//! Each separator is exactly one space; a second space, a tab, a bare CR or
//! any other control character anywhere in the line makes it malformed
//! (400). A well-formed version whose major number is not 1 is 505; a minor
//! number above 1 is served as HTTP/1.1 (RFC 9110 §2.5). The target must be
//! one of the four forms, each with the methods allowed to use it
//! ([`crate::uri`]). A bare LF ends the line as well as CRLF does (RFC 9112
//! §2.2 lets a recipient accept it).
//!
//! The parser reads as far as the bytes go and reports a malformed line as
//! soon as it sees the first wrong byte, so a client that sends garbage is
//! answered before it has sent a whole line.

use crate::head::URI_TOO_LONG;
use crate::head::fast::is_tchar;
use crate::request::{Span, Verb};
use crate::uri::{self, Form, TARGET};
use crate::{Error, Limits, Status, Version};

/// A complete, valid request line.
#[derive(Debug)]
pub(crate) struct Line {
    pub(crate) verb: Verb,
    pub(crate) method: Span,
    pub(crate) target: Span,
    pub(crate) version: Version,
    /// Just past the line's LF: where the header section starts.
    pub(crate) end: usize,
}

const BAD_METHOD: Error = Error::bad_request("invalid method");
const BAD_TARGET: Error = Error::bad_request("invalid request target");
const BAD_VERSION: Error = Error::bad_request("invalid HTTP version");
const BAD_LINE_END: Error = Error::bad_request("invalid request line ending");

/// Parses the request line at the start of `buf`: `Ok(None)` while it is
/// incomplete and valid so far.
pub(crate) fn parse(buf: &[u8], limits: &Limits) -> Result<Option<Line>, Error> {
    // method SP
    let method_end = match buf.iter().position(|&b| !is_tchar(b)) {
        None => return Ok(None),
        Some(0) => return Err(BAD_METHOD),
        Some(n) if buf[n] != b' ' => return Err(BAD_METHOD),
        Some(n) => n,
    };
    // request-target SP
    let target_start = method_end + 1;
    let target_end = match buf[target_start..]
        .iter()
        .position(|&b| !TARGET[usize::from(b)])
    {
        None => return Ok(None),
        Some(n) if buf[target_start + n] != b' ' => return Err(BAD_TARGET),
        Some(0) => return Err(BAD_TARGET),
        Some(n) => target_start + n,
    };
    // HTTP-version, then CRLF or LF.
    let v = target_end + 1;
    let version = &buf[v..buf.len().min(v + 8)];
    let expected_shape = |i: usize, b: u8| match i {
        6 => b == b'.',
        5 | 7 => b.is_ascii_digit(),
        _ => b == b"HTTP/"[i],
    };
    if !version
        .iter()
        .enumerate()
        .all(|(i, &b)| expected_shape(i, b))
    {
        return Err(BAD_VERSION);
    }
    let end = match buf.get(v + 8..) {
        None | Some([] | [b'\r']) => return Ok(None),
        Some([b'\r', b'\n', ..]) => v + 10,
        Some([b'\n', ..]) => v + 9,
        Some(_) => return Err(BAD_LINE_END),
    };
    if v + 8 > limits.max_request_line {
        return Err(URI_TOO_LONG);
    }
    let version = match (buf[v + 5], buf[v + 7]) {
        (b'1', b'0') => Version::Http10,
        (b'1', _) => Version::Http11,
        _ => {
            return Err(Error::new(
                Status::HTTP_VERSION_NOT_SUPPORTED,
                "unsupported HTTP version",
            ));
        }
    };
    let verb = Verb::of(&buf[..method_end]);
    check_form(verb, &buf[target_start..target_end])?;
    Ok(Some(Line {
        verb,
        method: Span::new(0, method_end),
        target: Span::new(target_start, target_end),
        version,
        end,
    }))
}

/// The target's form, and whether this method may use it (RFC 9112 §3.2).
fn check_form(verb: Verb, target: &[u8]) -> Result<(), Error> {
    match (uri::form(target), verb) {
        (None, _) => Err(BAD_TARGET),
        (Some(Form::Authority), Verb::Connect) => Ok(()),
        (Some(Form::Authority), _) | (Some(_), Verb::Connect) => Err(Error::bad_request(
            "authority-form target is only for CONNECT, and CONNECT needs one",
        )),
        (Some(Form::Asterisk), Verb::Options) | (Some(Form::Origin | Form::Absolute { .. }), _) => {
            Ok(())
        }
        (Some(Form::Asterisk), _) => Err(Error::bad_request(
            "asterisk-form target is only for OPTIONS",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(line: &[u8]) -> Result<Option<(Verb, String, Version, usize)>, u16> {
        parse(line, &Limits::default())
            .map(|l| {
                l.map(|l| {
                    let t = &line[usize::from(l.target.start)..usize::from(l.target.end)];
                    (
                        l.verb,
                        String::from_utf8(t.to_vec()).unwrap(),
                        l.version,
                        l.end,
                    )
                })
            })
            .map_err(|e| e.status().code())
    }

    #[test]
    fn well_formed_lines() {
        assert_eq!(
            verdict(b"GET /a?b HTTP/1.1\r\nHost"),
            Ok(Some((Verb::Get, "/a?b".into(), Version::Http11, 19)))
        );
        assert_eq!(
            verdict(b"GET / HTTP/1.0\n"),
            Ok(Some((Verb::Get, "/".into(), Version::Http10, 15)))
        );
        assert_eq!(
            verdict(b"GET / HTTP/1.2\r\n").map(|l| l.map(|l| l.2)),
            Ok(Some(Version::Http11))
        );
        assert!(matches!(verdict(b"OPTIONS * HTTP/1.1\r\n"), Ok(Some(_))));
        assert!(matches!(
            verdict(b"CONNECT a:443 HTTP/1.1\r\n"),
            Ok(Some(_))
        ));
        assert!(matches!(
            verdict(b"GET http://a/b HTTP/1.1\r\n"),
            Ok(Some(_))
        ));
    }

    #[test]
    fn partial_lines_wait() {
        for partial in [
            &b"GE"[..],
            b"GET",
            b"GET /a",
            b"GET /a ",
            b"GET /a HTT",
            b"GET /a HTTP/1.",
            b"GET /a HTTP/1.1",
            b"GET /a HTTP/1.1\r",
        ] {
            assert_eq!(verdict(partial), Ok(None), "{}", partial.escape_ascii());
        }
    }

    #[test]
    fn malformed_lines_are_400() {
        for bad in [
            &b" GET / HTTP/1.1\r\n"[..],
            b"GET  / HTTP/1.1\r\n",
            b"GET /  HTTP/1.1\r\n",
            b"GET\t/ HTTP/1.1\r\n",
            b"GET /\tHTTP/1.1\r\n",
            b"GET /a x HTTP/1.1\r\n",
            b"GET / HTTP/1.\r\n",
            b"GET / HTTP/1.1 \r\n",
            b"GET / HTTP/1.1\r\r\n",
            b"GET / http/1.1\r\n",
            b"GET / HTTP/11\r\n",
            b"GET / HTTP/1.10\r\n",
            b"GET / HTTP/2\r\n",
            b"GET /a\rb HTTP/1.1\r\n",
            b"GET /a\x00 HTTP/1.1\r\n",
            b"GET /\x80 HTTP/1.1\r\n",
            b"GET /a#b HTTP/1.1\r\n",
            b"GET ?x HTTP/1.1\r\n",
            b"GET x HTTP/1.1\r\n",
            b"GET http:/x HTTP/1.1\r\n",
            b"GET * HTTP/1.1\r\n",
            b"GET a:443 HTTP/1.1\r\n",
            b"CONNECT / HTTP/1.1\r\n",
            b"CONNECT http://a/ HTTP/1.1\r\n",
            b"G(T / HTTP/1.1\r\n",
        ] {
            assert_eq!(verdict(bad), Err(400), "{}", bad.escape_ascii());
        }
        // Garbage is rejected before the line ends.
        assert_eq!(verdict(b"GET /a\x00"), Err(400));
        assert_eq!(verdict(b"GET / XTTP"), Err(400));
    }

    #[test]
    fn other_major_versions_are_505() {
        for line in [
            &b"GET / HTTP/2.0\r\n"[..],
            b"GET / HTTP/0.9\r\n",
            b"PRI * HTTP/2.0\r\n",
            b"GET / HTTP/3.1\n",
        ] {
            assert_eq!(verdict(line), Err(505), "{}", line.escape_ascii());
        }
    }
}
