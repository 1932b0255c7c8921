//! A small worker loop on `reactor::epoll` and client helpers shared by the
//! integration tests.
//!
//! Protocol: the client sends lines; the worker answers each with
//! `"<worker id> <line>\n"` (after `reply_delay`), and closes on EOF. On
//! shutdown it stops polling the port, picks up requests that already
//! arrived, answers them, closes idle connections, and returns once every
//! connection is closed or the deadline passed.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dispatch::{Batch, WorkerPort};
use reactor::epoll::{ALL_EDGE, Epoll, Events};

/// How the test workers behave.
#[derive(Debug, Default)]
pub struct Behavior {
    /// Delay before each reply (to keep requests in flight).
    pub reply_delay: Duration,
    /// Per worker: when set, the worker does not poll its port.
    pub stalled: Vec<AtomicBool>,
    /// Per worker: replies sent.
    pub served: Vec<AtomicU64>,
    /// Requests (lines) read, all workers together: a request counted here
    /// is in flight, so tests wait on this rather than sleep.
    pub received: AtomicU64,
}

impl Behavior {
    pub fn new(workers: usize) -> Arc<Behavior> {
        Arc::new(Behavior {
            reply_delay: Duration::ZERO,
            stalled: (0..workers).map(|_| AtomicBool::new(false)).collect(),
            served: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            received: AtomicU64::new(0),
        })
    }

    pub fn with_delay(workers: usize, reply_delay: Duration) -> Arc<Behavior> {
        Arc::new(Behavior {
            reply_delay,
            stalled: (0..workers).map(|_| AtomicBool::new(false)).collect(),
            served: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            received: AtomicU64::new(0),
        })
    }

    /// Requests read by the workers so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::SeqCst)
    }

    pub fn served(&self, worker: usize) -> u64 {
        self.served[worker].load(Ordering::SeqCst)
    }

    pub fn stall(&self, worker: usize, on: bool) {
        self.stalled[worker].store(on, Ordering::SeqCst);
    }

    fn is_stalled(&self, port: &WorkerPort) -> bool {
        // A stalled worker still honours shutdown, or a failing test would
        // hang in the server's drop instead of reporting.
        self.stalled
            .get(port.id())
            .is_some_and(|s| s.load(Ordering::SeqCst))
            && !port.shutdown_handle().is_shutdown_requested()
    }
}

struct Conn {
    fd: OwnedFd,
    buf: Vec<u8>,
    pending: VecDeque<(Instant, Vec<u8>)>,
    eof: bool,
}

const PORT: u64 = u64::MAX;

/// The worker loop.
pub fn serve(mut port: WorkerPort, behavior: &Behavior) {
    let id = port.id();
    let ep = Epoll::new().unwrap();
    ep.add(port.as_fd(), ALL_EDGE, PORT).unwrap();
    let mut events = Events::with_capacity(256);
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut next_token = 0u64;
    let mut port_ready = true;
    let mut shutdown: Option<Instant> = None;
    let mut batch = Vec::new();
    let mut readable: Vec<u64> = Vec::new();
    loop {
        if port_ready && shutdown.is_none() && !behavior.is_stalled(&port) {
            loop {
                match port.poll_batch(&mut batch) {
                    Ok(Batch::Fds(_)) => {
                        for fd in batch.drain(..) {
                            assert_is_socket(&fd, id);
                            let token = next_token;
                            next_token += 1;
                            ep.add(fd.as_fd(), ALL_EDGE, token).unwrap();
                            conns.insert(
                                token,
                                Conn {
                                    fd,
                                    buf: Vec::new(),
                                    pending: VecDeque::new(),
                                    eof: false,
                                },
                            );
                            readable.push(token);
                        }
                    }
                    Ok(Batch::WouldBlock) => {
                        port_ready = false;
                        break;
                    }
                    Ok(Batch::Shutdown { deadline }) => {
                        shutdown = Some(deadline);
                        ep.delete(port.as_fd()).unwrap();
                        // Requests that already arrived are in flight too.
                        readable.extend(conns.keys().copied());
                        break;
                    }
                    Err(e) => panic!("worker {id}: poll_batch: {e}"),
                }
            }
        }
        let now = Instant::now();
        for token in readable.drain(..) {
            if let Some(conn) = conns.get_mut(&token) {
                let n = read_requests(conn, id, now + behavior.reply_delay);
                behavior.received.fetch_add(n, Ordering::SeqCst);
            }
        }
        let now = Instant::now();
        let mut to_close = Vec::new();
        for (&token, conn) in conns.iter_mut() {
            while conn.pending.front().is_some_and(|(due, _)| *due <= now) {
                let (_, reply) = conn.pending.pop_front().unwrap();
                if reactor::sys::send(conn.fd.as_fd(), &reply).is_err() {
                    conn.eof = true;
                    conn.pending.clear();
                } else {
                    behavior.served[id].fetch_add(1, Ordering::SeqCst);
                }
            }
            if conn.pending.is_empty() && (conn.eof || shutdown.is_some()) {
                to_close.push(token);
            }
        }
        for token in to_close {
            close(&ep, &port, &mut conns, token);
        }
        if let Some(deadline) = shutdown
            && (conns.is_empty() || Instant::now() >= deadline)
        {
            let tokens: Vec<u64> = conns.keys().copied().collect();
            for token in tokens {
                close(&ep, &port, &mut conns, token);
            }
            return;
        }
        let mut timeout = Duration::from_millis(100);
        if behavior.is_stalled(&port) {
            timeout = Duration::from_millis(5);
        }
        let now = Instant::now();
        for conn in conns.values() {
            if let Some((due, _)) = conn.pending.front() {
                timeout = timeout.min(due.saturating_duration_since(now));
            }
        }
        if let Some(deadline) = shutdown {
            timeout = timeout.min(deadline.saturating_duration_since(now));
        }
        ep.wait(&mut events, Some(timeout)).unwrap();
        for ev in events.iter() {
            if ev.token == PORT {
                port_ready = true;
            } else {
                readable.push(ev.token);
            }
        }
    }
}

