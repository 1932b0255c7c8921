//! What the command line adds around a static file's answer: header rules
//! (`--header`), CORS (`--cors`, with preflight `OPTIONS`), the
//! single-page-app fallback (`--fallback`) and error pages
//! (`--error-page`). Kept apart from [`crate::static_files`], which decides
//! the answer for one file; this module only adjusts it.

use std::borrow::Cow;
use std::sync::Arc;

use http1::{Request, Status};

use crate::action::Action;
use crate::header_rules::{HeaderRule, check_value};
use crate::static_files::{StaticReply, StaticRoot};

/// `Access-Control-Allow-Methods` of a preflight: files are only read.
pub const CORS_METHODS: &str = "GET, HEAD, OPTIONS";
/// `Access-Control-Max-Age` of a preflight (a day).
pub const CORS_MAX_AGE: &str = "86400";

/// The features, as given on the command line (all off by default).
#[derive(Debug, Default, Clone)]
pub struct FileFeatures {
    /// `--header` rules, in order.
    pub rules: Vec<HeaderRule>,
    /// `--cors`: the `Access-Control-Allow-Origin` value.
    pub cors: Option<String>,
    /// `--fallback`: the URL path of the file served for paths that do not
    /// exist and do not look like files (`/index.html`).
    pub fallback: Option<String>,
    /// `--error-page`: a status and the URL path of its page.
    pub error_pages: Vec<(u16, String)>,
}

impl FileFeatures {
    /// Whether a rule or CORS may add headers to a file's answer.
    pub(crate) fn adds_headers(&self) -> bool {
        !self.rules.is_empty() || self.cors.is_some()
    }

    /// Whether anything is on (else answers go through untouched).
    fn any(&self) -> bool {
        !self.rules.is_empty()
            || self.cors.is_some()
            || self.fallback.is_some()
            || !self.error_pages.is_empty()
    }
}

/// Parses `--cors`'s origin: a header value, not empty.
pub fn parse_cors_origin(origin: &str) -> Result<String, String> {
    let origin = origin.trim();
    if origin.is_empty() {
        return Err("empty origin".to_string());
    }
    check_value(origin)?;
    Ok(origin.to_string())
}

/// The answer to a GET or HEAD of `req` under `root`, with the features.
pub fn serve(root: &StaticRoot, req: &Request) -> StaticReply {
    let features = root.features();
    if !features.any() {
        return root.serve(req);
    }
    let mut reply = root.serve(req);
    if let Some(fallback) = &features.fallback
        && matches!(reply, StaticReply::Error(Status::NOT_FOUND, _))
        && !looks_like_a_file(req.path())
    {
        reply = root.serve_at(req, fallback);
    }
    if let StaticReply::Error(status, headers) = &mut reply
        && let Some((_, page)) = features
            .error_pages
            .iter()
            .find(|(code, _)| *code == status.code())
        && let Ok((file, len, content_type)) = root.open_page(page)
    {
        // The page's body with the original status (and its headers: a
        // 416's Content-Range), never its ranges or validators.
        let mut page_headers = vec![("Content-Type", content_type)];
        page_headers.append(headers);
        reply = StaticReply::File {
            status: *status,
            file: Arc::new(file),
            offset: 0,
            len,
            headers: page_headers,
            body: None,
        };
    }
    decorate(features, req.path(), reply)
}

/// Whether the last segment of the URL path `path` has an extension
/// (`/app.js`, not `/users/12`): such a path is not a client-side route,
/// and a missing one stays a 404 under `--fallback`.
fn looks_like_a_file(path: &str) -> bool {
    let path = http1::percent_decode_str(path).unwrap_or(Cow::Borrowed(path));
    let last = path.rsplit('/').next().unwrap_or("");
    last.trim_start_matches('.').contains('.')
}

/// Adds the rules' headers (to 200, 206 and 304) and CORS's (to all).
fn decorate(features: &FileFeatures, path: &str, mut reply: StaticReply) -> StaticReply {
    let (status, headers) = match &mut reply {
        StaticReply::File {
            status, headers, ..
        } => (status.code(), headers),
        StaticReply::Parts { headers, .. } => (206, headers),
        StaticReply::NotModified { headers } => (304, headers),
        StaticReply::Error(status, headers) => (status.code(), headers),
        _ => return reply,
    };
    if matches!(status, 200 | 206 | 304) && !features.rules.is_empty() {
        let path = http1::percent_decode_str(path).unwrap_or(Cow::Borrowed(path));
        headers.extend(features.rules.iter().filter_map(|r| r.header_for(&path)));
        // A rule's Cache-Control replaces the default one (the first).
        let is_cc = |n: &&str| n.eq_ignore_ascii_case("cache-control");
        if headers.iter().filter(|(n, _)| is_cc(n)).count() > 1
            && let Some(default) = headers.iter().position(|(n, _)| is_cc(n))
        {
            headers.remove(default);
        }
    }
    if let Some(origin) = &features.cors {
        headers.push(("Access-Control-Allow-Origin", origin.clone()));
    }
    reply
}

/// The answer to a CORS preflight (`OPTIONS` with `Origin` and
/// `Access-Control-Request-Method`) of a file path, when `--cors` is on:
/// 204 with the allowed methods, the requested headers echoed, and a day's
/// max-age. `None` for any other `OPTIONS` (answered with `Allow`).
pub fn preflight(features: &FileFeatures, req: &Request) -> Option<Action> {
    let origin = features.cors.as_ref()?;
    req.header("origin")?;
    req.header("access-control-request-method")?;
    let mut headers = vec![
        ("Access-Control-Allow-Origin", origin.clone()),
        ("Access-Control-Allow-Methods", CORS_METHODS.to_string()),
    ];
    if let Some(asked) = req
        .header("access-control-request-headers")
        .and_then(|v| std::str::from_utf8(v).ok())
        .filter(|v| !v.trim().is_empty() && check_value(v).is_ok())
    {
        headers.push(("Access-Control-Allow-Headers", asked.trim().to_string()));
    }
    headers.push(("Access-Control-Max-Age", CORS_MAX_AGE.to_string()));
    headers.push(("Allow", CORS_METHODS.to_string()));
    if origin != "*" {
        headers.push(("Vary", "Origin".to_string()));
    }
    Some(Action::Owned {
        status: Status::NO_CONTENT,
        content_type: None,
        headers,
        body: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_looks_like_a_file() {
        assert!(looks_like_a_file("/app.js"));
        assert!(looks_like_a_file("/a/b/c.min.css"));
        assert!(looks_like_a_file("/a%2Eb"));
        assert!(!looks_like_a_file("/"));
        assert!(!looks_like_a_file("/users/12"));
        assert!(!looks_like_a_file("/v1.2/users"));
        assert!(!looks_like_a_file("/.hidden"));
    }
}
