//! Percent-decoding of request paths (RFC 3986 §2.1).
//!
//! Routing and file lookup need the decoded path, and the decoded bytes are
//! where path-traversal and truncation tricks hide, so this is strict: a `%`
//! not followed by two hex digits is an error (not passed through), and so is
//! a NUL byte, raw or encoded, because it truncates C strings in the kernel's
//! file API. `+` stays `+`: it means space only in HTML form bodies.

use std::borrow::Cow;

use crate::Error;

/// Decodes `%XX` escapes in `input`.
///
/// Borrows when there is nothing to decode, so the common path allocates
/// nothing. Fails (400) on a malformed escape or a NUL byte.
///
/// ```
/// use http1::percent_decode;
/// assert_eq!(&*percent_decode(b"/a%20b").unwrap(), b"/a b");
/// assert!(percent_decode(b"/a%2").is_err());
/// assert!(percent_decode(b"/a%00b").is_err());
/// ```
pub fn percent_decode(input: &[u8]) -> Result<Cow<'_, [u8]>, Error> {
    let Some(first) = input.iter().position(|&b| b == b'%' || b == 0) else {
        return Ok(Cow::Borrowed(input));
    };
    let mut out = Vec::with_capacity(input.len());
    out.extend_from_slice(&input[..first]);
    let mut i = first;
    while i < input.len() {
        let b = input[i];
        let decoded = match b {
            b'%' => {
                let hi = input.get(i + 1).and_then(|&h| hex(h));
                let lo = input.get(i + 2).and_then(|&l| hex(l));
                let (Some(hi), Some(lo)) = (hi, lo) else {
                    return Err(Error::bad_request("invalid percent-encoding"));
                };
                i += 3;
                hi << 4 | lo
            }
            _ => {
                i += 1;
                b
            }
        };
        if decoded == 0 {
            return Err(Error::bad_request("NUL byte in path"));
        }
        out.push(decoded);
    }
    Ok(Cow::Owned(out))
}

/// Like [`percent_decode`], and also requires the result to be UTF-8, which
/// is what a router or a file-system path usually wants.
///
/// ```
/// use http1::percent_decode_str;
/// assert_eq!(percent_decode_str("/caf%C3%A9").unwrap(), "/café");
/// assert!(percent_decode_str("/%FF").is_err());
/// ```
pub fn percent_decode_str(input: &str) -> Result<Cow<'_, str>, Error> {
    match percent_decode(input.as_bytes())? {
        // Borrowed means unchanged, and `input` is already a `str`.
        Cow::Borrowed(_) => Ok(Cow::Borrowed(input)),
        Cow::Owned(bytes) => String::from_utf8(bytes)
            .map(Cow::Owned)
            .map_err(|_| Error::bad_request("percent-decoded path is not UTF-8")),
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_borrow() {
        assert!(matches!(
            percent_decode(b"/index.html"),
            Ok(Cow::Borrowed(_))
        ));
        assert!(matches!(
            percent_decode_str("/a/b"),
            Ok(Cow::Borrowed("/a/b"))
        ));
        assert_eq!(&*percent_decode(b"").unwrap(), b"");
    }

    #[test]
    fn escapes_decode() {
        assert_eq!(&*percent_decode(b"%41%62%2f%2F").unwrap(), b"Ab//");
        assert_eq!(&*percent_decode(b"/a+b%25").unwrap(), b"/a+b%");
        assert_eq!(&*percent_decode(b"%ff").unwrap(), &[0xff]);
        assert_eq!(percent_decode_str("/%2e%2e/x").unwrap(), "/../x");
    }

    #[test]
    fn bad_escapes_are_400() {
        for bad in [&b"%"[..], b"%4", b"%4g", b"%g4", b"/x%", b"/x%zz", b"%%41"] {
            let err = percent_decode(bad).unwrap_err();
            assert_eq!(err.status().code(), 400, "{bad:?}");
        }
    }

    #[test]
    fn nul_is_rejected_raw_and_encoded() {
        assert!(percent_decode(b"/a\0b").is_err());
        assert!(percent_decode(b"/a%00b").is_err());
        assert!(percent_decode(b"%41\0").is_err());
    }

    #[test]
    fn non_utf8_result_is_rejected_by_str_variant() {
        assert!(percent_decode_str("/%C3").is_err());
        assert_eq!(percent_decode_str("/%C3%A9").unwrap(), "/é");
    }
}
