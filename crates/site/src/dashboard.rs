//! The live dashboard at `/_httplite/` (and at `/` when there is no
//! `--root`): one HTML page, one stylesheet and one script, all compiled
//! into the binary, fed by [`crate::events`] (or by polling
//! `/_httplite/stats` where a stream cannot be had).
//!
//! Nothing is fetched from anywhere else, so the page works on a machine
//! with no internet, and a strict `Content-Security-Policy` says so to the
//! browser: no inline script or style, no other origin, no frames, no
//! forms. The assets are revalidated on every load (`no-cache` with an
//! `ETag`): a new binary's page is never mixed with an old script.

use http1::{HeaderValue, Request, Status};

use crate::action::{Action, HTML};

/// The page.
pub const PAGE_HTML: &str = include_str!("dashboard/index.html");
/// Its script: plain JavaScript, charts drawn on `<canvas>` by hand.
pub const SCRIPT_JS: &str = include_str!("dashboard/dashboard.js");
/// Its stylesheet.
pub const STYLE_CSS: &str = include_str!("dashboard/dashboard.css");

/// What the page may load and connect to: its own script and stylesheet
/// and its own origin's `/_httplite/events` and `/_httplite/stats`;
/// nothing inline, nothing from elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const JS: HeaderValue<'static> = HeaderValue::from_static("text/javascript; charset=utf-8");
const CSS: HeaderValue<'static> = HeaderValue::from_static("text/css; charset=utf-8");

/// One embedded file and its validator.
struct Asset {
    body: &'static str,
    content_type: HeaderValue<'static>,
    etag: u64,
}

const PAGE: Asset = Asset {
    body: PAGE_HTML,
    content_type: HTML,
    etag: fnv1a(PAGE_HTML.as_bytes()),
};
const SCRIPT: Asset = Asset {
    body: SCRIPT_JS,
    content_type: JS,
    etag: fnv1a(SCRIPT_JS.as_bytes()),
};
const STYLE: Asset = Asset {
    body: STYLE_CSS,
    content_type: CSS,
    etag: fnv1a(STYLE_CSS.as_bytes()),
};

/// FNV-1a over `bytes`, at compile time: an `ETag` that changes with the
/// file (a validator, not a security measure).
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}

/// The page (`endpoint` is the path after `/_httplite/`, `""` for the page
/// itself), or `None` if `endpoint` is none of the dashboard's files.
pub(crate) fn asset(endpoint: &str, req: &Request) -> Option<Action> {
    let asset = match endpoint {
        "" => &PAGE,
        "dashboard.js" => &SCRIPT,
        "dashboard.css" => &STYLE,
        _ => return None,
    };
    Some(serve(asset, req))
}

/// The page itself (`/` without `--root`).
pub(crate) fn page(req: &Request) -> Action {
    serve(&PAGE, req)
}

fn serve(asset: &Asset, req: &Request) -> Action {
    let etag = format!("\"{:016x}\"", asset.etag);
    let mut headers = vec![
        ("Cache-Control", "no-cache".to_string()),
        ("Content-Security-Policy", CSP.to_string()),
        ("X-Content-Type-Options", "nosniff".to_string()),
        ("Referrer-Policy", "no-referrer".to_string()),
    ];
    // `If-None-Match` is a list of tags (or `*`); a weak match is enough
    // for a GET (RFC 9110 §13.1.2).
    let fresh = (req.header("if-none-match"))
        .and_then(|v| std::str::from_utf8(v).ok())
        .is_some_and(|v| {
            v.split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == etag || t == "*")
        });
    headers.push(("ETag", etag));
    if fresh {
        return Action::Owned {
            status: Status::NOT_MODIFIED,
            content_type: None,
            headers,
            body: Vec::new(),
        };
    }
    Action::Owned {
        status: Status::OK,
        content_type: Some(asset.content_type),
        headers,
        body: asset.body.as_bytes().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::BytesMut;
    use http1::{Decoder, Limits, Message};

    fn request(head: &str) -> Request {
        let mut buf = BytesMut::from(head.as_bytes());
        match Decoder::new(Limits::default()).decode(&mut buf) {
            Ok(Some(Message::Head(req))) => req,
            other => panic!("{head:?}: {other:?}"),
        }
    }

    fn owned(a: Action) -> (Status, Vec<(&'static str, String)>, Vec<u8>) {
        match a {
            Action::Owned {
                status,
                headers,
                body,
                ..
            } => (status, headers, body),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn assets_carry_the_policy_and_revalidate() {
        let req = request("GET /_httplite/ HTTP/1.1\r\nHost: a\r\n\r\n");
        let (status, headers, body) = owned(asset("", &req).expect("the page"));
        assert_eq!(status, Status::OK);
        assert_eq!(body, PAGE_HTML.as_bytes());
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("Content-Security-Policy").as_deref(), Some(CSP));
        assert_eq!(get("Cache-Control").as_deref(), Some("no-cache"));
        let etag = get("ETag").expect("an ETag");
        // The same tag back: 304 without a body.
        let again = format!(
            "GET /_httplite/ HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\", W/{etag}\r\n\r\n"
        );
        let (status, _, body) = owned(asset("", &request(&again)).unwrap());
        assert_eq!((status, body.len()), (Status::NOT_MODIFIED, 0));
        // Another file's tag is not this one's.
        let (_, js_headers, _) = owned(asset("dashboard.js", &req).unwrap());
        assert!(!js_headers.contains(&("ETag", etag)));
        assert!(asset("dashboard.png", &req).is_none());
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere_and_nothing_inline() {
        for text in [PAGE_HTML, SCRIPT_JS, STYLE_CSS] {
            for bad in ["http://", "https://", "//cdn", "eval(", "innerHTML"] {
                assert!(!text.contains(bad), "{bad} in an embedded file");
            }
        }
        // No inline script or style for the policy to refuse.
        assert!(!PAGE_HTML.contains("<script>") && !PAGE_HTML.contains("<style"));
        assert!(!PAGE_HTML.contains(" style=") && !PAGE_HTML.contains(" onclick="));
        assert!(PAGE_HTML.contains("src=\"/_httplite/dashboard.js\""));
        assert!(PAGE_HTML.contains("href=\"/_httplite/dashboard.css\""));
    }
}
