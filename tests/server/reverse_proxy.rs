//! The reverse proxy (`--proxy`): heads and bodies both ways, real
//! clients (curl; Python's `http.client` and `websockets`, from the venv
//! `scripts/test.sh` makes), WebSocket tunnels, errors and their counters,
//! the pool of upstream connections, balancing and passive health,
//! smuggling refused before the upstream, and a large answer streamed with
//! flat memory. Against the test upstream in `reverse_proxy/upstream.rs`,
//! on every design.

pub(crate) mod upstream;

use std::time::{Duration, Instant};

use super::harness::*;
use upstream::TestUpstream;

fn proxy(rt: &str, routes: &[String], extra: &[&str]) -> Server {
    let mut args: Vec<&str> = Vec::new();
    for r in routes {
        args.extend(["--proxy", r.as_str()]);
    }
    args.extend(extra);
    Server::start(rt, &args)
}

fn header_line<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn heads_and_bodies_cross_both_ways() {
    for rt in runtimes() {
        let up = TestUpstream::start(None);
        let server = proxy(rt, &[format!("/api/={}", up.url())], &[]);
        let mut c = server.connect();

        let r = c.get("/api/fast");
        assert_eq!((r.status, r.text().as_str()), (200, "fast"), "[{rt}]");
        assert_eq!(r.header("X-Upstream"), Some("test"), "[{rt}]");
        assert!(
            r.header("Via").is_some_and(|v| v.ends_with("httplite")),
            "[{rt}] {r:?}"
        );

        // What the upstream received: hop-by-hop gone, forwarding added.
        c.send(
            b"GET /api/head?x=1 HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive, X-Hop\r\n\
              X-Hop: secret\r\nKeep-Alive: 5\r\nX-Forwarded-For: 6.6.6.6\r\nAccept: */*\r\n\r\n",
        );
        let r = c.read_response();
        let head = r.text();
        assert!(
            head.starts_with("GET /head?x=1 HTTP/1.1\r\n"),
            "[{rt}] {head}"
        );
        assert_eq!(
            header_line(&head, "host"),
            Some("example.com"),
            "[{rt}] {head}"
        );
        assert_eq!(header_line(&head, "accept"), Some("*/*"), "[{rt}]");
        assert_eq!(
            header_line(&head, "x-forwarded-for"),
            Some("127.0.0.1"),
            "[{rt}] {head}"
        );
        let proto = if server.is_https() { "https" } else { "http" };
        assert_eq!(
            header_line(&head, "x-forwarded-proto"),
            Some(proto),
            "[{rt}]"
        );
        assert!(
            header_line(&head, "forwarded").is_some_and(|f| f.starts_with("for=127.0.0.1;")),
            "[{rt}]"
        );
        for gone in ["X-Hop", "Keep-Alive", "Connection", "6.6.6.6"] {
            assert!(
                !head.contains(gone),
                "[{rt}] {gone} reached the upstream: {head}"
            );
        }

        // Bodies: a length, then chunked, echoed whole.
        let body = pseudo_random(1 << 20);
        let mut req = format!(
            "POST /api/echo HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(&body);
        c.send(&req);
        let r = c.read_response();
        assert_eq!(r.status, 200, "[{rt}]");
        assert!(r.body == body, "[{rt}] the 1 MiB body came back changed");
        c.send(b"POST /api/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
        let r = c.read_response();
        assert_eq!(r.text(), "abcdefg", "[{rt}]");
        let last = up.heads().last().cloned().unwrap();
        assert_eq!(
            header_line(&last, "transfer-encoding"),
            Some("chunked"),
            "[{rt}] {last}"
        );

        // Answers of unknown length are re-chunked for HTTP/1.1.
        let r = c.get("/api/chunked");
        assert_eq!((r.text().as_str(), r.chunked), ("abbccc", true), "[{rt}]");
        let r = c.get("/api/close-delimited");
        assert_eq!(
            (r.text().as_str(), r.chunked),
            ("until the end", true),
            "[{rt}]"
        );
        // Everything else is the site's: a path outside the prefix.
        assert_eq!(
            c.get("/_httplite/plaintext").text(),
            "Hello, World!",
            "[{rt}]"
        );
        // Still one client connection for all of it.
        assert_eq!(c.get("/api/fast").status, 200, "[{rt}]");
    }
}

#[test]
fn curl_gets_posts_ten_mib_and_uploads_chunked() {
    for rt in runtimes() {
        let up = TestUpstream::start(None);
        // Larger than the default --max-body (1 MiB), which applies to
        // proxied requests too.
        let server = proxy(
            rt,
            &[format!("/app={}", up.url())],
            &["--max-body", "16MiB"],
        );
        let dir = TempDir::new("proxy-curl");
        let big = pseudo_random(10 << 20);
        let file = dir.write("big.bin", &big);
        let curl = |args: &[&str]| {
            let out = (curl_command().args(["-sS", "--max-time", "30"]).args(args))
                .stdin(std::process::Stdio::null())
                .output()
                .expect("curl");
            assert!(
                out.status.success(),
                "[{rt}] curl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        };
        assert_eq!(curl(&[&server.url("/app/fast")]), b"fast", "[{rt}]");
        let at = format!("@{}", file.display());
        let echoed = curl(&["--data-binary", &at, &server.url("/app/echo")]);
        assert!(
            echoed == big,
            "[{rt}] 10 MiB POST: {} bytes back",
            echoed.len()
        );
        let echoed = curl(&[
            "-H",
            "Transfer-Encoding: chunked",
            "--data-binary",
            &at,
            &server.url("/app/echo"),
        ]);
        assert!(
            echoed == big,
            "[{rt}] chunked upload: {} bytes back",
            echoed.len()
        );
    }
}

#[test]
fn upstream_failures_answer_502_or_504_and_are_counted() {
    for rt in runtimes() {
        let up = TestUpstream::start(None);
        // A port nothing listens on: bound, then closed.
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let server = proxy(
            rt,
            &[
                format!("/up/={}", up.url()),
                format!("/dead/=http://{dead}"),
            ],
            &["--proxy-timeout-read", "300ms"],
        );
        let mut c = server.connect();
        let r = c.get("/dead/x");
        assert_eq!(r.status, 502, "[{rt}] refused: {r:?}");
        assert!(!r.says_close(), "[{rt}] the client's connection stays");
        let t = Instant::now();
        let r = c.get("/up/slow?ms=2000");
        assert_eq!(r.status, 504, "[{rt}] slow: {r:?}");
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "[{rt}] {:?}",
            t.elapsed()
        );
        let r = c.get("/up/malformed");
        assert_eq!(r.status, 502, "[{rt}] malformed: {r:?}");
        // Cut mid-body: the head is out, so the client sees the close.
        let mut c2 = server.connect();
        c2.send(&get_req("/up/cut"));
        assert!(
            c2.try_read_response(false).is_err(),
            "[{rt}] a cut answer must not look whole"
        );
        assert_eq!(
            c.get("/up/fast").status,
            200,
            "[{rt}] and the proxy carries on"
        );

        let stats = server.stats();
        let doc = stats.0.clone();
        for counted in [
            "\"connect_failed\":1",
            "\"read_timeout\":1",
            "\"malformed\":1",
            "\"closed_early\":1",
        ] {
            assert!(doc.contains(counted), "[{rt}] {counted} in {doc}");
        }
    }
}

#[test]
fn upstream_connections_are_pooled_and_an_idle_close_fails_nothing() {
    for rt in runtimes() {
        let up = TestUpstream::start(Some(Duration::from_millis(100)));
        let server = proxy(rt, &[format!("/p/={}", up.url())], &[]);
        let mut c = server.connect();
        for _ in 0..20 {
            assert_eq!(c.get("/p/fast").status, 200, "[{rt}]");
        }
        assert_eq!(
            up.accepted(),
            1,
            "[{rt}] 20 requests on one pooled connection"
        );
        // The upstream closes its idle connection; the next request must
        // not fail for it.
        std::thread::sleep(Duration::from_millis(300));
        for _ in 0..3 {
            assert_eq!(c.get("/p/fast").status, 200, "[{rt}]");
        }
        assert_eq!(up.accepted(), 2, "[{rt}]");
        assert!(server.stats().0.contains("\"reused\":"), "[{rt}]");
    }
}

#[test]
fn two_upstreams_share_the_load_and_a_dead_one_is_skipped() {
    for rt in runtimes() {
        let (a, b) = (TestUpstream::start(None), TestUpstream::start(None));
        let server = proxy(rt, &[format!("/lb/={},{}", a.url(), b.url())], &[]);
        for _ in 0..10 {
            assert_eq!(server.get("/lb/fast").status, 200, "[{rt}]");
        }
        let (na, nb) = (a.heads().len(), b.heads().len());
        assert!(
            na >= 3 && nb >= 3 && na + nb == 10,
            "[{rt}] round robin: {na} and {nb}"
        );
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let server = proxy(rt, &[format!("/lb/={},http://{dead}", a.url())], &[]);
        for i in 0..10 {
            assert_eq!(server.get("/lb/fast").status, 200, "[{rt}] request {i}");
        }
        let doc = server.stats().0;
        assert!(doc.contains("\"down\":true"), "[{rt}] {doc}");
    }
}

/// A WebSocket handshake through the proxy, with a first message sent in
/// the same write as the head.
fn websocket_open(server: &Server, path: &str, first: &[u8]) -> (Client, Response) {
    let key = "dGhlIHNhbXBsZSBub25jZQ==";
    let mut c = server.connect();
    let mut out = format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes();
    out.extend_from_slice(first);
    c.send(&out);
    let r = c.read_response();
    (c, r)
}

/// The next frame the server sends: opcode and payload.
fn read_frame(c: &mut Client) -> (u8, Vec<u8>) {
    let mut buf = c.read_bytes(2);
    let extra = match buf[1] & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    buf.extend(c.read_bytes(extra));
    let len = match extra {
        2 => usize::from(u16::from_be_bytes([buf[2], buf[3]])),
        8 => u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize,
        _ => usize::from(buf[1] & 0x7f),
    };
    buf.extend(c.read_bytes(len));
    let (opcode, payload, _) = upstream::frame(&buf).expect("a whole frame");
    (opcode, payload)
}

#[test]
fn a_websocket_upgrade_becomes_a_tunnel_until_either_side_closes() {
    for rt in runtimes() {
        let up = TestUpstream::start(None);
        let server = proxy(
            rt,
            &[format!("/app/={}", up.url())],
            &["--idle-timeout", "2s"],
        );
        let mask = [1, 2, 3, 4];
        let hello = upstream::client_frame(1, b"hello", mask);
        let (mut c, r) = websocket_open(&server, "/app/ws", &hello);
        assert_eq!(r.status, 101, "[{rt}] {r:?}");
        assert_eq!(r.header("Upgrade"), Some("websocket"), "[{rt}] {r:?}");
        assert!(
            r.header("Connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("upgrade")),
            "[{rt}] {r:?}"
        );
        assert_eq!(
            r.header("Sec-WebSocket-Accept"),
            Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            "[{rt}] RFC 6455's example key"
        );
        // The upstream got the upgrade, not the client's other hop fields.
        let head = up.heads().pop().unwrap();
        assert_eq!(
            header_line(&head, "upgrade"),
            Some("websocket"),
            "[{rt}] {head}"
        );
        assert_eq!(
            header_line(&head, "connection"),
            Some("upgrade"),
            "[{rt}] {head}"
        );
        // The message sent with the head, then messages both ways: a large
        // one crosses in many reads.
        assert_eq!(read_frame(&mut c), (1, b"hello".to_vec()), "[{rt}]");
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        c.send(&upstream::client_frame(2, &big, mask));
        let (opcode, echoed) = read_frame(&mut c);
        assert!(
            opcode == 2 && echoed == big,
            "[{rt}] {} bytes back",
            echoed.len()
        );
        c.send(&upstream::client_frame(1, b"again", mask));
        assert_eq!(read_frame(&mut c), (1, b"again".to_vec()), "[{rt}]");
        // The close handshake, then the upstream's end closes the client.
        c.send(&upstream::client_frame(8, &[3, 232], mask));
        assert_eq!(read_frame(&mut c), (8, vec![3, 232]), "[{rt}]");
        c.expect_closed(Duration::from_secs(3));
        let stats = server.stats();
        assert_eq!(stats.get("tunnels"), 1, "[{rt}] {}", stats.0);

        // A tunnel silent both ways for --idle-timeout closes.
        let (mut c, r) = websocket_open(&server, "/app/ws?hold", &[]);
        assert_eq!(r.status, 101, "[{rt}] {r:?}");
        let t = Instant::now();
        c.expect_closed(Duration::from_secs(5));
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(1500),
            "[{rt}] closed after {waited:?}, before the idle timeout"
        );

        // The client's end closes the upstream's side too: the next
        // tunnel's upstream connection is a new one, and the old one is
        // not reused for a plain request.
        let accepted = up.accepted();
        let (mut c, r) = websocket_open(&server, "/app/ws?hold", &[]);
        assert_eq!(r.status, 101, "[{rt}] {r:?}");
        c.shutdown_write();
        c.expect_closed(Duration::from_secs(3));
        assert_eq!(server.get("/app/fast").status, 200, "[{rt}]");
        assert_eq!(
            up.accepted(),
            accepted + 2,
            "[{rt}] a tunnel's socket was pooled"
        );
    }
}

/// The venv `scripts/test.sh` makes, with Python's `websockets`.
fn test_venv_python() -> std::path::PathBuf {
    let python =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: scripts/test.sh makes it (python3 -m venv, pip install websockets)",
        python.display()
    );
    python
}

#[test]
fn python_http_client_and_websockets_work_through_the_proxy() {
    let python = test_venv_python();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/server/reverse_proxy/python_clients.py");
    for rt in runtimes() {
        let up = TestUpstream::start(None);
        let server = proxy(rt, &[format!("/app/={}", up.url())], &[]);
        let (scheme, ca) = if server.is_https() {
            let ca = crate::pki::Pki::shared().0.ca().display().to_string();
            ("https", ca)
        } else {
            ("http", "-".to_string())
        };
        let base = format!("{scheme}://127.0.0.1:{}", server.addr().port());
        let out = std::process::Command::new("timeout")
            .arg("30")
            .arg(&python)
            .arg(&script)
            .args([&base, &ca])
            .output()
            .expect("python");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "[{rt}] {stdout}{stderr}");
        assert_eq!(
            stdout, "get 200 fast\npost 200 True\ntext hello\nbinary True\nclosed\n",
            "[{rt}] {stderr}"
        );
        assert_eq!(server.stats().get("tunnels"), 1, "[{rt}]");
    }
}

#[test]
fn a_client_that_leaves_while_the_upstream_thinks_cancels_the_request() {
    for rt in runtimes() {
        let up = TestUpstream::start(None);
        let server = proxy(rt, &[format!("/app/={}", up.url())], &[]);
        // A request that arrives while the upstream thinks (pipelined) is
        // kept for later: both are answered, in order.
        let mut c = server.connect();
        c.send(&get_req("/app/slow?ms=300"));
        std::thread::sleep(Duration::from_millis(100));
        c.send(&get_req("/app/fast"));
        assert_eq!(c.read_response().text(), "slow", "[{rt}]");
        assert_eq!(c.read_response().text(), "fast", "[{rt}]");
        // A client that closes while the upstream thinks (3 s) cancels the
        // request then, not when the answer comes.
        let mut c = server.connect();
        c.send(&get_req("/app/slow?ms=3000"));
        std::thread::sleep(Duration::from_millis(200));
        drop(c);
        let cancelled = wait_until(Duration::from_secs(2), Duration::from_millis(20), || {
            server.stats().get("upstreams.cancelled") == 1
        });
        assert!(cancelled, "[{rt}] {}", server.stats().0);
        assert_eq!(server.get("/app/fast").status, 200, "[{rt}]");
    }
}

#[test]
fn smuggling_attempts_never_reach_the_upstream() {
    for rt in runtimes() {
        let up = TestUpstream::start(None);
        let server = proxy(rt, &[format!("/s/={}", up.url())], &[]);
        for attempt in [
            &b"POST /s/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"[..],
            b"POST /s/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
            b"GET /s/fast HTTP/1.1\r\nHost: t\r\nX-A: b\r\n c\r\n\r\n",
        ] {
            let mut c = server.connect();
            c.send(attempt);
            assert_eq!(c.read_response().status, 400, "[{rt}] {:?}", String::from_utf8_lossy(attempt));
        }
        assert!(up.heads().is_empty(), "[{rt}] {:?}", up.heads());
    }
}

#[test]
fn a_large_answer_streams_through_with_flat_memory() {
    let _heavy = heavy_lock();
    for rt in runtimes().iter().copied().filter(|rt| !is_fork(rt)) {
        let up = TestUpstream::start(None);
        let server = proxy(rt, &[format!("/big={}", up.url())], &[]);
        let rss = || {
            let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
                .unwrap()
        };
        let mut c = server.connect();
        assert_eq!(c.get("/big/fast").status, 200);
        let before = rss();
        let n: u64 = 256 << 20;
        c.send(&get_req(&format!("/big/big?bytes={n}")));
        let r = c.read_response();
        assert_eq!(r.body.len() as u64, n, "[{rt}]");
        let grown = rss().saturating_sub(before);
        assert!(
            grown < 8 * 1024,
            "[{rt}] RSS grew by {grown} kB for a 256 MiB answer"
        );
    }
}

#[test]
fn bad_proxy_values_are_usage_errors() {
    for (value, says) in [
        ("/a", "PREFIX=URL"),
        ("/a=https://127.0.0.1:1", "TLS to an upstream"),
        ("a=http://127.0.0.1:1", "must start with '/'"),
    ] {
        let out = run_binary(
            &["--runtime", "threads", "--proxy", value],
            Duration::from_secs(10),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {err}");
        assert!(err.contains(says), "{value}: {err}");
    }
}

#[test]
fn the_access_log_names_each_upstream_its_status_and_time() {
    for rt in runtimes() {
        let up = TestUpstream::start(None);
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let dir = TempDir::new("proxy-log");
        let log = dir.path().join("access.log");
        let routes = [
            format!("/ok/={}", up.url()),
            format!("/dead/=http://{dead}"),
        ];
        let args = [
            "--access-log",
            log.to_str().unwrap(),
            "--access-log-format",
            "json",
        ];
        let mut server = proxy(rt, &routes, &args);
        let mut c = server.connect();
        assert_eq!(c.get("/ok/fast").status, 200, "[{rt}]");
        assert_eq!(c.get("/dead/x").status, 502, "[{rt}]");
        assert_eq!(c.get("/_httplite/plaintext").status, 200, "[{rt}]");
        drop(c);
        assert!(server.terminate().success(), "[{rt}]");
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "[{rt}] {text}");
        let ok = &lines[0]["upstream"];
        assert_eq!(
            ok["addr"],
            up.url().trim_start_matches("http://"),
            "[{rt}] {text}"
        );
        assert_eq!(ok["status"], 200, "[{rt}]");
        assert!(ok["time_us"].as_u64().is_some(), "[{rt}]");
        assert_eq!(lines[1]["status"], 502, "[{rt}]");
        assert_eq!(
            lines[1]["upstream"]["status"],
            serde_json::Value::Null,
            "[{rt}]"
        );
        assert_eq!(lines[1]["upstream"]["addr"], dead.to_string(), "[{rt}]");
        assert!(
            lines[2].get("upstream").is_none(),
            "[{rt}] the site's own line has none"
        );
    }
}
