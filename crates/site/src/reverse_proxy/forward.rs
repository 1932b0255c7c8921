//! A client's request head as the upstream gets it.
//!
//! - **Hop-by-hop fields are removed** (RFC 9110 §7.6.1): `Connection` and
//!   every field it names, `Keep-Alive`, `TE`, `Transfer-Encoding`,
//!   `Upgrade` (kept, with `Connection: upgrade`, when the request is
//!   tunnelled), and every `Proxy-*` field (`Proxy-Connection`,
//!   `Proxy-Authorization`: they are for a proxy, and this one takes none).
//! - **The body is re-framed**: the decoder has already taken the client's
//!   framing apart (and refused every ambiguous one: both `Content-Length`
//!   and `Transfer-Encoding`, two lengths, obs-fold), so the upstream gets
//!   one `Content-Length` or `Transfer-Encoding: chunked` written here.
//!   `Expect: 100-continue` is answered by the proxy itself and not
//!   forwarded.
//! - **Who asked**: `X-Forwarded-For`, `X-Forwarded-Proto` and `Forwarded`
//!   (RFC 7239) say the client's address and scheme. From a trusted peer
//!   (`--trusted-proxy`) the fields it sent are kept and this hop is
//!   appended; from anyone else they are dropped first, so the upstream
//!   reads only what this proxy vouches for.
//! - `Via` gets this hop appended (RFC 9110 §7.6.3); `Host` is the client's
//!   (`--proxy-host preserve`) or the upstream's (`upstream`).

use std::fmt::Write as _;
use std::net::IpAddr;

use bytes::{BufMut, BytesMut};
use http1::{Request, Version};

/// Which `Host` the upstream gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostPolicy {
    /// The client's (virtual hosts behind the proxy see the name asked for).
    #[default]
    Preserve,
    /// The upstream URL's `HOST[:PORT]`.
    Upstream,
}

/// How the request's body goes upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body.
    None,
    /// Exactly this many bytes (`Content-Length`).
    Length(u64),
    /// Re-chunked as it streams (`Transfer-Encoding: chunked`).
    Chunked,
}

/// What the head needs besides the request.
#[derive(Debug, Clone, Copy)]
pub struct Forwarding<'a> {
    /// The client's address (the PROXY header's, or the socket's peer).
    pub client: Option<IpAddr>,
    /// Whether the client came over TLS.
    pub https: bool,
    /// Whether the peer is a `--trusted-proxy`: its forwarding fields stay.
    pub trusted_peer: bool,
    /// Which `Host` to send.
    pub host: HostPolicy,
    /// The upstream URL's authority, for [`HostPolicy::Upstream`] (and
    /// for a client that sent no `Host`).
    pub upstream_authority: &'a str,
    /// The request asks for an upgrade that is passed on (`Upgrade` and
    /// `Connection: upgrade` are kept).
    pub tunnel: bool,
}

/// Whether `name` is a hop-by-hop field by definition (not by being named
/// in `Connection`). `Trailer` is among them here: the proxy re-frames a
/// chunked body and does not pass trailer fields on, so it must not
/// announce any.
pub fn is_hop_by_hop(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "te",
        "transfer-encoding",
        "upgrade",
        "trailer",
    ]
    .iter()
    .any(|h| name.eq_ignore_ascii_case(h))
        || name
            .get(..6)
            .is_some_and(|p| p.eq_ignore_ascii_case("proxy-"))
}

/// The field names a `Connection` header lists (lower-cased), from every
/// `Connection` line of `headers`.
pub fn connection_tokens<'h>(headers: impl Iterator<Item = (&'h str, &'h [u8])>) -> Vec<String> {
    headers
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(|&b| b == b','))
        .map(|t| String::from_utf8_lossy(t).trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Appends the head for `req` to `out`, with `target` as its request
/// target (see [`super::upstream_target`]).
pub fn write_request_head(
    out: &mut BytesMut,
    req: &Request,
    target: &str,
    f: &Forwarding<'_>,
    body: BodyFraming,
) {
    let listed = connection_tokens(req.headers());
    let mut head = String::with_capacity(req.head_bytes().len() + 160);
    let _ = write!(head, "{} {target} HTTP/1.1\r\n", req.method().as_str());
    let host = match f.host {
        HostPolicy::Preserve => req.host().unwrap_or(f.upstream_authority),
        HostPolicy::Upstream => f.upstream_authority,
    };
    let _ = write!(head, "Host: {host}\r\n");
    let (mut xff, mut forwarded, mut via) = (String::new(), String::new(), String::new());
    let mut proto = None;
    for (name, value) in req.headers() {
        let lower = name.to_ascii_lowercase();
        let value = String::from_utf8_lossy(value);
        match lower.as_str() {
            "host" | "content-length" | "expect" => continue,
            "upgrade" if f.tunnel => {
                let _ = write!(head, "{name}: {value}\r\n");
            }
            _ if is_hop_by_hop(&lower) || listed.contains(&lower) => continue,
            "x-forwarded-for" if f.trusted_peer => append(&mut xff, &value),
            "forwarded" if f.trusted_peer => append(&mut forwarded, &value),
            "x-forwarded-proto" if f.trusted_peer => proto = Some(value.into_owned()),
            "x-forwarded-for" | "forwarded" | "x-forwarded-proto" => {}
            "via" => append(&mut via, &value),
            _ => {
                let _ = write!(head, "{name}: {value}\r\n");
            }
        }
    }
    let scheme = if f.https { "https" } else { "http" };
    if let Some(ip) = f.client {
        append(&mut xff, &ip.to_string());
    }
    if !xff.is_empty() {
        let _ = write!(head, "X-Forwarded-For: {xff}\r\n");
    }
    let _ = write!(
        head,
        "X-Forwarded-Proto: {}\r\n",
        proto.as_deref().unwrap_or(scheme)
    );
    append(
        &mut forwarded,
        &forwarded_element(f.client, scheme, req.host()),
    );
    let _ = write!(head, "Forwarded: {forwarded}\r\n");
    let received = match req.version() {
        Version::Http10 => "1.0",
        Version::Http11 => "1.1",
    };
    append(&mut via, &format!("{received} httplite"));
    let _ = write!(head, "Via: {via}\r\n");
    if f.tunnel {
        head.push_str("Connection: upgrade\r\n");
    }
    match body {
        BodyFraming::None => {}
        BodyFraming::Length(n) => {
            let _ = write!(head, "Content-Length: {n}\r\n");
        }
        BodyFraming::Chunked => head.push_str("Transfer-Encoding: chunked\r\n"),
    }
    head.push_str("\r\n");
    out.put_slice(head.as_bytes());
}

fn append(list: &mut String, item: &str) {
    if !list.is_empty() {
        list.push_str(", ");
    }
    list.push_str(item);
}

/// This hop's `Forwarded` element (RFC 7239 §4): an IPv6 address and a
/// host with characters outside a token are quoted.
fn forwarded_element(client: Option<IpAddr>, proto: &str, host: Option<&str>) -> String {
    let mut e = String::new();
    match client {
        Some(IpAddr::V4(a)) => {
            let _ = write!(e, "for={a};");
        }
        Some(IpAddr::V6(a)) => {
            let _ = write!(e, "for=\"[{a}]\";");
        }
        None => e.push_str("for=unknown;"),
    }
    let _ = write!(e, "proto={proto}");
    if let Some(h) = host {
        let token = h
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'*+^`|".contains(&b));
        if token {
            let _ = write!(e, ";host={h}");
        } else {
            let quoted = h.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = write!(e, ";host=\"{quoted}\"");
        }
    }
    e
}
