//! `Accept-Encoding` negotiation for precompressed sidecars (`--precompressed`):
//! which of `x.br`, `x.zst`, `x.gz` (or `x` itself) a client may be sent.
//!
//! RFC 9110 §12.5.3, with these decisions:
//! - A q-value of 0 means "not acceptable". A coding not listed takes the
//!   q of `*` if present, else it is not acceptable (a listed header is an
//!   exhaustive list).
//! - `identity` is acceptable unless `identity;q=0`, or `*;q=0` without an
//!   `identity` entry. When it is not listed at all it loses every tie with
//!   a listed coding (browsers send `gzip, deflate, br, zstd` and want one of
//!   them); it wins only when its q (given directly or by `*`) is strictly
//!   higher than a coding's.
//! - No header, or an empty one: identity only. (The RFC would allow any
//!   coding without the header, but a client that sends none, like a plain
//!   `curl`, expects the bytes of the file.)
//! - A malformed header (bad q, stray characters, not UTF-8) is treated as
//!   absent: identity, never a 406, since guessing what a broken client
//!   can decode could hand it bytes it cannot read.
//! - Ties between codings go to the smaller file: br, then zstd, then gzip.
//! - The first entry for a coding wins over later duplicates.

/// A content coding a sidecar can have, in order of preference on ties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// `x.br`.
    Br,
    /// `x.zst`.
    Zstd,
    /// `x.gz`.
    Gzip,
}

impl Coding {
    /// All, in order of preference on ties.
    pub const ALL: [Coding; 3] = [Coding::Br, Coding::Zstd, Coding::Gzip];

    /// The `Content-Encoding` token.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Br => "br",
            Coding::Zstd => "zstd",
            Coding::Gzip => "gzip",
        }
    }

    /// The sidecar's file name suffix.
    pub fn suffix(self) -> &'static str {
        match self {
            Coding::Br => ".br",
            Coding::Zstd => ".zst",
            Coding::Gzip => ".gz",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A q-value in thousandths (`q=0.5` is 500); `None` when not listed.
type Q = Option<u16>;

/// What a request's `Accept-Encoding` allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptEncoding {
    codings: [Q; 3],
    identity: Q,
    star: Q,
}

impl AcceptEncoding {
    /// Identity only: what no header, an empty one or a malformed one means.
    pub const IDENTITY: AcceptEncoding = AcceptEncoding {
        codings: [Some(0); 3],
        identity: None,
        star: None,
    };

    /// Parses the header's value (`None`: no header).
    pub fn parse(header: Option<&[u8]>) -> AcceptEncoding {
        header
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(parse_list)
            .unwrap_or(AcceptEncoding::IDENTITY)
    }

    /// The q of `c` (0 for "not acceptable").
    pub fn q(&self, c: Coding) -> u16 {
        self.codings[c.index()].or(self.star).unwrap_or(0)
    }

    /// Whether the unencoded file may be sent.
    pub fn identity_acceptable(&self) -> bool {
        self.identity.or(self.star).unwrap_or(1000) > 0
    }

    /// The codings to try, best first: acceptable, and not beaten by
    /// identity (see the module documentation). The first whose sidecar
    /// exists is the answer; if none does, identity (if acceptable).
    pub fn ranked(&self) -> impl Iterator<Item = Coding> + '_ {
        // Identity's q when it was given (directly or by `*`); 0 when not,
        // so that any acceptable coding wins.
        let floor = self.identity.or(self.star).unwrap_or(0);
        let mut order = Coding::ALL;
        // Stable: equal q keeps br > zstd > gzip.
        order.sort_by_key(|&c| std::cmp::Reverse(self.q(c)));
        order
            .into_iter()
            .filter(move |&c| self.q(c) > 0 && self.q(c) >= floor)
    }
}

/// `coding [; q=x] , ...`; `None` if malformed.
fn parse_list(h: &str) -> Option<AcceptEncoding> {
    let mut out = AcceptEncoding {
        codings: [None; 3],
        identity: None,
        star: None,
    };
    for item in h.split(',') {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim();
        if name.is_empty() {
            // Empty list elements are allowed (`gzip, , br`), a bare
            // parameter is not.
            if parts.next().is_some() {
                return None;
            }
            continue;
        }
        if !name.bytes().all(is_tchar) {
            return None;
        }
        let mut q = 1000;
        for param in parts {
            let (k, v) = param.split_once('=')?;
            if k.trim().eq_ignore_ascii_case("q") {
                q = parse_q(v.trim())?;
            }
            // Other parameters are allowed by the grammar and mean nothing
            // to us.
        }
        let slot = if name == "*" {
            &mut out.star
        } else if name.eq_ignore_ascii_case("identity") {
            &mut out.identity
        } else if name.eq_ignore_ascii_case("br") {
            &mut out.codings[Coding::Br.index()]
        } else if name.eq_ignore_ascii_case("zstd") {
            &mut out.codings[Coding::Zstd.index()]
        } else if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
            &mut out.codings[Coding::Gzip.index()]
        } else {
            continue;
        };
        slot.get_or_insert(q);
    }
    Some(out)
}

