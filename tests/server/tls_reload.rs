//! Certificate reload (SIGHUP and the console's `reload`) under load, and
//! the certificate files' errors and warnings, on every runtime (the
//! rest of the TLS tests are in `tls.rs`).

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::harness::{Client, Server, get_req, runtimes, wait_until};
use crate::pki::{Issued, KeyKind, Pki};
use crate::tls::{start, tls_args};

/// The first certificate of a PEM chain file.
fn leaf(issued: &Issued) -> CertificateDer<'static> {
    CertificateDer::pem_file_iter(&issued.cert)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
}

/// Copies `from`'s files over `to`'s (what an operator's renewal does).
fn replace(from: &Issued, to: &Issued) {
    std::fs::copy(&from.cert, &to.cert).unwrap();
    std::fs::copy(&from.key, &to.key).unwrap();
}

#[test]
fn reload_under_load_switches_new_handshakes_only() {
    let pki = Pki::new("reload");
    for rt in runtimes() {
        let live = pki.issue(&format!("live-{rt}"), KeyKind::EcdsaP256, 100);
        let old = leaf(&live);
        let next = pki.issue(&format!("next-{rt}"), KeyKind::EcdsaP256, 101);
        let new = leaf(&next);
        let server = start(rt, &live, &[]);
        let addr = server.addr();

        // Fresh full handshakes in a loop (no resumption: a resumed
        // handshake carries no certificate), noting which one each saw.
        let mut config = (*pki.client_config()).clone();
        config.resumption = rustls::client::Resumption::disabled();
        let config = Arc::new(config);
        let stop = Arc::new(AtomicBool::new(false));
        let (saw_old, saw_new, failed) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let load = {
            let (stop, config) = (stop.clone(), config.clone());
            let (saw_old, saw_new, failed) = (saw_old.clone(), saw_new.clone(), failed.clone());
            let (old, new) = (old.clone(), new.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let r = Client::try_connect_tls(addr, &config).and_then(|mut c| {
                        c.try_send(&get_req("/_httplite/plaintext"))?;
                        let r = c.try_read_response(false)?;
                        let cert = c.tls().unwrap().peer_certificates().unwrap()[0].clone();
                        Ok((r.status, cert))
                    });
                    match r {
                        Ok((200, c)) if c == old => saw_old.fetch_add(1, Ordering::Relaxed),
                        Ok((200, c)) if c == new => saw_new.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        };
        // A kept-alive connection from before the reload.
        let mut before = Client::try_connect_tls(addr, &config).unwrap();
        assert_eq!(before.get("/_httplite/plaintext").status, 200);
        assert!(wait_until(
            Duration::from_secs(10),
            Duration::from_millis(5),
            || { saw_old.load(Ordering::Relaxed) >= 5 }
        ));

        replace(&next, &live);
        server.signal(libc::SIGHUP);
        let switched = wait_until(Duration::from_secs(10), Duration::from_millis(5), || {
            saw_new.load(Ordering::Relaxed) >= 5
        });
        stop.store(true, Ordering::Relaxed);
        load.join().unwrap();
        assert!(
            switched,
            "[{rt}] new handshakes never saw the new certificate"
        );
        assert_eq!(
            failed.load(Ordering::Relaxed),
            0,
            "[{rt}] requests failed during the reload"
        );
        assert!(
            wait_until(Duration::from_secs(5), Duration::from_millis(10), || server
                .stderr()
                .contains("TLS certificate reloaded")),
            "[{rt}] {}",
            server.stderr()
        );
        // The old connection keeps its certificate and carries on.
        assert_eq!(before.get("/_httplite/plaintext").status, 200, "[{rt}]");
        assert!(before.tls().unwrap().peer_certificates().unwrap()[0] == old);

        // A bad key file: one clear line, and the certificate stays.
        std::fs::write(&live.key, b"not a key").unwrap();
        server.signal(libc::SIGHUP);
        assert!(
            wait_until(Duration::from_secs(5), Duration::from_millis(10), || server
                .stderr()
                .contains(
                    "TLS reload failed, keeping the old certificate: --tls-key"
                )),
            "[{rt}] {}",
            server.stderr()
        );
        // A key that belongs to another certificate.
        let other = pki.issue(&format!("other-{rt}"), KeyKind::EcdsaP256, 102);
        std::fs::copy(&other.key, &live.key).unwrap();
        server.signal(libc::SIGHUP);
        assert!(
            wait_until(Duration::from_secs(5), Duration::from_millis(10), || server
                .stderr()
                .contains("does not match")),
            "[{rt}] {}",
            server.stderr()
        );
        let mut after = Client::try_connect_tls(addr, &config).unwrap();
        assert_eq!(after.get("/_httplite/plaintext").status, 200, "[{rt}]");
        assert!(
            after.tls().unwrap().peer_certificates().unwrap()[0] == new,
            "[{rt}]"
        );
    }
}

#[test]
fn console_reload_reads_the_files_again() {
    let pki = Pki::new("console");
    let live = pki.issue("live", KeyKind::EcdsaP256, 200);
    let next = pki.issue("next", KeyKind::EcdsaP256, 201);
    let args = tls_args(&live);
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.push("--console");
    let mut server = Server::start_with_stdin("stackless", &all);
    let mut stdin = server.take_stdin().unwrap();
    replace(&next, &live);
    stdin.write_all(b"reload\n").unwrap();
    assert!(
        wait_until(Duration::from_secs(5), Duration::from_millis(10), || server
            .stdout()
            .contains("TLS certificate reloaded")),
        "{}",
        server.stdout()
    );
    let mut c = Client::try_connect_tls(server.addr(), &pki.client_config()).unwrap();
    assert_eq!(c.get("/_httplite/plaintext").status, 200);
    assert!(c.tls().unwrap().peer_certificates().unwrap()[0] == leaf(&next));
}

#[test]
fn bad_tls_files_fail_at_start_up() {
    let pki = Pki::new("startup");
    let a = pki.issue("a", KeyKind::EcdsaP256, 300);
    let b = pki.issue("b", KeyKind::EcdsaP256, 301);
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "--tls-cert",
                "/nonexistent/c.pem",
                "--tls-key",
                "/nonexistent/k.pem",
            ],
            "--tls-cert",
        ),
        (
            &[
                "--tls-cert",
                a.cert.to_str().unwrap(),
                "--tls-key",
                b.key.to_str().unwrap(),
            ],
            "does not match",
        ),
        (
            &["--tls-cert", a.cert.to_str().unwrap()],
            "required arguments",
        ),
    ];
    for (args, needle) in cases {
        let out = crate::harness::run_binary(args, Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn an_expired_certificate_is_served_with_a_warning() {
    let pki = Pki::new("expired");
    let expired = pki.issue_expired("old", 400);
    let server = start("stackless", &expired, &[]);
    assert!(
        wait_until(Duration::from_secs(5), Duration::from_millis(10), || server
            .stderr()
            .contains("httplite: warning: --tls-cert")
            && server.stderr().contains("the certificate expired")),
        "{}",
        server.stderr()
    );
    // Served: a client that checks dates refuses it, which is its call.
    let mut c = Client::try_connect_tls(server.addr(), &pki.client_config()).unwrap();
    let e = c
        .try_send(&get_req("/"))
        .and_then(|_| c.try_read_response(false));
    let e = e.expect_err("rustls accepted an expired certificate");
    assert!(e.to_string().to_lowercase().contains("expired"), "{e}");
    // A reload of the same files says it again, in the reload line.
    server.signal(libc::SIGHUP);
    assert!(
        wait_until(Duration::from_secs(5), Duration::from_millis(10), || server
            .stderr()
            .contains("TLS certificate reloaded; warning:")),
        "{}",
        server.stderr()
    );
}
