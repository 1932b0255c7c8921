//! The request line and the `Host` value, read from the RFCs for the
//! reference model ([`crate::requests_ref`]); written here, not shared with
//! `http1`, so that the fuzz targets compare two readings of the rules.
//!
//! ```text
//! request-line   = method SP request-target SP HTTP-version CRLF   ; RFC 9112 §3
//! method         = token                                           ; RFC 9110 §9.1
//! HTTP-version   = "HTTP/" DIGIT "." DIGIT                         ; RFC 9112 §2.3
//! request-target = origin-form / absolute-form / authority-form / asterisk-form
//! Host           = uri-host [ ":" port ]                           ; RFC 9110 §7.2
//! ```
//!
//! The server's reading, as `docs/conformance.md` states it:
//!
//! - the line ends with CRLF or a bare LF (RFC 9112 §2.2 lets a recipient
//!   accept one); each separator is exactly one SP; a bare CR, a tab or
//!   any other control anywhere in the line is malformed;
//! - a line of that shape whose version has a major number other than 1 is
//!   505 whatever its target (the target forms are HTTP/1.1's grammar, and
//!   the version decides the grammar); `HTTP/1.x`, x > 1, is HTTP/1.1
//!   (RFC 9110 §2.5); anything else malformed is 400;
//! - the target is visible ASCII but `#` (the fragment never reaches a
//!   server; RFC 3986's "unsafe" visible characters are tolerated), and is
//!   one of: origin-form `/…` with any method but `CONNECT`;
//!   absolute-form with scheme `http` or `https` (any case), `//`, an
//!   authority `host[:port]` with a non-empty host and no userinfo, then
//!   path and query, with any method but `CONNECT`; authority-form
//!   `host:port` (both non-empty) with `CONNECT` only; `*` with `OPTIONS`
//!   only;
//! - a port is at most five digits and at most 65535; in `Host` and in
//!   absolute-form it may be empty (`port = *DIGIT`, RFC 3986 §3.2.3);
//! - a `Host` value (trimmed of SP and HTAB) may be empty; its host is a
//!   reg-name (which covers IPv4 addresses), `[IPv6address]` or
//!   `[IPvFuture]` (RFC 3986 §3.2.2; no zone identifiers).

/// What the start of a head holds as a request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line<'a> {
    /// No line end yet, and the bytes so far can still begin a valid line.
    Partial,
    /// Malformed: answered with `status` (400 or 505). `ended` when the
    /// line's LF has arrived (then the server must notice); otherwise the
    /// bytes so far already cannot begin a valid line (400), which the
    /// server may notice early or only once more arrives.
    Bad {
        /// 400 or 505.
        status: u16,
        /// The LF ending the line has arrived.
        ended: bool,
    },
    /// A valid, complete request line.
    Valid {
        /// The method token.
        method: &'a [u8],
        /// The request target.
        target: &'a [u8],
        /// `HTTP/1.1` or a later minor version (else `HTTP/1.0`).
        http11: bool,
        /// Just past the line's LF.
        end: usize,
    },
}

/// Reads the request line at the start of `input`.
pub fn request_line(input: &[u8]) -> Line<'_> {
    let Some(lf) = input.iter().position(|&b| b == b'\n') else {
        return if viable_prefix(input) {
            Line::Partial
        } else {
            Line::Bad {
                status: 400,
                ended: false,
            }
        };
    };
    let content = input[..lf].strip_suffix(b"\r").unwrap_or(&input[..lf]);
    let bad = |status| Line::Bad {
        status,
        ended: true,
    };
    let parts: Vec<&[u8]> = content.split(|&b| b == b' ').collect();
    let [method, target, version] = parts[..] else {
        return bad(400);
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return bad(400);
    }
    if target.is_empty() || !target.iter().all(|&b| is_target_byte(b)) {
        return bad(400);
    }
    let Some((major, minor)) = http_version(version) else {
        return bad(400);
    };
    if major != 1 {
        return bad(505);
    }
    if !target_fits_method(method, target) {
        return bad(400);
    }
    Line::Valid {
        method,
        target,
        http11: minor >= 1,
        end: lf + 1,
    }
}

