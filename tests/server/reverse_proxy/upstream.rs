//! A test upstream for the reverse proxy: a thread per connection, parsing
//! requests with `http1` (the server's own decoder: bodies of either
//! framing), answering by path:
//!
//! | path | answer |
//! |---|---|
//! | `/fast` | `200`, `fast` |
//! | `/head` | `200`, the request head it received, as the body |
//! | `/echo` | `200`, the request body |
//! | `/slow?ms=N` | `200` after N ms |
//! | `/chunked` | `200`, `a`, `bb`, `ccc` in three chunks |
//! | `/close-delimited` | `200` with no length, then the body and a close |
//! | `/big?bytes=N` | `200`, N bytes of a pattern, written 64 KiB at a time |
//! | `/malformed` | both `Content-Length` and `Transfer-Encoding` |
//! | `/cut` | `Content-Length: 100`, 10 bytes, then a close |
//!
//! It counts the connections it accepted and keeps every request head; with
//! `idle_close`, it closes a keep-alive connection idle that long (as an
//! application server's keep-alive timeout does).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use http1::{Decoder, Limits, Message};

#[derive(Debug, Default)]
struct Shared {
    accepted: AtomicUsize,
    heads: Mutex<Vec<String>>,
    stop: AtomicBool,
}

/// A running test upstream; stops when dropped.
#[derive(Debug)]
pub struct TestUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl TestUpstream {
    /// Starts one on an ephemeral port of 127.0.0.1.
    pub fn start(idle_close: Option<Duration>) -> TestUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                s.accepted.fetch_add(1, Relaxed);
                let s = s.clone();
                std::thread::spawn(move || serve(conn, &s, idle_close));
            }
        });
        TestUpstream { addr, shared }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Relaxed)
    }

    /// Every request head received, in order.
    pub fn heads(&self) -> Vec<String> {
        self.shared.heads.lock().unwrap().clone()
    }
}

impl Drop for TestUpstream {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(mut conn: TcpStream, s: &Shared, idle_close: Option<Duration>) {
    let mut decoder = Decoder::new(Limits {
        max_body: u64::MAX,
        ..Limits::default()
    });
    let mut buf = BytesMut::new();
    let mut req = None;
    let mut body = Vec::new();
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(Message::Head(r))) => {
                let head = String::from_utf8_lossy(r.head_bytes()).into_owned();
                s.heads.lock().unwrap().push(head);
                if r.has_body() {
                    req = Some(r);
                    continue;
                }
                if !answer(&mut conn, &r, &[]) {
                    return;
                }
            }
            Ok(Some(Message::Body(b))) => body.extend_from_slice(&b),
            Ok(Some(Message::End)) => {
                let r = req.take().expect("a head before the body");
                if !answer(&mut conn, &r, &std::mem::take(&mut body)) {
                    return;
                }
            }
            Ok(None) => {
                let idle = decoder.is_idle() && buf.is_empty();
                let _ = conn.set_read_timeout(if idle { idle_close } else { None });
                let mut chunk = [0u8; 64 * 1024];
                match conn.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            Err(e) => {
                let _ = conn.write_all(format!("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n{e}").as_bytes());
                return;
            }
        }
    }
}

/// Answers one request; false once the connection is to close.
fn answer(conn: &mut TcpStream, req: &http1::Request, body: &[u8]) -> bool {
    let ok = |len: usize| {
        format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nX-Upstream: test\r\n\r\n")
    };
    let query = req.query().unwrap_or_default();
    let number = |key: &str| -> u64 {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let sent = match req.path() {
        "/fast" => conn.write_all(format!("{}fast", ok(4)).as_bytes()),
        "/head" => {
            let head = req.head_bytes();
            conn.write_all(ok(head.len()).as_bytes())
                .and_then(|_| conn.write_all(head))
        }
        "/echo" => conn
            .write_all(ok(body.len()).as_bytes())
            .and_then(|_| conn.write_all(body)),
        "/slow" => {
            std::thread::sleep(Duration::from_millis(number("ms")));
            conn.write_all(format!("{}slow", ok(4)).as_bytes())
        }
        "/chunked" => conn.write_all(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n2\r\nbb\r\n3\r\nccc\r\n0\r\n\r\n",
        ),
        "/close-delimited" => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end");
            return false;
        }
        "/big" => {
            let n = number("bytes");
            let piece: Vec<u8> = (0..64 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
            let mut r = conn.write_all(ok(n as usize).as_bytes());
            let mut left = n;
            while r.is_ok() && left > 0 {
                let k = left.min(piece.len() as u64) as usize;
                r = conn.write_all(&piece[..k]);
                left -= k as u64;
            }
            r
        }
        "/malformed" => {
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            );
            return false;
        }
        "/cut" => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
            return false;
        }
        _ => conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
    };
    sent.is_ok() && req.keep_alive()
}
