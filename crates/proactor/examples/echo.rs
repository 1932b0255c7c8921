//! A TCP echo server on the proactor: one multishot accept, a multishot recv
//! per connection on the shared buffer ring, owned-buffer sends. It serves
//! a few clients of its own (so it ends by itself) and prints the counters:
//! note how few `io_uring_enter` calls carry all the SQEs and CQEs.
//!
//! `cargo run -p proactor --example echo`

use std::io::{Read, Write};
use std::net::TcpStream as StdStream;

use executor::{Runtime, spawn};
use proactor::{Proactor, TcpListener};

fn main() -> std::io::Result<()> {
    let rt = Runtime::with_driver(Proactor::new()?)?;
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
        let addr = l.local_addr()?;
        println!("echo on {addr}");
        let clients = std::thread::spawn(move || {
            for i in 0..4 {
                let mut s = StdStream::connect(addr).unwrap();
                for j in 0..3 {
                    let msg = format!("client {i} line {j}\n");
                    s.write_all(msg.as_bytes()).unwrap();
                    let mut back = vec![0; msg.len()];
                    s.read_exact(&mut back).unwrap();
                    assert_eq!(back, msg.as_bytes());
                }
            }
        });
        let mut conns = Vec::new();
        for _ in 0..4 {
            let s = l.accept().await?;
            conns.push(spawn(async move {
                let mut echoed = 0;
                while let Some(buf) = s.recv().await? {
                    // Copy out and return the ring buffer at once.
                    let bytes = buf.to_vec();
                    drop(buf);
                    echoed += bytes.len();
                    let (r, _) = s.send_all(bytes).await;
                    r?;
                }
                Ok::<usize, std::io::Error>(echoed)
            }));
        }
        for c in conns {
            println!(
                "connection echoed {} bytes",
                c.await.expect("echo task panicked")?
            );
        }
        clients.join().unwrap();
        Ok::<(), std::io::Error>(())
    })?;
    let st = rt.driver().stats();
    println!(
        "sqes={} cqes={} io_uring_enter={} rearms={} enobufs={} cancels={}",
        st.sqes, st.cqes, st.enters, st.rearms, st.enobufs, st.cancels
    );
    Ok(())
}
