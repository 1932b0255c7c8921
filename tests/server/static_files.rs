//! `--root DIR`: files, types, directories, conditional and range requests,
//! listings, and traversal attempts.

use std::time::Duration;

use crate::harness::{Client, Server, TempDir, get_req, kernel_has_openat2, runtimes};

const SECRET: &str = "TOP-SECRET-OUTSIDE-THE-ROOT";

/// A site:
///
/// ```text
/// base/
///   outside/secret.txt          (must never be served)
///   site/                       (the root)
///     index.html  a.txt  style.css  app.js  data.json  pic.png  noext
///     digits.txt  (0123456789 x 10)
///     empty.txt
///     withindex/index.html
///     plain/inner.txt           (no index)
///     out -> ../outside/secret.txt
///     outdir -> ../outside
///     inlink -> a.txt
/// ```
struct Site {
    base: TempDir,
}

impl Site {
    fn new() -> Site {
        let base = TempDir::new("site");
        base.write("outside/secret.txt", SECRET.as_bytes());
        base.write("site/index.html", b"<h1>home</h1>\n");
        base.write("site/a.txt", b"hello from a\n");
        base.write("site/style.css", b"body{}\n");
        base.write("site/app.js", b"let x = 1;\n");
        base.write("site/data.json", b"{\"k\":1}\n");
        base.write("site/pic.png", b"\x89PNG\r\n\x1a\n");
        base.write("site/noext", b"raw\n");
        base.write("site/digits.txt", "0123456789".repeat(10).as_bytes());
        base.write("site/empty.txt", b"");
        base.write("site/withindex/index.html", b"<p>sub index</p>\n");
        base.write("site/plain/inner.txt", b"inner\n");
        base.write("site/with space.txt", b"spaced\n");
        let site = base.path().join("site");
        std::os::unix::fs::symlink("../outside/secret.txt", site.join("out")).unwrap();
        std::os::unix::fs::symlink("../outside", site.join("outdir")).unwrap();
        std::os::unix::fs::symlink("a.txt", site.join("inlink")).unwrap();
        Site { base }
    }

    fn root(&self) -> String {
        self.base.path().join("site").to_str().unwrap().to_string()
    }
}

fn send(c: &mut Client, method: &str, path: &str, headers: &[(&str, &str)]) {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    c.send(req.as_bytes());
}

fn get_with(c: &mut Client, path: &str, headers: &[(&str, &str)]) -> crate::harness::Response {
    send(c, "GET", path, headers);
    c.read_response()
}

#[test]
fn files_are_served_with_their_content_type() {
    for rt in runtimes() {
        let site = Site::new();
        let server = Server::start(rt, &["--root", &site.root()]);
        let mut c = server.connect();
        let cases = [
            ("/a.txt", "text/plain", "hello from a\n"),
            ("/index.html", "text/html", "<h1>home</h1>\n"),
            ("/style.css", "text/css", "body{}\n"),
            ("/app.js", "javascript", "let x = 1;\n"),
            ("/data.json", "application/json", "{\"k\":1}\n"),
            ("/pic.png", "image/png", "\u{fffd}PNG\r\n\u{1a}\n"),
            // Typed by the link's own name (no extension) where the kernel
            // has openat2; by its target's (a.txt) where the pre-5.6
            // fallback canonicalises the path first.
            (
                "/inlink",
                match kernel_has_openat2() {
                    true => "application/octet-stream",
                    false => "text/plain",
                },
                "hello from a\n",
            ),
            ("/with%20space.txt", "text/plain", "spaced\n"),
            ("/a.txt?query=ignored", "text/plain", "hello from a\n"),
            ("/plain/./inner.txt", "text/plain", "inner\n"),
        ];
        for (path, ctype, body) in cases {
            let r = c.get(path);
            assert_eq!(r.status, 200, "[{rt}] GET {path}: {r:?}");
            assert_eq!(r.text(), body, "[{rt}] GET {path}");
            let got = r.header("content-type").unwrap_or("");
            assert!(
                got.contains(ctype),
                "[{rt}] GET {path}: Content-Type {got:?}, expected {ctype:?}"
            );
            assert!(r.header("last-modified").is_some(), "[{rt}] {path}: {r:?}");
            assert!(r.header("etag").is_some(), "[{rt}] {path}: {r:?}");
        }
        let r = c.get("/noext");
        assert_eq!(r.status, 200, "[{rt}]");
        assert!(
            r.header("content-type").is_some(),
            "[{rt}] no Content-Type: {r:?}"
        );
        let r = c.get("/empty.txt");
        assert_eq!(r.status, 200, "[{rt}]");
        assert_eq!(r.header("content-length"), Some("0"), "[{rt}]");
        // HEAD: the GET's length, no body (checked by pipelining a GET).
        let mut req = b"HEAD /digits.txt HTTP/1.1\r\nHost: t\r\n\r\n".to_vec();
        req.extend_from_slice(&get_req("/a.txt"));
        c.send(&req);
        let head = c.read_head_response();
        assert_eq!(head.status, 200, "[{rt}]");
        assert_eq!(
            head.header("content-length"),
            Some("100"),
            "[{rt}] {head:?}"
        );
        let r = c.read_response();
        assert_eq!(r.body, b"hello from a\n", "[{rt}] HEAD carried a body");
    }
}

