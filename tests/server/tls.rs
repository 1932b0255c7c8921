//! HTTPS on every runtime, with real clients: curl, Python's
//! `ssl`, Node's `https`, `h2load --h1`, `openssl s_client` (TLS 1.2 and
//! 1.3, resumption) and the harness's rustls client; plain HTTP on the TLS
//! port; bad input and stalled handshakes; shutdown. Reload and the
//! certificate files' errors are in `tls_reload.rs`.
//!
//! The certificates are made at test time (`pki`); `openssl`, `curl`,
//! `node` and `h2load` are Debian packages `scripts/test.sh` installs, and
//! a missing one fails these tests rather than skipping them.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Client, Server, TempDir, get_req, runtimes, wait_until};
use crate::pki::{Issued, KeyKind, Pki};

/// `--tls-cert C --tls-key K` for `issued`.
pub(crate) fn tls_args(issued: &Issued) -> Vec<String> {
    vec![
        "--tls-cert".into(),
        issued.cert.display().to_string(),
        "--tls-key".into(),
        issued.key.display().to_string(),
    ]
}

pub(crate) fn start(rt: &str, issued: &Issued, extra: &[&str]) -> Server {
    let args = tls_args(issued);
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend_from_slice(extra);
    let server = Server::start(rt, &all);
    assert!(
        server.is_https(),
        "[{rt}] the start-up line should say https"
    );
    server
}

/// Runs `cmd`, bounded by `timeout(1)`, feeding `stdin`; (status ok, stdout, stderr).
fn run(cmd: &str, args: &[&str], stdin: &[u8]) -> (bool, String, String) {
    let mut child = Command::new("timeout")
        .arg("20")
        .arg(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `openssl s_client` against the server with `version` (`-tls1_2` or
/// `-tls1_3`), saving or reusing a session; its stdout.
fn s_client(server: &Server, ca: &str, version: &str, sess: (&str, &str), req: &[u8]) -> String {
    let connect = server.addr().to_string();
    let (ok, out, err) = run(
        "openssl",
        &[
            "s_client", "-connect", &connect, version, "-CAfile", ca, "-ign_eof", sess.0, sess.1,
        ],
        req,
    );
    assert!(ok, "s_client {version} failed: {err}\n{out}");
    out
}

#[test]
fn real_clients_over_tls_on_every_runtime() {
    let (pki, issued) = Pki::shared();
    let ca = pki.ca().display().to_string();
    let root = TempDir::new("tls-root");
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    root.write("big.bin", &big);
    root.write("small.txt", b"small file\n");
    let root_arg = root.path().display().to_string();
    for rt in runtimes() {
        let server = start(rt, issued, &["--root", &root_arg, "--expose", "plaintext"]);
        let url = |p: &str| server.url(p);

        // curl: two requests on one kept-alive connection.
        let (ok, out, err) = run(
            "curl",
            &[
                "-sSv",
                "--max-time",
                "10",
                "--cacert",
                &ca,
                &url("/small.txt"),
                &url("/small.txt"),
            ],
            b"",
        );
        assert!(ok, "[{rt}] curl: {err}");
        assert_eq!(out, "small file\nsmall file\n", "[{rt}]");
        assert!(
            err.contains("Re-using existing connection"),
            "[{rt}] no keep-alive: {err}"
        );
        assert!(
            err.contains("ALPN: server accepted http/1.1"),
            "[{rt}] {err}"
        );

        // A large file, whole and as a range, byte for byte.
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "20", "--cacert", &ca, &url("/big.bin")])
            .output()
            .unwrap();
        assert!(out.status.success(), "[{rt}] curl big: {:?}", out);
        assert!(
            out.stdout == big,
            "[{rt}] big.bin differs ({} bytes)",
            out.stdout.len()
        );
        let out = Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "10",
                "--cacert",
                &ca,
                "-r",
                "1000000-1999999",
            ])
            .arg(url("/big.bin"))
            .output()
            .unwrap();
        assert!(
            out.stdout == big[1_000_000..2_000_000],
            "[{rt}] range differs"
        );

        // Python's ssl and http.client, keep-alive.
        let script = "import ssl,sys,http.client\n\
            ctx=ssl.create_default_context(cafile=sys.argv[1])\n\
            c=http.client.HTTPSConnection('127.0.0.1',int(sys.argv[2]),context=ctx)\n\
            for _ in range(3):\n c.request('GET','/_httplite/plaintext'); r=c.getresponse(); print(r.status, r.read().decode())\n\
            print(c.sock.version())\n";
        let port = server.addr().port().to_string();
        let (ok, out, err) = run("python3", &["-c", script, &ca, &port], b"");
        assert!(ok, "[{rt}] python: {err}");
        assert_eq!(out.matches("200 Hello, World!").count(), 3, "[{rt}] {out}");
        assert!(out.contains("TLSv1.3"), "[{rt}] {out}");

        // Node's https, keep-alive agent: two requests, one socket.
        let script = "const https=require('https'),fs=require('fs');\
            const agent=new https.Agent({keepAlive:true,maxSockets:1});\
            const ca=fs.readFileSync(process.argv[1]);let sockets=new Set();\
            function get(n){https.get({host:'127.0.0.1',port:+process.argv[2],\
            path:'/_httplite/plaintext',ca,agent},res=>{let b='';sockets.add(res.socket);\
            const p=res.socket.getProtocol();\
            res.on('data',d=>b+=d);res.on('end',()=>{console.log(res.statusCode,b,p);if(n>1)get(n-1);else{console.log('sockets',sockets.size);\
            agent.destroy();}});}).on('error',e=>{console.error(e);process.exit(1);});}get(2);";
        let (ok, out, err) = run("node", &["-e", script, &ca, &port], b"");
        assert!(ok, "[{rt}] node: {err}");
        assert_eq!(
            out.matches("200 Hello, World! TLSv1.3").count(),
            2,
            "[{rt}] {out}"
        );
        assert!(out.contains("sockets 1"), "[{rt}] no keep-alive: {out}");

        // openssl s_client, each version, then resumed from a saved session.
        let dir = TempDir::new("sess");
        let req = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        for (version, name) in [("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")] {
            let sess = dir
                .path()
                .join(format!("{name}.sess"))
                .display()
                .to_string();
            let first = s_client(&server, &ca, version, ("-sess_out", &sess), req);
            assert!(first.contains(&format!("New, {name}")), "[{rt}] {first}");
            assert!(
                first.contains("Verify return code: 0 (ok)"),
                "[{rt}] {first}"
            );
            assert!(first.contains("Hello, World!"), "[{rt}] {first}");
            let again = s_client(&server, &ca, version, ("-sess_in", &sess), req);
            assert!(
                again.contains(&format!("Reused, {name}")),
                "[{rt}] not resumed: {again}"
            );
            assert!(again.contains("Hello, World!"), "[{rt}] {again}");
        }

        // The harness's rustls client: pipelined requests in one write.
        let mut c = Client::try_connect_tls(server.addr(), &pki.client_config()).unwrap();
        let mut batch = Vec::new();
        for _ in 0..3 {
            batch.extend_from_slice(&get_req("/_httplite/plaintext"));
        }
        batch.extend_from_slice(&get_req("/small.txt"));
        c.send(&batch);
        for _ in 0..3 {
            assert_eq!(c.read_response().body, b"Hello, World!", "[{rt}]");
        }
        assert_eq!(c.read_response().body, b"small file\n", "[{rt}]");
        let tls = c.tls().unwrap();
        assert_eq!(tls.alpn_protocol(), Some(&b"http/1.1"[..]), "[{rt}]");

        let stats = server.stats();
        assert!(
            stats.get("tls.handshakes.resumed") >= 2,
            "[{rt}] {}",
            stats.0
        );
        assert!(stats.get("tls.versions.tls1_2") >= 2, "[{rt}] {}", stats.0);
        assert!(stats.get("tls.versions.tls1_3") >= 4, "[{rt}] {}", stats.0);
        assert!(stats.get("tls.handshakes.full") >= 5, "[{rt}] {}", stats.0);
    }
}

