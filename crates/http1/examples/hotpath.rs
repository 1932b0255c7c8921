//! The per-request hot path of a plaintext benchmark, in a loop, for
//! instruction counting under callgrind:
//!
//! ```text
//! cargo build --release -p http1 --example hotpath
//! valgrind --tool=callgrind target/release/examples/hotpath 10000
//! valgrind --tool=callgrind target/release/examples/hotpath 110000
//! ```
//!
//! (Ir(110k) − Ir(10k)) / 100,000 is the cost of one request: append the
//! request's bytes to the read buffer, decode the head (split off the buffer
//! and dropped, as a server does), encode the `Hello, World!` response into
//! the write buffer and clear it. Buffers are reused the way the server
//! reuses them. A second argument pipelines that many requests per buffer
//! fill (`hotpath 110000 16`); the count is then of requests, not fills.
//! A third argument, `browser`, sends a browser-like head with a dozen
//! headers instead.

use std::hint::black_box;

use bytes::BytesMut;
use http1::{Decoder, Limits, Message, ReplyTo, Status, TEXT_PLAIN, encode_response};

const REQUEST: &[u8] = b"GET /_httplite/plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n";
const BROWSER: &[u8] = b"GET /_httplite/plaintext?lang=en HTTP/1.1\r\n\
Host: localhost:8080\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n\
Accept-Language: en-US,en;q=0.5\r\n\
Accept-Encoding: gzip, deflate, br, zstd\r\n\
Connection: keep-alive\r\n\
Cookie: session=0123456789abcdef; theme=dark\r\n\
Upgrade-Insecure-Requests: 1\r\n\
Sec-Fetch-Dest: document\r\n\
Sec-Fetch-Mode: navigate\r\n\
Sec-Fetch-Site: none\r\n\
Priority: u=0, i\r\n\
\r\n";
/// What the server keeps free in its read buffer before each read.
const MIN_READ: usize = 1024;

fn main() {
    let mut args = std::env::args().skip(1);
    let requests: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let pipeline: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(1).max(1);
    let request = match args.next().as_deref() {
        Some("browser") => BROWSER,
        _ => REQUEST,
    };

    // The server refreshes the `Date` cache once per event-loop turn.
    http1::refresh_date();
    let mut decoder = Decoder::new(Limits::default());
    let mut rbuf = BytesMut::with_capacity(4096);
    let mut wbuf = BytesMut::with_capacity(4096);
    let mut served = 0;
    let mut out_bytes = 0;
    while served < requests {
        if rbuf.capacity() - rbuf.len() < MIN_READ {
            rbuf.reserve(MIN_READ);
        }
        let batch = pipeline.min(requests - served);
        for _ in 0..batch {
            rbuf.extend_from_slice(black_box(request));
        }
        loop {
            match decoder.decode(&mut rbuf) {
                Ok(Some(Message::Head(req))) => {
                    let path = black_box(req.path());
                    let status = if path == "/_httplite/plaintext" {
                        Status::OK
                    } else {
                        Status::NOT_FOUND
                    };
                    encode_response(
                        &mut wbuf,
                        ReplyTo::new(&req),
                        status,
                        Some(TEXT_PLAIN),
                        b"Hello, World!",
                    );
                    served += 1;
                }
                Ok(Some(_)) => unreachable!("no bodies"),
                Ok(None) => break,
                Err(e) => panic!("{e}"),
            }
        }
        out_bytes += wbuf.len();
        black_box(&wbuf[..]);
        wbuf.clear();
    }
    assert!(decoder.is_idle() && rbuf.is_empty());
    println!("{served} requests, {out_bytes} response bytes");
}
