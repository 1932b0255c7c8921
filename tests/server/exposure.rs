//! The public listener and the admin one (`--admin`, `--expose`,
//! `--health`): with a `--root` the public listener answers the site only,
//! a hidden endpoint exactly as a missing file; the admin listener (TCP
//! and Unix socket) answers the endpoints as demo mode does. Also the
//! bounds that hold on every listener, and TLS's suite order.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::harness::*;
use super::pki::{Pki, tls_connect};

/// A site with one file.
fn site() -> TempDir {
    let dir = TempDir::new("exposure");
    dir.write("a.txt", b"a file\n");
    dir
}

/// `head` (a request line) sent with `body` on a fresh connection that
/// asks to be closed.
fn request(line: &str, body: &[u8]) -> Vec<u8> {
    let mut req = format!("{line} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    if !body.is_empty() || line.starts_with("POST") {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    let mut req = req.into_bytes();
    req.extend_from_slice(body);
    req
}

/// What a client can see of an answer, less what differs between two
/// answers by nature (`Date`): status, header names and values, body.
fn seen(r: &Response) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let headers = (r.headers.iter())
        .filter(|(n, _)| !n.eq_ignore_ascii_case("date"))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    (r.status, headers, r.body.clone())
}

/// The requests an endpoint gets, and what answers them on a listener
/// that serves it: (request line, body, status, a piece of the body).
const ENDPOINTS: &[(&str, &[u8], u16, &str)] = &[
    ("GET /_httplite/stats", b"", 200, "\"requests\""),
    ("GET /_httplite/", b"", 200, "<html"),
    ("POST /_httplite/jobs?type=sha256", b"abc", 202, "\"id\""),
    ("POST /_httplite/echo", b"echoed", 200, "echoed"),
    ("GET /_httplite/sleep?ms=1", b"", 200, "slept 1 ms"),
    ("GET /_httplite/plaintext", b"", 200, "Hello, World!"),
    ("GET /_httplite/health", b"", 200, "ok"),
];