/// `h2load --h1` over TLS with `args`; asserts every request succeeded.
fn h2load(rt: &str, server: &Server, n: usize, args: &[&str]) {
    let url = server.url("/_httplite/plaintext");
    let count = n.to_string();
    let mut all = vec!["--h1", "-n", &count];
    all.extend_from_slice(args);
    all.push(&url);
    let (ok, out, err) = run("h2load", &all, b"");
    assert!(ok, "[{rt}] h2load {args:?}: {err}\n{out}");
    let want = format!("{n} succeeded, 0 failed, 0 errored, 0 timeout");
    assert!(out.contains(&want), "[{rt}] h2load {args:?}: {out}");
    assert!(
        out.contains("Application protocol: http/1.1"),
        "[{rt}] {out}"
    );
}

#[test]
fn h2load_keep_alive_pipelined_and_one_connection_per_request() {
    let (_, issued) = Pki::shared();
    for rt in runtimes() {
        let server = start(rt, issued, &[]);
        h2load(rt, &server, 400, &["-c", "4"]);
        h2load(rt, &server, 400, &["-c", "2", "-m", "16"]);
        let handshakes = |s: &Server| {
            let st = s.stats();
            st.get("tls.handshakes.full") + st.get("tls.handshakes.resumed")
        };
        let before = handshakes(&server);
        h2load(rt, &server, 40, &["-c", "2", "-H", "Connection: close"]);
        let after = handshakes(&server);
        // A new handshake per request (h2load resumes its sessions), plus
        // the stats request's own.
        assert!(after - before >= 41, "[{rt}] {before} -> {after}");
    }
}

#[test]
fn rsa_key_with_a_chain() {
    let pki = Pki::new("rsa");
    let issued = pki.issue("rsa", KeyKind::Rsa2048, 7);
    let ca = pki.ca().display().to_string();
    for rt in runtimes() {
        let server = start(rt, &issued, &[]);
        let (ok, out, err) = run(
            "curl",
            &[
                "-sSv",
                "--max-time",
                "10",
                "--cacert",
                &ca,
                &server.url("/_httplite/plaintext"),
            ],
            b"",
        );
        assert!(ok, "[{rt}] curl: {err}");
        assert_eq!(out, "Hello, World!", "[{rt}]");
        let req = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        let out = s_client(&server, &ca, "-tls1_2", ("-sess_out", "/dev/null"), req);
        assert!(
            out.contains("Server public key is 2048 bit"),
            "[{rt}] {out}"
        );
        assert!(out.contains("Verify return code: 0 (ok)"), "[{rt}] {out}");
    }
}

