//! A raw epoll callback loop: no futures, no wakers. One listener and its
//! connections in one edge-triggered epoll set; every connection echoes what it
//! reads. This is what every layer above automates.
//!
//! Run: `cargo run -p reactor --example raw_epoll` then, in another shell,
//! `printf 'hello\n' | nc -q1 127.0.0.1 7878` (the loop ends after 5 clients or
//! 60 s).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use reactor::epoll::{ALL_EDGE, Epoll, Events, flags_to_string};
use reactor::sys;

const LISTENER: u64 = u64::MAX;

fn main() -> io::Result<()> {
    let addr = "127.0.0.1:7878".parse().unwrap();
    let listener = sys::tcp_listener(addr, sys::ListenOptions::default())?;
    let epoll = Epoll::new()?;
    epoll.add(listener.as_fd(), ALL_EDGE, LISTENER)?;
    println!("echoing on {addr}; connect with: printf 'hello\\n' | nc -q1 127.0.0.1 7878");

    let mut conns: HashMap<u64, OwnedFd> = HashMap::new();
    let mut served = 0;
    let mut events = Events::with_capacity(64);
    let stop = Instant::now() + Duration::from_secs(60);
    while served < 5 && Instant::now() < stop {
        epoll.wait(&mut events, Some(Duration::from_secs(1)))?;
        for ev in events.iter() {
            println!(
                "event token={} flags={}",
                ev.token,
                flags_to_string(ev.flags)
            );
            if ev.token == LISTENER {
                // Edge-triggered: accept until EAGAIN or we miss connections.
                loop {
                    match sys::accept(listener.as_fd()) {
                        Ok((fd, peer)) => {
                            let token = fd.as_raw_fd() as u64;
                            epoll.add(fd.as_fd(), ALL_EDGE, token)?;
                            println!("  accepted {peer} as token {token}");
                            conns.insert(token, fd);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e),
                    }
                }
                continue;
            }
            let Some(fd) = conns.get(&ev.token) else {
                continue;
            };
            // Read until EAGAIN (or EOF), echoing as we go.
            let mut buf = [0u8; 4096];
            let closed = loop {
                match sys::read(fd.as_fd(), &mut buf) {
                    Ok(0) => break true,
                    Ok(n) => {
                        println!("  read {n} bytes");
                        sys::send(fd.as_fd(), &buf[..n])?;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
                    Err(_) => break true,
                }
            };
            if closed {
                let fd = conns.remove(&ev.token).unwrap();
                epoll.delete(fd.as_fd())?; // deregister, then close
                drop(fd);
                served += 1;
                println!("  closed token {} ({served} served)", ev.token);
            }
        }
    }
    Ok(())
}
