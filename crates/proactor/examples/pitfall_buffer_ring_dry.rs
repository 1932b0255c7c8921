//! Pitfall: a provided-buffer ring that runs dry.
//!
//! With a buffer ring the kernel, not the application, picks the buffer a
//! recv lands in, and only from the buffers the application has given back.
//! A server that keeps every `RecvBuf` it receives until it has a whole
//! request (here: until it has 8 KiB) holds the whole ring once the request
//! is bigger than the ring: the multishot recv ends with `-ENOBUFS`, the
//! stream waits for a buffer to come back, and none ever does. The
//! connection stalls; a 500 ms watchdog reports it.
//!
//! 1. hold every buffer until the request is complete (broken): stalls;
//! 2. copy the bytes out and drop each buffer at once (fixed): the ring of
//!    four 1 KiB buffers carries the 8 KiB request.
//!
//! Run: `cargo run --release -p proactor --example pitfall_buffer_ring_dry`

use std::io::Write;
use std::net::TcpStream as StdStream;
use std::time::{Duration, Instant};

use executor::Runtime;
use proactor::{Proactor, RecvBuf, TcpListener, time};

const REQUEST: usize = 8192;

fn run(hold: bool) -> std::io::Result<()> {
    let rt = Runtime::with_driver(Proactor::builder().buffers(4, 1024).build()?)?;
    let t0 = Instant::now();
    let outcome = rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
        let addr = l.local_addr()?;
        let client = std::thread::spawn(move || {
            let mut c = StdStream::connect(addr).unwrap();
            c.write_all(&[b'x'; REQUEST]).unwrap();
            std::thread::sleep(Duration::from_millis(700));
        });
        let s = l.accept().await?;
        let mut held: Vec<RecvBuf> = Vec::new();
        let mut copied = Vec::new();
        let got = time::timeout(Duration::from_millis(500), async {
            loop {
                let n = copied.len() + held.iter().map(|b| b.len()).sum::<usize>();
                if n >= REQUEST {
                    return Ok::<usize, std::io::Error>(n);
                }
                let Some(buf) = s.recv().await? else {
                    return Ok(n);
                };
                if hold {
                    held.push(buf); // keeps the ring buffer out of the kernel's reach
                } else {
                    copied.extend_from_slice(&buf); // the buffer goes back on drop
                }
            }
        })
        .await;
        let took = t0.elapsed();
        // Counted while `held` still holds its buffers.
        let left = Proactor::current().buffers_available();
        drop(held);
        client.join().unwrap();
        Ok::<_, std::io::Error>((got, took, left))
    })?;
    let (outcome, took, left) = outcome;
    let st = rt.driver().stats();
    match outcome {
        Ok(n) => println!(
            "  got the whole request ({} bytes) in {:?}; ENOBUFS {}, re-arms {}",
            n?, took, st.enobufs, st.rearms
        ),
        Err(_) => println!(
            "  STALLED: no progress for 500 ms with every buffer held; ENOBUFS {}, buffers left in the ring {}",
            st.enobufs, left
        ),
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    println!("a ring of 4 × 1 KiB buffers, one 8 KiB request");
    println!("1. holding every RecvBuf until the request is complete (broken):");
    run(true)?;
    println!("2. copying out and dropping each RecvBuf at once (fixed):");
    run(false)?;
    Ok(())
}
