//! Thread per connection: the classic design, as the baseline the event
//! loops are measured against. Each connection gets an OS thread and a
//! blocking socket; socket timeouts (`SO_RCVTIMEO`/`SO_SNDTIMEO`) stand in
//! for the header, idle and write timeouts, and `--max-connections` (the
//! dispatcher stops accepting at the limit) bounds the number of threads.

use std::io;
use std::net::TcpStream;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use dispatch::{Batch, WorkerPort};

use super::conn::Ctx;
use super::socket::Blocking;
use site::stats::RuntimeProbe;

/// Stack size of a connection thread: the connection code needs a few KiB;
/// the default 2 MiB would only be address space, but this keeps the
/// virtual size of 10,000 threads sane too.
const THREAD_STACK: usize = 256 * 1024;

/// Counts live connection threads, so that shutdown can wait for them.
#[derive(Debug, Default)]
pub struct Live {
    count: Mutex<usize>,
    zero: Condvar,
    high_water: AtomicUsize,
}

impl Live {
    /// Connection threads alive now.
    pub fn count(&self) -> usize {
        *self.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Most connection threads alive at once.
    pub fn high_water(&self) -> usize {
        self.high_water.load(Ordering::Relaxed)
    }
}

/// The threads driver's internals for the stats document: the kernel
/// schedules, so the only ones are the threads themselves.
#[derive(Debug)]
struct Probe(Arc<Live>);

impl RuntimeProbe for Probe {
    fn write_json(&self, s: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(
            s,
            ",\"runtime\":{{\"kind\":\"threads\",\"threads_alive\":{},\
             \"threads_high_water\":{}}}",
            self.0.count(),
            self.0.high_water()
        );
    }
}

/// Runs one worker: a thread per handed-off connection.
pub fn run(mut port: WorkerPort, ctx: Ctx) -> io::Result<()> {
    let ctx = Arc::new(ctx);
    let live = Arc::new(Live::default());
    ctx.stats.set_runtime(Box::new(Probe(live.clone())));
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(32);
    let deadline = loop {
        match port.poll_batch(&mut fds)? {
            Batch::WouldBlock => wait_fd(port.fd())?,
            Batch::Fds(_) => {}
            Batch::Shutdown { deadline } => break deadline,
        }
        for fd in fds.drain(..) {
            if spawn_connection(fd, &ctx, &live, &port).is_err() {
                port.connection_closed();
            }
        }
    };
    live.finish(&ctx, deadline);
    Ok(())
}

fn spawn_connection(
    fd: OwnedFd,
    ctx: &Arc<Ctx>,
    live: &Arc<Live>,
    port: &WorkerPort,
) -> io::Result<()> {
    let stream = TcpStream::from(fd);
    stream.set_nonblocking(false)?;
    // Fails on a Unix socket, which has no Nagle to turn off.
    let _ = stream.set_nodelay(true);
    ctx.stats.connections.fetch_add(1, Ordering::Relaxed);
    live.enter();
    let (thread_ctx, thread_live, closer) = (ctx.clone(), live.clone(), port.closer());
    let spawned = std::thread::Builder::new()
        .name("httplite-conn".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            super::tls::serve(&thread_ctx, Blocking::new(stream));
            thread_ctx.stats.closed.fetch_add(1, Ordering::Relaxed);
            closer.connection_closed();
            thread_live.done();
        });
    if let Err(e) = spawned {
        // Out of threads (or memory): this connection is dropped (its
        // socket closed with the closure), the server carries on.
        ctx.stats.closed.fetch_add(1, Ordering::Relaxed);
        live.done();
        return Err(e);
    }
    Ok(())
}

impl Live {
    /// One more connection.
    pub(crate) fn enter(&self) {
        let mut count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        *count += 1;
        self.high_water.fetch_max(*count, Ordering::Relaxed);
    }

    /// One connection fewer.
    pub(crate) fn done(&self) {
        let mut count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        *count -= 1;
        if *count == 0 {
            self.zero.notify_all();
        }
    }

    /// A worker's shutdown once it stops accepting: idle connections get
    /// end-of-file now, busy ones finish their request (answered with
    /// `Connection: close`) until `deadline`, then the access log is
    /// flushed.
    pub(crate) fn finish(&self, ctx: &Ctx, deadline: Instant) {
        ctx.idle.begin_shutdown();
        self.wait_zero(deadline);
        if let Some(log) = &ctx.access_log {
            log.flush();
        }
    }

    /// Waits until no connection is left, or `deadline` (stragglers are
    /// cut off when the process exits).
    fn wait_zero(&self, deadline: Instant) {
        let mut count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        while *count > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            count = self
                .zero
                .wait_timeout(count, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Blocks until `fd` is readable.
pub(crate) fn wait_fd(fd: RawFd) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: `pfd` is one valid pollfd for the duration of the call.
        match reactor::syscall!(unsafe { libc::poll(&mut pfd, 1, -1) }) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r.map(|_| ()),
        }
    }
}
