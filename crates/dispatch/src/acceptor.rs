//! The acceptor thread: the listeners, N handoff pipes, round-robin.
//!
//! ```text
//!   epoll (acceptor's own)
//!     ├─ listener i    EPOLLIN  → accept4 until EAGAIN, batch per worker
//!     ├─ doorbell      EPOLLIN  → shutdown, a close under max, a worker exit
//!     ├─ signal fd     EPOLLIN  → SIGINT/SIGTERM (if enabled)
//!     └─ pipe i (wr)   EPOLLOUT → room again in a full pipe: retry held fds
//! ```
//!
//! Each edge: accept until `EAGAIN` (or until a batch of 32 per worker is
//! ready), deal the fds round-robin, then write each worker's share with one
//! `write` per 32 fds. A full pipe (`EAGAIN` on the write) is counted and the
//! fds go to the next worker; if every pipe is full they are *held* here and
//! accepting stops (new clients wait in the kernel backlog, memory stays
//! bounded) until some pipe drains and its `EPOLLOUT` edge arrives.
//!
//! The same loop, without a listener or pipes, is the reuseport mode's
//! control thread, which only watches for signals.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

use reactor::epoll::{Epoll, Events};

use crate::accept::{self, Backoff, Step};
use crate::handoff::{self, BATCH, Sender};
use crate::shared::Shared;
use crate::signals::SignalGuard;
use crate::sys;

/// Listener `i` has token `LISTENER_BASE + i`.
const LISTENER_BASE: u64 = 1 << 32;
const CONTROL: u64 = 1;
const SIGNAL: u64 = 2;
const PIPE_BASE: u64 = 3;

/// Most accept attempts per loop turn, so that a flood cannot keep the
/// acceptor from noticing shutdown or a pipe with room.
const ROUND: usize = 1024;

/// Accept rounds at shutdown, to take what is already in the kernel's
/// accept queue (see [`Acceptor::finish`]).
const FINAL_ROUNDS: usize = 8;

const IN_EDGE: u32 = (libc::EPOLLIN | libc::EPOLLET) as u32;
const OUT_EDGE: u32 = (libc::EPOLLOUT | libc::EPOLLET) as u32;

/// Everything the acceptor thread owns.
#[derive(Debug)]
pub(crate) struct Acceptor {
    shared: Arc<Shared>,
    ep: Epoll,
    events: Events,
    /// Every listening socket; empty once closed.
    listeners: Vec<OwnedFd>,
    /// Per listener: an edge came and `accept` has not said `EAGAIN` since.
    listener_ready: Vec<bool>,
    reserve: Option<OwnedFd>,
    backoff: Backoff,
    pipes: Vec<Sender>,
    /// Read ends, only to reclaim the fds in a dead worker's pipe.
    readers: Vec<Arc<OwnedFd>>,
    dead: Vec<bool>,
    rr: usize,
    /// Accepted this round, not yet dealt out.
    fresh: Vec<OwnedFd>,
    buckets: Vec<Vec<OwnedFd>>,
    /// Accepted, but every pipe was full.
    held: Vec<OwnedFd>,
    limit: Option<u64>,
    /// Accepted and kept (not shed or rejected): with the workers' `closed`
    /// counters this gives the open count without any shared counter.
    live: u64,
    paused: bool,
    signals: Option<SignalGuard>,
    signal_grace: Duration,
}

/// What [`Acceptor::new`] needs.
#[derive(Debug)]
pub(crate) struct Parts {
    pub(crate) listeners: Vec<OwnedFd>,
    pub(crate) pipes: Vec<Sender>,
    pub(crate) readers: Vec<Arc<OwnedFd>>,
    pub(crate) limit: Option<u64>,
    pub(crate) signals: Option<SignalGuard>,
    pub(crate) signal_grace: Duration,
}