/// Every handed-off fd must be a connected socket: anything else means an
/// fd number was delivered that someone else owns.
fn assert_is_socket(fd: &OwnedFd, worker: usize) {
    // SAFETY: an all-zero stat is a valid buffer for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is writable; the fd is open (we own it).
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    assert_eq!(rc, 0, "worker {worker}: fstat({})", fd.as_raw_fd());
    assert_eq!(
        st.st_mode & libc::S_IFMT,
        libc::S_IFSOCK,
        "worker {worker}: fd {} is not a socket",
        fd.as_raw_fd()
    );
}

/// Reads what arrived and queues a reply per line; returns the lines read.
fn read_requests(conn: &mut Conn, id: usize, due: Instant) -> u64 {
    let mut chunk = [0u8; 4096];
    loop {
        match reactor::sys::read(conn.fd.as_fd(), &mut chunk) {
            Ok(0) => {
                conn.eof = true;
                break;
            }
            Ok(n) => conn.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                conn.eof = true;
                conn.pending.clear();
                return 0;
            }
        }
    }
    let mut lines = 0;
    while let Some(pos) = conn.buf.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = conn.buf.drain(..=pos).collect();
        let mut reply = format!("{id} ").into_bytes();
        reply.extend_from_slice(&line);
        conn.pending.push_back((due, reply));
        lines += 1;
    }
    lines
}

fn close(ep: &Epoll, port: &WorkerPort, conns: &mut HashMap<u64, Conn>, token: u64) {
    if let Some(conn) = conns.remove(&token) {
        ep.delete(conn.fd.as_fd()).unwrap();
        drop(conn);
        port.connection_closed();
    }
}

// ---------------------------------------------------------------- clients

pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Reads one `\n`-terminated line; `None` on EOF before any byte.
pub fn read_line(s: &mut TcpStream) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match s.read(&mut byte)? {
            0 if line.is_empty() => return Ok(None),
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            _ if byte[0] == b'\n' => return Ok(Some(String::from_utf8(line).unwrap())),
            _ => line.push(byte[0]),
        }
    }
}

/// Sends `msg` and returns the id of the worker that answered.
pub fn ask(s: &mut TcpStream, msg: &str) -> io::Result<usize> {
    s.write_all(format!("{msg}\n").as_bytes())?;
    read_reply(s, msg)
}

/// Reads the reply to `msg` and returns the worker id in it.
pub fn read_reply(s: &mut TcpStream, msg: &str) -> io::Result<usize> {
    let line = read_line(s)?.ok_or(io::ErrorKind::UnexpectedEof)?;
    let (id, echo) = line.split_once(' ').expect("reply has an id");
    assert_eq!(echo, msg);
    Ok(id.parse().unwrap())
}

/// Polls `cond` every 5 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}
