//! The dashboard page (`/_httplite/`) and its Server-Sent Events
//! (`/_httplite/events`) on every runtime: the page and its policy, the
//! stream's events, the viewer gauge and bound, a viewer that stops
//! reading, and shutdown with viewers connected. (What the page shows is
//! checked in a real browser by scripts/browser-test.sh.)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::harness::{Server, TempDir, find, is_timeout, runtimes, wait_until};

/// A raw client of `/_httplite/events` that reads the stream by hand.
struct Viewer {
    stream: TcpStream,
    got: Vec<u8>,
}

impl Viewer {
    fn open(server: &Server) -> Viewer {
        let stream = TcpStream::connect(server.addr()).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut v = Viewer {
            stream,
            got: Vec::new(),
        };
        v.stream
            .write_all(
                b"GET /_httplite/events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n",
            )
            .unwrap();
        v
    }

    /// Reads until `n` `data:` events have arrived (or the deadline).
    fn read_events(&mut self, n: usize, within: Duration) -> usize {
        let end = Instant::now() + within;
        let mut buf = [0u8; 16 * 1024];
        while self.events() < n && Instant::now() < end {
            match self.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => self.got.extend_from_slice(&buf[..k]),
                Err(e) if is_timeout(&e) => break,
                Err(_) => break,
            }
        }
        self.events()
    }

    fn events(&self) -> usize {
        self.text().matches("\ndata: {").count()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.got).into_owned()
    }

    /// Reads to the end of the stream; true if it ended within `within`.
    fn ends_within(&mut self, within: Duration) -> bool {
        let end = Instant::now() + within;
        let mut buf = [0u8; 16 * 1024];
        self.stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        while Instant::now() < end {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(k) => self.got.extend_from_slice(&buf[..k]),
                Err(e) if is_timeout(&e) => {}
                Err(_) => return true, // reset: ended too
            }
        }
        false
    }
}

#[test]
fn dashboard_page_is_served_with_a_strict_policy_and_root_does_not_shadow_it() {
    for rt in runtimes() {
        let dir = TempDir::new("dashboard-root");
        dir.write("index.html", b"<p>the site's own index</p>");
        let root = dir.path().to_str().unwrap();
        for (args, index_is_dashboard) in [(vec![], true), (vec!["--root", root], false)] {
            let server = Server::start(rt, &args);
            // With a site, the dashboard is the admin listener's.
            let get = |path: &str| match index_is_dashboard {
                true => server.get(path),
                false => server.admin_get(path),
            };
            if !index_is_dashboard {
                assert_eq!(server.get("/_httplite/").status, 404, "[{rt}]");
            }
            let r = get("/_httplite/");
            assert_eq!(r.status, 200, "[{rt}] {args:?} {r:?}");
            assert!(
                r.header("content-type")
                    .unwrap_or("")
                    .starts_with("text/html")
            );
            let csp = r.header("content-security-policy").unwrap_or("");
            for part in [
                "default-src 'none'",
                "script-src 'self'",
                "connect-src 'self'",
            ] {
                assert!(csp.contains(part), "[{rt}] CSP {csp:?}");
            }
            assert!(!csp.contains("unsafe-inline"), "[{rt}] CSP {csp:?}");
            let body = r.text();
            assert!(body.contains("/_httplite/dashboard.js"), "[{rt}] {body}");
            let etag = r.header("etag").expect("an ETag").to_string();
            let js = get("/_httplite/dashboard.js");
            assert_eq!(js.status, 200, "[{rt}]");
            assert!(
                js.header("content-type")
                    .unwrap_or("")
                    .starts_with("text/javascript")
            );
            assert!(js.text().contains("/_httplite/events"), "[{rt}]");
            let css = get("/_httplite/dashboard.css");
            assert!(
                css.header("content-type")
                    .unwrap_or("")
                    .starts_with("text/css")
            );
            // Revalidation: the same tag back is a 304.
            let mut c = match index_is_dashboard {
                true => server.connect(),
                false => server.connect_admin(),
            };
            c.send(
                format!("GET /_httplite/ HTTP/1.1\r\nHost: t\r\nIf-None-Match: {etag}\r\n\r\n")
                    .as_bytes(),
            );
            let r = c.read_head_response();
            assert_eq!(r.status, 304, "[{rt}] {r:?}");
            // `/` is the dashboard without --root, the site's index with it.
            let index = server.get("/").text();
            assert_eq!(
                index.contains("/_httplite/dashboard.js"),
                index_is_dashboard,
                "[{rt}] {args:?} {index}"
            );
        }
    }
}

