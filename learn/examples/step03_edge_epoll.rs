//! Step 3: edge-triggered epoll, with and without draining.
//!
//! Run: `cargo run -p learn --example step03_edge_epoll`. A client sends
//! 100 bytes to a server that reads 16 bytes at a time: draining until
//! `WouldBlock`, all 100 come back; reading once per edge, 16 do, and the
//! rest wait for an edge that never comes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use learn::step03_edge_epoll::{Drain, serve};

fn main() -> std::io::Result<()> {
    for drain in [Drain::UntilWouldBlock, Drain::Once] {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        // With Drain::Once the server never sees the client leave; the
        // thread is abandoned when main returns.
        thread::spawn(move || serve(listener, 1, drain, 16));
        let mut c = TcpStream::connect(addr)?;
        c.write_all(&[b'x'; 100])?;
        c.set_read_timeout(Some(Duration::from_millis(300)))?;
        let (mut got, mut buf) = (0, [0u8; 100]);
        while got < 100 {
            match c.read(&mut buf) {
                Ok(n @ 1..) => got += n,
                _ => break, // closed, or nothing for 300 ms
            }
        }
        println!("{drain:?}: sent 100 bytes, {got} came back within 300 ms");
    }
    Ok(())
}
