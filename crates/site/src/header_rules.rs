//! `--header 'GLOB: Name: value'`: extra headers on the static files whose
//! URL path matches a glob, e.g.
//! `'*.woff2: Cache-Control: public, max-age=31536000, immutable'`.
//!
//! Globs: `*` matches any run of characters but `/`, `**` any run at all,
//! `?` one character but `/`; everything else matches itself. A glob with
//! no `/` is matched against the path's last segment (`*.css` matches
//! `/a/b/x.css`), one with a `/` against the whole (percent-decoded) path
//! (`/assets/**`). Rules are checked once, at start-up: a bad one is a
//! usage error.

use std::fmt;

/// Headers a rule may not set: the encoder writes them, or the file
/// server does (a second copy would contradict the first).
const RESERVED: [&str; 11] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "date",
    "server",
    "content-type",
    "content-range",
    "content-encoding",
    "etag",
    "last-modified",
    "accept-ranges",
];

/// A glob over URL paths (see the module).
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: Vec<u8>,
    /// No `/` in the pattern: match the last segment only.
    last_segment: bool,
}

impl Glob {
    /// The glob `pattern` (not empty).
    pub fn new(pattern: &str) -> Result<Glob, String> {
        if pattern.is_empty() {
            return Err("empty glob".to_string());
        }
        Ok(Glob {
            pattern: pattern.as_bytes().to_vec(),
            last_segment: !pattern.contains('/'),
        })
    }

    /// Whether `path` (a URL path, `/` first) matches.
    pub fn matches(&self, path: &str) -> bool {
        let target = if self.last_segment {
            path.rsplit('/').next().unwrap_or(path)
        } else {
            path
        };
        glob_match(&self.pattern, target.as_bytes())
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({})", String::from_utf8_lossy(&self.pattern))
    }
}

/// Whether `s` matches the glob `p`: dynamic programming over (pattern
/// token, text position), so no pattern can make it exponential.
fn glob_match(p: &[u8], s: &[u8]) -> bool {
    #[derive(Clone, Copy)]
    enum Tok {
        Any,
        Star,
        One,
        Lit(u8),
    }
    let mut toks = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let t = match p[i] {
            b'*' if p.get(i + 1) == Some(&b'*') => {
                i += 1;
                Tok::Any
            }
            b'*' => Tok::Star,
            b'?' => Tok::One,
            c => Tok::Lit(c),
        };
        toks.push(t);
        i += 1;
    }
    // `next[j]`: whether the tokens after the current one match `s[j..]`.
    let mut next = vec![false; s.len() + 1];
    next[s.len()] = true;
    for t in toks.iter().rev() {
        let mut cur = vec![false; s.len() + 1];
        for j in (0..=s.len()).rev() {
            let c = s.get(j).copied();
            cur[j] = match t {
                Tok::Any => next[j] || (c.is_some() && cur[j + 1]),
                Tok::Star => next[j] || (c.is_some_and(|c| c != b'/') && cur[j + 1]),
                Tok::One => c.is_some_and(|c| c != b'/') && next[j + 1],
                Tok::Lit(l) => c == Some(*l) && next[j + 1],
            };
        }
        next = cur;
    }
    next[0]
}

/// One `--header` rule.
#[derive(Debug, Clone)]
pub struct HeaderRule {
    glob: Glob,
    name: &'static str,
    value: String,
}

impl HeaderRule {
    /// Parses `GLOB: Name: value`, checking the name (a token, not one the
    /// server writes itself) and the value (no control characters).
    pub fn parse(rule: &str) -> Result<HeaderRule, String> {
        let form = "expected 'GLOB: Name: value'";
        let (glob, rest) = rule.split_once(':').ok_or(form)?;
        let (name, value) = rest.split_once(':').ok_or(form)?;
        let (glob, name, value) = (glob.trim(), name.trim(), value.trim());
        let glob = Glob::new(glob)?;
        check_name(name)?;
        check_value(value)?;
        Ok(HeaderRule {
            glob,
            // Rules are made once, at start-up, and live as long as the
            // server: the name is leaked to be a `&'static str` like the
            // file server's own header names.
            name: Box::leak(name.to_string().into_boxed_str()),
            value: value.to_string(),
        })
    }

    /// The header, if `path` matches.
    pub fn header_for(&self, path: &str) -> Option<(&'static str, String)> {
        self.glob
            .matches(path)
            .then(|| (self.name, self.value.clone()))
    }
}

/// A header name is a token (RFC 9110 §5.6.2) and not a reserved one.
pub fn check_name(name: &str) -> Result<(), String> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(tchar) {
        return Err(format!("invalid header name {name:?}"));
    }
    if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        return Err(format!("header {name} is set by the server"));
    }
    Ok(())
}

/// A header value holds no control characters but tab.
pub fn check_value(value: &str) -> Result<(), String> {
    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(format!("invalid header value {value:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(glob: &str, path: &str) -> bool {
        Glob::new(glob).unwrap().matches(path)
    }

    #[test]
    fn globs() {
        assert!(m("*.woff2", "/fonts/a.woff2"));
        assert!(m("*.woff2", "/a.woff2"));
        assert!(!m("*.woff2", "/a.woff"));
        assert!(!m("*.woff2", "/a.woff2/x"));
        assert!(m("a?c.txt", "/x/abc.txt"));
        assert!(!m("a?c.txt", "/x/ac.txt"));
        assert!(m("/assets/*", "/assets/app.js"));
        assert!(!m("/assets/*", "/assets/js/app.js"));
        assert!(m("/assets/**", "/assets/js/app.js"));
        assert!(m("/**/*.map", "/a/b/c.js.map"));
        assert!(m("/**.map", "/a/b/c.js.map"));
        assert!(!m("/*.map", "/a/b.map"));
        assert!(m("/*", "/"));
        assert!(m("**", "/anything/at/all"));
        assert!(m("*", "/x"));
        assert!(!m("/a?c", "/a/c"));
        assert!(m("*.*.js", "/app.min.js"));
        assert!(!m("*.*.js", "/app.js"));
    }

    #[test]
    fn rules() {
        let r = HeaderRule::parse("*.woff2: Cache-Control: public, max-age=31536000, immutable")
            .unwrap();
        assert_eq!(
            r.header_for("/f/a.woff2"),
            Some((
                "Cache-Control",
                "public, max-age=31536000, immutable".to_string()
            ))
        );
        assert_eq!(r.header_for("/f/a.css"), None);
        // A colon in the value is kept.
        let r = HeaderRule::parse("/x: Link: <https://a/b>; rel=preload").unwrap();
        assert_eq!(r.header_for("/x").unwrap().1, "<https://a/b>; rel=preload");
        for bad in [
            "no colons",
            "*.css: only-name",
            ": X-A: b",
            "*.css: Bad Name: v",
            "*.css: : v",
            "*.css: Content-Length: 5",
            "*.css: content-type: text/css",
            "*.css: X-A: a\u{1}b",
        ] {
            assert!(HeaderRule::parse(bad).is_err(), "{bad}");
        }
    }
}