/// One request over a Unix socket: (status, the whole answer).
fn unix_request(path: &Path, req: &[u8]) -> (u16, String) {
    let mut s = UnixStream::connect(path).expect("connect to the admin socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read the answer");
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[test]
fn with_a_root_the_public_listener_hides_every_endpoint() {
    for rt in runtimes() {
        let site = site();
        let dir = TempDir::new("exposure-admin");
        let sock = dir.path().join("admin.sock");
        let sock_arg = format!("unix:{}", sock.display());
        let server = Server::start(
            rt,
            &[
                "--root",
                &site.path().display().to_string(),
                "--admin",
                "127.0.0.1:0",
                "--admin",
                &sock_arg,
            ],
        );
        for (line, body, status, piece) in ENDPOINTS {
            // Public: as the same path with the prefix misspelt.
            let missing = line.replace("/_httplite/", "/_httplitx/");
            let hidden = {
                let mut c = server.connect();
                c.send(&request(line, body));
                c.read_response()
            };
            let absent = {
                let mut c = server.connect();
                c.send(&request(&missing, body));
                c.read_response()
            };
            assert_eq!(hidden.status, 404, "[{rt}] {line}: {hidden:?}");
            assert_eq!(seen(&hidden), seen(&absent), "[{rt}] {line}");
            // Admin over TCP and over the Unix socket: as in demo mode.
            let status = *status;
            let mut c = server.connect_admin();
            c.send(&request(line, body));
            let r = c.read_response();
            assert_eq!(r.status, status, "[{rt}] admin {line}: {r:?}");
            if status < 300 {
                assert!(r.text().contains(piece), "[{rt}] admin {line}: {r:?}");
            }
            let (unix_status, text) = unix_request(&sock, &request(line, body));
            assert_eq!(unix_status, status, "[{rt}] unix admin {line}: {text}");
            if status < 300 {
                assert!(text.contains(piece), "[{rt}] unix admin {line}: {text}");
            }
        }
        // The site is the public listener's, and the admin's `/` is the
        // dashboard, never a file.
        assert_eq!(server.get("/a.txt").text(), "a file\n", "[{rt}]");
        let admin = server.admin_get("/a.txt");
        assert_eq!(admin.status, 404, "[{rt}] {admin:?}");
        assert!(server.admin_get("/").text().contains("<html"), "[{rt}]");
        // The stats count each listener's connections: a fresh one per
        // request here, 2 public per endpoint plus the file's, the rest
        // on the admin listener (TCP and Unix).
        let stats = server.stats();
        let public = stats.get("listeners.public.connections");
        assert_eq!(public, 2 * ENDPOINTS.len() as u64 + 1, "[{rt}] {}", stats.0);
        assert!(
            stats.get("listeners.admin.connections") >= 2 * ENDPOINTS.len() as u64 + 2,
            "[{rt}] {}",
            stats.0
        );
    }
}

#[test]
fn expose_puts_back_what_it_names_and_nothing_else() {
    for rt in runtimes() {
        let site = site();
        let root = site.path().display().to_string();
        let server = Server::start(rt, &["--root", &root, "--expose", "stats"]);
        let r = server.get("/_httplite/stats");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert!(r.text().contains("\"requests\""), "[{rt}]");
        for path in ["/_httplite/plaintext", "/_httplite/", "/_httplite/health"] {
            assert_eq!(server.get(path).status, 404, "[{rt}] {path}");
        }
        assert!(
            server
                .stderr()
                .contains("warning: --expose serves stats on the public listener"),
            "[{rt}] {}",
            server.stderr()
        );
    }
}

#[test]
fn health_path_answers_on_the_public_listener_and_fails_during_the_drain() {
    for rt in runtimes() {
        let site = site();
        let root = site.path().display().to_string();
        // `fork` has no drain delay (its parent stops at once): the
        // health answer only.
        let mut args = vec!["--root", root.as_str(), "--health", "/healthz"];
        if !is_fork(rt) {
            args.extend(["--drain-delay", "5s"]);
        }
        let mut server = Server::start(rt, &args);
        let ok = server.connect().get("/healthz");
        assert_eq!((ok.status, ok.text().as_str()), (200, "ok\n"), "[{rt}]");
        assert!(!ok.says_close(), "[{rt}]");
        assert_eq!(server.get("/_httplite/health").status, 404, "[{rt}]");
        if is_fork(rt) {
            println!("[{rt}] skipped: the drain half (fork has no --drain-delay)");
            continue;
        }
        server.signal(libc::SIGTERM);
        let draining = wait_until(Duration::from_secs(3), Duration::from_millis(10), || {
            server.connect().get("/healthz").status == 503
        });
        assert!(draining, "[{rt}] /healthz still 200 after SIGTERM");
        let r = server.connect().get("/healthz");
        assert!(r.says_close(), "[{rt}] 503 without Connection: close");
        assert_eq!(r.text(), "draining\n", "[{rt}]");
        // The site is served as before during the delay.
        assert_eq!(server.get("/a.txt").status, 200, "[{rt}]");
        server.signal(libc::SIGTERM);
        assert!(
            server.wait_exit(Duration::from_secs(10)).is_some(),
            "[{rt}] did not stop"
        );
    }
}

/// `--pool-queue` bounds the sleeps and the jobs on every listener, a job's
/// body is bounded by `--max-body`, and a flood of them leaves the
/// constant answers as fast as ever.
#[test]
fn sleeps_and_jobs_are_bounded_and_plaintext_still_answers_at_once() {
    for rt in runtimes() {
        if is_fork(rt) {
            // Each connection is a child process (bounded by
            // --max-connections), whose sleep no pool bound holds.
            println!("[{rt}] skipped: a sleep is its child's own, not bounded by --pool-queue");
            continue;
        }
        let server = Server::start(
            rt,
            &[
                "--pool-queue",
                "4",
                "--pool-threads",
                "1",
                "--max-body",
                "1KiB",
            ],
        );
        // Four sleeps fill the bound; the fifth is 503.
        let mut sleepers: Vec<Client> = (0..4)
            .map(|_| {
                let mut c = server.connect();
                c.send(&get_req("/_httplite/sleep?ms=8000"));
                c
            })
            .collect();
        let asleep = wait_until(Duration::from_secs(10), Duration::from_millis(10), || {
            server.stats().get("sleeping") == 4
        });
        assert!(asleep, "[{rt}] {}", server.stats().0);
        let r = server.get("/_httplite/sleep?ms=8000");
        assert_eq!(r.status, 503, "[{rt}] {r:?}");
        assert_eq!(r.header("retry-after"), Some("1"), "[{rt}]");
        // One job runs (the test kind `sleep` holds the one thread), then
        // four wait; the sixth is 503.
        let submit = || {
            let mut c = server.connect();
            c.send(&request("POST /_httplite/jobs?type=sleep", b"8000"));
            c.read_response().status
        };
        assert_eq!(submit(), 202, "[{rt}]");
        let running = wait_until(Duration::from_secs(10), Duration::from_millis(10), || {
            server.stats().get("jobs.running") == 1
        });
        assert!(running, "[{rt}] {}", server.stats().0);
        let statuses: Vec<u16> = (0..5).map(|_| submit()).collect();
        assert_eq!(statuses, [202, 202, 202, 202, 503], "[{rt}]");
        // A body over --max-body never reaches the pool.
        let mut c = server.connect();
        c.send(&request("POST /_httplite/jobs?type=sha256", &[b'x'; 2048]));
        assert_eq!(c.read_response().status, 413, "[{rt}]");
        // The constant answer on a fresh connection: at once (the best of
        // three tries, so that one slow spell of a shared machine does not
        // decide).
        let best = (0..3)
            .map(|_| {
                let t = Instant::now();
                assert_eq!(server.get("/_httplite/plaintext").status, 200, "[{rt}]");
                t.elapsed()
            })
            .min()
            .unwrap();
        assert!(
            best < Duration::from_millis(100),
            "[{rt}] plaintext took {best:?} beside the flood"
        );
        for c in &mut sleepers {
            c.shutdown_write();
        }
    }
}

#[test]
fn the_access_log_names_the_listener() {
    for rt in runtimes() {
        let site = site();
        let root = site.path().display().to_string();
        let logs = TempDir::new("exposure-log");
        let log = logs.path().join("access.log");
        let log_arg = log.display().to_string();
        let server = Server::start(
            rt,
            &[
                "--root",
                &root,
                "--access-log",
                &log_arg,
                "--access-log-format",
                "json",
            ],
        );
        assert_eq!(server.get("/a.txt").status, 200, "[{rt}]");
        assert_eq!(server.admin_get("/_httplite/health").status, 200, "[{rt}]");
        // Stopping flushes every worker's buffered lines.
        let mut server = server;
        assert_eq!(server.terminate().code(), Some(0), "[{rt}]");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(text.lines().count(), 2, "[{rt}] {text}");
        let line = |target: &str| {
            (text.lines())
                .find(|l| l.contains(&format!("\"target\":\"{target}\"")))
                .unwrap_or_else(|| panic!("[{rt}] no {target} in {text}"))
                .to_string()
        };
        assert!(line("/a.txt").contains("\"listener\":\"public\""), "[{rt}]");
        assert!(
            line("/_httplite/health").contains("\"listener\":\"admin\""),
            "[{rt}]"
        );
    }
}

#[test]
fn demo_mode_warns_on_an_address_other_hosts_reach() {
    let server = Server::start("stackless", &["--bind", "0.0.0.0:0"]);
    // Read from the pipe by a thread of the harness's: the line printed
    // before the listening line may still be on its way.
    wait_until(Duration::from_secs(5), Duration::from_millis(10), || {
        server.stderr().contains("warning")
    });
    let stderr = server.stderr();
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("demo mode (no --root) on 0.0.0.0:")
            && warnings[0].contains("stats")
            && warnings[0].contains("jobs"),
        "{stderr}"
    );
    let quiet = Server::start("stackless", &[]);
    assert!(!quiet.stderr().contains("warning"), "{}", quiet.stderr());
}

