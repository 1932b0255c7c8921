//! The classic thread pool (`--runtime threadpool`): a fixed number of OS
//! threads (`--threadpool-size`), each taking an accepted connection from
//! one bounded queue and serving it to completion with blocking I/O (the
//! same [`Blocking`] socket and connection loop as `threads`).
//!
//! ```text
//!   dispatch workers ──push──▶ [ queue, at most --threadpool-queue ] ──pop──▶ N pool threads
//!          │ queue full                                                      serve to the end
//!          ▼
//!   503 + Connection: close, written at once; what the client sent is read
//!   and discarded for a few ms (never parsed), then the socket is closed
//! ```
//!
//! A keep-alive connection holds its thread for its whole life, idle or
//! not: with every thread held by idle clients, a new connection waits in
//! the queue until one of them leaves or times out (the head-of-line
//! effect measured in docs/threadpool-and-fork.md). These threads are not
//! the blocking pool of `--pool-threads`, which still runs jobs.

use std::collections::VecDeque;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use dispatch::{Batch, Closer, WorkerPort};
use site::stats::RuntimeProbe;

use super::conn::Ctx;
use super::socket::Blocking;
use super::threads::{Live, wait_fd};

/// Stack size of a pool thread, as for `threads`' connection threads.
const THREAD_STACK: usize = 256 * 1024;

/// How long a refused connection is drained after its 503. Closing a
/// socket with unread input sends a reset instead of a FIN, and a reset
/// can cost the client the 503 (and fails its writes); reading what it
/// sent first makes the close a clean one.
const LINGER: Duration = Duration::from_millis(5);
/// Most bytes read from one refused connection; a client still sending
/// beyond that gets its reset.
const LINGER_BYTES: usize = 8 * 1024;
/// Most refused connections one worker keeps draining at once; beyond,
/// one is closed after reading only what has arrived.
const LINGER_MAX: usize = 64;

/// One accepted connection waiting for a thread.
struct Job {
    fd: OwnedFd,
    ctx: Arc<Ctx>,
    live: Arc<Live>,
    closer: Closer,
}

/// The pool: its threads and its queue, shared by every dispatch worker.
#[derive(Debug, Clone)]
pub struct ThreadPool {
    shared: Arc<Shared>,
}

struct Shared {
    queue: Mutex<VecDeque<Job>>,
    ready: Condvar,
    size: usize,
    bound: usize,
    started: Once,
    /// Threads serving a connection now.
    busy: AtomicUsize,
    /// Connections answered 503 because the queue was full.
    rejected: AtomicU64,
    /// Longest the queue has been.
    queue_high_water: AtomicUsize,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("size", &self.size)
            .field("bound", &self.bound)
            .finish_non_exhaustive()
    }
}

impl ThreadPool {
    /// A pool of `size` threads (started with the first worker) and a
    /// queue of at most `bound` waiting connections.
    pub fn new(size: usize, bound: usize) -> ThreadPool {
        ThreadPool {
            shared: Arc::new(Shared {
                queue: Mutex::new(VecDeque::with_capacity(bound.min(4096))),
                ready: Condvar::new(),
                size: size.max(1),
                bound,
                started: Once::new(),
                busy: AtomicUsize::new(0),
                rejected: AtomicU64::new(0),
                queue_high_water: AtomicUsize::new(0),
            }),
        }
    }

