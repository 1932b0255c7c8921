//! httplite's TLS-wrapped connection driver: the blocking connection loop
//! over `httplite::blocking::tls::TlsIo` over an in-memory socket, with a
//! real certificate (made at start-up with rcgen, never stored).
//!
//! Input: the bytes a client sends, then it closes its side. For half the
//! inputs (a knob drawn from their hash) a real ClientHello goes first, so
//! that the fuzzer's bytes meet a server in the middle of a handshake
//! rather than only the first-byte sniffing; the other half is sent as is
//! (garbage records, plain HTTP on the TLS port, truncated records).
//!
//! Checks, besides "no panic" and "no hang" (the in-memory socket never
//! waits, so a loop that does not progress would spin here):
//! - what the server sends to a connection that began with a handshake
//!   record is a sequence of whole TLS records (handshake or alert, then
//!   application data only after a handshake), never cleartext;
//! - a connection that began with anything else gets nothing, or one
//!   cleartext `400` (or `308` with `--redirect-http`) and nothing more.
#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use clap::Parser;
use fuzz_support::Knobs;
use fuzz_support::memio::{MemIo, Wire};
use httplite::blocking::IdleSet;
use httplite::blocking::conn::{self, Ctx};
use httplite::blocking::tls::TlsIo;
use httplite::cli::Cli;
use httplite::config::Config;
use httplite::jobs::{Jobs, Retention};
use httplite::routes::App;
use httplite::stats::Stats;
use httplite::tls::Tls;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut knobs = Knobs::new(data);
    let redirect = knobs.one_in(2);
    let tls = if redirect { &tls().1 } else { &tls().0 };
    let mut input = Vec::new();
    if knobs.one_in(2) {
        input.extend_from_slice(client_hello());
    }
    input.extend_from_slice(data);
    let ctx = Ctx {
        app: app().clone(),
        config: Arc::new(Config::from_cli(&Cli::parse_from(["httplite"]))),
        stats: Stats::new(1).worker(0),
        access_log: None,
        idle: IdleSet::default(),
        tls: httplite::tls::TlsByListener {
            public: Some(tls.clone()),
            admin: None,
        },
    };
    let splits = knobs.splits(input.len());
    let mut wire = Wire::default();
    let io = TlsIo::new(MemIo::new(&input, splits, knobs, &mut wire), tls).expect("session");
    conn::serve(&ctx, io, None, httplite::exposure::Surface::Public);

    let out = &wire.output;
    match input.first() {
        None => assert!(out.is_empty()),
        Some(0x16) => {
            if let Err(e) = records(out) {
                panic!(
                    "{e}\ninput:  {}\noutput: {}",
                    input.escape_ascii(),
                    out.escape_ascii()
                );
            }
        }
        Some(_) => {
            let ok = out.is_empty()
                || out.starts_with(b"HTTP/1.1 400 ")
                || (redirect && out.starts_with(b"HTTP/1.1 308 "));
            assert!(ok, "cleartext answer: {}", out.escape_ascii());
            let n = out.windows(9).filter(|w| w == b"HTTP/1.1 ").count();
            assert!(n <= 1, "more than one answer: {}", out.escape_ascii());
        }
    }
});

/// Checks that `out` is a sequence of whole TLS records of known types.
fn records(mut out: &[u8]) -> Result<(), String> {
    while !out.is_empty() {
        if out.len() < 5 {
            return Err(format!("a record header cut short: {} bytes", out.len()));
        }
        let (kind, version) = (out[0], u16::from_be_bytes([out[1], out[2]]));
        let len = usize::from(u16::from_be_bytes([out[3], out[4]]));
        if !matches!(kind, 0x14..=0x17) {
            return Err(format!("record of type {kind:#x}"));
        }
        if !matches!(version, 0x0301 | 0x0303) {
            return Err(format!("record version {version:#x}"));
        }
        if len > 16_384 + 256 || out.len() < 5 + len {
            return Err(format!(
                "record length {len} with {} bytes left",
                out.len() - 5
            ));
        }
        out = &out[5 + len..];
    }
    Ok(())
}

/// The server's TLS state: without and with `--redirect-http`.
fn tls() -> &'static (Arc<Tls>, Arc<Tls>) {
    static TLS: OnceLock<(Arc<Tls>, Arc<Tls>)> = OnceLock::new();
    TLS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("httplite-fuzz-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        let cert = params.self_signed(&key).expect("certificate");
        let (cert_path, key_path): (PathBuf, PathBuf) = (dir.join("c.pem"), dir.join("k.pem"));
        std::fs::write(&cert_path, cert.pem()).expect("write cert");
        std::fs::write(&key_path, key.serialize_pem()).expect("write key");
        let make = |redirect| {
            Arc::new(Tls::new(cert_path.clone(), key_path.clone(), redirect).expect("tls"))
        };
        let both = (make(false), make(true));
        let _ = std::fs::remove_dir_all(&dir);
        both
    })
}

/// A real ClientHello (from rustls' client, offering `http/1.1`).
fn client_hello() -> &'static [u8] {
    static HELLO: OnceLock<Vec<u8>> = OnceLock::new();
    HELLO.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let mut client = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
        let mut hello = Vec::new();
        client.write_tls(&mut hello).expect("ClientHello");
        hello
    })
}

/// Built-in routes only: the TLS layer is what is fuzzed here.
fn app() -> &'static Arc<App> {
    static APP: OnceLock<Arc<App>> = OnceLock::new();
    APP.get_or_init(|| {
        let pool = pool::Pool::builder()
            .name("fuzz-pool")
            .max_threads(1)
            .build();
        let retention = Retention {
            max_count: 16,
            max_age: std::time::Duration::from_secs(60),
        };
        Arc::new(App {
            root: None,
            stats: Arc::new(Stats::new(1)),
            worker_extra: Box::new(|_, _| {}),
            test_endpoints: false,
            jobs: Jobs::new(pool, retention, false),
            events: Default::default(),
            exposure: httplite::exposure::Exposure::DEMO,
            health_path: None,
            max_sleeping: 1024,
            proxy: Default::default(),
        })
    })
}
