//! Watch the event loop work: two tasks talk over a socket pair while a
//! third sleeps, with tracing on, so every `epoll_wait`, wake and poll
//! prints as it happens.
//!
//! Run: `cargo run -p executor --example trace --features trace`
//!
//! Without `--features trace` the trace sites are compiled out and the
//! example says so.

use std::time::Duration;

use executor::net::{TcpListener, TcpStream};
use executor::{Runtime, spawn};

/// Reads until `buf` is full (a short read leaves readiness set: see the
/// `read` lines in the trace).
async fn read_full(s: &TcpStream, buf: &mut [u8]) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]).await? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => got += n,
        }
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    if !reactor::trace::enable(0) {
        eprintln!(
            "tracing is compiled out: run with `cargo run -p executor --example trace \
             --features trace`"
        );
    }
    reactor::trace::set_thread_label("main");
    let rt = Runtime::new()?;
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0".parse().expect("address"))?;
        let addr = listener.local_addr()?;
        let sleeper = spawn(async {
            executor::sleep(Duration::from_millis(20)).await;
            "slept 20 ms"
        });
        let client = spawn(async move {
            let s = TcpStream::connect(addr).await?;
            s.write_all(b"ping").await?;
            let mut buf = [0u8; 4];
            read_full(&s, &mut buf).await?;
            Ok::<_, std::io::Error>(buf)
        });
        let (server_side, _) = listener.accept().await?;
        let mut buf = [0u8; 4];
        read_full(&server_side, &mut buf).await?;
        server_side.write_all(b"pong").await?;
        let reply = client.await.expect("client task")?;
        println!(
            "client got {:?}; sleeper: {}",
            String::from_utf8_lossy(&reply),
            sleeper.await.expect("sleeper task")
        );
        Ok(())
    })
}
