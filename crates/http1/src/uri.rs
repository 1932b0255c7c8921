//! The grammar of request targets and `Host` values (RFC 9112 §3.2,
//! RFC 3986 §3), checked without allocating.
//!
//! A request target comes in one of four forms, each allowed only with
//! certain methods:
//!
//! | form | looks like | methods |
//! |---|---|---|
//! | origin | `/path?query` | all but `CONNECT` |
//! | absolute | `http://host:port/path?query` | all but `CONNECT` |
//! | authority | `host:port` | `CONNECT` only |
//! | asterisk | `*` | `OPTIONS` only |
//!
//! Anything else (`?x`, `x`, `http:/x`, an empty target) is malformed, and
//! so is a target with a byte no URI may contain raw: a space, `#` (the
//! fragment never reaches a server), a control, DEL, or a byte from `0x80`
//! up. The visible characters RFC 3986 calls unsafe (`"<>[\]^`{|}`) are
//! tolerated in paths and queries, as every widely used parser does:
//! browsers send `|`, `^`, `[` and `]` unencoded, and PHP-style queries
//! (`a[]=1`) are common. `docs/conformance.md` lists this choice.

use std::net::Ipv6Addr;

/// The form of a request target; see the module documentation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Form {
    /// `/path?query`.
    Origin,
    /// `http://authority/path?query`; the authority is `target[start..end]`.
    Absolute { start: usize, end: usize },
    /// `host:port`, for `CONNECT`.
    Authority,
    /// `*`, for `OPTIONS`.
    Asterisk,
}

/// Bytes allowed raw in an origin-form path or query: `pchar`, `/` and
/// `?` (RFC 3986 §3.3, §3.4), plus the tolerated unsafe characters; see the
/// module documentation. `%` is allowed here and its two hex digits are
/// checked where the path is decoded.
pub(crate) static TARGET: [bool; 256] = {
    let mut map = [false; 256];
    let mut b = 0x21;
    while b < 0x7f {
        map[b] = b != b'#' as usize;
        b += 1;
    }
    map
};

/// `unreserved / sub-delims` (RFC 3986 §2.2, §2.3): what a `reg-name` is
/// made of, besides `pct-encoded`.
static REG_NAME: [bool; 256] = {
    let mut map = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        map[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            );
        b += 1;
    }
    map
};

/// Classifies a request target, or `None` if it is none of the four forms.
/// Which methods may use which form is the caller's rule.
pub(crate) fn form(target: &[u8]) -> Option<Form> {
    match target {
        [] => None,
        [b'/', ..] => target
            .iter()
            .all(|&b| TARGET[usize::from(b)])
            .then_some(Form::Origin),
        b"*" => Some(Form::Asterisk),
        _ => absolute(target).or_else(|| is_authority_form(target).then_some(Form::Authority)),
    }
}

/// `http://authority[/path][?query]` (RFC 9112 §3.2.2), with the scheme
/// `http` or `https` in any case (a server for those answers nothing else),
/// an authority without userinfo (RFC 9110 §4.2.4: a recipient treats it as
/// an error) and a host that is not empty (§4.2.1).
fn absolute(target: &[u8]) -> Option<Form> {
    let colon = target.iter().position(|&b| b == b':')?;
    let scheme = &target[..colon];
    if !(scheme.eq_ignore_ascii_case(b"http") || scheme.eq_ignore_ascii_case(b"https")) {
        return None;
    }
    let start = colon + 3;
    if target.get(colon + 1..start)? != b"//" {
        return None;
    }
    let rest = &target[start..];
    let end = start
        + rest
            .iter()
            .position(|&b| b == b'/' || b == b'?')
            .unwrap_or(rest.len());
    let (host, _) = split_port(&target[start..end])?;
    if host.is_empty() {
        return None;
    }
    // The path, if any, starts with `/` (path-abempty), and the query after
    // it; both use the origin-form alphabet.
    let tail = &target[end..];
    tail.iter()
        .all(|&b| TARGET[usize::from(b)])
        .then_some(Form::Absolute { start, end })
}

/// `uri-host ":" port` with a port (RFC 9112 §3.2.3): `CONNECT`'s target.
fn is_authority_form(target: &[u8]) -> bool {
    matches!(split_port(target), Some((host, Some(port))) if !host.is_empty() && !port.is_empty())
}

/// Whether a `Host` field value (already trimmed of surrounding
/// whitespace) is `uri-host [ ":" port ]` (RFC 9112 §3.2, RFC 3986 §3.2.2).
///
/// An empty value is valid: RFC 9110 §7.2 has clients send one when the
/// target URI has no authority. So is an empty port after the colon
/// (`port = *DIGIT`); `docs/conformance.md` records both choices.
pub(crate) fn is_host(value: &[u8]) -> bool {
    split_port(value).is_some()
}

