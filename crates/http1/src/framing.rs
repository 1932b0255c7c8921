//! What the headers say about the message: body framing (RFC 9112 §6),
//! connection persistence (§9.3) and `Expect: 100-continue` (RFC 9110 §10.1.1).
//!
//! Framing is where request smuggling lives: if this server and a proxy in
//! front of it disagree on where a body ends, an attacker's second request
//! hides inside the first one's body. So every ambiguous combination is
//! rejected rather than guessed at.

use crate::{BodyKind, Error, Limits, Status, Version};

/// Facts collected from the headers, one header at a time, while the head is
/// converted; [`finish`](Semantics::finish) turns them into decisions.
#[derive(Default)]
pub(crate) struct Semantics {
    /// A header of one of the names below might have been seen; without
    /// one, the decisions are the version's defaults.
    any: bool,
    content_length: Option<u64>,
    /// A `Transfer-Encoding` header was seen.
    te_seen: bool,
    /// The last coding listed so far is `chunked`.
    te_last_chunked: bool,
    te_chunked_count: u32,
    /// A coding other than `chunked` was listed.
    te_other: bool,
    conn_close: bool,
    conn_keep_alive: bool,
    expect_continue: bool,
    /// `Host` header lines seen (saturating).
    hosts: u8,
}

/// What a header means to [`Semantics`], by its name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Relevance {
    /// Nothing: its value does not matter either.
    None,
    /// A `Host` line, which is counted.
    Host,
    /// Maybe one of the headers whose values decide framing, persistence
    /// and `100-continue`: [`Semantics::value`] must see it.
    Value,
}

/// What the head decides about the message.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Decision {
    pub(crate) body: BodyKind,
    pub(crate) keep_alive: bool,
    pub(crate) expects_continue: bool,
}

impl Decision {
    /// The decisions for a head with none of the headers that change them:
    /// no body, and the version's default persistence.
    #[inline(always)]
    pub(crate) fn plain(version: Version) -> Decision {
        Decision {
            body: BodyKind::None,
            keep_alive: version == Version::Http11,
            expects_continue: false,
        }
    }
}

/// For each name length below 32, the lowercased first letter of the one
/// header name of that length that [`Semantics::relevance`] picks, or 0:
/// `Host`, and those whose value [`Semantics::value`] must see: `Expect`,
/// `Connection`, `Content-Length`, `Transfer-Encoding`.
static RELEVANT_FIRST: [u8; 32] = {
    let mut t = [0u8; 32];
    t[4] = b'h';
    t[6] = b'e';
    t[10] = b'c';
    t[14] = b'c';
    t[17] = b't';
    t
};

impl Semantics {
    /// Takes one header into account. `value` may still carry spaces and
    /// tabs around it: every rule below trims.
    #[inline]
    pub(crate) fn header(&mut self, name: &[u8], value: &[u8]) -> Result<(), Error> {
        match Semantics::relevance(name) {
            Relevance::Value => self.value(name, value),
            Relevance::Host => {
                self.add_hosts(1);
                // RFC 9112 §3.2: an invalid Host value is 400, like a
                // missing or repeated one.
                if crate::uri::is_host(trim(value)) {
                    Ok(())
                } else {
                    Err(Error::bad_request("invalid Host header"))
                }
            }
            Relevance::None => Ok(()),
        }
    }

