//! Bodies larger than the socket buffers, sent both ways a driver can send
//! a file: `sendfile(2)` (`--sendfile-max unlimited`, the default) and the
//! copy through the worker's buffer (`--sendfile-max 0`, or `512KiB` for
//! the bodies above it); and a file that shrinks while
//! it is being sent, which must end the response by closing the connection
//! short of its Content-Length, never by hanging.

use std::time::{Duration, Instant};

use std::os::fd::AsRawFd as _;

use crate::harness::{Server, TempDir, find, get_req, pseudo_random, runtimes, wait_until};
use crate::pki::tls_mode;

/// Both ways to send a file body.
const MODES: &[&str] = &["unlimited", "0"];

fn get_with_range(path: &str, range: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\nRange: {range}\r\n\r\n").into_bytes()
}

#[test]
fn large_file_arrives_intact() {
    // 3 MiB: larger than socket buffers.
    let data = pseudo_random(3 << 20);
    for rt in runtimes() {
        for mode in MODES {
            let dir = TempDir::new("large-file");
            dir.write("big.bin", &data);
            let root = dir.path().to_str().unwrap();
            let server = Server::start(
                rt,
                &[
                    "--root",
                    root,
                    "--sendfile-max",
                    mode,
                    "--expose",
                    "plaintext",
                ],
            );
            let mut c = server.connect();
            for _ in 0..2 {
                let r = c.get("/big.bin");
                assert_eq!(r.status, 200, "[{rt} {mode}]");
                assert_eq!(r.body.len(), data.len(), "[{rt} {mode}]");
                assert!(r.body == data, "[{rt} {mode}] 3 MiB file arrived corrupted");
            }
            c.send(&get_with_range("/big.bin", "bytes=1000000-2000000"));
            let r = c.read_response();
            assert_eq!(r.status, 206, "[{rt} {mode}]");
            assert!(
                r.body == data[1_000_000..=2_000_000],
                "[{rt} {mode}] range of the big file differs"
            );
            // Pipelined: two big bodies back to back, then a small one.
            let mut req = get_req("/big.bin");
            req.extend_from_slice(&get_req("/big.bin"));
            req.extend_from_slice(&get_req("/_httplite/plaintext"));
            c.send(&req);
            assert!(c.read_response().body == data, "[{rt} {mode}]");
            assert!(c.read_response().body == data, "[{rt} {mode}]");
            assert_eq!(c.read_response().body, b"Hello, World!", "[{rt} {mode}]");
        }
    }
}

#[test]
fn a_file_over_512_kib_arrives_intact_by_default_and_when_copied() {
    // The default sends every body with sendfile(2); `--sendfile-max
    // 512KiB` copies the bodies above it. An odd size past both the 1 MiB
    // sendfile call and the 256 KiB copy buffer ends mid-chunk.
    use sha2::{Digest, Sha256};
    let data = pseudo_random((2 << 20) + 7);
    let want = Sha256::digest(&data);
    for rt in runtimes() {
        for flags in [&[][..], &["--sendfile-max", "512KiB"][..]] {
            let dir = TempDir::new("over-512k");
            dir.write("big.bin", &data);
            let mut args = vec!["--root", dir.path().to_str().unwrap()];
            args.extend_from_slice(flags);
            let server = Server::start(rt, &args);
            let mut c = server.connect();
            for _ in 0..2 {
                let r = c.get("/big.bin");
                assert_eq!(r.status, 200, "[{rt} {flags:?}]");
                assert_eq!(r.body.len(), data.len(), "[{rt} {flags:?}]");
                assert_eq!(Sha256::digest(&r.body), want, "[{rt} {flags:?}] sha256");
            }
            // A range that starts below 512 KiB and ends above it.
            c.send(&get_with_range("/big.bin", "bytes=500000-1600000"));
            let r = c.read_response();
            assert_eq!(r.status, 206, "[{rt} {flags:?}]");
            assert!(
                r.body == data[500_000..=1_600_000],
                "[{rt} {flags:?}] the range differs"
            );
        }
    }
}