impl Acceptor {
    pub(crate) fn new(shared: Arc<Shared>, parts: Parts) -> io::Result<Acceptor> {
        let ep = Epoll::new()?;
        for (i, l) in parts.listeners.iter().enumerate() {
            ep.add(l.as_fd(), IN_EDGE, LISTENER_BASE + i as u64)?;
        }
        ep.add(shared.control.fd(), IN_EDGE, CONTROL)?;
        if let Some(s) = &parts.signals {
            ep.add(s.fd(), IN_EDGE, SIGNAL)?;
        }
        for (i, p) in parts.pipes.iter().enumerate() {
            ep.add(p.fd(), OUT_EDGE, PIPE_BASE + i as u64)?;
        }
        let n = parts.pipes.len();
        let reserve = match parts.listeners.is_empty() {
            false => Some(sys::open_reserve()?),
            true => None,
        };
        Ok(Acceptor {
            shared,
            ep,
            events: Events::with_capacity(64),
            listener_ready: vec![true; parts.listeners.len()],
            listeners: parts.listeners,
            reserve,
            backoff: Backoff::default(),
            pipes: parts.pipes,
            readers: parts.readers,
            dead: vec![false; n],
            rr: 0,
            fresh: Vec::new(),
            buckets: (0..n).map(|_| Vec::new()).collect(),
            held: Vec::new(),
            limit: parts.limit,
            live: 0,
            paused: false,
            signals: parts.signals,
            signal_grace: parts.signal_grace,
        })
    }

    /// The thread body: serve until shutdown, then hand over and close.
    pub(crate) fn run(mut self) -> io::Result<()> {
        let result = self.serve();
        // Whatever ended the loop, the workers must hear of it.
        self.shared.request_shutdown(Duration::ZERO);
        self.finish();
        result
    }

    fn serve(&mut self) -> io::Result<()> {
        loop {
            if self.shared.shutdown.is_requested() {
                return Ok(());
            }
            self.reap_dead_workers();
            if !self.held.is_empty() {
                self.flush_held();
            }
            let mut more = false;
            if self.can_accept() {
                more = self.accept_round();
            }
            // After a capped round the queue may still hold connections that
            // will raise no new edge: look again without sleeping.
            let timeout = match more {
                true => Some(Duration::ZERO),
                false => self.backoff.remaining(),
            };
            self.ep.wait(&mut self.events, timeout)?;
            let mut signalled = false;
            for ev in self.events.iter() {
                match ev.token {
                    t if t >= LISTENER_BASE => {
                        if let Some(r) = self.listener_ready.get_mut((t - LISTENER_BASE) as usize) {
                            *r = true;
                        }
                    }
                    CONTROL => self.shared.control.drain(),
                    SIGNAL => signalled = true,
                    // A pipe has room again: the held fds are retried above.
                    _ => {}
                }
            }
            if signalled {
                if let Some(guard) = &mut self.signals {
                    let _ = sys::eventfd_drain(guard.fd().as_raw_fd());
                    // A second signal now gets the old (default) action.
                    guard.restore();
                }
                self.shared.request_shutdown(self.signal_grace);
            }
        }
    }

    fn can_accept(&mut self) -> bool {
        self.listener_ready.iter().any(|&r| r)
            && self.held.is_empty()
            && self.backoff.remaining().is_none()
    }

    /// Accepts until `EAGAIN`, the limit, a full set of pipes, or
    /// [`ROUND`] connections; returns `true` in the last case (more may be
    /// waiting). The cap keeps a flood from starving shutdown and signals.
    fn accept_round(&mut self) -> bool {
        let Some(mut current) = self.listener_ready.iter().position(|&r| r) else {
            return false;
        };
        let stats = &self.shared.stats.clone();
        let stats = stats.acceptor();
        let flush_at = BATCH * self.pipes.len().max(1);
        let mut budget = self.room_left();
        if budget > 0 {
            self.paused = false;
        }
        let mut capped = false;
        let mut tries = 0;
        loop {
            if tries == ROUND {
                capped = true;
                break;
            }
            tries += 1;
            if budget == 0 {
                budget = self.pause();
                if budget == 0 {
                    break;
                }
            }
            let listener = self.listeners[current].as_fd();
            match accept::step(listener, &mut self.reserve) {
                Step::Conn(fd) => {
                    self.backoff.reset();
                    stats.accepted.fetch_add(1, Relaxed);
                    self.live += 1;
                    budget -= 1;
                    self.fresh.push(fd);
                    if self.fresh.len() >= flush_at {
                        self.deal();
                        if !self.held.is_empty() {
                            break;
                        }
                    }
                }
                Step::Empty => {
                    self.listener_ready[current] = false;
                    match self.listener_ready.iter().position(|&r| r) {
                        Some(next) => current = next,
                        None => break,
                    }
                }
                Step::Retry => {
                    stats.accept_errors.fetch_add(1, Relaxed);
                }
                Step::Shed => {
                    stats.emfile_events.fetch_add(1, Relaxed);
                    stats.rejected.fetch_add(1, Relaxed);
                    stats.shed.fetch_add(1, Relaxed);
                }
                Step::Exhausted(e) => {
                    stats.emfile_events.fetch_add(1, Relaxed);
                    self.shared.stats.set_last_accept_error(&e);
                    self.backoff.start();
                    break;
                }
                Step::Failed(e) => {
                    stats.accept_errors.fetch_add(1, Relaxed);
                    self.shared.stats.set_last_accept_error(&e);
                    self.backoff.start();
                    break;
                }
            }
        }
        self.deal();
        capped
    }

