//! The floor: the least a request can cost on this runtime. One task per
//! connection reads whatever arrives and answers each read with a fixed
//! plaintext response: no parsing, no routing, no timers. Comparing a real
//! server's instructions per request with this one's tells how much is
//! runtime and how much is HTTP.
//!
//! Run: `cargo run --release -p executor --example floor -- 127.0.0.1:7880 [secs]`

use std::time::Duration;

use executor::net::TcpListener;

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nServer: floor\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7880".into());
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(60);
    executor::block_on(async move {
        let listener = TcpListener::bind(addr.parse().expect("address"))?;
        let serve = async {
            loop {
                let (stream, _) = listener.accept().await?;
                executor::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut out = Vec::with_capacity(4096);
                    loop {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                // One response per request in this read
                                // (requests end with an empty line).
                                let count = buf[..n].iter().filter(|&&b| b == b'\n').count() / 2;
                                for _ in 0..count.max(1) {
                                    out.extend_from_slice(RESPONSE);
                                }
                                if stream.write_all(&out).await.is_err() {
                                    break;
                                }
                                out.clear();
                            }
                        }
                    }
                });
            }
            #[allow(unreachable_code)]
            Ok::<(), std::io::Error>(())
        };
        match executor::timeout(Duration::from_secs(secs), serve).await {
            Ok(r) => r,
            Err(_) => Ok(()),
        }
    })
}
