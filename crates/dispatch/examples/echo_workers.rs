//! Two workers echoing lines, each with its own raw epoll loop; Ctrl-C shuts
//! down gracefully (in-flight lines are answered, then the threads join).
//!
//! ```text
//! cargo run -p dispatch --example echo_workers [addr] [acceptor|reuseport]
//! # in another terminal, a few times:
//! printf 'hello\nworld\n' | nc -q1 127.0.0.1 7878
//! 0 hello
//! 0 world       <- the worker id, then your line; the next client gets 1
//! ```

mod common;

use std::time::Duration;

use dispatch::{Config, Mode, Server};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7878".into());
    let mode = match args.next().as_deref() {
        Some("reuseport") => Mode::ReusePort,
        _ => Mode::Acceptor,
    };
    let config = Config {
        workers: 2,
        mode,
        handle_signals: true,
        signal_grace: Duration::from_secs(5),
        ..Config::new(addr.parse().expect("address like 127.0.0.1:7878"))
    };
    let server = Server::start(config, common::echo_worker)?;
    println!(
        "echoing on {} with 2 workers ({mode:?} mode); Ctrl-C to stop",
        server.local_addr()
    );
    let stats = server.stats().clone();
    server.join()?;
    println!("stopped. acceptor: {:?}", stats.acceptor().snapshot());
    for (id, w) in stats.workers().iter().enumerate() {
        println!("worker {id}: {:?}", w.snapshot());
    }
    Ok(())
}