/// Whether `input` (no LF in it) can still grow into a valid line: the
/// shape `method SP target SP version CR` cut short anywhere, each part
/// made of its own bytes. The target's form is judged only at the end.
fn viable_prefix(input: &[u8]) -> bool {
    // A CR is only possible as the first half of the CRLF, right after a
    // whole version.
    let (content, cr) = match input.strip_suffix(b"\r") {
        Some(content) => (content, true),
        None => (input, false),
    };
    let parts: Vec<&[u8]> = content.split(|&b| b == b' ').collect();
    let shape = b"HTTP/D.D";
    let version_prefix = |v: &[u8]| {
        v.len() <= shape.len()
            && v.iter().zip(shape).all(|(&b, &s)| match s {
                b'D' => b.is_ascii_digit(),
                _ => b == s,
            })
    };
    match parts[..] {
        [method] => !cr && method.iter().all(|&b| is_tchar(b)),
        [method, target] => {
            !cr && !method.is_empty()
                && method.iter().all(|&b| is_tchar(b))
                && target.iter().all(|&b| is_target_byte(b))
        }
        [method, target, version] => {
            !method.is_empty()
                && method.iter().all(|&b| is_tchar(b))
                && !target.is_empty()
                && target.iter().all(|&b| is_target_byte(b))
                && version_prefix(version)
                && (!cr || version.len() == shape.len())
        }
        _ => false,
    }
}

/// `"HTTP/" DIGIT "." DIGIT`, case-sensitive: (major, minor).
fn http_version(v: &[u8]) -> Option<(u8, u8)> {
    match *v {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Some((major - b'0', minor - b'0'))
        }
        _ => None,
    }
}

/// `tchar` (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Bytes a target may hold raw: visible ASCII but `#`.
fn is_target_byte(b: u8) -> bool {
    b.is_ascii_graphic() && b != b'#'
}

/// RFC 9112 §3.2.1–3.2.4: the target is one of the four forms, and the
/// method may use it. Methods are case-sensitive (RFC 9110 §9.1).
fn target_fits_method(method: &[u8], target: &[u8]) -> bool {
    if method == b"CONNECT" {
        return is_authority_form(target);
    }
    if target == b"*" {
        return method == b"OPTIONS";
    }
    target.first() == Some(&b'/') || is_absolute_form(target)
}

/// `uri-host ":" port` (RFC 9112 §3.2.3), both present.
fn is_authority_form(target: &[u8]) -> bool {
    matches!(host_port(target), Some((host, Some(port))) if !host.is_empty() && !port.is_empty())
}

/// `http` or `https` (any case) `"://" authority path-abempty ["?" query]`
/// (RFC 9112 §3.2.2, RFC 3986 §3), with no userinfo (RFC 9110 §4.2.4) and a
/// non-empty host (§4.2.1). The path and query bytes were checked already.
fn is_absolute_form(target: &[u8]) -> bool {
    let lower = target.to_ascii_lowercase();
    let rest = if lower.starts_with(b"http://") {
        &target[7..]
    } else if lower.starts_with(b"https://") {
        &target[8..]
    } else {
        return false;
    };
    // The authority ends at the path's `/` or the query's `?`.
    let authority_len = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    if authority.contains(&b'@') {
        return false;
    }
    matches!(host_port(authority), Some((host, _)) if !host.is_empty())
}

/// Whether a `Host` field value is `uri-host [":" port]`, after trimming
/// SP and HTAB around it; an empty value is one.
pub fn is_host_value(value: &[u8]) -> bool {
    let ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = value.iter().position(|b| !ows(b)).unwrap_or(value.len());
    let end = value.iter().rposition(|b| !ows(b)).map_or(start, |e| e + 1);
    host_port(&value[start..end]).is_some()
}

/// Splits `host [":" port]` (host possibly empty), checking both: the
/// host a reg-name (IPv4 addresses are reg-names too) or an IP-literal,
/// the port at most five digits and at most 65535 (possibly empty).
fn host_port(s: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let (host, port) = if s.first() == Some(&b'[') {
        let close = s.iter().position(|&b| b == b']')?;
        let port = match &s[close + 1..] {
            [] => None,
            [b':', port @ ..] => Some(port),
            _ => return None,
        };
        if !is_ip_literal_inside(&s[1..close]) {
            return None;
        }
        (&s[..=close], port)
    } else {
        match s.iter().position(|&b| b == b':') {
            Some(colon) => (&s[..colon], Some(&s[colon + 1..])),
            None => (s, None),
        }
    };
    if host.first() != Some(&b'[') && !is_reg_name(host) {
        return None;
    }
    if let Some(port) = port {
        let digits = port.len() <= 5 && port.iter().all(u8::is_ascii_digit);
        if !digits || port.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')) > 65535 {
            return None;
        }
    }
    Some((host, port))
}

/// `unreserved / sub-delims` (RFC 3986 §2.2, §2.3).
fn is_unreserved_or_sub_delim(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b)
}

