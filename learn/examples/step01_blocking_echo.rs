//! Step 1: a blocking echo server, a thread per client.
//!
//! Run: `cargo run -p learn --example step01_blocking_echo` (two built-in
//! clients talk to it, then it exits), or with `-- --serve N` to serve N
//! clients of your own (`nc 127.0.0.1 PORT`) on the printed port.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use learn::step01_blocking_echo::serve_threaded;

fn main() -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    if let Some(n) = std::env::args().skip_while(|a| a != "--serve").nth(1) {
        println!("echo server on {addr} for {n} clients");
        return serve_threaded(&listener, n.parse().expect("--serve N"));
    }
    let server = thread::spawn(move || serve_threaded(&listener, 2));
    let mut a = TcpStream::connect(addr)?;
    let mut b = TcpStream::connect(addr)?;
    for (name, c) in [("a", &mut a), ("b", &mut b)] {
        c.write_all(format!("hello from {name}").as_bytes())?;
        let mut back = [0u8; 12];
        c.read_exact(&mut back)?;
        println!(
            "client {name} got back {:?}",
            String::from_utf8_lossy(&back)
        );
    }
    drop((a, b));
    server.join().expect("server thread")
}
