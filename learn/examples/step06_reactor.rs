//! Step 6: an async echo server: tasks, a reactor, edge-triggered epoll.
//!
//! Run: `cargo run -p learn --example step06_reactor` (three built-in
//! clients, then it exits), or `-- --serve N` for your own clients.

use std::io::{Read, Write};
use std::net::{self, TcpStream};
use std::thread;

use learn::step05_executor::Executor;
use learn::step06_reactor::{TcpListener, block_on, serve};

fn main() -> std::io::Result<()> {
    let listener = net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let conns = match std::env::args().skip_while(|a| a != "--serve").nth(1) {
        Some(n) => n.parse().expect("--serve N"),
        None => 3,
    };
    println!("async echo server on {addr} for {conns} clients");
    let server = thread::spawn(move || {
        let executor = Executor::new();
        let listener = TcpListener::new(listener)?;
        block_on(&executor, serve(executor.clone(), listener, conns))
    });
    if std::env::args().all(|a| a != "--serve") {
        let mut clients = (0..3)
            .map(|_| TcpStream::connect(addr))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, c) in clients.iter_mut().enumerate().rev() {
            c.write_all(format!("client {i}").as_bytes())?;
            let mut back = [0u8; 8];
            c.read_exact(&mut back)?;
            println!("{:?}", String::from_utf8_lossy(&back));
        }
    }
    let echoed = server.join().expect("server thread")?;
    println!("echoed {echoed} bytes");
    Ok(())
}
