//! `--proxy-protocol` and `--trusted-proxy`: PROXY v1 and v2 headers
//! (IPv4, IPv6, LOCAL, UNKNOWN) accepted and their client logged in every
//! access-log format; missing, malformed, late and untrusted headers closed
//! and counted; a PROXY header on a listener without the option is a bad
//! request; the per-listener choice; Unix sockets; and the
//! `X-Forwarded-For` / `Forwarded` rightmost-untrusted rule.

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::FromRawFd;
use std::path::Path;
use std::time::Duration;

use super::harness::*;
use super::pki::tls_mode;

/// The runtimes of this run (every one reads PROXY headers; uring only in
/// plaintext, as it serves no TLS, and the TLS pass leaves it out whole).
fn proxy_runtimes() -> impl Iterator<Item = &'static &'static str> {
    runtimes().iter()
}

const V2_SIG: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// A v1 header for a TCP client `src` (to `dst`).
fn v1(src: SocketAddr) -> Vec<u8> {
    let fam = if src.is_ipv4() { "TCP4" } else { "TCP6" };
    let dst = if src.is_ipv4() {
        "203.0.113.9"
    } else {
        "2001:db8::9"
    };
    format!("PROXY {fam} {} {dst} {} 443\r\n", src.ip(), src.port()).into_bytes()
}

/// A v2 PROXY header for `src`, or a LOCAL one (a health check) for `None`.
fn v2(src: Option<SocketAddr>) -> Vec<u8> {
    let mut h = V2_SIG.to_vec();
    let body: Vec<u8> = match src {
        None => Vec::new(),
        Some(SocketAddr::V4(a)) => [
            &a.ip().octets()[..],
            &[203, 0, 113, 9],
            &a.port().to_be_bytes(),
            &443u16.to_be_bytes(),
        ]
        .concat(),
        Some(SocketAddr::V6(a)) => [
            &a.ip().octets()[..],
            &"2001:db8::9"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
            &a.port().to_be_bytes(),
            &443u16.to_be_bytes(),
        ]
        .concat(),
    };
    let (cmd, fam) = match src {
        None => (0x20, 0x00),
        Some(SocketAddr::V4(_)) => (0x21, 0x11),
        Some(SocketAddr::V6(_)) => (0x21, 0x21),
    };
    h.extend_from_slice(&[cmd, fam]);
    h.extend_from_slice(&(body.len() as u16).to_be_bytes());
    h.extend_from_slice(&body);
    h
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A TCP connection to `dst` from the local address `src` (the loopback
/// has all of 127.0.0.0/8, so a test can be an untrusted peer).
fn connect_from(src: IpAddr, dst: SocketAddr) -> TcpStream {
    let (IpAddr::V4(src), SocketAddr::V4(dst)) = (src, dst) else {
        panic!("IPv4 only");
    };
    let sin = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a fresh fd, with sockaddr_in values
    // that live across each call.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        let a = sin(src, 0);
        let r = libc::bind(fd, std::ptr::from_ref(&a).cast(), len);
        assert_eq!(r, 0, "bind {src}: {}", std::io::Error::last_os_error());
        let b = sin(*dst.ip(), dst.port());
        let r = libc::connect(fd, std::ptr::from_ref(&b).cast(), len);
        assert_eq!(r, 0, "connect {dst}: {}", std::io::Error::last_os_error());
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        stream
    }
}

/// A connection that has sent `header` in the clear, then speaks HTTP
/// (over TLS in TLS mode).
fn proxied(addr: SocketAddr, header: &[u8]) -> Client {
    let mut sock = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    sock.write_all(header).unwrap();
    Client::from_tcp(sock)
}

/// The server's stats, read through a connection with a LOCAL header.
fn stats_via_proxy(server: &Server) -> Stats {
    let mut c = proxied(server.addr(), &v2(None));
    let r = c.get("/_httplite/stats");
    assert_eq!(r.status, 200);
    Stats(r.text())
}

/// The log once the server has exited, as (target, address) pairs.
fn logged(mut server: Server, log: &Path, n: usize) -> Vec<(String, String)> {
    let rt = server.runtime().to_string();
    assert!(server.terminate().success(), "[{rt}] {}", server.stderr());
    let mut text = String::new();
    wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
        text = std::fs::read_to_string(log).unwrap_or_default();
        text.lines().count() >= n
    });
    text.lines().map(parse_line).collect()
}

