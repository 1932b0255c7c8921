//! A reference reading of a client's whole byte stream as HTTP/1.1
//! requests: the request line, target forms and `Host` values as
//! [`crate::rfc_line`] reads them from the RFCs, httparse for the header
//! fields after the line, then RFC 9112 framing written here from the RFC
//! (none of it shared with `http1`), with the server's limits and policy.
//! The `connection` target checks the server's answers against it.

use crate::chunked_ref::{self, ChunkedEnd};
use crate::rfc_line::{self, Line};

/// The limits and policy the server runs with.
#[derive(Debug, Clone, Copy)]
pub struct RefLimits {
    /// Longest request line without its line end (414 beyond).
    pub max_request_line: usize,
    /// Longest header section, final empty line included (431 beyond).
    pub max_head: usize,
    /// Most header fields (431 beyond).
    pub max_headers: usize,
    /// Largest body (413 beyond).
    pub max_body: u64,
    /// HTTP/1.1 needs exactly one `Host`; HTTP/1.0 at most one.
    pub require_host: bool,
}

impl From<http1::Limits> for RefLimits {
    fn from(l: http1::Limits) -> RefLimits {
        RefLimits {
            max_request_line: l.max_request_line,
            max_head: l.max_head,
            max_headers: l.max_headers,
            max_body: l.max_body,
            require_host: l.require_host,
        }
    }
}

/// A request whose head is valid.
#[derive(Debug, Clone)]
pub struct RefRequest {
    /// The method token.
    pub method: String,
    /// The request target as sent.
    pub target: String,
    /// The connection may stay open after the answer.
    pub keep_alive: bool,
    /// HTTP/1.1, `Expect: 100-continue`, and a body.
    pub expects_continue: bool,
    /// The body is chunked (else sized or absent).
    pub chunked: bool,
    /// The body decoded so far (all of it for a complete request).
    pub body: Vec<u8>,
}

impl RefRequest {
    /// A `HEAD` request, whose answer has no body.
    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }

    /// Whether this is a request for the echo endpoint by origin-form
    /// target, whose answer is its body.
    pub fn is_echo(&self) -> bool {
        let path = self.target.split('?').next().unwrap_or_default();
        path == "/_httplite/echo" && matches!(self.method.as_str(), "POST" | "PUT")
    }
}

/// What the reference makes of one request in the stream.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Head and body complete and valid.
    Complete(RefRequest),
    /// The head is invalid. `certain` when the server must notice before
    /// the stream ends: the head is terminated by its empty line, the
    /// request line is malformed and has ended, or a limit is already
    /// exceeded. (An invalid byte in a line or head that never ends may go
    /// unnoticed until the end of the stream, which is fine.)
    BadHead {
        /// See above.
        certain: bool,
        /// The status the answer must have, where only one is possible:
        /// 400 or 505 for a malformed request line, 400 for a malformed
        /// header field; `None` where several are (a limit: 414 or 431,
        /// or a malformed line too; framing: 400, 413 or 501).
        status: Option<u16>,
    },
    /// The head is valid, the body is not (chunked framing, body limit).
    BadBody(RefRequest),
    /// The stream ends inside the head.
    PartialHead,
    /// The stream ends inside the body.
    PartialBody(RefRequest),
}

/// Reads `input` as requests until the first one that is not complete.
pub fn parse_stream(input: &[u8], limits: &RefLimits) -> Vec<Verdict> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        at += empty_lines(&input[at..]);
        if at >= input.len() {
            return out;
        }
        let (verdict, used) = one(&input[at..], limits);
        let complete = matches!(verdict, Verdict::Complete(_));
        out.push(verdict);
        if !complete {
            return out;
        }
        at += used;
    }
}

/// RFC 9112 §2.2: empty lines before a request line are ignored.
fn empty_lines(input: &[u8]) -> usize {
    let mut n = 0;
    loop {
        if input[n..].starts_with(b"\r\n") {
            n += 2;
        } else if input[n..].starts_with(b"\n") {
            n += 1;
        } else {
            return n;
        }
    }
}