/// Splits `uri-host [ ":" port ]` into the host and the port's digits (at
/// most five, at most 65535), checking the host's grammar; `None` if
/// either is malformed. An empty host is allowed here; callers that need
/// one check.
fn split_port(authority: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix(b"[") {
        // IP-literal: `[` IPv6address / IPvFuture `]`.
        let close = rest.iter().position(|&b| b == b']')?;
        if !is_ip_literal(&rest[..close]) {
            return None;
        }
        let host = &authority[..close + 2];
        match &authority[close + 2..] {
            [] => (host, None),
            [b':', port @ ..] => (host, Some(port)),
            _ => return None,
        }
    } else {
        // reg-name (an IPv4 address is one too, syntactically).
        let (host, port) = match authority.iter().position(|&b| b == b':') {
            Some(c) => (&authority[..c], Some(&authority[c + 1..])),
            None => (authority, None),
        };
        if !is_reg_name(host) {
            return None;
        }
        (host, port)
    };
    if port.is_some_and(|port| !is_port(port)) {
        return None;
    }
    Some((host, port))
}

/// `*( unreserved / pct-encoded / sub-delims )`.
fn is_reg_name(name: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = name.get(i) {
        if b == b'%' {
            if !name
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
            {
                return false;
            }
            i += 3;
        } else if REG_NAME[usize::from(b)] {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// `*DIGIT`, here at most five digits and at most 65535.
fn is_port(port: &[u8]) -> bool {
    port.len() <= 5
        && port.iter().all(u8::is_ascii_digit)
        && port.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')) <= 65535
}

/// The inside of `[…]`: an IPv6 address (RFC 4291 text, as the standard
/// library reads it; zone identifiers are not part of HTTP URIs), or
/// `IPvFuture` (`v` HEXDIG+ `.` ( unreserved / sub-delims / `:` )+).
fn is_ip_literal(inside: &[u8]) -> bool {
    if let Some(future) = inside
        .strip_prefix(b"v")
        .or_else(|| inside.strip_prefix(b"V"))
    {
        let Some(dot) = future.iter().position(|&b| b == b'.') else {
            return false;
        };
        return dot > 0
            && future[..dot].iter().all(u8::is_ascii_hexdigit)
            && future.len() > dot + 1
            && future[dot + 1..]
                .iter()
                .all(|&b| b == b':' || REG_NAME[usize::from(b)]);
    }
    std::str::from_utf8(inside).is_ok_and(|s| s.parse::<Ipv6Addr>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(form(b"/"), Some(Form::Origin));
        assert_eq!(form(b"/a/b?x=1&y[]=2|3"), Some(Form::Origin));
        assert_eq!(form(b"*"), Some(Form::Asterisk));
        assert_eq!(form(b"example.com:443"), Some(Form::Authority));
        assert_eq!(form(b"[::1]:8080"), Some(Form::Authority));
        assert_eq!(
            form(b"http://h.example:80/p?q"),
            Some(Form::Absolute { start: 7, end: 19 })
        );
        assert_eq!(
            form(b"HTTPS://h"),
            Some(Form::Absolute { start: 8, end: 9 })
        );
        assert_eq!(
            form(b"http://[::1]?q"),
            Some(Form::Absolute { start: 7, end: 12 })
        );
        for bad in [
            &b""[..],
            b"?x",
            b"x",
            b"http:/x",
            b"http://",
            b"http://:80/",
            b"http://u@h/",
            b"ftp://h/",
            b"/a#b",
            b"/a b",
            b"/a\x00",
            b"/a\x7f",
            b"/\xc3\xa9",
            b"example.com",
            b"example.com:",
            b"example.com:99999",
            b"**",
            b"http://h/a#frag",
        ] {
            assert_eq!(form(bad), None, "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn hosts() {
        for good in [
            &b""[..],
            b"a",
            b"example.com",
            b"127.0.0.1:8080",
            b"a:",
            b"a:65535",
            b"[::1]",
            b"[::1]:80",
            b"[2001:db8::7]:443",
            b"[v1.x:y]",
            b"xn--d1acufc.xn--p1ai",
            b"a%20b",
            b"sub-delims!$&'()*+,;=",
        ] {
            assert!(is_host(good), "{}", good.escape_ascii());
        }
        for bad in [
            &b"bad host"[..],
            b"a/b",
            b"u@h",
            b"a:65536",
            b"a:123456",
            b"a:8x",
            b"a:1:2",
            b"[::1",
            b"[::1]x",
            b"[zz]",
            b"[::1%eth0]",
            b"[v.x]",
            b"a%2",
            b"a%zz",
            b"a\tb",
            b"caf\xc3\xa9",
            b"a?b",
            b"a#b",
        ] {
            assert!(!is_host(bad), "{}", bad.escape_ascii());
        }
    }
}