    /// Starts the threads, once; a thread that cannot start is reported on
    /// stderr and the pool runs with fewer.
    fn start(&self) {
        self.shared.started.call_once(|| {
            for i in 0..self.shared.size {
                let shared = self.shared.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("httplite-tp{i}"))
                    .stack_size(THREAD_STACK)
                    .spawn(move || shared.serve_forever());
                if let Err(e) = spawned {
                    eprintln!("httplite: threadpool thread {i} did not start: {e}");
                }
            }
        });
    }

    /// Queues `job`, or gives it back when the queue is at its bound.
    fn push(&self, job: Job) -> Result<(), Job> {
        let mut q = self.shared.lock();
        if q.len() >= self.shared.bound {
            return Err(job);
        }
        q.push_back(job);
        self.shared
            .queue_high_water
            .fetch_max(q.len(), Ordering::Relaxed);
        drop(q);
        self.shared.ready.notify_one();
        Ok(())
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Job>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pool thread: take a connection, serve it to the end, repeat. The
    /// threads outlive the workers and end with the process.
    fn serve_forever(&self) {
        loop {
            let job = {
                let mut q = self.lock();
                loop {
                    match q.pop_front() {
                        Some(job) => break job,
                        None => q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner()),
                    }
                }
            };
            self.busy.fetch_add(1, Ordering::Relaxed);
            serve(job);
            self.busy.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Serves one queued connection on the calling pool thread.
fn serve(job: Job) {
    let Job {
        fd,
        ctx,
        live,
        closer,
    } = job;
    let stream = TcpStream::from(fd);
    if stream.set_nonblocking(false).is_ok() {
        let _ = stream.set_nodelay(true);
        super::tls::serve(&ctx, Blocking::new(stream));
    }
    ctx.stats.closed.fetch_add(1, Ordering::Relaxed);
    closer.connection_closed();
    live.done();
}

/// The pool's internals for the stats document (the same numbers in every
/// worker's entry: there is one pool).
#[derive(Debug)]
struct Probe(Arc<Shared>);

impl RuntimeProbe for Probe {
    fn write_json(&self, s: &mut String) {
        use std::fmt::Write as _;
        let p = &self.0;
        let _ = write!(
            s,
            ",\"runtime\":{{\"kind\":\"threadpool\",\"threads\":{},\"busy\":{},\
             \"queued\":{},\"queue_bound\":{},\"queue_high_water\":{},\"rejected_503\":{}}}",
            p.size,
            p.busy.load(Ordering::Relaxed),
            p.lock().len(),
            p.bound,
            p.queue_high_water.load(Ordering::Relaxed),
            p.rejected.load(Ordering::Relaxed)
        );
    }
}

/// Runs one dispatch worker: it moves the connections handed to it into
/// the pool's queue (or answers 503 when the queue is full) and, at
/// shutdown, waits for the ones it queued.
pub fn run(mut port: WorkerPort, ctx: Ctx, pool: ThreadPool) -> io::Result<()> {
    let ctx = Arc::new(ctx);
    let live = Arc::new(Live::default());
    ctx.stats.set_runtime(Box::new(Probe(pool.shared.clone())));
    pool.start();
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(32);
    let mut refused: Vec<Refused> = Vec::new();
    let deadline = loop {
        match port.poll_batch(&mut fds)? {
            Batch::WouldBlock if refused.is_empty() => wait_fd(port.fd())?,
            Batch::WouldBlock => wait_lingering(port.fd(), &mut refused)?,
            Batch::Fds(_) => {}
            Batch::Shutdown { deadline } => break deadline,
        }
        for fd in fds.drain(..) {
            ctx.stats.connections.fetch_add(1, Ordering::Relaxed);
            live.enter();
            let job = Job {
                fd,
                ctx: ctx.clone(),
                live: live.clone(),
                closer: port.closer(),
            };
            if let Err(job) = pool.push(job) {
                let mut r = reject(job, &pool);
                if r.drain() == Drained::More && refused.len() < LINGER_MAX {
                    refused.push(r);
                } else {
                    r.close();
                }
            }
        }
    };
    // What the refused clients sent since: read, then closed.
    for mut r in refused.drain(..) {
        r.drain();
        r.close();
    }
    // Idle connections get end-of-file now; busy and queued ones are
    // answered with `Connection: close` until the deadline.
    ctx.idle.begin_shutdown();
    live.wait_zero(deadline);
    if let Some(log) = &ctx.access_log {
        log.flush();
    }
    Ok(())
}

/// Answers a connection the queue has no room for: a 503 written with one
/// non-blocking send (the socket is new, so its buffer has room), then the
/// write side shut down. The request is never parsed; the caller drains and
/// closes the connection ([`Refused`]).
fn reject(job: Job, pool: &ThreadPool) -> Refused {
    pool.shared.rejected.fetch_add(1, Ordering::Relaxed);
    let mut wbuf = BytesMut::with_capacity(512);
    site::respond::overloaded(&mut wbuf, &job.ctx.stats);
    let _ = reactor::sys::send(job.fd.as_fd(), &wbuf);
    let _ = reactor::sys::shutdown(job.fd.as_fd(), Shutdown::Write);
    Refused {
        job,
        until: Instant::now() + LINGER,
        read: 0,
    }
}

/// A refused connection whose 503 is written, being drained until the
/// client ends its side, [`LINGER_BYTES`] or [`LINGER`], on the worker's
/// thread without blocking it; then [`Refused::close`]d.
struct Refused {
    job: Job,
    until: Instant,
    read: usize,
}

/// What a [`Refused::drain`] left.
#[derive(Debug, PartialEq, Eq)]
enum Drained {
    /// Nothing more to read for now: the client may still send.
    More,
    /// The client's end of stream, an error, or the byte budget spent.
    Done,
}

impl Refused {
    /// Reads and discards what has arrived, without blocking.
    fn drain(&mut self) -> Drained {
        let mut buf = [0u8; 2048];
        while self.read < LINGER_BYTES {
            match reactor::sys::read(self.job.fd.as_fd(), &mut buf) {
                Ok(0) => return Drained::Done,
                Ok(n) => self.read += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Drained::More,
                Err(_) => return Drained::Done,
            }
        }
        Drained::Done
    }

    /// Closes the socket and counts the close.
    fn close(self) {
        let Job {
            fd,
            ctx,
            live,
            closer,
        } = self.job;
        drop(fd);
        ctx.stats.closed.fetch_add(1, Ordering::Relaxed);
        closer.connection_closed();
        live.done();
    }
}

/// Waits until the port has connections or a refused connection has input
/// or is due, then drains those and closes the ones that are done.
fn wait_lingering(port: RawFd, refused: &mut Vec<Refused>) -> io::Result<()> {
    let poll = |fd: RawFd, events: libc::c_short| libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let mut pfds = Vec::with_capacity(refused.len() + 1);
    pfds.push(poll(port, libc::POLLIN));
    let input = libc::POLLIN | libc::POLLRDHUP;
    pfds.extend(refused.iter().map(|r| poll(r.job.fd.as_raw_fd(), input)));
    let first = refused
        .iter()
        .map(|r| r.until)
        .min()
        .unwrap_or_else(Instant::now);
    let ms = super::poll_timeout_ms(first.saturating_duration_since(Instant::now()));
    // SAFETY: `pfds` holds `pfds.len()` valid pollfds for the call.
    let polled =
        reactor::syscall!(unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) });
    match polled {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    let now = Instant::now();
    // Backwards, so that `swap_remove` moves only entries already seen.
    for i in (0..refused.len()).rev() {
        let r = &mut refused[i];
        let ended = pfds[i + 1].revents != 0 && r.drain() == Drained::Done;
        let due = !ended && now >= r.until;
        if due {
            // One last read, so that nothing that came since is unread.
            r.drain();
        }
        if ended || due {
            refused.swap_remove(i).close();
        }
    }
    Ok(())
}
