//! A plain HTTP request on a TLS port: recognised by its first byte, and
//! answered in cleartext before the connection closes, as nginx does
//! ("400 The plain HTTP request was sent to HTTPS port"). With
//! `--redirect-http` the answer is a `308 Permanent Redirect` to the same
//! host, port and target with the `https` scheme, which is where the
//! client meant to go.
//!
//! Only the request line and the `Host` header are read, from at most
//! [`MAX_HEAD`] bytes; nothing here can be pushed into unbounded work.

/// A TLS record starts with its content type; a ClientHello comes in a
/// handshake record (22). No HTTP method starts with this byte.
pub const HANDSHAKE_RECORD: u8 = 0x16;

/// How much of a cleartext head is read before answering without it.
pub const MAX_HEAD: usize = 8 * 1024;

/// What to do with the cleartext bytes received so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The head is not complete yet: read more.
    More,
    /// Send these bytes, then close.
    Reply(Vec<u8>),
}

/// Decides the answer to `head` (the bytes received so far).
pub fn answer(head: &[u8], redirect: bool) -> Verdict {
    let end = head.windows(4).position(|w| w == b"\r\n\r\n");
    if end.is_none() && head.len() < MAX_HEAD {
        return Verdict::More;
    }
    let location = match (redirect, end) {
        (true, Some(end)) => https_url(&head[..end]),
        _ => None,
    };
    Verdict::Reply(match location {
        Some(url) => format!(
            "HTTP/1.1 308 Permanent Redirect\r\nLocation: {url}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .into_bytes(),
        None => {
            let body = "The plain HTTP request was sent to an HTTPS port.\n";
            format!(
                "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
    })
}

/// `https://HOST{target}` from a request head, if its target is a path
/// and its one `Host` header a plain host name or address (so that
/// nothing a client sends can inject a header or a line).
fn https_url(head: &[u8]) -> Option<String> {
    let head = std::str::from_utf8(head).ok()?;
    let mut lines = head.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (_method, target, _version) = (parts.next()?, parts.next()?, parts.next()?);
    if !target.starts_with('/') || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return None;
    }
    let mut host = None;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        if name.eq_ignore_ascii_case("host") {
            if host.is_some() {
                return None; // two Hosts: a bad request
            }
            host = Some(value.trim());
        }
    }
    let host = host.filter(|h| {
        !h.is_empty()
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
    })?;
    Some(format!("https://{host}{target}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(v: Verdict) -> String {
        match v {
            Verdict::Reply(b) => String::from_utf8(b).unwrap(),
            Verdict::More => panic!("wanted a reply"),
        }
    }

    #[test]
    fn waits_for_the_whole_head() {
        assert_eq!(
            answer(b"GET / HTTP/1.1\r\nHost: a\r\n", true),
            Verdict::More
        );
    }

    #[test]
    fn redirects_to_the_same_host_and_target() {
        let r = text(answer(
            b"GET /a/b?c=1 HTTP/1.1\r\nhost: example.org:8443\r\n\r\n",
            true,
        ));
        assert!(r.starts_with("HTTP/1.1 308 "), "{r}");
        assert!(
            r.contains("\r\nLocation: https://example.org:8443/a/b?c=1\r\n"),
            "{r}"
        );
    }

    #[test]
    fn answers_400_without_redirect_or_with_a_bad_host() {
        let plain = text(answer(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", false));
        assert!(plain.starts_with("HTTP/1.1 400 "), "{plain}");
        for bad in [
            &b"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            b"GET http://x/ HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
        ] {
            assert!(text(answer(bad, true)).starts_with("HTTP/1.1 400 "));
        }
        // An endless head is answered once MAX_HEAD bytes are in.
        let long = vec![b'a'; MAX_HEAD];
        assert!(text(answer(&long, true)).starts_with("HTTP/1.1 400 "));
    }
}
