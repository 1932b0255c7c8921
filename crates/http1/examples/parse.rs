//! Parses a pipelined buffer and encodes a response to each request, the way
//! a connection task does, minus the socket.
//!
//! Run with `cargo run -p http1 --example parse`.

use bytes::BytesMut;
use http1::{
    Decoder, Framing, Limits, Message, ReplyTo, Status, TEXT_PLAIN, encode_continue, encode_error,
    encode_head, encode_response,
};

fn main() {
    // What one `read` might return from a client that pipelines: a GET, a
    // HEAD, a POST with a chunked body, an HTTP/1.0 request, and the start of
    // one more that has not fully arrived.
    let input: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n\
HEAD /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n\
POST /echo HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n\
5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: ignored\r\n\r\n\
GET /stream HTTP/1.0\r\n\r\n\
GET /unfinished HTT";

    let mut decoder = Decoder::new(Limits::default());
    let mut read_buf = BytesMut::from(input);
    let mut write_buf = BytesMut::with_capacity(4096);
    let mut echo = Vec::new();
    let mut current: Option<ReplyTo> = None;

    loop {
        let msg = match decoder.decode(&mut read_buf) {
            Ok(Some(msg)) => msg,
            Ok(None) => break,
            Err(err) => {
                // Answer the error, then the connection would close.
                encode_error(&mut write_buf, &err);
                break;
            }
        };
        match msg {
            Message::Head(req) => {
                println!(
                    "<- {} {} {}",
                    req.method(),
                    req.target(),
                    req.version().as_str()
                );
                let to = ReplyTo::new(&req);
                match req.path() {
                    _ if req.has_body() => {
                        // Answer once the body is in, at Message::End.
                        if req.expects_continue() {
                            encode_continue(&mut write_buf);
                        }
                        current = Some(to);
                    }
                    "/plaintext" => encode_response(
                        &mut write_buf,
                        to,
                        Status::OK,
                        Some(TEXT_PLAIN),
                        b"Hello, World!",
                    ),
                    "/stream" => {
                        let mut body =
                            encode_head(&mut write_buf, to, Status::OK, &[], Framing::Chunked)
                                .expect("no caller headers to reject");
                        for part in [&b"streamed "[..], b"in ", b"parts"] {
                            body.write(&mut write_buf, part)
                                .expect("chunked has no length");
                        }
                        body.finish(&mut write_buf)
                            .expect("chunked always finishes");
                    }
                    _ => encode_response(&mut write_buf, to, Status::NOT_FOUND, None, b""),
                }
            }
            Message::Body(piece) => echo.extend_from_slice(&piece),
            Message::End => {
                let to = current.take().expect("End follows a Head with a body");
                encode_response(&mut write_buf, to, Status::OK, Some(TEXT_PLAIN), &echo);
                echo.clear();
            }
        }
        // A server would `write` here (or batch several responses first).
        flush(&mut write_buf);
    }
    flush(&mut write_buf);

    println!(
        "-- left in the read buffer, waiting for more bytes: {:?}",
        String::from_utf8_lossy(&read_buf)
    );
}

/// Prints what a server would write to the socket, CRLFs made visible.
fn flush(write_buf: &mut BytesMut) {
    if write_buf.is_empty() {
        return;
    }
    let text = String::from_utf8_lossy(write_buf).replace("\r\n", "\\r\\n\n");
    println!("-> {}", text.trim_end().replace('\n', "\n   "));
    write_buf.clear();
}