/// One request at the start of `input`: its verdict and, when complete,
/// its length.
fn one(input: &[u8], limits: &RefLimits) -> (Verdict, usize) {
    let bad = |certain, status| (Verdict::BadHead { certain, status }, 0);
    if input == b"\r" {
        // Maybe the start of one more empty line.
        return (Verdict::PartialHead, 0);
    }
    let scan = scan_head(input);
    let over_limit = scan.line_len > limits.max_request_line
        || scan.section_len > limits.max_head
        || scan.fields > limits.max_headers;
    if over_limit {
        return bad(true, None);
    }
    let (method, target, http11, line_end) = match rfc_line::request_line(input) {
        Line::Partial => return (Verdict::PartialHead, 0),
        Line::Bad { status, ended } => return bad(ended, Some(status)),
        Line::Valid {
            method,
            target,
            http11,
            end,
        } => (method, target, http11, end),
    };
    let mut slots = vec![httparse::EMPTY_HEADER; limits.max_headers];
    let (head_len, fields) = match httparse::parse_headers(&input[line_end..], &mut slots) {
        Ok(httparse::Status::Complete((n, fields))) => (line_end + n, fields),
        Ok(httparse::Status::Partial) if scan.terminated => {
            // httparse wants more, yet the head has ended: malformed.
            return bad(true, Some(400));
        }
        Ok(httparse::Status::Partial) => return (Verdict::PartialHead, 0),
        Err(_) => return bad(scan.terminated, Some(400)),
    };
    let Some(framing) = framing(http11, fields, limits) else {
        return bad(true, None);
    };
    let mut request = RefRequest {
        method: String::from_utf8_lossy(method).into_owned(),
        target: String::from_utf8_lossy(target).into_owned(),
        keep_alive: framing.keep_alive,
        expects_continue: framing.expects_continue,
        chunked: framing.body == Body::Chunked,
        body: Vec::new(),
    };
    let rest = &input[head_len..];
    match framing.body {
        Body::Length(n) => {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            if rest.len() < n {
                request.body = rest.to_vec();
                return (Verdict::PartialBody(request), 0);
            }
            request.body = rest[..n].to_vec();
            (Verdict::Complete(request), head_len + n)
        }
        Body::Chunked => {
            let (data, end) = chunked_ref::decode(rest, limits.max_body, limits.max_head);
            request.body = data;
            match end {
                ChunkedEnd::Complete(n) => (Verdict::Complete(request), head_len + n),
                ChunkedEnd::NeedMore => (Verdict::PartialBody(request), 0),
                ChunkedEnd::Error(_) => (Verdict::BadBody(request), 0),
            }
        }
    }
}

/// What a line scan of the head shows, complete or not.
struct HeadScan {
    /// Request line length without its line end (so far).
    line_len: usize,
    /// Header section bytes after the request line, up to and including
    /// the empty line (so far).
    section_len: usize,
    /// Complete header lines.
    fields: usize,
    /// The empty line ending the head was found.
    terminated: bool,
}

fn scan_head(input: &[u8]) -> HeadScan {
    let strip_cr = |line: &[u8]| line.len() - usize::from(line.last() == Some(&b'\r'));
    let mut lines = input.split_inclusive(|&b| b == b'\n');
    let first = lines.next().unwrap_or_default();
    let mut scan = HeadScan {
        line_len: strip_cr(first.strip_suffix(b"\n").unwrap_or(first)),
        section_len: 0,
        fields: 0,
        terminated: false,
    };
    if !first.ends_with(b"\n") {
        return scan;
    }
    for line in lines {
        scan.section_len += line.len();
        let Some(content) = line.strip_suffix(b"\n") else {
            break; // the partial line being received
        };
        if content.is_empty() || content == b"\r" {
            scan.terminated = true;
            break;
        }
        scan.fields += 1;
    }
    scan
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Length(u64),
    Chunked,
}

struct Framing {
    body: Body,
    keep_alive: bool,
    expects_continue: bool,
}

/// RFC 9112 §6 (framing), §9.3 (persistence), RFC 9110 §10.1.1 (Expect),
/// §3.2 (`Host`: a valid value, and with `require_host` exactly one in
/// HTTP/1.1, at most one in HTTP/1.0), with the server's policy on
/// ambiguity: anything unclear is rejected.
fn framing(http11: bool, fields: &[httparse::Header<'_>], limits: &RefLimits) -> Option<Framing> {
    let mut hosts = 0;
    let mut lengths: Vec<u64> = Vec::new();
    let mut codings: Option<Vec<String>> = None;
    let (mut close, mut keep_alive_token, mut expect) = (false, false, false);
    for h in fields {
        let name = h.name.to_ascii_lowercase();
        let value = h.value;
        match name.as_str() {
            "host" if !rfc_line::is_host_value(value) => return None,
            "host" => hosts += 1,
            "content-length" => {
                for item in value.split(|&b| b == b',') {
                    let item = trim(item);
                    if item.is_empty() || !item.iter().all(u8::is_ascii_digit) {
                        return None;
                    }
                    let n = std::str::from_utf8(item).ok()?.parse::<u64>().ok()?;
                    lengths.push(n);
                }
            }
            "transfer-encoding" => {
                let list = codings.get_or_insert_with(Vec::new);
                list.extend(elements(value).map(|c| String::from_utf8_lossy(c).to_lowercase()));
            }
            "connection" => {
                for token in elements(value) {
                    close |= token.eq_ignore_ascii_case(b"close");
                    keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            }
            "expect" => expect |= trim(value).eq_ignore_ascii_case(b"100-continue"),
            _ => {}
        }
    }
    if limits.require_host && (hosts > 1 || (hosts == 0 && http11)) {
        return None;
    }
    if lengths.windows(2).any(|w| w[0] != w[1]) {
        return None;
    }
    let body = match (codings, lengths.first()) {
        (Some(_), Some(_)) => return None,
        (Some(codings), None) => {
            let chunked_last = codings.last().is_some_and(|c| c == "chunked");
            let chunked_once = codings.iter().filter(|c| *c == "chunked").count() == 1;
            if !http11 || !chunked_last || !chunked_once || codings.len() != 1 {
                return None;
            }
            Body::Chunked
        }
        (None, Some(&n)) if n > limits.max_body => return None,
        (None, Some(&n)) => Body::Length(n),
        (None, None) => Body::Length(0),
    };
    let keep_alive = !close && (http11 || keep_alive_token);
    let has_body = body != Body::Length(0);
    Some(Framing {
        body,
        keep_alive,
        expects_continue: http11 && expect && has_body,
    })
}

/// The non-empty, trimmed elements of a comma-separated list.
fn elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim)
        .filter(|e| !e.is_empty())
}

