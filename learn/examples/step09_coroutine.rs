//! Step 9: step 8's HTTP server, blocking-style, on stackful coroutines.
//!
//! Run: `cargo run -p learn --example step09_coroutine` (a built-in client
//! sends two keep-alive requests, then it exits), or `-- --serve N` and try
//! `curl -v http://127.0.0.1:PORT/` on the printed port, N connections.

use std::io::{Read, Write};
use std::net::{self, TcpStream};
use std::thread;

use learn::step09_coroutine::{serve, serve_connection};

fn main() -> std::io::Result<()> {
    let listener = net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let serve_arg = std::env::args().skip_while(|a| a != "--serve").nth(1);
    let conns = serve_arg
        .as_deref()
        .map_or(1, |n| n.parse().expect("--serve N"));
    println!("HTTP/1.1 server on coroutines, http://{addr}/ for {conns} connections");
    let server = thread::spawn(move || serve(listener, conns, serve_connection));
    if serve_arg.is_none() {
        let mut c = TcpStream::connect(addr)?;
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")?;
        c.write_all(b"POST /echo HTTP/1.1\r\nContent-Length: 4\r\nConnection: close\r\n\r\npong")?;
        let mut all = String::new();
        c.read_to_string(&mut all)?;
        println!("{all}");
    }
    server.join().expect("server thread")
}