#[test]
fn an_admin_listener_on_the_public_port_is_refused() {
    let out = run_binary(
        &["--bind", "127.0.0.1:18181", "--admin", "0.0.0.0:18181"],
        Duration::from_secs(10),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--admin 0.0.0.0:18181 overlaps --bind"),
        "{stderr}"
    );
}

#[test]
fn the_admin_listener_takes_its_own_certificate() {
    let pki = Pki::new("admin-tls");
    let issued = pki.issue("localhost", super::pki::KeyKind::EcdsaP256, 7);
    for rt in runtimes() {
        let site = site();
        let root = site.path().display().to_string();
        let (cert, key) = (
            issued.cert.display().to_string(),
            issued.key.display().to_string(),
        );
        let server = Server::start(
            rt,
            &[
                "--root",
                &root,
                "--admin",
                "127.0.0.1:0",
                "--admin-tls-cert",
                &cert,
                "--admin-tls-key",
                &key,
            ],
        );
        let admin = server.admin_addr().expect("an admin listener");
        let mut tls = tls_connect(admin, &pki.client_config()).expect("a TLS admin listener");
        tls.write_all(&get_close("/_httplite/health")).unwrap();
        let mut out = Vec::new();
        let _ = tls.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 200"), "[{rt}] {text}");
        // The public listener stays as --tls-cert says (plain here, unless
        // the whole suite runs over TLS).
        assert_eq!(server.get("/a.txt").status, 200, "[{rt}]");
    }
}