    /// Open connections: kept accepts minus every worker's closes.
    fn open(&self) -> u64 {
        let closed: u64 = (self.shared.stats.workers().iter())
            .map(|w| w.closed.load(SeqCst))
            .sum();
        self.live.saturating_sub(closed)
    }

    fn room_left(&self) -> u64 {
        match self.limit {
            None => u64::MAX,
            Some(max) => max.saturating_sub(self.open()),
        }
    }

    /// At `max_connections`: arm the doorbell, re-check, and either carry on
    /// or stop accepting until a close rings it.
    fn pause(&mut self) -> u64 {
        let room = &self.shared.control;
        room.arm();
        let left = self.room_left();
        if left > 0 {
            room.disarm();
            self.paused = false;
            return left;
        }
        if !self.paused {
            self.paused = true;
            self.shared
                .stats
                .acceptor()
                .paused_at_max
                .fetch_add(1, Relaxed);
        }
        0
    }

    /// The next live worker in round-robin order.
    fn next_worker(&mut self) -> Option<usize> {
        let n = self.pipes.len();
        for _ in 0..n {
            let w = self.rr;
            self.rr = (w + 1) % n;
            if !self.dead[w] && !self.shared.is_alive(w) {
                self.reap(w);
            }
            if !self.dead[w] {
                return Some(w);
            }
        }
        None
    }

    /// Deals the fresh fds round-robin and writes each worker's share.
    fn deal(&mut self) {
        if self.fresh.is_empty() {
            return;
        }
        let mut fresh = std::mem::take(&mut self.fresh);
        for fd in fresh.drain(..) {
            match self.next_worker() {
                Some(w) => self.buckets[w].push(fd),
                None => self.reject(fd),
            }
        }
        self.fresh = fresh;
        for w in 0..self.pipes.len() {
            let mut bucket = std::mem::take(&mut self.buckets[w]);
            while !bucket.is_empty() && self.send(w, &mut bucket) {}
            self.held.append(&mut bucket);
            self.buckets[w] = bucket;
        }
        if !self.held.is_empty() {
            self.flush_held();
        }
    }

    /// Offers the held fds to every live worker in turn until they are all
    /// gone or every pipe is full.
    fn flush_held(&mut self) {
        let n = self.pipes.len();
        let mut held = std::mem::take(&mut self.held);
        let mut refused = 0;
        while !held.is_empty() && refused < n {
            match self.next_worker() {
                Some(w) if self.send(w, &mut held) => refused = 0,
                Some(_) => refused += 1,
                None => {
                    for fd in held.drain(..) {
                        self.reject(fd);
                    }
                }
            }
        }
        self.held = held;
        let stats = self.shared.stats.acceptor();
        stats.held.store(self.held.len() as u64, Relaxed);
    }