#[test]
fn plain_http_on_the_tls_port_is_answered_and_closed() {
    let (_, issued) = Pki::shared();
    for rt in runtimes() {
        for redirect in [false, true] {
            let extra: &[&str] = if redirect { &["--redirect-http"] } else { &[] };
            let server = start(rt, issued, extra);
            let mut c = Client::try_connect_plain(server.addr()).unwrap();
            c.send(b"GET /a/b?c=1 HTTP/1.1\r\nHost: example.test:8443\r\n\r\n");
            let r = c.read_response();
            if redirect {
                assert_eq!(r.status, 308, "[{rt}] {r:?}");
                assert_eq!(
                    r.header("location"),
                    Some("https://example.test:8443/a/b?c=1")
                );
            } else {
                assert_eq!(r.status, 400, "[{rt}] {r:?}");
                assert!(r.text().contains("HTTPS port"), "[{rt}] {r:?}");
            }
            c.expect_closed(Duration::from_secs(5));
            let s = server.stats();
            assert_eq!(
                s.get("tls.handshake_failures.plain_http"),
                1,
                "[{rt}] {}",
                s.0
            );
        }
    }
}

#[test]
fn bad_and_stalled_handshakes_are_closed_and_counted() {
    let (pki, issued) = Pki::shared();
    for rt in runtimes() {
        let server = start(rt, issued, &["--header-timeout", "1s"]);
        // A handshake record holding garbage.
        let mut c = Client::try_connect_plain(server.addr()).unwrap();
        c.send(b"\x16\x03\x01\x00\x08garbage!");
        assert!(
            c.wait_closed(Duration::from_secs(5)).is_some(),
            "[{rt}] still open"
        );
        // A record header claiming more than a record may hold.
        let mut c = Client::try_connect_plain(server.addr()).unwrap();
        c.send(b"\x16\x03\x01\xff\xffxxxxxxxxxxxxxxxxxx");
        assert!(
            c.wait_closed(Duration::from_secs(5)).is_some(),
            "[{rt}] still open"
        );
        // No ClientHello at all, and one that stops halfway: the header
        // timeout closes both.
        let mut silent = Client::try_connect_plain(server.addr()).unwrap();
        let mut partial = Client::try_connect_plain(server.addr()).unwrap();
        partial.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03");
        silent.expect_closed(Duration::from_secs(5));
        assert!(
            partial.wait_closed(Duration::from_secs(5)).is_some(),
            "[{rt}] still open"
        );
        // A client that offers only h2: no protocol in common.
        let mut config = (*pki.client_config()).clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let mut h2 = Client::try_connect_tls(server.addr(), &Arc::new(config)).unwrap();
        assert!(
            h2.try_send(&get_req("/"))
                .and_then(|_| h2.try_read_response(false))
                .is_err()
        );

        // The server is fine, and counted each reason.
        let mut ok = Client::try_connect_tls(server.addr(), &pki.client_config()).unwrap();
        assert_eq!(ok.get("/_httplite/plaintext").status, 200, "[{rt}]");
        let stats = server.stats();
        let s = |k: &str| stats.get(&format!("tls.handshake_failures.{k}"));
        assert!(s("bad_record") + s("misbehaved") >= 2, "[{rt}] {}", stats.0);
        assert!(s("incomplete") >= 2, "[{rt}] {}", stats.0);
        assert!(s("incompatible") >= 1, "[{rt}] {}", stats.0);
        assert!(stats.get("timeouts.header") >= 2, "[{rt}] {}", stats.0);
    }
}

#[test]
fn shutdown_ends_connections_idle_after_their_handshake() {
    let (pki, issued) = Pki::shared();
    for rt in runtimes() {
        // Timeouts far beyond the bound below: only shutdown can end them.
        let mut server = start(
            rt,
            issued,
            &["--header-timeout", "60s", "--shutdown-timeout", "30s"],
        );
        let mut idle = Client::try_connect_tls(server.addr(), &pki.client_config()).unwrap();
        idle.complete_handshake().unwrap();
        let mut mid = Client::try_connect_plain(server.addr()).unwrap();
        mid.send(b"\x16\x03\x01\x02\x00\x01");
        // Both reached the server before the signal.
        assert!(wait_until(
            Duration::from_secs(10),
            Duration::from_millis(10),
            || { server.stats().get("connections.open") >= 3 }
        ));
        server.signal(libc::SIGTERM);
        let exited = server.wait_exit(Duration::from_secs(5));
        assert!(
            exited.is_some_and(|s| s.success()),
            "[{rt}] did not exit at once: {exited:?}"
        );
        idle.expect_closed(Duration::from_secs(5));
    }
}
