//! A complete, minimal worker loop on raw epoll: what a runtime does with a
//! [`WorkerPort`], without the runtime. Each connection gets its lines echoed
//! back as `"<worker id> <line>\n"`; end-of-file closes it.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use dispatch::{Batch, WorkerPort};
use reactor::epoll::{ALL_EDGE, Epoll, Events};

/// The port's token; connections use their fd number, which is unique while
/// the connection is open.
const PORT: u64 = u64::MAX;

struct Conn {
    fd: OwnedFd,
    /// Bytes of an unfinished line.
    input: Vec<u8>,
    /// Replies the socket did not take yet (it said EAGAIN).
    output: Vec<u8>,
    eof: bool,
}

impl Conn {
    /// Reads until EAGAIN (edge-triggered: stopping earlier could strand
    /// data with no new edge to come) and queues a reply per full line.
    fn read_all(&mut self, id: usize) {
        let mut buf = [0u8; 4096];
        loop {
            match reactor::sys::read(self.fd.as_fd(), &mut buf) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.eof = true;
                    self.output.clear();
                    break;
                }
            }
        }
        while let Some(end) = self.input.iter().position(|&b| b == b'\n') {
            self.output.extend_from_slice(format!("{id} ").as_bytes());
            self.output.extend(self.input.drain(..=end));
        }
    }

    /// Writes what it can; the rest waits for the next writable edge.
    fn flush(&mut self) {
        while !self.output.is_empty() {
            match reactor::sys::send(self.fd.as_fd(), &self.output) {
                Ok(n) => {
                    self.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.eof = true;
                    self.output.clear();
                }
            }
        }
    }

    /// Nothing in flight: safe to close at shutdown.
    fn is_idle(&self) -> bool {
        self.input.is_empty() && self.output.is_empty()
    }
}

/// The worker loop: runs until shutdown and returns once its connections are
/// done or the deadline passed.
pub fn echo_worker(mut port: WorkerPort) {
    let id = port.id();
    let ep = Epoll::new().expect("epoll");
    ep.add(port.as_fd(), ALL_EDGE, PORT).expect("register port");
    let mut events = Events::with_capacity(256);
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut fresh = Vec::new();
    let mut deadline: Option<Instant> = None;
    // Poll the port once up front: connections may already be waiting.
    let mut port_ready = true;
    loop {
        if port_ready && deadline.is_none() {
            port_ready = false;
            loop {
                match port.poll_batch(&mut fresh) {
                    Ok(Batch::Fds(_)) => {
                        for fd in fresh.drain(..) {
                            let token = fd.as_raw_fd() as u64;
                            ep.add(fd.as_fd(), ALL_EDGE, token).expect("register");
                            let conn = Conn {
                                fd,
                                input: Vec::new(),
                                output: Vec::new(),
                                eof: false,
                            };
                            conns.insert(token, conn);
                        }
                    }
                    Ok(Batch::WouldBlock) => break,
                    Ok(Batch::Shutdown { deadline: d }) => {
                        deadline = Some(d);
                        let _ = ep.delete(port.as_fd());
                        // A request may sit unread in a socket whose edge
                        // we have not handled yet: it is in flight too.
                        for conn in conns.values_mut() {
                            conn.read_all(id);
                            conn.flush();
                        }
                        break;
                    }
                    Err(e) => {
                        eprintln!("worker {id}: {e}");
                        deadline = Some(Instant::now());
                        break;
                    }
                }
            }
        }
        // Stop when shutting down and nothing is in flight, or time is up.
        if let Some(d) = deadline {
            let expired = Instant::now() >= d;
            let done: Vec<u64> = (conns.iter())
                .filter(|(_, c)| expired || c.is_idle())
                .map(|(&t, _)| t)
                .collect();
            for token in done {
                close(&ep, &port, &mut conns, token);
            }
            if conns.is_empty() {
                return;
            }
        }
        let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let timeout = timeout.map(|t| t.max(Duration::from_millis(1)));
        ep.wait(&mut events, timeout).expect("epoll_wait");
        for ev in events.iter() {
            if ev.token == PORT {
                port_ready = true;
                continue;
            }
            let Some(conn) = conns.get_mut(&ev.token) else {
                continue;
            };
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                conn.read_all(id);
            }
            conn.flush();
            if conn.eof && conn.output.is_empty() {
                close(&ep, &port, &mut conns, ev.token);
            }
        }
    }
}

/// Deregisters, closes, and tells dispatch (open count, max_connections).
fn close(ep: &Epoll, port: &WorkerPort, conns: &mut HashMap<u64, Conn>, token: u64) {
    if let Some(conn) = conns.remove(&token) {
        let _ = ep.delete(conn.fd.as_fd());
        drop(conn);
        port.connection_closed();
    }
}
