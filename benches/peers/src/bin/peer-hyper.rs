//! tokio + hyper 1.x peer for scripts/bench.sh: HTTP/1.1 only, one
//! `current_thread` runtime per worker thread, each with its own
//! SO_REUSEPORT listener. Answers `Hello, World!` on every path, and
//! `/sleep?ms=N` (or `/_httplite/sleep?ms=N`) after sleeping N ms.
//!
//! Usage: peer-hyper [--bind 127.0.0.1:8080] [--workers 1]
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use httplite_peers::{run_workers, sleep_ms};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if let Some(ms) = req
        .uri()
        .path_and_query()
        .and_then(|t| sleep_ms(t.as_str()))
    {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let mut resp = Response::new(Full::new(Bytes::from_static(b"Hello, World!")));
    resp.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    Ok(resp)
}

fn listener(addr: SocketAddr) -> std::net::TcpListener {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.set_reuseaddr(true).unwrap();
    sock.set_reuseport(true).unwrap();
    sock.bind(addr).expect("bind");
    let l = sock.listen(4096).expect("listen");
    l.into_std().unwrap()
}

fn worker(addr: SocketAddr) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let std_l = listener(addr);
        let l = tokio::net::TcpListener::from_std(std_l).unwrap();
        loop {
            let Ok((stream, _)) = l.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .keep_alive(true)
                    .pipeline_flush(true)
                    .serve_connection(TokioIo::new(stream), service_fn(handle))
                    .await;
            });
        }
    });
}

fn main() {
    run_workers(worker);
}