    /// What the header called `name` means to the decisions, told from the
    /// name alone: for the fast parser's header loop, which looks at values
    /// only when they matter. One table look-up by length and first letter
    /// sorts out nearly all other headers (`Accept`, `User-Agent`, `Cookie`,
    /// `Sec-Fetch-Mode` have the lengths) without comparing names; the few
    /// left are compared in [`value`](Semantics::value).
    #[inline(always)]
    pub(crate) fn relevance(name: &[u8]) -> Relevance {
        let Some(&first) = name.first() else {
            return Relevance::None;
        };
        // Setting bit 5 lowercases an ASCII letter, and the only bytes it
        // maps to a lowercase letter are that letter and its uppercase
        // form; no byte maps to 0. Longer names share slots (`& 31`), which
        // only sends a few odd names on to the full comparison. Most names
        // are sorted out by this one look-up and compare.
        if RELEVANT_FIRST[name.len() & 31] != first | 0x20 {
            return Relevance::None;
        }
        // Slot 4 is `Host`'s, which only four-byte names can be.
        if name.len() & 31 == 4 {
            return if is_host(name) {
                Relevance::Host
            } else {
                Relevance::None
            };
        }
        Relevance::Value
    }

    /// Counts `n` more `Host` lines.
    #[inline]
    pub(crate) fn add_hosts(&mut self, n: u8) {
        self.hosts = self.hosts.saturating_add(n);
    }

    /// Takes into account a header whose [`relevance`](Semantics::relevance)
    /// is [`Relevance::Value`].
    #[inline]
    pub(crate) fn value(&mut self, name: &[u8], value: &[u8]) -> Result<(), Error> {
        self.any = true;
        self.framing_header(name, value)
    }

