//! Connection rate through acceptor → pipe → worker versus `SO_REUSEPORT`,
//! and how evenly each spreads connections over the workers.
//!
//! ```text
//! cargo run --release -p dispatch --example conn_rate [seconds] [clients]
//! ```
//!
//! Each client thread loops: connect, write a line, read the echo, close
//! (with `SO_LINGER 0`, so that a long run does not exhaust ephemeral ports
//! in `TIME_WAIT`). Short connections are the acceptor's worst case: every
//! one pays the handoff, and there is no request work to hide it behind.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dispatch::{Config, Mode, Server};

struct Run {
    mode: Mode,
    workers: usize,
    conns: u64,
    secs: f64,
    per_worker: Vec<u64>,
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().map_or(2.0, |s| s.parse().expect("seconds"));
    let clients: usize = args.next().map_or(1, |s| s.parse().expect("clients"));
    dispatch::sys::raise_nofile_limit()?;
    let workers = dispatch::default_workers();
    println!(
        "{workers} workers, {clients} client thread(s), {secs} s per mode, connect/write/read/close"
    );
    let runs = [
        measure(Mode::Acceptor, workers, clients, secs)?,
        measure(Mode::ReusePort, workers, clients, secs)?,
    ];
    println!();
    println!(
        "{:<10} {:>7} {:>8} {:>6} {:>9}   {:<24} {:>7}",
        "mode", "workers", "conns", "secs", "conns/s", "per worker", "max/min"
    );
    for r in &runs {
        let max = *r.per_worker.iter().max().unwrap_or(&0) as f64;
        let min = *r.per_worker.iter().min().unwrap_or(&0) as f64;
        let spread: Vec<String> = r.per_worker.iter().map(u64::to_string).collect();
        println!(
            "{:<10} {:>7} {:>8} {:>6.2} {:>9.0}   {:<24} {:>7.2}",
            format!("{:?}", r.mode).to_lowercase(),
            r.workers,
            r.conns,
            r.secs,
            r.conns as f64 / r.secs,
            spread.join(" / "),
            if min > 0.0 { max / min } else { f64::INFINITY },
        );
    }
    let rate = |r: &Run| r.conns as f64 / r.secs;
    println!(
        "\nreuseport / acceptor connection rate: {:.2}",
        rate(&runs[1]) / rate(&runs[0])
    );
    Ok(())
}

fn measure(mode: Mode, workers: usize, clients: usize, secs: f64) -> std::io::Result<Run> {
    let config = Config {
        workers,
        mode,
        backlog: 4096,
        ..Config::new("127.0.0.1:0".parse().unwrap())
    };
    let server = Server::start(config, common::echo_worker)?;
    let addr = server.local_addr();
    // Warm up (page in code, grow buffers), then count from a clean slate.
    for _ in 0..200 {
        one_connection(addr)?;
    }
    let before: Vec<u64> = (server.stats().workers().iter())
        .map(|w| w.handed_off())
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    one_connection(addr).expect("connection");
                    n += 1;
                }
                n
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let conns: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let elapsed = start.elapsed().as_secs_f64();

    let per_worker = (server.stats().workers().iter())
        .zip(before)
        .map(|(w, b)| w.handed_off() - b)
        .collect();
    server.shutdown(Duration::from_secs(1));
    server.join()?;
    Ok(Run {
        mode,
        workers,
        conns,
        secs: elapsed,
        per_worker,
    })
}

fn one_connection(addr: SocketAddr) -> std::io::Result<()> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"ping\n")?;
    let mut buf = [0u8; 64];
    let mut got = 0;
    while !buf[..got].contains(&b'\n') {
        let n = s.read(&mut buf[got..])?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got += n;
    }
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `linger` is a valid struct linger for the duration of the call,
    // and its size is passed along.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
