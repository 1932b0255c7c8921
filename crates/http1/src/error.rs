//! The one error type of this crate.

use std::fmt;

use crate::Status;

/// Why a request could not be decoded (or a response not encoded).
///
/// Every decoding error has the same remedy: answer [`status`](Error::status)
/// (see [`encode_error`](crate::encode_error)) and close the connection,
/// because after a framing error the server no longer knows where the next
/// request would start. The decoder stays failed and returns the same error
/// again if called.
///
/// Encoding errors (an invalid header name or value from the handler) carry
/// 500: they are bugs on the server's side, not the client's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Error {
    status: Status,
    reason: &'static str,
}

impl Error {
    pub(crate) const fn new(status: Status, reason: &'static str) -> Error {
        Error { status, reason }
    }

    pub(crate) const fn bad_request(reason: &'static str) -> Error {
        Error::new(Status::BAD_REQUEST, reason)
    }

    pub(crate) const fn encode(reason: &'static str) -> Error {
        Error::new(Status::INTERNAL_SERVER_ERROR, reason)
    }

    /// The status code to answer with: 400, 413, 414, 431, 501 or 505 for
    /// decoding errors, 500 for encoding errors, 502 for a response that
    /// [`ResponseDecoder`](crate::ResponseDecoder) could not decode.
    pub const fn status(&self) -> Status {
        self.status
    }

    /// A short, fixed description of what was wrong, fit for a log line or
    /// an error response body.
    pub const fn reason(&self) -> &'static str {
        self.reason
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status, self.reason)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_status_and_reason() {
        let e = Error::bad_request("invalid chunk size");
        assert_eq!(e.to_string(), "400 Bad Request: invalid chunk size");
        assert_eq!(e.status(), Status::BAD_REQUEST);
        assert_eq!(e.reason(), "invalid chunk size");
        assert_eq!(Error::encode("x").status().code(), 500);
    }
}