#[test]
fn events_stream_the_stats_and_count_their_viewers() {
    for rt in runtimes() {
        let server = Server::start(rt, &["--events-interval", "100ms"]);
        let mut v = Viewer::open(&server);
        assert_eq!(
            v.read_events(3, Duration::from_secs(10)),
            3,
            "[{rt}] {}",
            v.text()
        );
        let text = v.text();
        let head = &text[..find(text.as_bytes(), b"\r\n\r\n").expect("a head")];
        assert!(head.starts_with("HTTP/1.1 200 "), "[{rt}] {head}");
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains("content-type: text/event-stream"),
            "[{rt}] {head}"
        );
        assert!(
            lower.contains("transfer-encoding: chunked"),
            "[{rt}] {head}"
        );
        assert!(text.contains("retry: "), "[{rt}] {text}");
        assert!(
            text.contains("data: {\"state\":\"serving\""),
            "[{rt}] {text}"
        );
        let stats = server.stats();
        assert_eq!(stats.get("events.viewers"), 1, "[{rt}] {}", stats.0);
        assert_eq!(stats.get("events.total"), 1, "[{rt}] {}", stats.0);
        // The viewer leaves: the gauge goes back to zero, not counted as
        // an error.
        drop(v);
        let gone = wait_until(Duration::from_secs(5), Duration::from_millis(50), || {
            server.stats().get("events.viewers") == 0
        });
        let stats = server.stats();
        assert!(gone, "[{rt}] the viewer is still counted: {}", stats.0);
        assert_eq!(stats.get("errors.io"), 0, "[{rt}] {}", stats.0);
        // HEAD: the head alone.
        let mut c = server.connect();
        c.send(b"HEAD /_httplite/events HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.read_head_response();
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert_eq!(
            r.header("content-type"),
            Some("text/event-stream"),
            "[{rt}]"
        );
    }
}

#[test]
fn event_viewers_beyond_the_bound_are_refused() {
    for rt in runtimes() {
        let server = Server::start(rt, &["--max-event-viewers", "1"]);
        let mut first = Viewer::open(&server);
        assert!(first.read_events(1, Duration::from_secs(10)) >= 1, "[{rt}]");
        let r = server.get("/_httplite/events");
        assert_eq!(r.status, 503, "[{rt}] {r:?}");
        assert!(r.header("retry-after").is_some(), "[{rt}] {r:?}");
        let stats = server.stats();
        assert_eq!(stats.get("events.viewers"), 1, "[{rt}] {}", stats.0);
        assert_eq!(stats.get("errors.overloaded"), 1, "[{rt}] {}", stats.0);
        // The first one still streams.
        assert!(first.read_events(2, Duration::from_secs(10)) >= 2, "[{rt}]");
    }
}

#[test]
fn event_viewer_that_stops_reading_is_dropped_by_the_write_timeout() {
    for rt in runtimes() {
        // Events every 10 ms fill the socket buffers in seconds; then the
        // write timeout (1 s) must drop the viewer.
        let server = Server::start(rt, &["--events-interval", "10ms", "--write-timeout", "1s"]);
        let v = Viewer::open(&server);
        let dropped = wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
            let s = server.stats();
            s.get("timeouts.write") >= 1 && s.get("events.viewers") == 0
        });
        let stats = server.stats();
        assert!(dropped, "[{rt}] the viewer was not dropped: {}", stats.0);
        assert_eq!(stats.get("events.total"), 1, "[{rt}] {}", stats.0);
        drop(v);
        assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
    }
}

#[test]
fn shutdown_ends_event_streams_at_once() {
    for rt in runtimes() {
        // An interval far longer than the test: only shutdown can end it.
        let mut server = Server::start(rt, &["--events-interval", "60s"]);
        let mut v = Viewer::open(&server);
        assert_eq!(v.read_events(1, Duration::from_secs(10)), 1, "[{rt}]");
        let asked = Instant::now();
        server.signal(libc::SIGTERM);
        assert!(
            v.ends_within(Duration::from_secs(5)),
            "[{rt}] the stream outlived the drain"
        );
        // A clean end: the last chunk, not a cut.
        assert!(v.text().ends_with("\r\n0\r\n\r\n"), "[{rt}] {:?}", v.text());
        let status = server.wait_exit(Duration::from_secs(8));
        assert!(status.is_some_and(|s| s.success()), "[{rt}] {status:?}");
        assert!(asked.elapsed() < Duration::from_secs(8), "[{rt}]");
    }
}