/// The server's order of suites wins: a client that prefers ChaCha20 and
/// AES-128 still gets AES-256 when it offers it (TLS 1.3), and AES-128
/// over ChaCha20 when it does not (TLS 1.2 too).
#[test]
fn the_servers_suite_order_wins() {
    use rustls::crypto::aws_lc_rs::cipher_suite as cs;
    let pki = Pki::new("suite-order");
    let issued = pki.issue("localhost", super::pki::KeyKind::EcdsaP256, 9);
    let cases: [(&[rustls::SupportedCipherSuite], rustls::CipherSuite); 3] = [
        (
            &[
                cs::TLS13_CHACHA20_POLY1305_SHA256,
                cs::TLS13_AES_128_GCM_SHA256,
                cs::TLS13_AES_256_GCM_SHA384,
            ],
            rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
        ),
        (
            &[
                cs::TLS13_CHACHA20_POLY1305_SHA256,
                cs::TLS13_AES_128_GCM_SHA256,
            ],
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
        ),
        (
            &[
                cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            ],
            rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
    ];
    for rt in runtimes() {
        let server = super::tls::start(rt, &issued, &[]);
        for (offered, chosen) in &cases {
            let provider = rustls::crypto::CryptoProvider {
                cipher_suites: offered.to_vec(),
                ..rustls::crypto::aws_lc_rs::default_provider()
            };
            let mut roots = rustls::RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(rustls_pki_certs(pki.ca()));
            assert_eq!(added, 1, "the test CA");
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            let mut tls = tls_connect(server.addr(), &Arc::new(config)).expect("connect");
            tls.write_all(&get_close("/_httplite/plaintext")).unwrap();
            let mut out = Vec::new();
            let _ = tls.read_to_end(&mut out);
            assert!(out.starts_with(b"HTTP/1.1 200"), "[{rt}] {offered:?}");
            let got = tls.conn.negotiated_cipher_suite().map(|s| s.suite());
            assert_eq!(got, Some(*chosen), "[{rt}] offered {offered:?}");
        }
    }
}

/// The CA certificate in `path` (PEM), for a root store.
fn rustls_pki_certs(path: &Path) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject as _;
    rustls::pki_types::CertificateDer::pem_file_iter(path)
        .expect("the CA file")
        .map(|c| c.expect("a certificate"))
        .collect()
}

/// A bare `--proxy-protocol` is for the balancer's connections: the admin
/// listener takes none (the operator reaches it directly).
#[test]
fn the_admin_listener_takes_no_proxy_header() {
    for rt in runtimes() {
        let site = site();
        let root = site.path().display().to_string();
        let args = [
            "--root",
            root.as_str(),
            "--proxy-protocol",
            "--trusted-proxy",
            "127.0.0.1/32",
        ];
        let server = Server::start(rt, &args);
        assert_eq!(server.admin_get("/_httplite/health").status, 200, "[{rt}]");
        // The public listener still wants its header: a bare request is
        // closed unanswered.
        // (Over TLS the handshake itself is refused.)
        let answered = Client::try_connect(server.addr()).is_ok_and(|mut c| {
            c.try_send(&get_req("/a.txt")).is_ok() && c.try_read_response(false).is_ok()
        });
        assert!(!answered, "[{rt}] answered without a header");
    }
}
