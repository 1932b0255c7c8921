//! Pitfall: a blocking call inside a handler stalls every connection on the
//! worker thread.
//!
//! One executor thread serves five connections. Four *fast* clients ping
//! every 10 ms and time each answer; one *slow* client sends five requests
//! whose handler needs 100 ms of blocking work (a `std::thread::sleep`,
//! standing in for a synchronous library call, a cold disk read, a big
//! hash). Two runs:
//!
//! 1. the handler blocks inline: while it sleeps the thread runs nothing
//!    else, so every fast client waits up to 100 ms for a 10 µs answer;
//! 2. the handler hands the work to the blocking pool
//!    (`pool::spawn_blocking(..).await`): the task parks, the loop keeps
//!    serving, and the pool thread's wake brings the result back.
//!
//! Run: `cargo run --release -p executor --example pitfall_blocking_handler`
//! Explained in `docs/pitfalls/blocking_handler.md`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::time::{Duration, Instant};

use executor::net::{TcpListener, TcpStream};

const FAST_CLIENTS: usize = 4;
const PINGS: u32 = 60;
const PING_EVERY: Duration = Duration::from_millis(10);
const SLOW_REQUESTS: u32 = 5;
/// The blocking work one slow request needs.
const BLOCKING_WORK: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, PartialEq)]
enum Handler {
    Inline,
    Offloaded,
}

fn main() -> io::Result<()> {
    println!(
        "one worker thread, {FAST_CLIENTS} clients pinging every {} ms, one client sending \
         {SLOW_REQUESTS} requests that each need {} ms of blocking work\n",
        PING_EVERY.as_millis(),
        BLOCKING_WORK.as_millis()
    );
    run(
        "std::thread::sleep inside the handler (broken)",
        Handler::Inline,
    )?;
    run(
        "pool::spawn_blocking(..).await in the handler (fixed)",
        Handler::Offloaded,
    )?;
    println!(
        "Nothing that blocks may run on an event-loop thread: every connection on it waits. \
         Offload it (pool::spawn_blocking), or make it non-blocking."
    );
    Ok(())
}

fn run(title: &str, handler: Handler) -> io::Result<()> {
    println!("== {title}");
    let start = Instant::now();
    let (fast, slow) = executor::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
        let addr = listener.local_addr()?;
        let mut clients = Vec::new();
        for _ in 0..FAST_CLIENTS {
            clients.push(std::thread::spawn(move || client(addr, b"fast", PINGS)));
        }
        clients.push(std::thread::spawn(move || {
            client(addr, b"slow", SLOW_REQUESTS)
        }));
        let mut conns = Vec::new();
        for _ in 0..clients.len() {
            let (stream, _) = listener.accept().await?;
            conns.push(executor::spawn(serve(stream, handler)));
        }
        // Connections end when their clients hang up; joining the client
        // threads (a blocking call) is harmless only after that.
        for c in conns {
            c.await.expect("connection task")?;
        }
        let mut results: Vec<Vec<Duration>> = clients
            .into_iter()
            .map(|c| c.join().expect("client thread"))
            .collect::<io::Result<_>>()?;
        let slow = results.pop().expect("slow client");
        Ok::<_, io::Error>((results.concat(), slow))
    })?;
    report("fast requests", &fast);
    report("slow requests", &slow);
    println!(
        "   run took {:.0} ms\n",
        start.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

/// One connection: 4-byte requests, 4-byte answers, until EOF.
async fn serve(stream: TcpStream, handler: Handler) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut req = [0u8; 4];
    loop {
        let mut got = 0;
        while got < req.len() {
            match stream.read(&mut req[got..]).await? {
                0 => return Ok(()),
                n => got += n,
            }
        }
        if &req == b"slow" {
            // ANCHOR: handler
            match handler {
                // The whole thread sleeps: no other task runs meanwhile.
                Handler::Inline => std::thread::sleep(BLOCKING_WORK),
                // This task parks; the loop serves the others.
                Handler::Offloaded => pool::spawn_blocking(|| std::thread::sleep(BLOCKING_WORK))
                    .map_err(io::Error::other)? // Full: the pool's queue is at its bound
                    .await
                    .map_err(|e| io::Error::other(e.to_string()))?,
            }
            // ANCHOR_END: handler
        }
        stream.write_all(b"done").await?;
    }
}

/// Sends `n` requests, one per period (or as soon as the last one was
/// answered), and returns each one's latency.
fn client(addr: SocketAddr, kind: &[u8; 4], n: u32) -> io::Result<Vec<Duration>> {
    let mut s = StdStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let start = Instant::now();
    let mut latencies = Vec::new();
    for i in 0..n {
        if let Some(wait) = (start + PING_EVERY * i).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let sent = Instant::now();
        s.write_all(kind)?;
        let mut answer = [0u8; 4];
        s.read_exact(&mut answer)?;
        latencies.push(sent.elapsed());
    }
    Ok(latencies)
}

fn report(what: &str, latencies: &[Duration]) {
    let mut v = latencies.to_vec();
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let pct = |p: usize| v[(v.len() * p / 100).min(v.len() - 1)];
    let over = v.iter().filter(|d| **d > Duration::from_millis(20)).count();
    println!(
        "   {what}: {} answered, median {:.3} ms, p90 {:.3} ms, worst {:.1} ms; {over} took over 20 ms",
        v.len(),
        ms(pct(50)),
        ms(pct(90)),
        ms(*v.last().expect("some requests"))
    );
}
