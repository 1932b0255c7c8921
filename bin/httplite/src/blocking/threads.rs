//! Thread per connection: the classic design, as the baseline the event
//! loops are measured against. Each connection gets an OS thread and a
//! blocking socket; socket timeouts (`SO_RCVTIMEO`/`SO_SNDTIMEO`) stand in
//! for the header, idle and write timeouts, and `--max-connections` (the
//! dispatcher stops accepting at the limit) bounds the number of threads.

use std::io;
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use dispatch::{Batch, WorkerPort};
use reactor::sys;

use super::conn::Ctx;
use super::{BlockingIo, Deadline};
use site::stats::RuntimeProbe;

/// Stack size of a connection thread: the connection code needs a few KiB;
/// the default 2 MiB would only be address space, but this keeps the
/// virtual size of 10,000 threads sane too.
const THREAD_STACK: usize = 256 * 1024;

/// A blocking socket with deadline-driven timeouts.
struct Blocking {
    stream: TcpStream,
    /// The receive/send timeouts last set, so that unchanged deadlines cost
    /// no `setsockopt`.
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

/// The socket timeout a deadline becomes: at least 1 ms (zero would mean
/// "no timeout"), in whole milliseconds so that repeated calls with the
/// same deadline usually need no new `setsockopt`. A relative deadline
/// needs no clock read at all.
fn remaining(deadline: Deadline) -> io::Result<Duration> {
    let left = match deadline {
        Deadline::After(d) => d,
        Deadline::At(t) => t.saturating_duration_since(Instant::now()),
        Deadline::Since(start, d) => (start + d).saturating_duration_since(Instant::now()),
    };
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    Ok(Duration::from_millis(left.as_millis().max(1) as u64))
}

/// Blocking calls report an expired socket timeout as `EAGAIN`.
fn timeout_error(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        io::ErrorKind::TimedOut.into()
    } else {
        e
    }
}

impl Blocking {
    fn set_read_deadline(&mut self, deadline: Deadline) -> io::Result<()> {
        let t = remaining(deadline)?;
        if self
            .read_timeout
            .is_none_or(|old| old.abs_diff(t) > Duration::from_millis(50))
        {
            self.stream.set_read_timeout(Some(t))?;
            self.read_timeout = Some(t);
        }
        Ok(())
    }

    /// Waits with poll(2) until one of `events` (or an error or hang-up)
    /// is reported, or the deadline passes (`TimedOut`).
    fn wait(&self, events: libc::c_short, deadline: Deadline) -> io::Result<()> {
        let deadline = Deadline::At(deadline.at(Instant::now));
        let mut pfd = libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events,
            revents: 0,
        };
        loop {
            let ms = remaining(deadline)?.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: `pfd` is one valid pollfd for the duration of the call.
            match reactor::syscall!(unsafe { libc::poll(&mut pfd, 1, ms) }) {
                Ok(0) => continue, // re-check the deadline
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn set_write_deadline(&mut self, deadline: Deadline) -> io::Result<()> {
        let t = remaining(deadline)?;
        if self
            .write_timeout
            .is_none_or(|old| old.abs_diff(t) > Duration::from_millis(50))
        {
            self.stream.set_write_timeout(Some(t))?;
            self.write_timeout = Some(t);
        }
        Ok(())
    }

    /// Runs a file-sending `op` on the socket in non-blocking mode, waiting
    /// for room with poll(2) against the deadline.
    ///
    /// Not SO_SNDTIMEO: a blocking sendfile(2) splices a large count in
    /// pieces and each piece's wait gets the whole timeout afresh, so a
    /// client that takes a few bytes now and then stretches one call far
    /// past it (scripts/soak.sh measured 8 s for --write-timeout 2s).
    fn send_without_blocking(
        &mut self,
        deadline: Deadline,
        mut op: impl FnMut(RawFd) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let at = deadline.at(Instant::now);
        loop {
            self.stream.set_nonblocking(true)?;
            let sent = op(self.stream.as_raw_fd());
            self.stream.set_nonblocking(false)?;
            match sent {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.wait(libc::POLLOUT, Deadline::At(at))?
                }
                r => return r,
            }
        }
    }
}

// SAFETY: `read_uninit` returns what `read(2)` returned (reactor's
// `sys::read_uninit`): at most `buf.len()`, all written by the kernel.
unsafe impl BlockingIo for Blocking {
    fn read_uninit(
        &mut self,
        buf: &mut [MaybeUninit<u8>],
        deadline: Deadline,
    ) -> io::Result<usize> {
        self.set_read_deadline(deadline)?;
        loop {
            match sys::read_uninit(self.stream.as_raw_fd(), buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r.map_err(timeout_error),
            }
        }
    }

    fn write(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        self.set_write_deadline(deadline)?;
        loop {
            match sys::send(self.stream.as_raw_fd(), buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r.map_err(timeout_error),
            }
        }
    }

    fn sendfile(
        &mut self,
        file: RawFd,
        offset: &mut u64,
        count: usize,
        deadline: Deadline,
    ) -> io::Result<usize> {
        self.send_without_blocking(deadline, |sock| sys::sendfile(sock, file, offset, count))
    }

    fn send_file_copied(
        &mut self,
        file: RawFd,
        offset: &mut u64,
        count: usize,
        deadline: Deadline,
    ) -> io::Result<usize> {
        self.send_without_blocking(deadline, |sock| {
            crate::driver::with_copy_buffer(|buf| {
                sys::send_file_copied(sock, file, offset, count, buf).map(|(sent, _)| sent)
            })
        })
    }

    fn wait_readable(&mut self, deadline: Deadline) -> io::Result<()> {
        self.wait(libc::POLLIN | libc::POLLRDHUP, deadline)
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        self.stream.shutdown(how)
    }

    fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.stream.peer_addr().ok()
    }
}

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
    // Idle connections get end-of-file now; busy ones finish their request
    // (answered with `Connection: close`) until the deadline.
    ctx.idle.begin_shutdown();
    let mut count = live.count.lock().unwrap_or_else(|e| e.into_inner());
    while *count > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break; // stragglers are cut off when the process exits
        }
        count = live
            .zero
            .wait_timeout(count, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    if let Some(log) = &ctx.access_log {
        log.flush();
    }
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
    {
        let mut count = live.count.lock().unwrap_or_else(|e| e.into_inner());
        *count += 1;
        live.high_water.fetch_max(*count, Ordering::Relaxed);
    }
    let (thread_ctx, thread_live, closer) = (ctx.clone(), live.clone(), port.closer());
    let spawned = std::thread::Builder::new()
        .name("httplite-conn".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let io = Blocking {
                stream,
                read_timeout: None,
                write_timeout: None,
            };
            super::tls::serve(&thread_ctx, io);
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
    fn done(&self) {
        let mut count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        *count -= 1;
        if *count == 0 {
            self.zero.notify_all();
        }
    }
}

/// Blocks until `fd` is readable.
fn wait_fd(fd: RawFd) -> io::Result<()> {
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