    /// Writes up to one batch from the front of `fds` to worker `w`.
    fn send(&mut self, w: usize, fds: &mut Vec<OwnedFd>) -> bool {
        let stats = &self.shared.stats.workers()[w];
        // Traced before the write, so that the line precedes the worker's.
        let chrome = reactor::trace::chrome::on();
        if chrome {
            trace_handoff(w, fds);
        } else {
            reactor::trace!(
                "handoff",
                "fds={:?} -> w{w}",
                fds.iter()
                    .take(BATCH)
                    .map(|f| f.as_raw_fd())
                    .collect::<Vec<_>>()
            );
        }
        let sent = self.pipes[w].send(fds, &stats.handed_off);
        if chrome {
            reactor::trace::chrome::end(format_args!(""));
        }
        match sent {
            Ok(_) => true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                reactor::trace!("handoff", "pipe to w{w} full: holding the fds");
                stats.pipe_full.fetch_add(1, Relaxed);
                false
            }
            Err(_) => {
                // Cannot happen while the server holds the read end; if it
                // does, stop using this worker rather than lose more fds.
                self.dead[w] = true;
                false
            }
        }
    }

    /// Stops listening: a client that connects now is refused at connect.
    fn close_listener(&mut self) {
        for l in self.listeners.drain(..) {
            let _ = self.ep.delete(l.as_fd());
        }
        self.listener_ready.clear();
    }

    /// Closes an accepted connection nobody can serve.
    fn reject(&mut self, fd: OwnedFd) {
        drop(fd);
        self.live -= 1;
        self.shared.stats.acceptor().rejected.fetch_add(1, Relaxed);
    }

    fn reap_dead_workers(&mut self) {
        for w in 0..self.pipes.len() {
            if !self.dead[w] && !self.shared.is_alive(w) {
                self.reap(w);
            }
        }
    }

    /// A worker that left `worker_main` takes no more fds; whatever sits in
    /// its pipe is closed, and its connections no longer count as open (its
    /// thread is gone, and their fds with it).
    fn reap(&mut self, w: usize) {
        self.dead[w] = true;
        let stranded = handoff::drain_and_close(self.readers[w].as_fd()) as u64;
        let stats = &self.shared.stats.workers()[w];
        stats.closed.store(stats.handed_off.load(Relaxed), SeqCst);
        let acceptor = self.shared.stats.acceptor();
        acceptor.rejected.fetch_add(stranded, Relaxed);
    }

    /// Shutdown without resetting a client that has sent its request.
    ///
    /// - Connections already in the kernel's accept queue completed their
    ///   handshake, and their clients may have sent a request: closing the
    ///   listener would reset them. So they are accepted first (until
    ///   `EAGAIN`, within the connection limit) and handed over like any
    ///   other; the workers answer them with `Connection: close`. A client
    ///   that connects after the listener is closed is refused at connect.
    /// - Held fds (every pipe was full) wait for room until the grace
    ///   deadline: a busy or stalled worker drains its pipe once it sees the
    ///   shutdown. Only what is still held at the deadline is closed.
    ///
    /// Then the pipes close: each worker reads its remaining fds followed
    /// by end-of-file.
    fn finish(&mut self) {
        let deadline = self.shared.shutdown.deadline();
        // Bounded: a flood of new connections cannot keep shutdown waiting.
        let mut rounds = 0;
        loop {
            self.reap_dead_workers();
            self.flush_held();
            let mut more = false;
            if self.shared.shutdown.is_handover() {
                // The successor accepts what is queued.
                self.close_listener();
            }
            if self.held.is_empty() && !self.listeners.is_empty() {
                self.listener_ready.fill(true);
                more = rounds < FINAL_ROUNDS && self.can_accept() && self.accept_round();
                rounds += 1;
                // The queue is empty (or the limit or the bound is reached),
                // and all that was taken is in a pipe: nothing waits to be
                // reset any more.
                if !more && self.held.is_empty() {
                    self.close_listener();
                }
            }
            let now = Instant::now();
            if (self.held.is_empty() && self.listeners.is_empty()) || now >= deadline {
                break;
            }
            if more {
                continue;
            }
            // A pipe with room again raises its EPOLLOUT edge.
            if self
                .ep
                .wait(&mut self.events, Some(deadline - now))
                .is_err()
            {
                break;
            }
            if self.events.iter().any(|ev| ev.token == CONTROL) {
                self.shared.control.drain();
            }
        }
        self.close_listener();
        for fd in std::mem::take(&mut self.held) {
            self.reject(fd);
        }
        self.shared.stats.acceptor().held.store(0, Relaxed);
        for p in self.pipes.drain(..) {
            let _ = self.ep.delete(p.fd());
        }
        if let Some(s) = &self.signals {
            let _ = self.ep.delete(s.fd());
        }
        self.signals = None;
    }
}

/// A timeline's `handoff` slice (closed by the caller after the write):
/// which fds go to which worker, each the start of a flow arrow that the
/// worker's handoff loop and the connection's first poll continue.
#[cold]
fn trace_handoff(w: usize, fds: &[OwnedFd]) {
    use reactor::trace::chrome;
    use std::fmt::Write as _;
    let batch = &fds[..fds.len().min(BATCH)];
    let mut list = String::new();
    for (i, f) in batch.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(list, "{sep}{}", f.as_raw_fd());
    }
    chrome::begin(
        "handoff",
        format_args!("\"fds\":[{list}],\"worker\":\"w{w}\""),
    );
    for f in batch {
        chrome::flow_start(chrome::handoff_flow(f.as_raw_fd()));
    }
}