/// The exact `Content-Type` per extension (site::mime's rules: nginx's
/// types, `charset=utf-8` on text types, octet-stream when unknown).
#[test]
fn content_types_are_exact() {
    let base = TempDir::new("types");
    let cases = [
        ("s.css", "text/css; charset=utf-8"),
        ("m.JS", "text/javascript; charset=utf-8"),
        ("i.svg", "image/svg+xml"),
        ("f.woff2", "font/woff2"),
        ("w.wasm", "application/wasm"),
        ("d.json", "application/json"),
        ("t.txt", "text/plain; charset=utf-8"),
        ("r.md", "text/markdown; charset=utf-8"),
        ("a.tar.gz", "application/gzip"),
        ("x.unknownext", "application/octet-stream"),
        (".hidden", "application/octet-stream"),
    ];
    for (name, _) in cases {
        base.write(name, b"x");
    }
    let root = base.path().to_str().unwrap().to_string();
    for rt in runtimes() {
        let server = Server::start(rt, &["--root", &root]);
        let mut c = server.connect();
        for (name, want) in cases {
            let r = c.get(&format!("/{name}"));
            assert_eq!(r.status, 200, "[{rt}] GET /{name}: {r:?}");
            assert_eq!(r.header("content-type"), Some(want), "[{rt}] /{name}");
        }
    }
}

#[test]
fn directories_index_redirect_and_listing() {
    for rt in runtimes() {
        let site = Site::new();
        let server = Server::start(rt, &["--root", &site.root()]);
        let mut c = server.connect();
        let r = c.get("/");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"<h1>home</h1>\n", "[{rt}]");
        let r = c.get("/withindex/");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"<p>sub index</p>\n", "[{rt}]");
        let r = c.get("/withindex");
        assert_eq!(r.status, 301, "[{rt}] {r:?}");
        assert_eq!(r.header("location"), Some("/withindex/"), "[{rt}] {r:?}");
        let r = c.get("/withindex?a=b");
        assert_eq!(r.status, 301, "[{rt}] {r:?}");
        assert_eq!(
            r.header("location"),
            Some("/withindex/?a=b"),
            "[{rt}] {r:?}"
        );
        // No index.html and no --list-dirs: refused.
        let r = c.get("/plain/");
        assert_eq!(r.status, 403, "[{rt}] {r:?}");
        assert!(
            !r.text().contains("inner.txt"),
            "[{rt}] listed without --list-dirs"
        );
        // Missing.
        for path in ["/missing.txt", "/plain/missing", "/a.txt/child"] {
            let r = c.get(path);
            assert_eq!(r.status, 404, "[{rt}] GET {path}: {r:?}");
        }

        let server = Server::start(rt, &["--root", &site.root(), "--list-dirs"]);
        let mut c = server.connect();
        let r = c.get("/plain/");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert!(r.header("content-type").unwrap_or("").contains("text/html"));
        assert!(
            r.text().contains("inner.txt"),
            "[{rt}] listing: {}",
            r.text()
        );
        // index.html still wins over a listing.
        assert_eq!(c.get("/withindex/").body, b"<p>sub index</p>\n", "[{rt}]");
    }
}

