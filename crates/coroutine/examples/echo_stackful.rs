//! A TCP echo server on one thread: one coroutine per connection, all of
//! them multiplexed by the reactor. It serves for 60 seconds (or `--secs N`)
//! and exits by itself.
//!
//! The same server as `crates/executor/examples/echo.rs`, written
//! blocking-style: no `async`, no `.await`; `read` and `write_all` park the
//! coroutine instead. Diff the two files to see what a stack buys.
//!
//! Run: `cargo run -p coroutine --example echo_stackful` then, from another shell:
//! `printf 'hello\n' | nc -q1 127.0.0.1 7879`

use std::time::{Duration, Instant};

use coroutine::net::TcpListener;

fn main() -> std::io::Result<()> {
    let secs: u64 = std::env::args()
        .skip_while(|a| a != "--secs")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    coroutine::run(move || {
        let listener = TcpListener::bind("127.0.0.1:7879".parse().unwrap())?;
        println!("echo server on {} for {secs} s", listener.local_addr()?);
        let deadline = Instant::now() + Duration::from_secs(secs);
        let serve = || -> std::io::Result<()> {
            loop {
                let (stream, peer) = listener.accept_until(Some(deadline))?;
                println!("{peer} connected");
                coroutine::spawn(move || {
                    let mut buf = [0u8; 4096];
                    loop {
                        match stream.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if stream.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    println!("{peer} disconnected");
                });
            }
        };
        match serve() {
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                println!("time is up, bye");
                Ok(())
            }
            result => result,
        }
    })
}
