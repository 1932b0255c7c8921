//! The real `curl` against the server. These fail (never skip) when curl is
//! not installed.

use crate::harness::{Server, TempDir, curl, curl_path, runtimes};

/// Splits curl's `-i` / `-D -` output into (status, head text, body).
fn split_head(out: &[u8]) -> (u16, String, Vec<u8>) {
    let end = crate::harness::find(out, b"\r\n\r\n").expect("no header end in curl output");
    let head = String::from_utf8_lossy(&out[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("no status in curl output");
    (status, head, out[end + 4..].to_vec())
}

fn has_header(head: &str, name: &str, value: &str) -> bool {
    head.lines().any(|l| {
        l.split_once(':').is_some_and(|(n, v)| {
            n.trim().eq_ignore_ascii_case(name) && v.trim().eq_ignore_ascii_case(value)
        })
    })
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        l.split_once(':')
            .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    })
}

#[test]
fn curl_is_installed() {
    // Fails with a clear message rather than letting the others look green.
    let p = curl_path();
    let out = std::process::Command::new(&p)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success(), "{} --version failed", p.display());
}

#[test]
fn curl_get() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let out = curl(&["-i", &server.url("/_httplite/plaintext")]);
        let (status, head, body) = split_head(&out.stdout);
        assert_eq!(status, 200, "[{rt}] {head}");
        assert_eq!(body, b"Hello, World!", "[{rt}]");
        assert!(has_header(&head, "content-length", "13"), "[{rt}] {head}");
        let out = curl(&[&server.url("/_httplite/json")]);
        assert_eq!(out.stdout, br#"{"message":"Hello, World!"}"#, "[{rt}]");
        // HTTP/1.0 too.
        let out = curl(&["-0", &server.url("/_httplite/plaintext")]);
        assert_eq!(out.stdout, b"Hello, World!", "[{rt}]");
    }
}

#[test]
fn curl_head() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let out = curl(&["-I", &server.url("/_httplite/plaintext")]);
        let (status, head, body) = split_head(&out.stdout);
        assert_eq!(status, 200, "[{rt}] {head}");
        assert!(has_header(&head, "content-length", "13"), "[{rt}] {head}");
        assert!(body.is_empty(), "[{rt}] HEAD body: {body:?}");
    }
}

#[test]
fn curl_post_echo() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let url = server.url("/_httplite/echo");
        let out = curl(&["--data-binary", "hello curl", &url]);
        assert_eq!(out.stdout, b"hello curl", "[{rt}]");

        // A larger body from a file (curl sends Expect: 100-continue for it).
        let dir = TempDir::new("curl-post");
        let data: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let file = dir.write("body.bin", &data);
        let arg = format!("@{}", file.display());
        let out = curl(&[
            "--data-binary",
            &arg,
            "-H",
            "Content-Type: application/x-test",
            &url,
        ]);
        assert!(out.stdout == data, "[{rt}] echo of a 200 KB body differs");

        // Chunked upload.
        let out = curl(&[
            "-i",
            "-H",
            "Transfer-Encoding: chunked",
            "--data-binary",
            &arg,
            &url,
        ]);
        let (status, head, body) = split_head(&out.stdout);
        assert_eq!(status, 200, "[{rt}] {head}");
        assert!(
            has_header(&head, "transfer-encoding", "chunked"),
            "[{rt}] {head}"
        );
        assert!(body == data, "[{rt}] chunked echo via curl differs");
    }
}

#[test]
fn curl_reuses_the_keep_alive_connection() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let out = curl(&[
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-w",
            "%{num_connects}\n",
            &server.url("/_httplite/plaintext"),
            &server.url("/_httplite/json"),
        ]);
        let counts = String::from_utf8_lossy(&out.stdout).into_owned();
        let counts: Vec<&str> = counts.lines().collect();
        assert_eq!(
            counts,
            ["1", "0"],
            "[{rt}] the second transfer opened a new connection; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // And curl's own account of it.
        let out = curl(&[
            "-v",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            &server.url("/_httplite/plaintext"),
            &server.url("/"),
        ]);
        let verbose = String::from_utf8_lossy(&out.stderr);
        assert!(
            verbose.contains("Re-using existing connection"),
            "[{rt}] {verbose}"
        );
        let stats = server.stats();
        assert_eq!(stats.get("connections.total"), 3, "[{rt}] {}", stats.0);
    }
}

#[test]
fn curl_static_file_with_range() {
    for rt in runtimes() {
        let dir = TempDir::new("curl-range");
        dir.write("digits.txt", "0123456789".repeat(10).as_bytes());
        let server = Server::start(rt, &["--root", dir.path().to_str().unwrap()]);
        let url = server.url("/digits.txt");
        let out = curl(&["-i", "-r", "10-19", &url]);
        let (status, head, body) = split_head(&out.stdout);
        assert_eq!(status, 206, "[{rt}] {head}");
        assert_eq!(
            header(&head, "content-range"),
            Some("bytes 10-19/100"),
            "[{rt}]"
        );
        assert_eq!(body, b"0123456789", "[{rt}]");
        let out = curl(&["-r", "-5", &url]);
        assert_eq!(out.stdout, b"56789", "[{rt}]");
        let out = curl(&[
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-r",
            "200-300",
            &url,
        ]);
        assert_eq!(out.stdout, b"416", "[{rt}]");
    }
}

#[test]
fn curl_not_modified() {
    for rt in runtimes() {
        let dir = TempDir::new("curl-304");
        let file = dir.write("page.html", b"<p>cached</p>\n");
        let server = Server::start(rt, &["--root", dir.path().to_str().unwrap()]);
        let url = server.url("/page.html");
        let out = curl(&["-i", &url]);
        let (status, head, _) = split_head(&out.stdout);
        assert_eq!(status, 200, "[{rt}] {head}");
        let etag = header(&head, "etag").expect("no ETag").to_string();
        // curl -z FILE sends If-Modified-Since with the file's mtime.
        let z = file.to_str().unwrap();
        let out = curl(&["-s", "-o", "/dev/null", "-w", "%{http_code}", "-z", z, &url]);
        assert_eq!(out.stdout, b"304", "[{rt}] If-Modified-Since via curl -z");
        let inm = format!("If-None-Match: {etag}");
        let out = curl(&["-i", "-H", &inm, &url]);
        let (status, head, body) = split_head(&out.stdout);
        assert_eq!(status, 304, "[{rt}] {head}");
        assert!(body.is_empty(), "[{rt}]");
    }
}

#[test]
fn curl_404() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let out = curl(&[
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &server.url("/nope"),
        ]);
        assert_eq!(out.stdout, b"404", "[{rt}]");
        // --fail turns it into curl's exit code 22.
        let out = crate::harness::curl_command()
            .args(["-sS", "--fail", "--max-time", "10", &server.url("/nope")])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(22), "[{rt}] {out:?}");
    }
}