/// `0[.ddd]` or `1[.000]` (RFC 9110 §12.4.2), in thousandths.
fn parse_q(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths: u16 = 0;
    for (i, b) in frac.bytes().enumerate() {
        thousandths += u16::from(b - b'0') * [100, 10, 1][i];
    }
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Coding::*;

    fn ranked(h: &str) -> Vec<Coding> {
        AcceptEncoding::parse(Some(h.as_bytes())).ranked().collect()
    }

    fn identity_ok(h: &str) -> bool {
        AcceptEncoding::parse(Some(h.as_bytes())).identity_acceptable()
    }

    #[test]
    fn plain_lists_prefer_br_then_zstd_then_gzip() {
        assert_eq!(ranked("gzip, deflate, br, zstd"), [Br, Zstd, Gzip]);
        assert_eq!(ranked("gzip"), [Gzip]);
        assert_eq!(ranked("deflate"), []);
        assert!(identity_ok("gzip, br"));
    }

    #[test]
    fn q_values_order_and_zero_excludes() {
        assert_eq!(ranked("br;q=0.5, gzip;q=0.8, zstd;q=0.6"), [Gzip, Zstd, Br]);
        assert_eq!(ranked("br;q=0, gzip"), [Gzip]);
        assert_eq!(ranked("br;q=0.000, gzip;q=0.001"), [Gzip]);
        assert_eq!(ranked("gzip;q=1.0, br;q=1"), [Br, Gzip]);
        assert_eq!(ranked("gzip ; q=0.9 , br ;Q=0.2"), [Gzip, Br]);
        // Parameters other than q are ignored.
        assert_eq!(ranked("gzip;level=1;q=0.3, br;q=0.2"), [Gzip, Br]);
    }

    #[test]
    fn wildcard_covers_unlisted_codings() {
        assert_eq!(ranked("*"), [Br, Zstd, Gzip]);
        assert_eq!(ranked("gzip;q=1, *;q=0.5"), [Gzip, Br, Zstd]);
        assert_eq!(ranked("*;q=0.5, br;q=0"), [Zstd, Gzip]);
        assert_eq!(ranked("*;q=0, gzip"), [Gzip]);
        assert!(!identity_ok("*;q=0, gzip"));
        assert!(identity_ok("*;q=0, identity"));
    }

    #[test]
    fn identity_rules() {
        assert!(!identity_ok("identity;q=0"));
        assert!(!identity_ok("br, identity;q=0"));
        assert!(identity_ok("br;q=0"));
        assert!(identity_ok("identity;q=0.1"));
        // Identity preferred explicitly over a coding beats it; a tie or no
        // mention leaves the coding first.
        assert_eq!(ranked("identity, gzip;q=0.5"), []);
        assert_eq!(ranked("identity;q=0.5, gzip;q=0.5, br;q=0.4"), [Gzip]);
        assert_eq!(ranked("identity;q=0.5, gzip"), [Gzip]);
    }

    #[test]
    fn case_insensitive() {
        assert_eq!(ranked("GZIP, Br"), [Br, Gzip]);
        assert_eq!(ranked("ZSTD;Q=0.5, X-Gzip;q=0.4"), [Zstd, Gzip]);
        assert!(!identity_ok("IDENTITY;Q=0"));
    }

    #[test]
    fn absent_empty_and_malformed_mean_identity() {
        let id = AcceptEncoding::IDENTITY;
        assert_eq!(AcceptEncoding::parse(None), id);
        assert!(id.identity_acceptable());
        assert_eq!(id.ranked().count(), 0);
        assert_eq!(ranked(""), []);
        assert!(identity_ok(""));
        for bad in [
            "gzip;q=2",
            "gzip;q=0.5000",
            "gzip;q=x",
            "gzip;q=",
            "gzip;q",
            "br;q=-1",
            "gz ip",
            "gzip, ;q=1",
            "identity;q=0, br;q=1.1",
        ] {
            let a = AcceptEncoding::parse(Some(bad.as_bytes()));
            assert_eq!(a, id, "{bad:?}");
        }
        assert_eq!(AcceptEncoding::parse(Some(b"gzip\xff")), id);
        // Empty elements are fine.
        assert_eq!(ranked("gzip, , br"), [Br, Gzip]);
    }

    #[test]
    fn first_duplicate_wins() {
        assert_eq!(ranked("br;q=0, br"), []);
        assert_eq!(ranked("gzip;q=0.2, gzip;q=0.9, zstd;q=0.5"), [Zstd, Gzip]);
    }
}
