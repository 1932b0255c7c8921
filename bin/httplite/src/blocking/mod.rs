//! Blocking-style servers: one connection = one thread of control that
//! simply calls `read` and `write` and is put to sleep while it waits.
//!
//! The same connection code ([`conn`]) runs on two designs through the
//! [`BlockingIo`] trait:
//! - `threads`: an OS thread per connection over blocking sockets, with
//!   socket timeouts standing in for the header, idle and write timeouts (the
//!   classic design every comparison needs as a baseline);
//! - `stackful`: a coroutine per connection (the `coroutine` crate), parked
//!   in the same reactor the stackless server uses.
//!
//! Shutdown reaches a connection blocked between requests through
//! [`IdleSet`]: the worker shuts down the read side of every idle socket,
//! which makes its blocked read return end-of-file, whatever the design.

pub mod conn;
pub mod stackful;
pub mod threads;

use std::io;
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::RawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// When a blocking call gives up. Relative deadlines are resolved only if
/// the call actually has to wait: most reads and writes complete at once,
/// and then cost no clock read.
#[derive(Debug, Clone, Copy)]
pub enum Deadline {
    /// This long after the call starts waiting.
    After(Duration),
    /// At this instant.
    At(Instant),
}

impl Deadline {
    /// The absolute deadline, reading the clock with `now` if needed.
    pub fn at(self, now: impl FnOnce() -> Instant) -> Instant {
        match self {
            Deadline::After(d) => now() + d,
            Deadline::At(t) => t,
        }
    }
}

/// What the blocking connection code needs from its socket. Every call
/// blocks the calling thread of control until done or until its deadline
/// (then `io::ErrorKind::TimedOut`).
pub trait BlockingIo {
    /// Reads into uninitialised memory; returns how many bytes at the start
    /// of `buf` are now initialised (`0`: end of stream).
    fn read_uninit(&mut self, buf: &mut [MaybeUninit<u8>], deadline: Deadline)
    -> io::Result<usize>;
    /// Writes some of `buf` (never raising `SIGPIPE`).
    fn write(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize>;
    /// `sendfile(2)` up to `count` bytes of `file` from `*offset`.
    fn sendfile(
        &mut self,
        file: RawFd,
        offset: &mut u64,
        count: usize,
        deadline: Deadline,
    ) -> io::Result<usize>;
    /// Waits until a read would not block (data, end of stream, error).
    fn wait_readable(&mut self, deadline: Deadline) -> io::Result<()>;
    /// Sleeps without holding up other connections.
    fn sleep(&mut self, d: Duration);
    /// The current time, as precise as the design's deadlines need (an
    /// event loop's cached clock is enough).
    fn now(&self) -> Instant;
    /// Shuts down one or both directions.
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;
    /// The socket's fd (for [`IdleSet`]).
    fn fd(&self) -> RawFd;
    /// The client's address (for the access log).
    fn peer_addr(&self) -> Option<SocketAddr>;
    /// Runs blocking work (a directory listing) where it holds up no other
    /// connection. By default right here, which is right when this thread
    /// of control is the connection's alone (a thread per connection);
    /// designs that share a thread hand it to `pool`.
    fn offload<T: Send + 'static>(
        &mut self,
        pool: &pool::Pool,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Result<T, pool::JoinError>, pool::Full> {
        let _ = pool;
        Ok(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .map_err(pool::JoinError::Panicked))
    }
}

/// Connections waiting between requests, and whether shutdown has begun.
///
/// Each connection owns a slot for its life; entering and leaving idleness
/// only writes its fd into the slot (or clears it) under the lock: no
/// hashing or allocation per request.
#[derive(Debug, Default)]
pub struct IdleSet {
    inner: Mutex<IdleInner>,
    /// Mirrors `IdleInner::shutting_down` for lock-free reads.
    shutting_down: AtomicBool,
}

#[derive(Debug, Default)]
struct IdleInner {
    shutting_down: bool,
    /// Per connection slot: its fd while idle, `-1` while busy.
    fds: Vec<RawFd>,
    free: Vec<usize>,
}

impl IdleSet {
    /// A slot for a new connection (give it back with [`IdleSet::release`]).
    pub fn id(&self) -> usize {
        let mut g = self.lock();
        match g.free.pop() {
            Some(id) => id,
            None => {
                g.fds.push(-1);
                g.fds.len() - 1
            }
        }
    }

    /// Marks connection `id` idle; false if shutdown has begun (then close).
    pub fn enter(&self, id: usize, fd: RawFd) -> bool {
        let mut g = self.lock();
        if g.shutting_down {
            return false;
        }
        g.fds[id] = fd;
        true
    }

    /// Connection `id` has a request to serve.
    pub fn leave(&self, id: usize) {
        self.lock().fds[id] = -1;
    }

    /// Connection `id` is closing: its slot goes back for reuse.
    pub fn release(&self, id: usize) {
        let mut g = self.lock();
        g.fds[id] = -1;
        g.free.push(id);
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Begins shutdown: idle connections get end-of-file on their blocked
    /// read (the fds stay open; their owners close them). Under the lock,
    /// so no connection can slip into idleness unseen.
    pub fn begin_shutdown(&self) {
        let mut g = self.lock();
        g.shutting_down = true;
        self.shutting_down.store(true, Ordering::Release);
        for &fd in g.fds.iter().filter(|&&fd| fd >= 0) {
            // SAFETY: a slot holds an fd only while its connection, which
            // owns it, is idle and still open (cleared before it closes).
            unsafe { libc::shutdown(fd, libc::SHUT_RD) };
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IdleInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