/// (target, address) of a CLF, combined or JSON line.
fn parse_line(line: &str) -> (String, String) {
    if line.starts_with('{') {
        let field = |name: &str| {
            let key = format!("\"{name}\":\"");
            let start = line.find(&key).map(|i| i + key.len())?;
            let end = start + line[start..].find('"')?;
            Some(line[start..end].to_string())
        };
        let remote = field("remote").unwrap_or_else(|| "null".into());
        return (field("target").unwrap_or_default(), remote);
    }
    let host = line.split(' ').next().unwrap_or_default().to_string();
    let target = line.split('"').nth(1).unwrap_or_default();
    let target = target.split(' ').nth(1).unwrap_or_default().to_string();
    (target, host)
}

/// The address logged for `target` (exactly one line for it).
fn address_of(lines: &[(String, String)], target: &str) -> String {
    let hits: Vec<&String> = lines
        .iter()
        .filter(|(t, _)| t == target)
        .map(|(_, a)| a)
        .collect();
    assert_eq!(hits.len(), 1, "one line for {target} in {lines:?}");
    hits[0].clone()
}

#[test]
fn headers_of_both_versions_name_the_logged_client() {
    let formats = ["clf", "combined", "json"];
    for rt in proxy_runtimes() {
        // Under fork, each child logs the client its connection's header
        // named (not its socket's peer, 127.0.0.1).
        for format in formats {
            let dir = TempDir::new("proxy-log");
            let log = dir.path().join("access.log");
            let args = [
                "--proxy-protocol",
                "--trusted-proxy",
                "127.0.0.1/32",
                "--access-log",
                log.to_str().unwrap(),
                "--access-log-format",
                format,
            ];
            let server = Server::start(rt, &args);
            let cases: Vec<(Vec<u8>, &str, &str)> = vec![
                (
                    v1(sa("192.0.2.1:5000")),
                    "/_httplite/plaintext?v1-4",
                    "192.0.2.1",
                ),
                (
                    v1(sa("[2001:db8::1]:5000")),
                    "/_httplite/plaintext?v1-6",
                    "2001:db8::1",
                ),
                (
                    v2(Some(sa("198.51.100.7:6000"))),
                    "/_httplite/plaintext?v2-4",
                    "198.51.100.7",
                ),
                (
                    v2(Some(sa("[2001:db8::2]:6000"))),
                    "/_httplite/plaintext?v2-6",
                    "2001:db8::2",
                ),
                // LOCAL and UNKNOWN keep the socket's own peer.
                (v2(None), "/_httplite/plaintext?local", "127.0.0.1"),
                (
                    b"PROXY UNKNOWN\r\n".to_vec(),
                    "/_httplite/plaintext?unknown",
                    "127.0.0.1",
                ),
            ];
            for (header, target, _) in &cases {
                let mut c = proxied(server.addr(), header);
                let r = c.get(target);
                assert_eq!(
                    (r.status, r.text().as_str()),
                    (200, "Hello, World!"),
                    "[{rt}] {target}"
                );
            }
            // A header that arrives in pieces, with the request behind it
            // in the last piece; then a second request on the connection.
            let header = v2(Some(sa("192.0.2.33:7000")));
            let mut sock = TcpStream::connect_timeout(&server.addr(), IO_TIMEOUT).unwrap();
            sock.write_all(&header[..5]).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            sock.write_all(&header[5..20]).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let mut rest = header[20..].to_vec();
            if !tls_mode() {
                rest.extend_from_slice(&get_req("/_httplite/plaintext?split"));
            }
            sock.write_all(&rest).unwrap();
            let mut c = Client::from_tcp(sock);
            if tls_mode() {
                c.send(&get_req("/_httplite/plaintext?split"));
            }
            assert_eq!(c.read_response().status, 200, "[{rt}] split");
            assert_eq!(c.get("/_httplite/plaintext?again").status, 200, "[{rt}]");
            let lines = logged(server, &log, cases.len() + 2);
            for (_, target, want) in &cases {
                assert_eq!(
                    address_of(&lines, target),
                    *want,
                    "[{rt} {format}] {target}"
                );
            }
            for target in ["/_httplite/plaintext?split", "/_httplite/plaintext?again"] {
                assert_eq!(address_of(&lines, target), "192.0.2.33", "[{rt} {format}]");
            }
        }
    }
}

