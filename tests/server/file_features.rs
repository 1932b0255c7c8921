//! File-server features on top of `--root`: multiple byte ranges
//! (`multipart/byteranges`), header rules and CORS (`--header`, `--cors`),
//! and the single-page-app fallback and error pages (`--fallback`,
//! `--error-page`).

use crate::harness::{Client, Response, Server, TempDir, runtimes};

/// Bytes that differ at every offset (so a wrong offset shows).
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn request(c: &mut Client, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    c.send(req.as_bytes());
    if method == "HEAD" {
        c.read_head_response()
    } else {
        c.read_response()
    }
}

/// The exact `multipart/byteranges` body for `ranges` (inclusive) of
/// `data`, with `boundary`.
fn multipart(data: &[u8], ranges: &[(usize, usize)], ct: &str, boundary: &str) -> Vec<u8> {
    let mut body = Vec::new();
    for (i, &(s, e)) in ranges.iter().enumerate() {
        if i > 0 {
            body.extend_from_slice(b"\r\n");
        }
        let head = format!(
            "--{boundary}\r\nContent-Type: {ct}\r\nContent-Range: bytes {s}-{e}/{}\r\n\r\n",
            data.len()
        );
        body.extend_from_slice(head.as_bytes());
        body.extend_from_slice(&data[s..=e]);
    }
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

/// A path, its bytes, its type, and the ranges asked for.
type Case<'a> = (&'a str, &'a [u8], &'a str, &'a [(usize, usize)]);

#[test]
fn multiple_ranges_are_multipart_byteranges() {
    let dir = TempDir::new("multirange");
    let small = pattern(100);
    let medium = pattern(10 * 1024); // not in the cache's bytes: read
    let big = pattern(200 * 1024); // parts sent with sendfile
    dir.write("small.bin", &small);
    dir.write("medium.txt", &medium);
    dir.write("big.bin", &big);
    let octet = "application/octet-stream";
    let text = "text/plain; charset=utf-8";
    let cases: &[Case] = &[
        ("/small.bin", &small, octet, &[(0, 9), (20, 29)]),
        ("/small.bin", &small, octet, &[(90, 99), (0, 0), (50, 59)]),
        ("/medium.txt", &medium, text, &[(0, 99), (5000, 9999)]),
        (
            "/big.bin",
            &big,
            octet,
            &[(0, 9), (1000, 60_000), (100_000, 204_799)],
        ),
        ("/big.bin", &big, octet, &[(150_000, 204_799), (0, 40_000)]),
    ];
    for rt in runtimes() {
        let root = dir.path().to_str().unwrap();
        let server = Server::start(rt, &["--root", root]);
        let mut c = server.connect();
        // Twice: the second time from the open-file cache.
        for _ in 0..2 {
            for &(path, data, ct, ranges) in cases {
                let spec: Vec<String> = ranges.iter().map(|(s, e)| format!("{s}-{e}")).collect();
                let range = format!("bytes={}", spec.join(","));
                let r = request(&mut c, "GET", path, &[("Range", &range)]);
                assert_eq!(r.status, 206, "[{rt}] {path} {range}: {:?}", r.headers);
                let ctype = r.header("content-type").unwrap();
                let boundary = ctype
                    .strip_prefix("multipart/byteranges; boundary=")
                    .unwrap_or_else(|| panic!("[{rt}] {ctype}"));
                assert!(r.header("content-range").is_none(), "[{rt}]");
                let expect = multipart(data, ranges, ct, boundary);
                let len: usize = r.header("content-length").unwrap().parse().unwrap();
                assert_eq!(len, expect.len(), "[{rt}] {path} {range}");
                assert!(r.body == expect, "[{rt}] {path} {range}: parts differ");
            }
        }
        // HEAD: the same head, no body; the connection goes on.
        let r = request(&mut c, "HEAD", "/big.bin", &[("Range", "bytes=0-9,20-29")]);
        assert_eq!(r.status, 206, "[{rt}]");
        assert!(r.body.is_empty());
        // Overlapping or too many: the whole file.
        let many: Vec<String> = (0..17).map(|i| format!("{}-{}", i * 2, i * 2)).collect();
        for range in [
            "bytes=0-9,5-14".to_string(),
            format!("bytes={}", many.join(",")),
        ] {
            let r = request(&mut c, "GET", "/small.bin", &[("Range", &range)]);
            assert_eq!(r.status, 200, "[{rt}] {range}");
            assert_eq!(r.body, small, "[{rt}] {range}");
        }
        // None satisfiable: 416.
        let r = request(
            &mut c,
            "GET",
            "/small.bin",
            &[("Range", "bytes=100-,200-300")],
        );
        assert_eq!(r.status, 416, "[{rt}]");
        assert_eq!(r.header("content-range"), Some("bytes */100"), "[{rt}]");
        // One satisfiable among others: a single range.
        let r = request(
            &mut c,
            "GET",
            "/small.bin",
            &[("Range", "bytes=5-6,200-300")],
        );
        assert_eq!(r.status, 206, "[{rt}]");
        assert_eq!(r.header("content-range"), Some("bytes 5-6/100"), "[{rt}]");
        assert_eq!(r.body, &small[5..=6]);
        // If-Range: the current ETag or Last-Modified honours the ranges,
        // anything else gets the whole file.
        let whole = request(&mut c, "GET", "/small.bin", &[]);
        let etag = whole.header("etag").unwrap().to_string();
        let date = whole.header("last-modified").unwrap().to_string();
        for (if_range, status) in [
            (etag.as_str(), 206),
            (date.as_str(), 206),
            ("\"stale\"", 200),
            ("Thu, 01 Jan 1970 00:00:00 GMT", 200),
        ] {
            let hs = [("Range", "bytes=0-1,5-6"), ("If-Range", if_range)];
            let r = request(&mut c, "GET", "/small.bin", &hs);
            assert_eq!(r.status, status, "[{rt}] If-Range: {if_range}");
        }
        // The connection is still in step after all that.
        assert_eq!(request(&mut c, "GET", "/small.bin", &[]).body, small);
    }
}

#[test]
fn header_rules_and_cors() {
    let dir = TempDir::new("rules");
    dir.write("fonts/a.woff2", b"font");
    dir.write("app.js", b"let x;");
    dir.write("big.woff2", &pattern(40 * 1024));
    let root = dir.path().to_str().unwrap();
    let immutable = "public, max-age=31536000, immutable";
    for rt in runtimes() {
        let server = Server::start(
            rt,
            &[
                "--root",
                root,
                "--header",
                &format!("*.woff2: Cache-Control: {immutable}"),
                "--header",
                "/fonts/**: X-Font: yes",
                "--header",
                "/*.js: X-Script: 1",
                "--cors",
            ],
        );
        let mut c = server.connect();
        let r = request(&mut c, "GET", "/fonts/a.woff2", &[]);
        assert_eq!(r.status, 200, "[{rt}]");
        assert_eq!(r.header("cache-control"), Some(immutable), "[{rt}]");
        assert_eq!(r.header("x-font"), Some("yes"), "[{rt}]");
        assert_eq!(r.header("x-script"), None, "[{rt}]");
        assert_eq!(r.header("access-control-allow-origin"), Some("*"), "[{rt}]");
        // 304 and 206 (one range, several, sendfile'd) carry them too.
        let etag = r.header("etag").unwrap().to_string();
        let r = request(&mut c, "GET", "/fonts/a.woff2", &[("If-None-Match", &etag)]);
        assert_eq!(r.status, 304, "[{rt}]");
        assert_eq!(r.header("cache-control"), Some(immutable), "[{rt}]");
        for range in ["bytes=0-1", "bytes=0-1,3-3"] {
            let r = request(&mut c, "GET", "/fonts/a.woff2", &[("Range", range)]);
            assert_eq!(r.status, 206, "[{rt}]");
            assert_eq!(r.header("x-font"), Some("yes"), "[{rt}] {range}");
        }
        let r = request(&mut c, "GET", "/big.woff2", &[]);
        assert_eq!((r.status, r.body.len()), (200, 40 * 1024), "[{rt}]");
        assert_eq!(r.header("cache-control"), Some(immutable), "[{rt}]");
        let r = request(&mut c, "HEAD", "/big.woff2", &[]);
        assert_eq!(r.header("cache-control"), Some(immutable), "[{rt}]");
        // A rule's Cache-Control replaces the default, never adds a second.
        assert_eq!(r.header_count("cache-control"), 1, "[{rt}] {r:?}");
        let r = request(&mut c, "GET", "/app.js", &[]);
        assert_eq!(r.header("x-script"), Some("1"), "[{rt}]");
        assert_eq!(
            r.header("cache-control"),
            Some("no-cache"),
            "[{rt}] the default"
        );
        // A 404 gets no rule headers, but CORS's.
        let r = request(&mut c, "GET", "/none.woff2", &[]);
        assert_eq!(r.status, 404, "[{rt}]");
        assert_eq!(r.header("cache-control"), None, "[{rt}]");
        assert_eq!(r.header("access-control-allow-origin"), Some("*"), "[{rt}]");
        // A preflight.
        let pre = [
            ("Origin", "https://example.com"),
            ("Access-Control-Request-Method", "GET"),
            ("Access-Control-Request-Headers", "x-a, content-type"),
        ];
        let r = request(&mut c, "OPTIONS", "/app.js", &pre);
        assert_eq!(r.status, 204, "[{rt}] {:?}", r.headers);
        assert!(r.body.is_empty() && r.header("content-length").is_none());
        assert_eq!(r.header("access-control-allow-origin"), Some("*"));
        assert_eq!(
            r.header("access-control-allow-methods"),
            Some("GET, HEAD, OPTIONS")
        );
        assert_eq!(
            r.header("access-control-allow-headers"),
            Some("x-a, content-type")
        );
        assert_eq!(r.header("access-control-max-age"), Some("86400"));
        // A plain OPTIONS is still answered with Allow.
        let r = request(&mut c, "OPTIONS", "/app.js", &[]);
        assert_eq!(r.status, 200, "[{rt}]");
        assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));
        assert_eq!(request(&mut c, "GET", "/app.js", &[]).body, b"let x;");
    }
    // An origin of one's own; without --cors nothing is added.
    let server = Server::start(
        "stackless",
        &["--root", root, "--cors", "https://a.example"],
    );
    let r = server.get("/app.js");
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://a.example")
    );
    let server = Server::start("stackless", &["--root", root]);
    let mut c = server.connect();
    let r = request(&mut c, "GET", "/app.js", &[]);
    assert_eq!(r.header("access-control-allow-origin"), None);
    let pre = [
        ("Origin", "https://x"),
        ("Access-Control-Request-Method", "GET"),
    ];
    assert_eq!(request(&mut c, "OPTIONS", "/app.js", &pre).status, 200);
}

