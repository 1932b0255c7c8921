//! The session pump over an in-memory, non-blocking socket, against
//! rustls' own client: every `WouldBlock` must leave a state the next call
//! continues from, whatever the split of the bytes.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::Arc;

use super::{RawIo, Session};
use crate::tls::Tls;
use crate::tls::stats::Failure;

/// One direction of a socket: bytes in flight, at most `chunk` per call.
struct Pipe {
    to_server: VecDeque<u8>,
    to_client: VecDeque<u8>,
    chunk: usize,
    closed: bool,
}

impl RawIo for Pipe {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.to_server.is_empty() {
            return if self.closed {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = buf.len().min(self.chunk).min(self.to_server.len());
        for b in buf.iter_mut().take(n) {
            *b = self.to_server.pop_front().unwrap();
        }
        Ok(n)
    }
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(self.chunk);
        self.to_client.extend(&buf[..n]);
        Ok(n)
    }
}

/// A server configuration with a fresh self-signed certificate for
/// `localhost`, and a client configuration that trusts it.
pub(crate) fn server(redirect: bool) -> (Arc<Tls>, Arc<rustls::ClientConfig>) {
    let dir = std::env::temp_dir().join(format!(
        "httplite-session-test-{}-{}",
        std::process::id(),
        redirect
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (c, k) = (dir.join("c.pem"), dir.join("k.pem"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    let tls = Arc::new(Tls::new(c, k, redirect).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (tls, Arc::new(client))
}

/// Moves bytes between a rustls client and the server session until the
/// server has read `want` plaintext bytes; returns them.
fn pump(
    client: &mut rustls::ClientConnection,
    session: &mut Session,
    pipe: &mut Pipe,
    want: usize,
) -> Vec<u8> {
    let mut got = Vec::new();
    for _ in 0..10_000 {
        while client.wants_write() {
            let mut out = Vec::new();
            client.write_tls(&mut out).unwrap();
            pipe.to_server.extend(out);
        }
        let mut buf = [0u8; 100];
        match session.read(pipe, &mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("server read: {e}"),
        }
        let incoming: Vec<u8> = pipe.to_client.drain(..).collect();
        if !incoming.is_empty() {
            client.read_tls(&mut &incoming[..]).unwrap();
            client.process_new_packets().unwrap();
        }
        if got.len() >= want {
            return got;
        }
    }
    panic!("no progress: got {got:?}");
}

#[test]
fn request_and_response_in_small_pieces() {
    let (tls, config) = server(false);
    for chunk in [1, 7, 1 << 20] {
        let mut pipe = Pipe {
            to_server: VecDeque::new(),
            to_client: VecDeque::new(),
            chunk,
            closed: false,
        };
        let mut session = Session::new(&tls).unwrap();
        let name = "localhost".try_into().unwrap();
        let mut client = rustls::ClientConnection::new(config.clone(), name).unwrap();
        client
            .writer()
            .write_all(b"GET / HTTP/1.1\r\n\r\n")
            .unwrap();
        let got = pump(&mut client, &mut session, &mut pipe, 18);
        assert_eq!(got, b"GET / HTTP/1.1\r\n\r\n", "chunk {chunk}");
        assert!(!session.is_handshaking());
        // The answer: taken in pieces while the socket takes `chunk` bytes
        // a call, and all of it out after `flush`.
        let answer = vec![b'x'; 100_000];
        let mut off = 0;
        while off < answer.len() {
            off += session.write(&mut pipe, &answer[off..]).unwrap();
        }
        session.flush(&mut pipe).unwrap();
        let incoming: Vec<u8> = pipe.to_client.drain(..).collect();
        let mut rest = &incoming[..];
        let mut plain = Vec::new();
        while !rest.is_empty() {
            client.read_tls(&mut rest).unwrap();
            client.process_new_packets().unwrap();
            let _ = client.reader().read_to_end(&mut plain);
        }
        assert_eq!(plain, answer, "chunk {chunk}");
    }
    let mut j = String::new();
    tls.stats.write_json(&mut j);
    // One client configuration (with its session cache) for the three:
    // the second and third resume the first's session.
    assert!(j.contains("\"full\":1,\"resumed\":2"), "{j}");
}

#[test]
fn plain_http_is_answered_and_garbage_fails() {
    let (tls, _) = server(true);
    let mut pipe = Pipe {
        to_server: b"GET /x HTTP/1.1\r\nHost: h:1\r\n\r\n"
            .iter()
            .copied()
            .collect(),
        to_client: VecDeque::new(),
        chunk: 5,
        closed: false,
    };
    let mut session = Session::new(&tls).unwrap();
    let mut buf = [0u8; 64];
    // One call: the session reads the whole head (the socket hands it over
    // 5 bytes at a time) and answers it.
    let e = match session.read(&mut pipe, &mut buf) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => panic!("stalled"),
        Err(e) => e,
        Ok(n) => panic!("plaintext from a cleartext client: {n}"),
    };
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    let reply: Vec<u8> = pipe.to_client.drain(..).collect();
    assert!(
        reply.starts_with(b"HTTP/1.1 308 "),
        "{}",
        reply.escape_ascii()
    );
    assert_eq!(tls.stats.failures(Failure::PlainHttp), 1);

    // A handshake record full of garbage: an error, counted, never a panic.
    let mut pipe = Pipe {
        to_server: b"\x16\x03\x01\x00\x04abcd".iter().copied().collect(),
        to_client: VecDeque::new(),
        chunk: 3,
        closed: false,
    };
    let mut session = Session::new(&tls).unwrap();
    let e = match session.read(&mut pipe, &mut buf) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => panic!("stalled"),
        Err(e) => e,
        Ok(_) => panic!("plaintext from garbage"),
    };
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    drop(session);
    let failed: u64 = [Failure::BadRecord, Failure::Misbehaved, Failure::Other]
        .iter()
        .map(|f| tls.stats.failures(*f))
        .sum();
    assert_eq!(failed, 1);
    assert_eq!(tls.stats.failures(Failure::Incomplete), 0);
}

#[test]
fn a_client_that_leaves_mid_handshake_is_incomplete() {
    let (tls, _) = server(false);
    let mut pipe = Pipe {
        to_server: b"\x16\x03\x01\x01\x00\x01".iter().copied().collect(),
        to_client: VecDeque::new(),
        chunk: 64,
        closed: true,
    };
    let mut session = Session::new(&tls).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(session.read(&mut pipe, &mut buf).unwrap(), 0);
    drop(session);
    assert_eq!(tls.stats.failures(Failure::Incomplete), 1);
}