#[test]
fn missing_malformed_late_and_untrusted_headers_are_closed_and_counted() {
    for rt in proxy_runtimes() {
        let server = Server::start(
            rt,
            &[
                "--proxy-protocol",
                "--trusted-proxy",
                "127.0.0.1/32",
                "--header-timeout",
                "1s",
            ],
        );
        let bad: [&[u8]; 4] = [
            // Missing: HTTP straight away.
            b"GET /_httplite/plaintext HTTP/1.1\r\nHost: x\r\n\r\n",
            // Malformed v1 and v2.
            b"PROXY TCP4 not-an-address 203.0.113.9 1 443\r\n",
            b"\r\n\r\n\0\r\nQUIT\n\x13\x11\x00\x0c",
            // Closed half-way through the header.
            b"PROXY TCP4 192.0.2.1",
        ];
        for (i, bytes) in bad.iter().enumerate() {
            let mut c = Client::try_connect_plain(server.addr()).unwrap();
            c.send(bytes);
            if i == 3 {
                c.shutdown_write();
            }
            c.expect_closed(Duration::from_secs(5));
        }
        // Late: nothing within --header-timeout.
        let mut c = Client::try_connect_plain(server.addr()).unwrap();
        c.send(b"PROXY TCP4 ");
        c.expect_closed(Duration::from_secs(5));
        // Untrusted: 127.0.0.2 is not 127.0.0.1/32, even with a good header.
        let mut s = connect_from([127, 0, 0, 2].into(), server.addr());
        let _ = s.write_all(&v1(sa("192.0.2.1:5000")));
        let _ = s.write_all(&get_req("/_httplite/plaintext"));
        let mut got = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut got);
        assert!(
            got.is_empty(),
            "[{rt}] untrusted got {:?}",
            String::from_utf8_lossy(&got)
        );
        let mut stats = stats_via_proxy(&server);
        // The counters are bumped as the connections close; fork's children
        // may still be finishing.
        wait_until(Duration::from_secs(5), Duration::from_millis(50), || {
            stats = stats_via_proxy(&server);
            stats.get("errors.proxy_header") >= 5 && stats.get("errors.proxy_untrusted") >= 1
        });
        assert_eq!(stats.get("errors.proxy_header"), 5, "[{rt}] {}", stats.0);
        assert_eq!(stats.get("errors.proxy_untrusted"), 1, "[{rt}] {}", stats.0);
        // Nothing was answered on them.
        assert_eq!(stats.get("errors.bad_request"), 0, "[{rt}]");
    }
}