    // Out of line, so that the parsers' loops keep their registers for
    // the common case.
    #[inline(never)]
    fn framing_header(&mut self, name: &[u8], value: &[u8]) -> Result<(), Error> {
        match name.len() {
            14 if folds_to(name, b"content-length") => self.content_length(value),
            17 if folds_to(name, b"transfer-encoding") => {
                self.transfer_encoding(value);
                Ok(())
            }
            10 if folds_to(name, b"connection") => {
                for token in list(value) {
                    if folds_to(token, b"close") {
                        self.conn_close = true;
                    } else if folds_to(token, b"keep-alive") {
                        self.conn_keep_alive = true;
                    }
                }
                Ok(())
            }
            6 if folds_to(name, b"expect") => {
                if folds_to(trim(value), b"100-continue") {
                    self.expect_continue = true;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn content_length(&mut self, value: &[u8]) -> Result<(), Error> {
        // Identical repeats (`5, 5` or two headers) are tolerated because
        // some proxies fold them; anything else is ambiguous (RFC 9112 §6.3).
        for item in value.split(|&b| b == b',') {
            let n = parse_length(trim(item))?;
            match self.content_length {
                Some(prev) if prev != n => {
                    return Err(Error::bad_request("conflicting Content-Length values"));
                }
                _ => self.content_length = Some(n),
            }
        }
        Ok(())
    }

    fn transfer_encoding(&mut self, value: &[u8]) {
        self.te_seen = true;
        for coding in list(value) {
            if folds_to(coding, b"chunked") {
                self.te_chunked_count += 1;
                self.te_last_chunked = true;
            } else {
                self.te_other = true;
                self.te_last_chunked = false;
            }
        }
    }

    /// The decisions, or the error that makes the head unacceptable.
    #[inline(always)]
    pub(crate) fn finish(self, version: Version, limits: &Limits) -> Result<Decision, Error> {
        Semantics::check_hosts(usize::from(self.hosts), version, limits)?;
        if !self.any {
            return Ok(Decision::plain(version));
        }
        self.finish_any(version, limits.max_body)
    }

    /// The rule on `Host` lines (RFC 9112 §3.2), when the limits ask for
    /// it: exactly one in HTTP/1.1, at most one in HTTP/1.0.
    #[inline(always)]
    pub(crate) fn check_hosts(
        hosts: usize,
        version: Version,
        limits: &Limits,
    ) -> Result<(), Error> {
        // One line, the common case, passes on one compare.
        if hosts != 1 && limits.require_host && (hosts > 1 || version == Version::Http11) {
            return Err(Error::bad_request("missing or repeated Host header"));
        }
        Ok(())
    }

    fn finish_any(self, version: Version, max_body: u64) -> Result<Decision, Error> {
        let keep_alive = match version {
            Version::Http11 => !self.conn_close,
            Version::Http10 => self.conn_keep_alive && !self.conn_close,
        };
        let body = if self.te_seen {
            if self.content_length.is_some() {
                return Err(Error::bad_request(
                    "both Content-Length and Transfer-Encoding",
                ));
            }
            if version == Version::Http10 {
                // HTTP/1.0 has no transfer codings; RFC 9112 §6.1 calls
                // such framing faulty.
                return Err(Error::bad_request("Transfer-Encoding in HTTP/1.0 request"));
            }
            if !self.te_last_chunked {
                // §6.3: the body length cannot be determined.
                return Err(Error::bad_request("final transfer coding is not chunked"));
            }
            if self.te_chunked_count > 1 {
                return Err(Error::bad_request("chunked applied more than once"));
            }
            if self.te_other {
                return Err(Error::new(
                    Status::NOT_IMPLEMENTED,
                    "unsupported transfer coding",
                ));
            }
            BodyKind::Chunked
        } else if let Some(n) = self.content_length {
            if n > max_body {
                return Err(Error::new(
                    Status::CONTENT_TOO_LARGE,
                    "Content-Length over the body limit",
                ));
            }
            BodyKind::Length(n)
        } else {
            BodyKind::None
        };
        // HTTP/1.0 has no interim responses (RFC 9110 §10.1.1), and without
        // a body there is nothing for the client to hold back.
        let has_body = !matches!(body, BodyKind::None | BodyKind::Length(0));
        Ok(Decision {
            body,
            keep_alive,
            expects_continue: self.expect_continue && version == Version::Http11 && has_body,
        })
    }
}

/// `name.eq_ignore_ascii_case(b"host")` as one word compare: setting bit 5
/// of each byte lowercases an ASCII letter, and the only bytes it maps to a
/// lowercase letter are that letter and its uppercase form.
#[inline(always)]
fn is_host(name: &[u8]) -> bool {
    let Ok(word) = <[u8; 4]>::try_from(name) else {
        return false;
    };
    u32::from_le_bytes(word) | 0x2020_2020 == u32::from_le_bytes(*b"host")
}

/// `1*DIGIT` into a `u64`; signs, spaces, hex and overflow are all errors.
fn parse_length(digits: &[u8]) -> Result<u64, Error> {
    const INVALID: Error = Error::bad_request("invalid Content-Length");
    if digits.is_empty() {
        return Err(INVALID);
    }
    let mut n: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return Err(INVALID);
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or(INVALID)?;
    }
    Ok(n)
}

/// The non-empty elements of a comma-separated list, trimmed (RFC 9110 §5.6.1
/// says recipients ignore empty elements).
fn list(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim)
        .filter(|item| !item.is_empty())
}

/// `s.eq_ignore_ascii_case(lower)` for a lower-case literal, which the
/// compiler turns into a few word compares instead of a loop that
/// lowercases byte by byte: at a letter of `lower`, setting bit 5 of the
/// byte must give that letter (only the letter and its upper-case form
/// do); anywhere else the byte must be equal.
#[inline(always)]
fn folds_to<const N: usize>(s: &[u8], lower: &[u8; N]) -> bool {
    let Ok(s) = <&[u8; N]>::try_from(s) else {
        return false;
    };
    let mut diff = 0;
    for (&b, &l) in s.iter().zip(lower) {
        let fold = if l.is_ascii_lowercase() { 0x20 } else { 0 };
        diff |= (b | fold) ^ l;
    }
    diff == 0
}

pub(crate) fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(version: Version, headers: &[(&str, &str)]) -> Result<Decision, Error> {
        let mut s = Semantics::default();
        for (n, v) in headers {
            s.header(n.as_bytes(), v.as_bytes())?;
        }
        s.finish(
            version,
            &Limits {
                max_body: 1000,
                ..Limits::default()
            },
        )
    }

    fn body(headers: &[(&str, &str)]) -> Result<BodyKind, u16> {
        decide(Version::Http11, headers)
            .map(|d| d.body)
            .map_err(|e| e.status().code())
    }

    #[test]
    fn lengths() {
        assert_eq!(body(&[]), Ok(BodyKind::None));
        assert_eq!(body(&[("Content-Length", "0")]), Ok(BodyKind::Length(0)));
        assert_eq!(body(&[("content-LENGTH", "12")]), Ok(BodyKind::Length(12)));
        assert_eq!(body(&[("Content-Length", "5, 5")]), Ok(BodyKind::Length(5)));
        assert_eq!(
            body(&[("Content-Length", "5"), ("Content-Length", "5")]),
            Ok(BodyKind::Length(5))
        );
        assert_eq!(body(&[("Content-Length", "007")]), Ok(BodyKind::Length(7)));
        assert_eq!(
            body(&[("Content-Length", "1000")]),
            Ok(BodyKind::Length(1000))
        );
    }

    #[test]
    fn bad_lengths() {
        for v in [
            "",
            "-1",
            "+1",
            "1 2",
            "0x10",
            "abc",
            "5,",
            "5,6",
            "1e3",
            "99999999999999999999",
        ] {
            assert_eq!(body(&[("Content-Length", v)]), Err(400), "{v:?}");
        }
        assert_eq!(
            body(&[("Content-Length", "5"), ("Content-Length", "6")]),
            Err(400)
        );
        assert_eq!(body(&[("Content-Length", "1001")]), Err(413));
        assert_eq!(
            body(&[("Content-Length", "18446744073709551615")]),
            Err(413)
        );
    }

    #[test]
    fn transfer_encodings() {
        assert_eq!(
            body(&[("Transfer-Encoding", "chunked")]),
            Ok(BodyKind::Chunked)
        );
        assert_eq!(
            body(&[("Transfer-Encoding", " Chunked ")]),
            Ok(BodyKind::Chunked)
        );
        assert_eq!(body(&[("Transfer-Encoding", "gzip, chunked")]), Err(501));
        assert_eq!(
            body(&[
                ("Transfer-Encoding", "gzip"),
                ("Transfer-Encoding", "chunked")
            ]),
            Err(501)
        );
        assert_eq!(body(&[("Transfer-Encoding", "chunked, gzip")]), Err(400));
        assert_eq!(body(&[("Transfer-Encoding", "gzip")]), Err(400));
        assert_eq!(body(&[("Transfer-Encoding", "")]), Err(400));
        assert_eq!(body(&[("Transfer-Encoding", "chunked, chunked")]), Err(400));
        assert_eq!(
            body(&[("Transfer-Encoding", "chunked"), ("Content-Length", "3")]),
            Err(400)
        );
        let d = decide(Version::Http10, &[("Transfer-Encoding", "chunked")]);
        assert_eq!(d.err().unwrap().status().code(), 400);
    }

    #[test]
    fn keep_alive_rules() {
        let ka = |v, h: &[(&str, &str)]| decide(v, h).unwrap().keep_alive;
        assert!(ka(Version::Http11, &[]));
        assert!(!ka(Version::Http11, &[("Connection", "close")]));
        assert!(!ka(Version::Http11, &[("Connection", "Upgrade, CLOSE")]));
        assert!(!ka(Version::Http10, &[]));
        assert!(ka(Version::Http10, &[("Connection", "Keep-Alive")]));
        assert!(ka(Version::Http10, &[("Connection", "foo ,keep-alive")]));
        assert!(!ka(
            Version::Http10,
            &[("Connection", "keep-alive"), ("Connection", "close")]
        ));
        assert!(!ka(Version::Http10, &[("Connection", "keep-alives")]));
    }

    #[test]
    fn expect_continue_only_for_http11() {
        let e = |v, h: &[(&str, &str)]| {
            let mut h = h.to_vec();
            h.push(("Content-Length", "1"));
            decide(v, &h).unwrap().expects_continue
        };
        assert!(e(Version::Http11, &[("Expect", "100-continue")]));
        assert!(e(Version::Http11, &[("expect", " 100-Continue ")]));
        assert!(!e(Version::Http11, &[("Expect", "200-ok")]));
        assert!(!e(Version::Http10, &[("Expect", "100-continue")]));
        assert!(!e(Version::Http11, &[]));
    }

    #[test]
    fn expect_continue_needs_a_body() {
        let e = |h: &[(&str, &str)]| decide(Version::Http11, h).unwrap().expects_continue;
        assert!(!e(&[("Expect", "100-continue")]));
        assert!(!e(&[("Expect", "100-continue"), ("Content-Length", "0")]));
        assert!(e(&[
            ("Expect", "100-continue"),
            ("Transfer-Encoding", "chunked")
        ]));
    }

    #[test]
    fn relevance_picks_the_headers_that_matter() {
        for name in [
            "Content-Length",
            "content-length",
            "CONTENT-LENGTH",
            "Transfer-Encoding",
            "transfer-encoding",
            "Connection",
            "CONNECTION",
            "Expect",
            "expect",
        ] {
            assert_eq!(
                Semantics::relevance(name.as_bytes()),
                Relevance::Value,
                "{name}"
            );
        }
        for name in ["Host", "host", "HOST", "hOsT"] {
            assert_eq!(Semantics::relevance(name.as_bytes()), Relevance::Host);
        }
        for name in [
            "",
            "H",
            "Hos",
            "Hosts",
            "Ho5t",
            "Accept",
            "Cookie",
            "User-Agent",
            "X",
            "Sec-Fetch-Mode",
            "Content-Type",
            "Content-Lengt",
            "\x03ontent-Length",
            "#ost",
            "Hos\x14",
        ] {
            assert_eq!(
                Semantics::relevance(name.as_bytes()),
                Relevance::None,
                "{name:?}"
            );
        }
    }

    #[test]
    fn long_names_that_share_a_slot_change_nothing() {
        // 38 & 31 == 6, the slot of `Expect`: such a name is passed on to
        // `value`, which finds it is not `Expect` and leaves the defaults.
        let name = format!("e{}", "x".repeat(37));
        assert_eq!(Semantics::relevance(name.as_bytes()), Relevance::Value);
        let mut s = Semantics::default();
        s.value(name.as_bytes(), b"100-continue").unwrap();
        let d = s.finish(Version::Http11, &Limits::default()).unwrap();
        assert_eq!(d.body, BodyKind::None);
        assert!(d.keep_alive && !d.expects_continue);
        // 36 & 31 == 4, but only four-byte names can be `Host`.
        let name = format!("h{}", "x".repeat(35));
        assert_eq!(Semantics::relevance(name.as_bytes()), Relevance::None);
    }

    #[test]
    fn host_is_required_only_when_asked() {
        let strict = Limits {
            require_host: true,
            ..Limits::default()
        };
        let run = |headers: &[(&[u8], &[u8])], version, limits: &Limits| {
            let mut s = Semantics::default();
            for (n, v) in headers {
                s.header(n, v).unwrap();
            }
            s.finish(version, limits)
        };
        let h: (&[u8], &[u8]) = (b"Host", b"a");
        assert!(run(&[], Version::Http11, &Limits::default()).is_ok());
        assert!(run(&[], Version::Http11, &strict).is_err());
        assert!(run(&[], Version::Http10, &strict).is_ok());
        assert!(run(&[h], Version::Http11, &strict).is_ok());
        let err = run(&[h, h], Version::Http11, &strict).unwrap_err();
        assert_eq!(err.status(), Status::BAD_REQUEST);
        assert!(run(&[(b"HOST", b"x")], Version::Http11, &strict).is_ok());
    }
}