/// `reg-name = *( unreserved / pct-encoded / sub-delims )`.
fn is_reg_name(name: &[u8]) -> bool {
    let mut rest = name;
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            match tail {
                [h, l, more @ ..] if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => rest = more,
                _ => return false,
            }
        } else if is_unreserved_or_sub_delim(b) {
            rest = tail;
        } else {
            return false;
        }
    }
    true
}

/// Between `[` and `]`: `IPv6address / IPvFuture` (RFC 3986 §3.2.2).
fn is_ip_literal_inside(s: &[u8]) -> bool {
    if let [b'v' | b'V', rest @ ..] = s {
        // IPvFuture = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
        let Some(dot) = rest.iter().position(|&b| b == b'.') else {
            return false;
        };
        let (hex, tail) = (&rest[..dot], &rest[dot + 1..]);
        return !hex.is_empty()
            && hex.iter().all(u8::is_ascii_hexdigit)
            && !tail.is_empty()
            && tail
                .iter()
                .all(|&b| b == b':' || is_unreserved_or_sub_delim(b));
    }
    is_ipv6(s)
}

/// RFC 3986's `IPv6address`: eight 16-bit groups (`h16`, 1–4 hex digits)
/// separated by `:`, the last two possibly an `IPv4address`; or fewer
/// around one `::`, which stands for at least one group.
fn is_ipv6(s: &[u8]) -> bool {
    // The groups of one side of `::`, or of the whole address: how many
    // 16-bit groups they make, if well-formed; an IPv4 address only last.
    fn groups(side: &[u8], may_end_in_ipv4: bool) -> Option<usize> {
        if side.is_empty() {
            return Some(0);
        }
        let parts: Vec<&[u8]> = side.split(|&b| b == b':').collect();
        let mut n = 0;
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            if (1..=4).contains(&part.len()) && part.iter().all(u8::is_ascii_hexdigit) {
                n += 1;
            } else if last && may_end_in_ipv4 && is_ipv4(part) {
                n += 2;
            } else {
                return None;
            }
        }
        Some(n)
    }
    match s.windows(2).position(|w| w == b"::") {
        None => groups(s, true) == Some(8),
        Some(at) => {
            let (left, right) = (&s[..at], &s[at + 2..]);
            match (groups(left, false), groups(right, true)) {
                (Some(l), Some(r)) => l + r <= 7,
                _ => false,
            }
        }
    }
}