#[test]
fn the_option_is_per_listener_and_a_header_elsewhere_is_a_bad_request() {
    for rt in runtimes() {
        let dir = TempDir::new("proxy-listeners");
        let sock = dir.path().join("p.sock");
        let sock_arg = format!("unix:{}", sock.display());
        let log = dir.path().join("access.log");
        // 127.0.0.1 (the harness's) plain; [::1] and the Unix socket take
        // the PROXY protocol.
        let server = Server::start(
            rt,
            &[
                "--bind",
                "[::1]:0",
                "--bind",
                &sock_arg,
                "--proxy-protocol=[::1]:0",
                &format!("--proxy-protocol={sock_arg}"),
                "--trusted-proxy",
                "::1",
                "--trusted-proxy",
                "unix",
                "--access-log",
                log.to_str().unwrap(),
            ],
        );
        let v6 = super::listen::tcp_addr(&server, |a| a.is_ipv6());
        // The plain listener: HTTP as ever; a PROXY header is a bad request.
        assert_eq!(
            server.get("/_httplite/plaintext?plain").status,
            200,
            "[{rt}]"
        );
        let mut c = Client::try_connect_plain(server.addr()).unwrap();
        c.send(&v1(sa("192.0.2.1:5000")));
        c.send(&get_req("/_httplite/plaintext?nope"));
        // (Over TLS too: the TLS layer answers text that looks like HTTP
        // with a cleartext 400.)
        assert_eq!(c.read_response().status, 400, "[{rt}]");
        let mut c = Client::try_connect_plain(server.addr()).unwrap();
        c.send(&v2(Some(sa("192.0.2.1:5000"))));
        c.send(&get_req("/_httplite/plaintext?nope2"));
        if tls_mode() {
            // Binary, not a TLS record: the handshake fails, nothing served.
            let got = c.wait_closed(Duration::from_secs(5)).expect("closed");
            assert!(!String::from_utf8_lossy(&got).contains(" 200 "), "[{rt}]");
        } else {
            assert_eq!(c.read_response().status, 400, "[{rt}] v2");
        }
        // The PROXY listener: a header is required.
        let mut c = proxied(v6, &v1(sa("[2001:db8::5]:5000")));
        assert_eq!(c.get("/_httplite/plaintext?v6").status, 200, "[{rt}]");
        let mut c = Client::try_connect_plain(v6).unwrap();
        c.send(&get_req("/_httplite/plaintext?bare"));
        c.expect_closed(Duration::from_secs(5));
        // The Unix socket: its peers are trusted with `unix`.
        let mut u = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        u.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        u.write_all(&v2(Some(sa("198.51.100.20:4000")))).unwrap();
        if !tls_mode() {
            u.write_all(&get_close("/_httplite/plaintext?unix"))
                .unwrap();
            let mut out = String::new();
            std::io::Read::read_to_string(&mut u, &mut out).unwrap();
            assert!(out.starts_with("HTTP/1.1 200"), "[{rt}] {out}");
        }
        drop(u);
        let mut u = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        u.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        u.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = Vec::new();
        let _ = std::io::Read::read_to_end(&mut u, &mut out);
        assert!(out.is_empty(), "[{rt}] the unix listener wants a header");
        let stats = server.stats();
        assert_eq!(stats.get("errors.proxy_header"), 2, "[{rt}] {}", stats.0);
        if !tls_mode() {
            assert_eq!(stats.get("errors.bad_request"), 2, "[{rt}] {}", stats.0);
        }
        let n = if tls_mode() { 2 } else { 3 };
        let lines = logged(server, &log, n);
        assert_eq!(
            address_of(&lines, "/_httplite/plaintext?plain"),
            "127.0.0.1"
        );
        assert_eq!(address_of(&lines, "/_httplite/plaintext?v6"), "2001:db8::5");
        if !tls_mode() {
            assert_eq!(
                address_of(&lines, "/_httplite/plaintext?unix"),
                "198.51.100.20"
            );
        }
    }
}