fn trim(s: &[u8]) -> &[u8] {
    let ws = |b: &u8| *b == b' ' || *b == b'\t';
    let start = s.iter().position(|b| !ws(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !ws(b)).map_or(start, |e| e + 1);
    &s[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> RefLimits {
        http1::Limits {
            require_host: true,
            ..http1::Limits::default()
        }
        .into()
    }

    fn kinds(input: &[u8]) -> Vec<&'static str> {
        parse_stream(input, &limits())
            .iter()
            .map(|v| match v {
                Verdict::Complete(_) => "complete",
                Verdict::BadHead { certain: true, .. } => "bad",
                Verdict::BadHead { certain: false, .. } => "bad?",
                Verdict::BadBody(_) => "badbody",
                Verdict::PartialHead => "partial",
                Verdict::PartialBody(_) => "partialbody",
            })
            .collect()
    }

    #[test]
    fn streams() {
        let get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(kinds(get), ["complete"]);
        assert_eq!(kinds(&[&get[..], b"\r\n", get].concat()), ["complete"; 2]);
        assert_eq!(kinds(b"GET / HTTP/1.1\r\n\r\n"), ["bad"]);
        assert_eq!(kinds(b"GET / HTTP/1.1\r\nHost: a\r\n"), ["partial"]);
        assert_eq!(kinds(b"GET / HTTP/1.1\r\nHo\x01st: a\r\n\r\n"), ["bad"]);
        assert_eq!(kinds(b"GET / HTTP/1.1\r\nHo\x01st: a\r\n"), ["bad?"]);
        assert_eq!(
            kinds(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nab"),
            ["partialbody"]
        );
        assert_eq!(
            kinds(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab"),
            ["badbody"]
        );
        assert_eq!(
            kinds(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"),
            ["bad"]
        );
        let long = [b"GET /".as_slice(), &[b'a'; 9000]].concat();
        assert_eq!(kinds(&long), ["bad"]);
    }

    fn status(input: &[u8]) -> Option<u16> {
        match parse_stream(input, &limits()).last() {
            Some(Verdict::BadHead { status, .. }) => *status,
            other => panic!("not a bad head: {other:?}"),
        }
    }

    #[test]
    fn strict_request_lines() {
        assert_eq!(kinds(b"GET / HTTP/1.2\r\nHost: a\r\n\r\n"), ["complete"]);
        assert_eq!(kinds(b"GET / HTTP/1.0\r\n\r\n"), ["complete"]);
        assert_eq!(
            kinds(b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"),
            ["complete"]
        );
        assert_eq!(kinds(b"CONNECT a:1 HTTP/1.1\nHost: a:1\n\n"), ["complete"]);
        assert_eq!(kinds(b"GET ?x HTTP/1.1\r\nHost: a\r\n\r\n"), ["bad"]);
        assert_eq!(status(b"GET ?x HTTP/1.1\r\nHost: a\r\n\r\n"), Some(400));
        // The line has ended: the server must answer before the headers do.
        assert_eq!(kinds(b"GET ?x HTTP/1.1\r\nHost: a\r\n"), ["bad"]);
        assert_eq!(kinds(b"GET / HTTP/3\r\n"), ["bad"]);
        assert_eq!(status(b"GET / HTTP/3\r\n"), Some(400));
        assert_eq!(status(b"GET / HTTP/3.0\r\n"), Some(505));
        assert_eq!(status(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Some(505));
        assert_eq!(kinds(b"GET / HTTP/2.0"), ["partial"]);
        assert_eq!(kinds(b"GET /a\x00"), ["bad?"]);
        assert_eq!(kinds(b"GET / HTTP/1.1\r\nHost: bad host\r\n\r\n"), ["bad"]);
        assert_eq!(
            kinds(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"),
            ["bad"]
        );
        assert_eq!(kinds(b"GET / HTTP/1.0\r\nHost: [::1\r\n\r\n"), ["bad"]);
        assert_eq!(kinds(b"\r"), ["partial"]);
        let get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(kinds(&[&get[..], b"\r"].concat()), ["complete", "partial"]);
        // Over a limit: any of the protocol errors.
        let long = [b"GET /".as_slice(), &[b'a'; 9000], b" HTTP/2.0\r\n"].concat();
        assert_eq!(status(&long), None);
    }
}
