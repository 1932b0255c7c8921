//! A TCP echo server on one thread: one task per connection, all of them
//! multiplexed by the reactor. It serves for 60 seconds (or `--secs N`) and
//! exits by itself.
//!
//! Run: `cargo run -p executor --example echo` then, from another shell:
//! `printf 'hello\n' | nc -q1 127.0.0.1 7879`

use std::time::Duration;

use executor::net::TcpListener;

fn main() -> std::io::Result<()> {
    let secs: u64 = std::env::args()
        .skip_while(|a| a != "--secs")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    executor::block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:7879".parse().unwrap())?;
        println!("echo server on {} for {secs} s", listener.local_addr()?);
        let serve = async {
            loop {
                let (stream, peer) = listener.accept().await?;
                println!("{peer} connected");
                executor::spawn(async move {
                    let mut buf = [0u8; 4096];
                    loop {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if stream.write_all(&buf[..n]).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    println!("{peer} disconnected");
                });
            }
            #[allow(unreachable_code)]
            Ok::<(), std::io::Error>(())
        };
        match executor::timeout(Duration::from_secs(secs), serve).await {
            Ok(result) => result,
            Err(_) => {
                println!("time is up, bye");
                Ok(())
            }
        }
    })
}
