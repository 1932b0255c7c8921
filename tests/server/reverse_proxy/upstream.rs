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
//! | `/ws` | with `Upgrade: websocket`: `101`, then a WebSocket echo (each message back, unmasked; a close answered and the connection closed) |
//! | `/ws?hold` | the same, but the `101` alone: then it only reads, echoing nothing |
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
                if r.path() == "/ws" {
                    websocket(conn, &r, buf);
                    return;
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

/// `/ws`: the handshake's `101` (RFC 6455 §4.2.2), then an echo of each
/// message, until a close frame (answered) or the end of the stream.
/// `buf` holds what followed the request's head.
fn websocket(mut conn: TcpStream, req: &http1::Request, mut buf: BytesMut) {
    let key = req
        .headers()
        .find(|(n, _)| n.eq_ignore_ascii_case("sec-websocket-key"))
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default();
    let asked = req
        .headers()
        .any(|(n, v)| n.eq_ignore_ascii_case("upgrade") && v.eq_ignore_ascii_case(b"websocket"));
    if !asked {
        let _ = conn.write_all(b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n\r\n",
        websocket_accept(&key)
    );
    if conn.write_all(head.as_bytes()).is_err() {
        return;
    }
    let hold = req.query() == Some("hold");
    loop {
        while let Some((opcode, payload, len)) = frame(&buf) {
            let _ = buf.split_to(len);
            if hold {
                continue;
            }
            if conn.write_all(&server_frame(opcode, &payload)).is_err() || opcode == 8 {
                return;
            }
        }
        let mut chunk = [0u8; 64 * 1024];
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// `Sec-WebSocket-Accept` for `key`: base64 of the SHA-1 of the key and
/// RFC 6455's GUID.
pub fn websocket_accept(key: &str) -> String {
    use sha1::Digest as _;
    let digest = sha1::Sha1::digest(format!("{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11"));
    base64(&digest)
}

fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            *group.get(1).unwrap_or(&0),
            *group.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= group.len() {
                out.push(ABC[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The first whole frame in `buf`: its opcode, its payload (unmasked) and
/// its length on the wire.
pub fn frame(buf: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    if buf.len() < 2 {
        return None;
    }
    let opcode = buf[0] & 0x0f;
    let masked = buf[1] & 0x80 != 0;
    let (len, mut at) = match buf[1] & 0x7f {
        126 => (
            u64::from(u16::from_be_bytes(buf.get(2..4)?.try_into().ok()?)),
            4,
        ),
        127 => (u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?), 10),
        n => (u64::from(n), 2),
    };
    let mask: Option<[u8; 4]> = if masked {
        let m = buf.get(at..at + 4)?.try_into().ok()?;
        at += 4;
        Some(m)
    } else {
        None
    };
    let end = at + usize::try_from(len).ok()?;
    let mut payload = buf.get(at..end)?.to_vec();
    if let Some(m) = mask {
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= m[i % 4];
        }
    }
    Some((opcode, payload, end))
}

/// A frame with `payload` as a server sends it (final, unmasked).
pub fn server_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    encode_frame(opcode, payload, None)
}

/// A frame with `payload` as a client sends it (final, masked with `mask`).
pub fn client_frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    encode_frame(opcode, payload, Some(mask))
}

fn encode_frame(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    let bit = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(bit | n as u8),
        n if n <= 0xffff => {
            out.push(bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(m) => {
            out.extend_from_slice(&m);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ m[i % 4]));
        }
        None => out.extend_from_slice(payload),
    }
    out
}