#[test]
fn methods_with_a_root_and_the_endpoints_on_the_admin_listener() {
    for rt in runtimes() {
        let site = Site::new();
        let server = Server::start(rt, &["--root", &site.root()]);
        let mut c = server.connect();
        // The endpoints are the admin listener's (exposure.rs has the rest).
        assert_eq!(c.get("/_httplite/plaintext").status, 404, "[{rt}]");
        assert_eq!(
            server.admin_get("/_httplite/plaintext").body,
            b"Hello, World!",
            "[{rt}]"
        );
        // A method files do not take: 405 where a file is, 404 where none is.
        c.send(b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
        let r = c.read_response();
        assert_eq!(r.status, 405, "[{rt}] {r:?}");
        assert!(
            r.header("allow").unwrap_or("").contains("GET"),
            "[{rt}] {r:?}"
        );
        c.send(b"POST /missing.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
        let r = c.read_response();
        assert_eq!(r.status, 404, "[{rt}] {r:?}");
        assert_eq!(c.get("/a.txt").status, 200, "[{rt}]");
    }
}

#[test]
fn conditional_requests_get_304() {
    for rt in runtimes() {
        let site = Site::new();
        let server = Server::start(rt, &["--root", &site.root()]);
        let mut c = server.connect();
        let r = c.get("/a.txt");
        assert_eq!(r.status, 200, "[{rt}]");
        let lm = r.header("last-modified").unwrap().to_string();
        let etag = r.header("etag").unwrap().to_string();

        let r = get_with(&mut c, "/a.txt", &[("If-Modified-Since", &lm)]);
        assert_eq!(r.status, 304, "[{rt}] If-Modified-Since {lm}: {r:?}");
        assert!(r.body.is_empty(), "[{rt}]");
        assert_eq!(r.header("etag"), Some(etag.as_str()), "[{rt}] {r:?}");

        let r = get_with(&mut c, "/a.txt", &[("If-None-Match", &etag)]);
        assert_eq!(r.status, 304, "[{rt}] If-None-Match {etag}: {r:?}");
        let r = get_with(
            &mut c,
            "/a.txt",
            &[("If-None-Match", &format!("\"x\", {etag}"))],
        );
        assert_eq!(r.status, 304, "[{rt}] etag in a list: {r:?}");
        let r = get_with(&mut c, "/a.txt", &[("If-None-Match", "*")]);
        assert_eq!(r.status, 304, "[{rt}] If-None-Match *: {r:?}");

        // Stale validators: the full file.
        let r = get_with(&mut c, "/a.txt", &[("If-None-Match", "\"nope\"")]);
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body, b"hello from a\n");
        let r = get_with(
            &mut c,
            "/a.txt",
            &[("If-Modified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")],
        );
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        // If-None-Match wins over If-Modified-Since.
        let r = get_with(
            &mut c,
            "/a.txt",
            &[("If-None-Match", "\"nope\""), ("If-Modified-Since", &lm)],
        );
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        // A HEAD gets 304 too, and the connection carries on.
        send(&mut c, "HEAD", "/a.txt", &[("If-None-Match", &etag)]);
        assert_eq!(c.read_head_response().status, 304, "[{rt}]");
        assert_eq!(c.get("/a.txt").status, 200, "[{rt}]");
    }
}

#[test]
fn single_ranges_get_206_and_unsatisfiable_416() {
    for rt in runtimes() {
        let site = Site::new();
        let server = Server::start(rt, &["--root", &site.root()]);
        let mut c = server.connect();
        let digits = "0123456789".repeat(10);
        let cases = [
            ("bytes=0-4", "bytes 0-4/100", &digits[0..5]),
            ("bytes=95-", "bytes 95-99/100", &digits[95..]),
            ("bytes=-3", "bytes 97-99/100", &digits[97..]),
            ("bytes=10-10", "bytes 10-10/100", &digits[10..11]),
            ("bytes=90-500", "bytes 90-99/100", &digits[90..]),
        ];
        for (range, content_range, body) in cases {
            let r = get_with(&mut c, "/digits.txt", &[("Range", range)]);
            assert_eq!(r.status, 206, "[{rt}] Range {range}: {r:?}");
            assert_eq!(
                r.header("content-range"),
                Some(content_range),
                "[{rt}] {range}"
            );
            assert_eq!(
                r.header("content-length"),
                Some(body.len().to_string().as_str()),
                "[{rt}] {range}"
            );
            assert_eq!(r.text(), body, "[{rt}] Range {range}");
        }
        for range in ["bytes=100-", "bytes=500-600", "bytes=-0"] {
            let r = get_with(&mut c, "/digits.txt", &[("Range", range)]);
            assert_eq!(r.status, 416, "[{rt}] Range {range}: {r:?}");
            assert_eq!(
                r.header("content-range"),
                Some("bytes */100"),
                "[{rt}] {range}"
            );
        }
        // Overlapping ranges, or not bytes: the whole file.
        for range in ["bytes=0-5,3-6", "lines=1-2"] {
            let r = get_with(&mut c, "/digits.txt", &[("Range", range)]);
            assert_eq!(r.status, 200, "[{rt}] Range {range}: {r:?}");
            assert_eq!(r.body.len(), 100, "[{rt}] Range {range}");
        }
        // If-Range with the current ETag honours the range; a stale one
        // gets the whole file.
        let etag = c.get("/digits.txt").header("etag").unwrap().to_string();
        let r = get_with(
            &mut c,
            "/digits.txt",
            &[("Range", "bytes=0-1"), ("If-Range", &etag)],
        );
        assert_eq!(r.status, 206, "[{rt}] {r:?}");
        let r = get_with(
            &mut c,
            "/digits.txt",
            &[("Range", "bytes=0-1"), ("If-Range", "\"stale\"")],
        );
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.body.len(), 100, "[{rt}]");
    }
}

