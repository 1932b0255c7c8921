//! The classic thread pool (`--runtime threadpool`): a fixed number of OS
//! threads (`--threadpool-size`) serving connections with blocking I/O
//! (the same [`Blocking`] socket and connection loop as `threads`), fed
//! by one bounded queue. How a connection uses a thread is
//! `--threadpool-mode`.
//!
//! **Event mode** (the default, Apache's event MPM): a thread serves a
//! *request*, not a connection. Each dispatch worker is a *front*
//! (`front.rs`): an epoll set holding every connection of the worker that
//! is waiting for the bytes of a request head: new ones, idle keep-alive
//! ones, and ones whose head has come in part. The front reads what
//! arrives and decodes it; a connection goes to the queue only with a
//! whole head (or a malformed one, to be answered 400/431/...), and a pool
//! thread gives it back to its front as soon as it would wait for the next
//! head. Idle and slow clients then cost an epoll entry, not a thread.
//!
//! ```text
//!   dispatch worker = front (one epoll set per worker)
//!     new fd ──▶ queue full? ──yes──▶ 503 (see `refused`)
//!                  │ no
//!                  ▼
//!     parked: new · idle keep-alive · head in part    ◀── give back (Mutex<Vec> + eventfd)
//!        │ readable: recv (MSG_DONTWAIT), decode                         ▲
//!        │ whole head, or an error;                                      │ next head not whole
//!        │ TLS / PROXY: readable                                         │
//!        ▼                                                               │
//!     [ queue ] ──pop──▶ N pool threads: answer it (body included, blocking), and every
//!                        request already whole in the buffer; flush ────┘
//!     deadlines: header and idle timeouts in the front (a BTreeSet of due times)
//! ```
//!
//! **Connection mode** (`--threadpool-mode connection`): the dispatch
//! worker moves each connection into the queue, and a pool thread serves
//! it to the end, idle keep-alive time and half-sent heads included: with
//! every thread held by idle clients, a new connection waits in the queue
//! until one of them leaves or times out (the head-of-line effect measured
//! in docs/threadpool-and-fork.md).
//!
//! ```text
//!   dispatch workers ──push──▶ [ queue, at most --threadpool-queue ] ──pop──▶ N pool threads
//!          │ queue full                                                      serve to the end
//!          ▼
//!   503 + Connection: close, written at once; what the client sent is read
//!   and discarded for a few ms (never parsed), then the socket is closed
//! ```
//!
//! In both modes `--threadpool-queue` bounds the queue against *new*
//! connections: while it is full, a new one is answered 503. In event mode
//! a connection already accepted is never refused: its next request waits
//! its turn in the queue, however long. These threads are not the blocking
//! pool of `--pool-threads`, which still runs jobs.

mod front;
mod refused;
mod turn;

use std::collections::VecDeque;
use std::io;
use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};

use bytes::BytesMut;
use dispatch::{Batch, Closer, WorkerPort};
use site::stats::RuntimeProbe;

use super::conn::Ctx;
use super::socket::Blocking;
use super::threads::{Live, wait_fd};
use refused::{Drained, LINGER_MAX, Refused, reject, wait_lingering};

/// Stack size of a pool thread, as for `threads`' connection threads.
const THREAD_STACK: usize = 256 * 1024;

/// How a connection uses a pool thread (`--threadpool-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// For one request at a time; the front waits for the next.
    Event,
    /// For its whole life.
    Connection,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Event => "event",
            Mode::Connection => "connection",
        }
    }
}

/// What each connection of one dispatch worker answers to when it closes.
struct Owner {
    ctx: Arc<Ctx>,
    live: Arc<Live>,
    closer: Closer,
}

impl Owner {
    /// Counts one connection closed (once per connection).
    fn closed(&self) {
        self.ctx.stats.closed.fetch_add(1, Ordering::Relaxed);
        self.closer.connection_closed();
        self.live.done();
    }
}

/// Connection mode: one accepted connection waiting for a thread.
struct Job {
    fd: OwnedFd,
    owner: Arc<Owner>,
}

/// What waits in the queue.
enum Work {
    /// Connection mode: a connection, to serve to the end.
    Connection(Job),
    /// Event mode: a connection with a request to answer.
    Event(turn::Turn),
}

/// The pool: its threads and its queue, shared by every dispatch worker.
#[derive(Debug, Clone)]
pub struct ThreadPool {
    shared: Arc<Shared>,
}

