//! What a request gets, as routing decides it: an [`Action`]. Its own
//! module so that the endpoints' modules (`routes`, `jobs::http`) can build
//! one without importing each other.

use std::time::Duration;

use http1::{HeaderValue, StaticResponse, Status};

use crate::jobs::kinds::JobKind;
use crate::static_files::StaticReply;

/// The prefix of every built-in endpoint; it cannot collide with a site's
/// files because `--root` content is only served outside it.
pub const PREFIX: &str = "/_httplite/";

/// `text/plain` for the server's own small answers.
pub const TEXT: HeaderValue<'static> = HeaderValue::from_static("text/plain; charset=utf-8");
/// `text/html` for the index page and listings.
pub const HTML: HeaderValue<'static> = HeaderValue::from_static("text/html; charset=utf-8");

/// What the connection should do next.
#[derive(Debug)]
pub enum Action {
    /// A complete response fixed at compile time (the hot path: no
    /// allocation).
    Static(&'static StaticResponse),
    /// A complete response with an owned body and extra headers.
    Owned {
        /// Status.
        status: Status,
        /// Content-Type, if any.
        content_type: Option<HeaderValue<'static>>,
        /// Extra headers (validated by the encoder).
        headers: Vec<(&'static str, String)>,
        /// Body.
        body: Vec<u8>,
    },
    /// Stream the request body back.
    Echo,
    /// Wait, then answer with a small text body.
    Sleep(Duration),
    /// A static file decision.
    File(StaticReply),
    /// Stream the stats as Server-Sent Events ([`crate::events`]).
    Events,
    /// Read the request body, then submit it as a job of this type
    /// ([`crate::jobs::http::submitted`] answers).
    Job(JobKind),
}

impl Action {
    pub(crate) fn error(status: Status) -> Action {
        Action::Owned {
            status,
            content_type: Some(TEXT),
            headers: Vec::new(),
            body: format!("{} {}\n", status.code(), status.reason()).into_bytes(),
        }
    }

    pub(crate) fn not_allowed(allow: &'static str) -> Action {
        Action::Owned {
            status: Status::METHOD_NOT_ALLOWED,
            content_type: Some(TEXT),
            headers: vec![("Allow", allow.to_string())],
            body: b"405 Method Not Allowed\n".to_vec(),
        }
    }
}
