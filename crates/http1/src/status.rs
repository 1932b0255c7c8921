//! HTTP status codes and their reason phrases.

use std::fmt;

/// An HTTP status code (three digits, `100..=999`).
///
/// The codes this server sends have associated constants, a reason phrase and
/// a pre-built status line, so encoding a common response copies one static
/// slice instead of formatting digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Status(u16);

macro_rules! statuses {
    ($( $(#[$doc:meta])* $name:ident = $code:literal, $reason:literal; )*) => {
        impl Status {
            $( $(#[$doc])* pub const $name: Status = Status($code); )*
        }

        /// Reason phrase of a known code.
        const fn known(code: u16) -> Option<&'static str> {
            match code {
                $( $code => Some($reason), )*
                _ => None,
            }
        }

        /// The status line of a known code in a fixed-size array, and its
        /// length.
        const fn padded(code: u16) -> Option<(&'static [u8; PADDED_LINE], usize)> {
            match code {
                $( $code => {
                    const LINE: &str =
                        concat!("HTTP/1.1 ", stringify!($code), " ", $reason, "\r\n");
                    Some((&const { pad(LINE) }, LINE.len()))
                } )*
                _ => None,
            }
        }
    };
}

/// Room for the longest known status line (`HTTP/1.1 431 Request Header
/// Fields Too Large\r\n` is 46 bytes).
pub(crate) const PADDED_LINE: usize = 48;

const fn pad(line: &str) -> [u8; PADDED_LINE] {
    let mut out = [0u8; PADDED_LINE];
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

statuses! {
    /// 100 Continue: the interim answer to `Expect: 100-continue`.
    CONTINUE = 100, "Continue";
    /// 200 OK.
    OK = 200, "OK";
    /// 202 Accepted: queued for later (a background job).
    ACCEPTED = 202, "Accepted";
    /// 204 No Content: never carries a body or `Content-Length`.
    NO_CONTENT = 204, "No Content";
    /// 206 Partial Content: the answer to a satisfiable `Range` request.
    PARTIAL_CONTENT = 206, "Partial Content";
    /// 301 Moved Permanently.
    MOVED_PERMANENTLY = 301, "Moved Permanently";
    /// 304 Not Modified: never carries a body.
    NOT_MODIFIED = 304, "Not Modified";
    /// 400 Bad Request: malformed syntax or framing; the connection closes.
    BAD_REQUEST = 400, "Bad Request";
    /// 403 Forbidden.
    FORBIDDEN = 403, "Forbidden";
    /// 404 Not Found.
    NOT_FOUND = 404, "Not Found";
    /// 405 Method Not Allowed.
    METHOD_NOT_ALLOWED = 405, "Method Not Allowed";
    /// 406 Not Acceptable: no representation the client accepts (e.g.
    /// `Accept-Encoding: identity;q=0` and no acceptable precompressed file).
    NOT_ACCEPTABLE = 406, "Not Acceptable";
    /// 408 Request Timeout.
    REQUEST_TIMEOUT = 408, "Request Timeout";
    /// 409 Conflict: the resource's state does not allow the request.
    CONFLICT = 409, "Conflict";
    /// 411 Length Required.
    LENGTH_REQUIRED = 411, "Length Required";
    /// 413 Content Too Large: the body is over the configured limit.
    CONTENT_TOO_LARGE = 413, "Content Too Large";
    /// 414 URI Too Long: the request line is over the configured limit.
    URI_TOO_LONG = 414, "URI Too Long";
    /// 416 Range Not Satisfiable.
    RANGE_NOT_SATISFIABLE = 416, "Range Not Satisfiable";
    /// 417 Expectation Failed.
    EXPECTATION_FAILED = 417, "Expectation Failed";
    /// 431 Request Header Fields Too Large: too many or too long headers.
    REQUEST_HEADER_FIELDS_TOO_LARGE = 431, "Request Header Fields Too Large";
    /// 500 Internal Server Error.
    INTERNAL_SERVER_ERROR = 500, "Internal Server Error";
    /// 501 Not Implemented: e.g. a transfer coding other than chunked.
    NOT_IMPLEMENTED = 501, "Not Implemented";
    /// 502 Bad Gateway: the server behind a proxy failed or answered
    /// something malformed.
    BAD_GATEWAY = 502, "Bad Gateway";
    /// 503 Service Unavailable.
    SERVICE_UNAVAILABLE = 503, "Service Unavailable";
    /// 504 Gateway Timeout: the server behind a proxy did not answer in
    /// time.
    GATEWAY_TIMEOUT = 504, "Gateway Timeout";
    /// 505 HTTP Version Not Supported: anything but HTTP/1.0 and HTTP/1.1.
    HTTP_VERSION_NOT_SUPPORTED = 505, "HTTP Version Not Supported";
}

impl Status {
    /// The status for `code`, or `None` if it is not three digits.
    ///
    /// Codes without a constant are allowed; their reason phrase is empty.
    #[inline]
    pub const fn from_code(code: u16) -> Option<Status> {
        if code >= 100 && code <= 999 {
            Some(Status(code))
        } else {
            None
        }
    }

    /// The numeric code, e.g. `404`.
    #[inline]
    pub const fn code(self) -> u16 {
        self.0
    }

    /// The reason phrase, e.g. `"Not Found"`; empty for unknown codes.
    pub const fn reason(self) -> &'static str {
        match known(self.0) {
            Some(reason) => reason,
            None => "",
        }
    }

    /// `true` for 1xx interim responses.
    #[inline]
    pub const fn is_informational(self) -> bool {
        self.0 < 200
    }

    /// `false` for the statuses whose responses never have a body
    /// (1xx, 204, 304, RFC 9110 §6.4.1); the encoder then writes neither a
    /// body nor framing headers.
    #[inline]
    pub const fn allows_body(self) -> bool {
        !(self.0 < 200 || self.0 == 204 || self.0 == 304)
    }

    /// `HTTP/1.1 <code> <reason>\r\n` for known codes, pre-built at compile
    /// time in a fixed-size array, plus its length: copying a constant number
    /// of bytes compiles to a few vector moves instead of a `memcpy` call,
    /// and the excess is truncated away.
    pub(crate) const fn padded_line(self) -> Option<(&'static [u8; PADDED_LINE], usize)> {
        padded(self.0)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason().is_empty() {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{} {}", self.0, self.reason())
        }
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Status({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codes_have_phrases_and_lines() {
        let all = [
            100, 200, 204, 206, 301, 304, 400, 403, 404, 405, 406, 408, 411, 413, 414, 416, 417,
            431, 500, 501, 503, 505,
        ];
        for code in all {
            let s = Status::from_code(code).unwrap();
            assert!(!s.reason().is_empty(), "{code}");
            let expected = format!("HTTP/1.1 {code} {}\r\n", s.reason());
            let (padded, len) = s.padded_line().unwrap();
            assert_eq!(&padded[..len], expected.as_bytes());
        }
        assert_eq!(Status::OK.reason(), "OK");
        assert_eq!(Status::URI_TOO_LONG.code(), 414);
        assert_eq!(Status::NOT_FOUND.to_string(), "404 Not Found");
    }

    #[test]
    fn unknown_and_invalid_codes() {
        let s = Status::from_code(299).unwrap();
        assert_eq!(s.reason(), "");
        assert_eq!(s.padded_line(), None);
        assert_eq!(s.to_string(), "299");
        assert_eq!(Status::from_code(99), None);
        assert_eq!(Status::from_code(1000), None);
    }

    #[test]
    fn bodyless_statuses() {
        assert!(!Status::CONTINUE.allows_body());
        assert!(!Status::NO_CONTENT.allows_body());
        assert!(!Status::NOT_MODIFIED.allows_body());
        assert!(Status::OK.allows_body());
        assert!(Status::NOT_FOUND.allows_body());
        assert!(Status::CONTINUE.is_informational());
        assert!(!Status::OK.is_informational());
    }
}
