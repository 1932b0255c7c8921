//! monoio peer (io_uring, thread-per-core) for scripts/bench.sh and
//! scripts/bench-uring.sh: the io_uring runtime people use, beside httplite's
//! hand-written proactor. One monoio runtime per worker thread on its
//! io_uring driver only (no epoll fallback), each with its own SO_REUSEPORT
//! listener. HTTP/1.1 by hand over httparse, as monoio's own HTTP benchmark
//! servers do: every complete request in a read is answered into one buffer,
//! written with one `write_all`, so pipelined requests cost one send.
//!
//! The answer is httplite's `/_httplite/plaintext` byte for byte (the `Server`
//! header included, a `Date` refreshed once a second), on every path;
//! `/sleep?ms=N` (or `/_httplite/sleep?ms=N`) sleeps N ms first.
//!
//! Usage: peer-monoio [--bind 127.0.0.1:8080] [--workers 1]
use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use httplite_peers::{run_workers, sleep_ms};
use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{ListenerOpts, TcpListener, TcpStream};

/// Bytes a client may send before its request head is complete.
const MAX_HEAD: usize = 64 * 1024;

thread_local! {
    /// `Date: ...\r\n`, refreshed by each worker's clock task once a second.
    static DATE: RefCell<Vec<u8>> = RefCell::new(date_line());
}

fn date_line() -> Vec<u8> {
    format!("Date: {}\r\n", httpdate::fmt_http_date(SystemTime::now())).into_bytes()
}

fn header<'a>(req: &'a httparse::Request, name: &str) -> Option<&'a [u8]> {
    req.headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value)
}

fn has_token(value: Option<&[u8]>, token: &str) -> bool {
    value.is_some_and(|v| {
        v.split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    })
}

fn respond(out: &mut Vec<u8>) {
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: httplite\r\n");
    DATE.with(|d| out.extend_from_slice(&d.borrow()));
    out.extend_from_slice(b"Content-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!");
}

/// One parsed request: its length (head and body) in the buffer, whether the
/// connection closes after it, and the sleep it asks for.
struct Parsed {
    len: usize,
    close: bool,
    sleep: Option<u64>,
}

/// The next complete request at the start of `buf`; `Ok(None)` when more
/// bytes are needed, `Err` for a request that cannot be served.
fn parse(buf: &[u8]) -> Result<Option<Parsed>, ()> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(()),
    };
    if header(&req, "transfer-encoding").is_some() {
        return Err(()); // no chunked bodies here; none of the benchmarks sends one
    }
    let body = match header(&req, "content-length") {
        None => 0,
        Some(v) => std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .ok_or(())?,
    };
    if buf.len() < head + body {
        return Ok(None);
    }
    let conn = header(&req, "connection");
    let close = if req.version == Some(0) {
        !has_token(conn, "keep-alive")
    } else {
        has_token(conn, "close")
    };
    Ok(Some(Parsed {
        len: head + body,
        close,
        sleep: req.path.and_then(sleep_ms),
    }))
}

async fn serve(mut stream: TcpStream) {
    let mut rbuf: Vec<u8> = Vec::with_capacity(4096);
    let mut wbuf: Vec<u8> = Vec::with_capacity(4096);
    loop {
        if rbuf.capacity() - rbuf.len() < 1024 {
            rbuf.reserve(4096);
        }
        let start = rbuf.len();
        let (res, slice) = stream.read(rbuf.slice_mut(start..)).await;
        rbuf = slice.into_inner();
        match res {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut off = 0;
        let mut close = false;
        while !close {
            let Ok(parsed) = parse(&rbuf[off..]) else {
                return;
            };
            let Some(p) = parsed else { break };
            if let Some(ms) = p.sleep {
                monoio::time::sleep(Duration::from_millis(ms)).await;
            }
            respond(&mut wbuf);
            off += p.len;
            close = p.close;
        }
        rbuf.drain(..off);
        if rbuf.len() > MAX_HEAD {
            return;
        }
        if !wbuf.is_empty() {
            let (res, buf) = stream.write_all(wbuf).await;
            wbuf = buf;
            wbuf.clear();
            if res.is_err() {
                return;
            }
        }
        if close {
            return;
        }
    }
}

fn worker(addr: SocketAddr) {
    let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .enable_timer()
        .build()
        .expect("an io_uring runtime (monoio's io_uring driver)");
    rt.block_on(async move {
        let opts = ListenerOpts::new().reuse_port(true).backlog(4096);
        let listener = TcpListener::bind_with_config(addr, &opts).expect("bind");
        monoio::spawn(async {
            loop {
                monoio::time::sleep(Duration::from_secs(1)).await;
                DATE.with(|d| *d.borrow_mut() = date_line());
            }
        });
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            monoio::spawn(serve(stream));
        }
    });
}

fn main() {
    run_workers(worker);
}