#[test]
fn a_file_that_shrinks_while_sent_closes_the_connection() {
    const FULL: usize = 16 << 20;
    const SHRUNK: u64 = 1 << 20;
    let data = pseudo_random(FULL);
    for rt in runtimes() {
        for mode in MODES {
            let dir = TempDir::new("shrinking-file");
            let path = dir.write("big.bin", &data);
            let root = dir.path().to_str().unwrap();
            // Validity 0: the request after the cut sees the new size at once.
            let args = [
                "--root",
                root,
                "--sendfile-max",
                mode,
                "--file-cache-valid",
                "0",
            ];
            let server = Server::start(rt, &args);
            let mut c = server.connect();
            c.send(&get_req("/big.bin"));
            // Not reading yet: the server fills the socket buffers and waits
            // for room, mid-body, when the file is cut short. Waited for as
            // bytes queued at the client that stop growing.
            let queued = || {
                let mut n: libc::c_int = 0;
                // SAFETY: FIONREAD writes one int to `n`.
                unsafe { libc::ioctl(c.stream().as_raw_fd(), libc::FIONREAD, &mut n) };
                n
            };
            let mut last = -1;
            let full = wait_until(Duration::from_secs(10), Duration::from_millis(50), || {
                let now = queued();
                now > 0 && std::mem::replace(&mut last, now) == now
            });
            assert!(full, "[{rt} {mode}] the body never filled the buffers");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(SHRUNK)
                .unwrap();
            let t = Instant::now();
            let got = c
                .wait_closed(Duration::from_secs(10))
                .unwrap_or_else(|| panic!("[{rt} {mode}] still open 10 s after the cut"));
            let head_end = find(&got, b"\r\n\r\n").expect("a response head") + 4;
            let head = String::from_utf8_lossy(&got[..head_end]);
            assert!(head.starts_with("HTTP/1.1 200"), "[{rt} {mode}] {head}");
            assert!(
                head.to_ascii_lowercase()
                    .contains(&format!("content-length: {FULL}\r\n")),
                "[{rt} {mode}] {head}"
            );
            let body = &got[head_end..];
            assert!(
                body.len() < FULL,
                "[{rt} {mode}] all {FULL} bytes arrived from a file cut to {SHRUNK}"
            );
            // What the file still has must arrive as it is. Past the cut,
            // sendfile(2) may have queued pages that truncation has since
            // zeroed or split (zero copy: the socket sends the page as it
            // is when the segment leaves, seen here as wrong bytes past
            // 1 MiB); the response is short of its Content-Length, so a
            // client discards it. The copy path sends only what it read.
            let must_match = match *mode {
                "0" => body.len(),
                _ => body.len().min(SHRUNK as usize),
            };
            assert!(
                body[..must_match] == data[..must_match],
                "[{rt} {mode}] the first {must_match} of {} bytes that arrived are not the file's",
                body.len()
            );
            assert!(t.elapsed() < Duration::from_secs(10), "[{rt} {mode}]");
            // The server goes on serving, the shrunk file in full.
            let r = server.connect().get("/big.bin");
            assert_eq!(r.status, 200, "[{rt} {mode}]");
            assert!(r.body == data[..SHRUNK as usize], "[{rt} {mode}]");
        }
    }
}

#[test]
fn a_file_body_shares_its_heads_segment() {
    // A head sent on its own is a segment (and, on loopback, an ACK) more
    // per response than nginx's `tcp_nopush` or lighttpd's cork gives; the
    // head goes with `MSG_MORE`, so the first bytes the client can read
    // hold the head and the start of the body together.
    use std::io::{Read, Write};
    let data = pseudo_random(64 << 10);
    for rt in runtimes() {
        let dir = TempDir::new("head-segment");
        dir.write("64k.bin", &data);
        let root = dir.path().to_str().unwrap();
        let server = Server::start(rt, &["--root", root, "--sendfile-max", "unlimited"]);
        if tls_mode() {
            // Over TLS the head and the body are framed into records and
            // copied by the TLS layer, which sends them as it sees fit: the
            // flag is the plain socket's. Here the body must still arrive
            // whole after its head.
            let r = server.connect().get("/64k.bin");
            assert_eq!(r.status, 200, "[{rt}]");
            assert!(r.body == data, "[{rt}] the 64 KiB body differs over TLS");
            continue;
        }
        for round in 0..3 {
            let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(&get_req("/64k.bin")).unwrap();
            let mut buf = vec![0u8; 256 << 10];
            let n = s.read(&mut buf).unwrap();
            let head_end = find(&buf[..n], b"\r\n\r\n").expect("a whole head first") + 4;
            assert!(
                n > head_end,
                "[{rt} round {round}] the head arrived alone ({n} bytes), without body bytes"
            );
            assert_eq!(&buf[head_end..n], &data[..n - head_end], "[{rt}]");
        }
    }
}