/// `IPv4address = dec-octet "." dec-octet "." dec-octet "." dec-octet`,
/// each 0–255 without leading zeros.
fn is_ipv4(s: &[u8]) -> bool {
    let octets: Vec<&[u8]> = s.split(|&b| b == b'.').collect();
    octets.len() == 4
        && octets.iter().all(|o| {
            (1..=3).contains(&o.len())
                && o.iter().all(u8::is_ascii_digit)
                && (o.len() == 1 || o[0] != b'0')
                && o.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')) <= 255
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(line: &[u8]) -> u16 {
        match request_line(line) {
            Line::Valid { .. } => 200,
            Line::Partial => 0,
            Line::Bad { status, .. } => status,
        }
    }

    #[test]
    fn lines() {
        for good in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"GET /a?b HTTP/1.0\n",
            b"GET / HTTP/1.2\r\n",
            b"get /x HTTP/1.1\r\n",
            b"OPTIONS * HTTP/1.1\r\n",
            b"CONNECT a:443 HTTP/1.1\r\n",
            b"CONNECT [::1]:1 HTTP/1.1\r\n",
            b"CONNECT http:80 HTTP/1.1\r\n",
            b"GET http://a/b HTTP/1.1\r\n",
            b"GET HTTPS://a HTTP/1.1\r\n",
            b"GET http://a:?q HTTP/1.1\r\n",
            b"GET http://[v1.x]/ HTTP/1.1\r\n",
            b"GET /a[]=|^{} HTTP/1.1\r\n",
        ] {
            assert_eq!(status(good), 200, "{}", good.escape_ascii());
        }
        assert!(matches!(
            request_line(b"GET / HTTP/1.9\r\n"),
            Line::Valid {
                http11: true,
                end: 16,
                ..
            }
        ));
        assert!(matches!(
            request_line(b"GET / HTTP/1.0\nHost"),
            Line::Valid {
                http11: false,
                end: 15,
                ..
            }
        ));
        for bad in [
            &b" GET / HTTP/1.1\r\n"[..],
            b"GET  / HTTP/1.1\r\n",
            b"GET / HTTP/1.1 \r\n",
            b"GET\t/ HTTP/1.1\r\n",
            b"GET / HTTP/1.1\r\r\n",
            b"GET / http/1.1\r\n",
            b"GET / HTTP/1.10\r\n",
            b"GET / HTTP/2\r\n",
            b"GET / HTTP/1.\r\n",
            b"GET /\x80 HTTP/1.1\r\n",
            b"GET /a#b HTTP/1.1\r\n",
            b"GET ?x HTTP/1.1\r\n",
            b"GET x HTTP/1.1\r\n",
            b"GET http:/x HTTP/1.1\r\n",
            b"GET http:// HTTP/1.1\r\n",
            b"GET http://:80/ HTTP/1.1\r\n",
            b"GET http://u@h/ HTTP/1.1\r\n",
            b"GET http://h:65536/ HTTP/1.1\r\n",
            b"GET ftp://h/ HTTP/1.1\r\n",
            b"GET * HTTP/1.1\r\n",
            b"GET a:443 HTTP/1.1\r\n",
            b"OPTIONS ** HTTP/1.1\r\n",
            b"CONNECT / HTTP/1.1\r\n",
            b"CONNECT a HTTP/1.1\r\n",
            b"CONNECT a: HTTP/1.1\r\n",
            b"CONNECT :1 HTTP/1.1\r\n",
            b"CONNECT http://a:1 HTTP/1.1\r\n",
            b"connect a:1 HTTP/1.1\r\n",
            b"G(T / HTTP/1.1\r\n",
            b"\r\r\n",
        ] {
            assert_eq!(status(bad), 400, "{}", bad.escape_ascii());
        }
        for other in [
            &b"GET / HTTP/2.0\r\n"[..],
            b"GET / HTTP/0.9\n",
            b"PRI * HTTP/2.0\r\n",
            b"GET ?x HTTP/3.1\r\n",
        ] {
            assert_eq!(status(other), 505, "{}", other.escape_ascii());
        }
    }

    #[test]
    fn prefixes() {
        let line = b"GET /a HTTP/1.1\r";
        for end in 0..=line.len() {
            assert_eq!(request_line(&line[..end]), Line::Partial);
        }
        assert_eq!(request_line(b"GET ?x"), Line::Partial);
        assert_eq!(request_line(b"GET / HTTP/2.0"), Line::Partial);
        for bad in [
            &b" "[..],
            b"G\r",
            b"GET  ",
            b"GET /a\x00",
            b"GET / XTTP",
            b"GET / HTTP/1.1x",
            b"GET / HTTP/1.1\rx",
            b"GET / HTTP/1.\r",
            b"GET / HTTP/1.1 ",
        ] {
            assert_eq!(
                request_line(bad),
                Line::Bad {
                    status: 400,
                    ended: false
                },
                "{}",
                bad.escape_ascii()
            );
        }
    }

    #[test]
    fn hosts() {
        for good in [
            &b""[..],
            b" a \t",
            b"a:",
            b"127.0.0.1:8080",
            b"a:00080",
            b"[::1]",
            b"[::1]:80",
            b"[::]",
            b"[1:2:3:4:5:6:7:8]",
            b"[1:2:3:4:5:6:7::]",
            b"[::2:3:4:5:6:7:8]",
            b"[::ffff:1.2.3.4]",
            b"[1:2:3:4:5:6:1.2.3.4]",
            b"[V1f.a:b]",
            b"a%20b",
            b"sub-delims!$&'()*+,;=",
            b"999.1.1.1",
        ] {
            assert!(is_host_value(good), "{}", good.escape_ascii());
        }
        for bad in [
            &b"bad host"[..],
            b"a/b",
            b"u@h",
            b"a:65536",
            b"a:000080",
            b"a:8x",
            b"a:1:2",
            b"[::1",
            b"[::1]x",
            b"[zz]",
            b"[::1%eth0]",
            b"[1:2:3:4:5:6:7:8:9]",
            b"[1:2:3:4:5:6:7]",
            b"[1::2::3]",
            b"[:::]",
            b"[12345::]",
            b"[::1.2.3.04]",
            b"[1.2.3.4::]",
            b"[::256.1.1.1]",
            b"[v.x]",
            b"[v1.]",
            b"a%2",
            b"a\tb",
            b"caf\xc3\xa9",
            b"a?b",
            b"a#b",
            b"[a]",
        ] {
            assert!(!is_host_value(bad), "{}", bad.escape_ascii());
        }
    }
}