#[test]
fn bad_rules_are_usage_errors() {
    let dir = TempDir::new("badrules");
    let root = dir.path().to_str().unwrap();
    for bad in [
        &["--header", "*.css"][..],
        &["--header", "*.css: Bad Name: v"],
        &["--header", "*.css: Content-Length: 1"],
        &["--cors", ""],
        &["--error-page", "200=/x.html"],
        &["--error-page", "404"],
        &["--fallback", "../x.html"],
    ] {
        // A port of its own: a refusal must be the flag's, not a bind's.
        let mut args = vec!["--root", root, "--bind", "127.0.0.1:0"];
        args.extend_from_slice(bad);
        let out = crate::harness::run_binary(&args, std::time::Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{bad:?}: {stderr}");
        assert!(
            stderr.contains("error") && stderr.contains(bad[0]),
            "{bad:?}: the refusal names the flag: {stderr}"
        );
    }
}

#[test]
fn fallback_and_error_pages() {
    let dir = TempDir::new("spa");
    let index = b"<div id=app></div>\n";
    let not_found = b"<h1>nothing here</h1>\n";
    let big_page = pattern(30 * 1024); // sent with sendfile
    dir.write("index.html", index);
    dir.write("404.html", not_found);
    dir.write("errors/403.bin", &big_page);
    dir.write("app.js", b"let x;");
    dir.write("docs/page.txt", b"page");
    let root = dir.path().to_str().unwrap();
    for rt in runtimes() {
        let server = Server::start(
            rt,
            &[
                "--root",
                root,
                "--fallback",
                "index.html",
                "--error-page",
                "404=/404.html",
                "--error-page",
                "403=errors/403.bin",
            ],
        );
        let mut c = server.connect();
        // Client-side routes get the app, with 200.
        for path in ["/users/12", "/about", "/v1.2/users", "/docs/none"] {
            let r = request(&mut c, "GET", path, &[]);
            assert_eq!(r.status, 200, "[{rt}] {path}");
            assert_eq!(r.body, index, "[{rt}] {path}");
            assert!(r.header("content-type").unwrap().starts_with("text/html"));
            let r = request(&mut c, "HEAD", path, &[]);
            assert_eq!(r.status, 200, "[{rt}] HEAD {path}");
            assert_eq!(r.header("content-length"), Some("19"), "[{rt}]");
        }
        // Existing files are themselves.
        assert_eq!(request(&mut c, "GET", "/app.js", &[]).body, b"let x;");
        assert_eq!(request(&mut c, "GET", "/docs/page.txt", &[]).body, b"page");
        // Missing paths that look like files: the 404 page, status kept.
        for path in ["/missing.js", "/docs/x.png"] {
            let r = request(&mut c, "GET", path, &[]);
            assert_eq!(r.status, 404, "[{rt}] {path}");
            assert_eq!(r.body, not_found, "[{rt}] {path}");
            assert!(r.header("content-type").unwrap().starts_with("text/html"));
            // Ranges and conditions do not apply to an error page.
            let r = request(&mut c, "GET", path, &[("Range", "bytes=0-1")]);
            assert_eq!((r.status, r.body.as_slice()), (404, &not_found[..]));
            let r = request(&mut c, "HEAD", path, &[]);
            assert_eq!(r.status, 404, "[{rt}] HEAD {path}");
            assert!(r.body.is_empty());
        }
        // A big error page (sendfile), for 403 (a directory without an
        // index, unlisted).
        let r = request(&mut c, "GET", "/docs/", &[]);
        assert_eq!(r.status, 403, "[{rt}]");
        assert!(r.body == big_page, "[{rt}] the 403 page differs");
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        // Other errors keep their plain answer.
        let r = request(&mut c, "GET", "/%2e%2e/x", &[]);
        // A `..` segment, once decoded, is refused by the path check.
        assert_eq!(r.status, 403, "[{rt}]");
        assert_eq!(request(&mut c, "GET", "/app.js", &[]).body, b"let x;");
    }
    // Without the flags: plain 404s.
    let server = Server::start("stackless", &["--root", root]);
    let r = server.get("/users/12");
    assert_eq!(r.status, 404);
    assert_ne!(r.body, index);
    // An error page without a fallback: client-side routes are 404 too.
    let server = Server::start("threads", &["--root", root, "--error-page", "404=404.html"]);
    let r = server.get("/users/12");
    assert_eq!((r.status, r.body.as_slice()), (404, &not_found[..]));
}