#[test]
fn proxy_protocol_needs_a_trusted_proxy_and_a_bind_it_names() {
    let out = run_binary(
        &["--proxy-protocol", "--bind", "127.0.0.1:0"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--trusted-proxy"), "{err}");
    let out = run_binary(
        &[
            "--bind",
            "127.0.0.1:0",
            "--proxy-protocol=127.0.0.1:1",
            "--trusted-proxy",
            "127.0.0.1",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no --bind 127.0.0.1:1"), "{err}");
    let out = run_binary(&["--trusted-proxy", "10.0.0.0/33"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn forwarding_headers_give_the_rightmost_untrusted_hop() {
    for rt in runtimes() {
        let dir = TempDir::new("xff");
        let log = dir.path().join("access.log");
        let server = Server::start(
            rt,
            &[
                "--trusted-proxy",
                "127.0.0.1/32",
                "--trusted-proxy",
                "10.0.0.0/8",
                "--access-log",
                log.to_str().unwrap(),
                "--access-log-format",
                "json",
            ],
        );
        let cases: [(&str, &str, &str); 8] = [
            ("?a", "X-Forwarded-For: 192.0.2.1, 10.0.0.2", "192.0.2.1"),
            (
                "?b",
                "X-Forwarded-For: 198.51.100.1, 192.0.2.1, 10.0.0.2",
                "192.0.2.1",
            ),
            ("?c", "X-Forwarded-For: 10.0.0.3, 10.0.0.2", "10.0.0.3"),
            ("?d", "X-Forwarded-For: 192.0.2.1, garbage", "127.0.0.1"),
            (
                "?e",
                "Forwarded: for=192.0.2.9;proto=http, for=\"[2001:db8::7]:80\"",
                "2001:db8::7",
            ),
            (
                "?f",
                "Forwarded: for=unknown\r\nX-Forwarded-For: 192.0.2.1",
                "127.0.0.1",
            ),
            (
                "?g",
                "X-Forwarded-For: 192.0.2.1\r\nX-Forwarded-For: 192.0.2.2",
                "192.0.2.2",
            ),
            ("?h", "X-Forwarded-For: [zz, 1.2.3.4.5", "127.0.0.1"),
        ];
        let mut c = server.connect();
        for (q, header, _) in cases {
            c.send(
                format!("GET /_httplite/plaintext{q} HTTP/1.1\r\nHost: x\r\n{header}\r\n\r\n")
                    .as_bytes(),
            );
            assert_eq!(c.read_response().status, 200, "[{rt}] {header}");
        }
        // From an untrusted peer the headers are ignored.
        let mut c2 = Client::from_tcp(connect_from([127, 0, 0, 2].into(), server.addr()));
        c2.send(
            b"GET /_httplite/plaintext?untrusted HTTP/1.1\r\nHost: x\r\n\
              X-Forwarded-For: 192.0.2.1\r\n\r\n",
        );
        assert_eq!(c2.read_response().status, 200, "[{rt}]");
        let lines = logged(server, &log, cases.len() + 1);
        for (q, header, want) in cases {
            let target = format!("/_httplite/plaintext{q}");
            assert_eq!(address_of(&lines, &target), want, "[{rt}] {header}");
        }
        assert_eq!(
            address_of(&lines, "/_httplite/plaintext?untrusted"),
            "127.0.0.2"
        );
    }
}

#[test]
fn forwarding_headers_behind_a_proxy_header() {
    for rt in proxy_runtimes() {
        let dir = TempDir::new("xff-proxy");
        let log = dir.path().join("access.log");
        let server = Server::start(
            rt,
            &[
                "--proxy-protocol",
                "--trusted-proxy",
                "127.0.0.1/32",
                "--trusted-proxy",
                "10.0.0.0/8",
                "--access-log",
                log.to_str().unwrap(),
            ],
        );
        let xff = |q: &str| {
            format!(
                "GET /_httplite/plaintext{q} HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 192.0.2.50\r\n\r\n"
            )
        };
        // The header's client is a trusted proxy: the hop it forwarded for.
        let mut c = proxied(server.addr(), &v1(sa("10.1.1.1:5000")));
        c.send(xff("?trusted").as_bytes());
        assert_eq!(c.read_response().status, 200, "[{rt}]");
        // It is not: the header's client, whatever it forwarded.
        let mut c = proxied(server.addr(), &v1(sa("198.51.100.3:5000")));
        c.send(xff("?untrusted").as_bytes());
        assert_eq!(c.read_response().status, 200, "[{rt}]");
        // LOCAL: the socket's peer (trusted) decides.
        let mut c = proxied(server.addr(), &v2(None));
        c.send(xff("?local").as_bytes());
        assert_eq!(c.read_response().status, 200, "[{rt}]");
        let lines = logged(server, &log, 3);
        assert_eq!(
            address_of(&lines, "/_httplite/plaintext?trusted"),
            "192.0.2.50",
            "[{rt}]"
        );
        assert_eq!(
            address_of(&lines, "/_httplite/plaintext?untrusted"),
            "198.51.100.3",
            "[{rt}]"
        );
        assert_eq!(
            address_of(&lines, "/_httplite/plaintext?local"),
            "192.0.2.50",
            "[{rt}]"
        );
    }
}
