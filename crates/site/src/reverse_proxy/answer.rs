//! An upstream's response head as the client gets it.
//!
//! Hop-by-hop fields are removed as on the way up ([`super::forward`]),
//! `Via` gets this hop, and the body is framed for this client: a length
//! stays a `Content-Length`; a chunked or close-delimited body is
//! re-chunked for an HTTP/1.1 client and close-delimited for an HTTP/1.0
//! one. Interim responses (1xx but 101) are not passed on: the proxy
//! answers `Expect: 100-continue` itself, and `103 Early Hints` is
//! optional. A `101 Switching Protocols` keeps `Upgrade` and
//! `Connection: upgrade`: the connection becomes a tunnel.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};
use http1::{ResponseBody, ResponseHead, Version};

use super::forward::{connection_tokens, is_hop_by_hop};

/// How the body goes to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFraming {
    /// No body (HEAD, 1xx, 204, 304: the upstream's `Content-Length`, if
    /// any, is passed on as it describes the resource).
    None,
    /// `Content-Length`: the bytes are copied as they come.
    Length(u64),
    /// Re-chunked: each piece read is one chunk, then the last chunk.
    Chunked,
    /// Until the proxy closes the client's connection (an HTTP/1.0
    /// client and a body of unknown length).
    Close,
}

/// How `head`'s body goes to a client speaking `client_version`.
pub fn client_framing(head: &ResponseHead, client_version: Version) -> ClientFraming {
    match head.body() {
        ResponseBody::None => ClientFraming::None,
        ResponseBody::Length(n) => ClientFraming::Length(n),
        ResponseBody::Chunked | ResponseBody::UntilClose => match client_version {
            Version::Http11 => ClientFraming::Chunked,
            Version::Http10 => ClientFraming::Close,
        },
    }
}

/// Appends the client's head for `head` to `out`: framed by `framing`,
/// with `Connection: close` when `close` (the client's connection ends
/// after this response).
pub fn write_response_head(
    out: &mut BytesMut,
    head: &ResponseHead,
    framing: ClientFraming,
    close: bool,
) {
    let upgrade = head.status() == 101;
    let listed = connection_tokens(head.headers());
    let mut text = String::with_capacity(head.as_bytes().len() + 64);
    let reason = String::from_utf8_lossy(head.reason());
    let _ = write!(text, "HTTP/1.1 {} {reason}\r\n", head.status());
    let mut via = String::new();
    for (name, value) in head.headers() {
        let lower = name.to_ascii_lowercase();
        let value = String::from_utf8_lossy(value);
        match lower.as_str() {
            "upgrade" if upgrade => {}
            "content-length" if framing != ClientFraming::None => continue,
            _ if is_hop_by_hop(&lower) || listed.contains(&lower) => continue,
            "via" => {
                via.push_str(&value);
                via.push_str(", ");
                continue;
            }
            _ => {}
        }
        let _ = write!(text, "{name}: {value}\r\n");
    }
    let received = match head.version() {
        Version::Http10 => "1.0",
        Version::Http11 => "1.1",
    };
    let _ = write!(text, "Via: {via}{received} httplite\r\n");
    match framing {
        ClientFraming::Length(n) => {
            let _ = write!(text, "Content-Length: {n}\r\n");
        }
        ClientFraming::Chunked => text.push_str("Transfer-Encoding: chunked\r\n"),
        ClientFraming::None | ClientFraming::Close => {}
    }
    if upgrade {
        text.push_str("Connection: upgrade\r\n");
    } else if close || framing == ClientFraming::Close {
        text.push_str("Connection: close\r\n");
    }
    text.push_str("\r\n");
    out.put_slice(text.as_bytes());
}
