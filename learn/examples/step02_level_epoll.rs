//! Step 2: one thread, level-triggered epoll, many clients.
//!
//! Run: `cargo run -p learn --example step02_level_epoll` (three built-in
//! clients take turns, then it exits), or `-- --serve N` for your own.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use learn::step02_level_epoll::serve;

fn main() -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    if let Some(n) = std::env::args().skip_while(|a| a != "--serve").nth(1) {
        println!("epoll (level-triggered) echo server on {addr} for {n} clients");
        return serve(listener, n.parse().expect("--serve N")).map(drop);
    }
    let server = thread::spawn(move || serve(listener, 3));
    let mut clients = (0..3)
        .map(|_| TcpStream::connect(addr))
        .collect::<Result<Vec<_>, _>>()?;
    for round in 0..2 {
        for (i, c) in clients.iter_mut().enumerate() {
            c.write_all(&[b'0' + i as u8, b'0' + round])?;
            let mut back = [0u8; 2];
            c.read_exact(&mut back)?;
            println!(
                "client {i} round {round}: {:?}",
                String::from_utf8_lossy(&back)
            );
        }
    }
    drop(clients);
    let echoed = server.join().expect("server thread")?;
    println!("one thread echoed {echoed} bytes for 3 clients");
    Ok(())
}