struct Shared {
    queue: Mutex<VecDeque<Work>>,
    ready: Condvar,
    size: usize,
    bound: usize,
    mode: Mode,
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
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl ThreadPool {
    /// A pool of `size` threads (started with the first worker) and a
    /// queue that refuses new connections beyond `bound` waiting ones.
    pub fn new(size: usize, bound: usize, mode: Mode) -> ThreadPool {
        ThreadPool {
            shared: Arc::new(Shared {
                queue: Mutex::new(VecDeque::with_capacity(bound.min(4096))),
                ready: Condvar::new(),
                size: size.max(1),
                bound,
                mode,
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
        q.push_back(Work::Connection(job));
        self.queued(q);
        Ok(())
    }

    /// Queues a connection with a request to answer, whatever the bound:
    /// it was let in already.
    fn push_ready(&self, turn: turn::Turn) {
        let mut q = self.shared.lock();
        q.push_back(Work::Event(turn));
        self.queued(q);
    }

    /// Whether a new connection would find the queue at its bound.
    fn is_full(&self) -> bool {
        self.shared.lock().len() >= self.shared.bound
    }

    /// After a push: the high-water mark, and a thread woken.
    fn queued(&self, q: std::sync::MutexGuard<'_, VecDeque<Work>>) {
        self.shared
            .queue_high_water
            .fetch_max(q.len(), Ordering::Relaxed);
        drop(q);
        self.shared.ready.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Work>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pool thread: take work, do it, repeat. The threads outlive the
    /// workers and end with the process.
    fn serve_forever(&self) {
        // Event mode's write buffer, lent to each turn in its turn.
        let mut wbuf = BytesMut::new();
        loop {
            let work = {
                let mut q = self.lock();
                loop {
                    match q.pop_front() {
                        Some(work) => break work,
                        None => q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner()),
                    }
                }
            };
            self.busy.fetch_add(1, Ordering::Relaxed);
            match work {
                Work::Connection(job) => serve(job),
                Work::Event(turn) => turn::serve_turn(turn, &mut wbuf),
            }
            self.busy.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Connection mode: serves one queued connection on the calling pool
/// thread.
fn serve(job: Job) {
    let Job { fd, owner } = job;
    let stream = TcpStream::from(fd);
    if stream.set_nonblocking(false).is_ok() {
        let _ = stream.set_nodelay(true);
        super::tls::serve(&owner.ctx, Blocking::new(stream));
    }
    owner.closed();
}

/// The pool's internals for the stats document (the same numbers in every
/// worker's entry: there is one pool), and the worker's own connections:
/// parked in its front, or handed to a thread (queued or being served).
#[derive(Debug)]
struct Probe {
    pool: Arc<Shared>,
    front: Option<Arc<turn::Gauges>>,
    live: Arc<Live>,
}

impl RuntimeProbe for Probe {
    fn write_json(&self, s: &mut String) {
        use std::fmt::Write as _;
        let p = &self.pool;
        let (parked, handed) = match &self.front {
            Some(g) => (g.parked(), g.handed()),
            // Every connection is a thread's, or waits for one.
            None => (0, self.live.count()),
        };
        let _ = write!(
            s,
            ",\"runtime\":{{\"kind\":\"threadpool\",\"mode\":\"{}\",\"threads\":{},\"busy\":{},\
             \"queued\":{},\"queue_bound\":{},\"queue_high_water\":{},\"rejected_503\":{},\
             \"parked\":{parked},\"handed\":{handed}}}",
            p.mode.name(),
            p.size,
            p.busy.load(Ordering::Relaxed),
            p.lock().len(),
            p.bound,
            p.queue_high_water.load(Ordering::Relaxed),
            p.rejected.load(Ordering::Relaxed)
        );
    }
}

/// Runs one dispatch worker: in event mode, its front
/// (`front::run`); in connection mode, it moves the connections handed
/// to it into the pool's queue (or answers 503 when the queue is full)
/// and, at shutdown, waits for the ones it queued.
pub fn run(port: WorkerPort, ctx: Ctx, pool: ThreadPool) -> io::Result<()> {
    match pool.shared.mode {
        Mode::Event => front::run(port, ctx, pool),
        Mode::Connection => run_connections(port, ctx, pool),
    }
}

fn run_connections(mut port: WorkerPort, ctx: Ctx, pool: ThreadPool) -> io::Result<()> {
    let ctx = Arc::new(ctx);
    let live = Arc::new(Live::default());
    ctx.stats.set_runtime(Box::new(Probe {
        pool: pool.shared.clone(),
        front: None,
        live: live.clone(),
    }));
    let owner = Arc::new(Owner {
        ctx: ctx.clone(),
        live: live.clone(),
        closer: port.closer(),
    });
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
                owner: owner.clone(),
            };
            if let Err(job) = pool.push(job) {
                let mut r = reject(job.fd, job.owner, &pool);
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
    // Queued connections are answered with `Connection: close` too.
    live.finish(&ctx, deadline);
    Ok(())
}