/// Traversal attempts (plain, percent-encoded, encoded slash, NUL,
/// symlinks leading out) get a 4xx and never the file.
#[test]
fn traversal_attempts_are_refused() {
    for rt in runtimes() {
        let site = Site::new();
        let server = Server::start(rt, &["--root", &site.root(), "--list-dirs"]);
        let attempts = [
            "/../outside/secret.txt",
            "/../../../../../../etc/passwd",
            "/plain/../../outside/secret.txt",
            "/%2e%2e/outside/secret.txt",
            "/%2E%2E/outside/secret.txt",
            "/.%2e/outside/secret.txt",
            "/..%2foutside%2fsecret.txt",
            "/plain/..%2f..%2foutside/secret.txt",
            "/%2e%2e%2foutside%2fsecret.txt",
            "/plain%2f..%2f..%2foutside%2fsecret.txt",
            "/..\\outside\\secret.txt",
            "/a.txt%00.html",
            "/%00",
            "/plain/%00/../../outside/secret.txt",
            "/out",
            "/outdir/secret.txt",
            "/outdir/",
            "/outdir",
            "//../outside/secret.txt",
        ];
        for path in attempts {
            let mut c = server.connect();
            c.send(&get_req(path));
            let r = match c.try_read_response(false) {
                Ok(r) => r,
                Err(e) => panic!("[{rt}] GET {path}: no response ({e})"),
            };
            assert!(
                (400..500).contains(&r.status),
                "[{rt}] GET {path}: expected a 4xx, got {r:?}"
            );
            assert!(
                !r.text().contains(SECRET) && !r.text().contains("secret.txt"),
                "[{rt}] GET {path} leaked the outside: {}",
                r.text()
            );
        }
        // Absolute-form and odd targets are no way out either.
        for target in ["../outside/secret.txt", "*"] {
            let mut c = server.connect();
            c.send(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            let r = c
                .try_read_response(false)
                .unwrap_or_else(|e| panic!("[{rt}] GET {target}: no response ({e})"));
            assert!(
                (400..500).contains(&r.status),
                "[{rt}] GET {target}: expected a 4xx, got {r:?}"
            );
            assert!(!r.text().contains(SECRET), "[{rt}] GET {target} leaked");
        }
        // The server is fine afterwards.
        let mut c = server.connect();
        assert_eq!(c.get("/a.txt").status, 200, "[{rt}]");
        c.expect_open(Duration::from_millis(20));
    }
}

/// `--list-dirs`: the size sort puts the largest file first, dotfiles are
/// hidden unless `--show-hidden`, names are escaped, and the page is never
/// cached without revalidation.
#[test]
fn listings_sort_hide_dotfiles_and_escape() {
    for rt in runtimes() {
        let base = TempDir::new("listing");
        base.write("d/small.txt", b"s");
        base.write("d/large.bin", &vec![b'x'; 40_000]);
        base.write("d/medium.dat", &vec![b'x'; 2_000]);
        base.write("d/<b>&.txt", b"tag");
        base.write("d/.secret", b"dot");
        base.write("d/sub/inner.txt", b"inner");
        let root = base.path().join("d");
        let root = root.to_str().unwrap();

        let server = Server::start(rt, &["--root", root, "--list-dirs"]);
        let mut c = server.connect();
        let r = c.get("/?sort=size&order=desc");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(r.header("cache-control"), Some("no-store"), "[{rt}] {r:?}");
        assert_eq!(r.header("etag"), None, "[{rt}] {r:?}");
        let html = r.text();
        let at = |name: &str| {
            html.find(&format!(">{name}<"))
                .unwrap_or_else(|| panic!("[{rt}] {name} not listed: {html}"))
        };
        // The directory first, then the largest file down to the smallest.
        assert!(at("sub/") < at("large.bin"), "[{rt}] {html}");
        assert!(at("large.bin") < at("medium.dat"), "[{rt}] {html}");
        assert!(at("medium.dat") < at("&lt;b&gt;&amp;.txt"), "[{rt}] {html}");
        assert!(at("&lt;b&gt;&amp;.txt") < at("small.txt"), "[{rt}] {html}");
        // Ascending: the other way round.
        let html = c.get("/?sort=size&order=asc").text();
        let at = |name: &str| {
            html.find(&format!(">{name}<"))
                .unwrap_or_else(|| panic!("[{rt}] {name} not listed: {html}"))
        };
        assert!(at("small.txt") < at("large.bin"), "[{rt}] {html}");
        // Escaped, and its link percent-encoded (it is served from there).
        let html = c.get("/").text();
        assert!(html.contains("href=\"%3Cb%3E%26.txt\""), "[{rt}] {html}");
        assert!(!html.contains("<b>&"), "[{rt}] unescaped: {html}");
        assert_eq!(c.get("/%3Cb%3E%26.txt").body, b"tag", "[{rt}]");
        // Dotfiles hidden by default.
        assert!(!html.contains(".secret"), "[{rt}] {html}");
        // A subdirectory has a parent link.
        let html = c.get("/sub/").text();
        assert!(html.contains("href=\"../\""), "[{rt}] {html}");
        drop(server);

        let server = Server::start(rt, &["--root", root, "--list-dirs", "--show-hidden"]);
        let html = server.connect().get("/").text();
        assert!(html.contains("href=\".secret\""), "[{rt}] {html}");
    }
}
