//! Event mode's front: one per dispatch worker, on the worker's thread.
//! An epoll set of the worker's connections that wait for the bytes of a
//! request head, each registered level-triggered with `EPOLLONESHOT`:
//! once reported, a connection is disarmed until the front takes it back,
//! so bytes that arrive while a pool thread owns it are reported when it
//! is re-armed (`EPOLL_CTL_MOD`), never lost and never read by two.
//!
//! - A plain connection's bytes are read here ([`Parked::feed`]) and
//!   decoded; a whole head (or a decoding error) sends it to the queue.
//! - A TLS connection's bytes are ciphertext: readable, it goes to a pool
//!   thread, which takes one step of the session (a handshake flight, or
//!   records) and parks it again unless a head is whole. A TLS record that
//!   arrives in pieces is kept by rustls meanwhile, so no part of a TLS
//!   connection's waiting holds a thread either.
//! - A connection whose listener takes a PROXY header goes to a pool
//!   thread on its first readability; the header is read there, blocking,
//!   within the header timeout (a balancer sends it at once).
//!
//! Deadlines (the header timeout from a head's first byte or the accept,
//! the idle timeout between requests) sit in a `BTreeSet` of (due, token):
//! the earliest is the `epoll_wait` timeout, and each wake looks only at
//! the expired ones. Pool threads give connections back through a locked
//! `Vec` and an eventfd in the set.

use std::collections::BTreeSet;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::BytesMut;
use dispatch::{Batch, WorkerPort};
use reactor::epoll::{Epoll, Events};
use site::stats::{ErrorKind, TimeoutKind};

use super::refused::{Drained, LINGER_MAX, Refused, reject};
use super::turn::{Gauges, Held, Home, Turn};
use super::{Owner, Probe, ThreadPool};
use crate::blocking::BlockingIo;
use crate::blocking::conn::{Ctx, Feed, Parked};
use crate::blocking::socket::Blocking;
use crate::blocking::threads::Live;
use crate::blocking::tls::{self, TlsIo};
use crate::driver::first_request_grace;
use crate::tls::Session;

/// The token of the dispatch port's fd.
const PORT: u64 = u64::MAX;
/// The token of the eventfd pool threads ring when they give a
/// connection back.
const WAKE: u64 = u64::MAX - 1;
/// How a parked connection is registered: readable or hung up, once.
const PARKED: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32;
/// How a refused connection being drained is registered (it never leaves).
const DRAINING: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
/// Events taken per `epoll_wait`.
const EVENTS: usize = 256;
/// Read buffers kept for the connections that start a head (a connection
/// waiting between requests holds none).
const SPARE_BUFFERS: usize = 64;
/// A read buffer starts at this size, and one larger than 64 times it is
/// not kept.
const BUF_SIZE: usize = 4096;

/// What the front does when a deadline comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// A header or idle timeout: counted, closed.
    Timeout(TimeoutKind),
    /// No PROXY header in time: counted, closed.
    ProxyHeader,
    /// Shutdown, and the first-request grace of a new connection is over.
    Close,
    /// A refused connection's drain is over.
    Linger,
}

enum State {
    Held(Held),
    Refused(Refused),
}

struct Entry {
    state: State,
    due: Instant,
    on_due: Due,
}

/// A place in the front's table; its generation tells a token of the
/// connection there now from one of a connection gone.
#[derive(Default)]
struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

struct Front {
    home: Arc<Home>,
    pool: ThreadPool,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// (due, token) of every entry.
    timers: BTreeSet<(Instant, u64)>,
    /// Read buffers for connections that start a head.
    buffers: Vec<BytesMut>,
    /// Refused connections being drained.
    refused: usize,
    /// Once shutdown has begun: when it cuts off what is left.
    shutdown: Option<Instant>,
    port: RawFd,
}

/// Runs one dispatch worker as a front until shutdown has served or cut
/// off its last connection.
pub(super) fn run(mut port: WorkerPort, ctx: Ctx, pool: ThreadPool) -> io::Result<()> {
    let ctx = Arc::new(ctx);
    let live = Arc::new(Live::default());
    let gauges = Arc::new(Gauges::default());
    ctx.stats.set_runtime(Box::new(Probe {
        pool: pool.shared.clone(),
        front: Some(gauges.clone()),
        live: live.clone(),
    }));
    let home = Arc::new(Home {
        owner: Arc::new(Owner {
            ctx: ctx.clone(),
            live: live.clone(),
            closer: port.closer(),
        }),
        epoll: Epoll::new()?,
        wake: reactor::sys::eventfd()?,
        woken: AtomicBool::new(false),
        back: Mutex::new(Vec::new()),
        gauges,
    });
    home.epoll.add(port.as_fd(), libc::EPOLLIN as u32, PORT)?;
    home.epoll
        .add(home.wake.as_fd(), libc::EPOLLIN as u32, WAKE)?;
    pool.start();
    // Set up: the front waits for the port's readiness before its first
    // `poll_batch`, so it says so itself.
    port.ready();
    let mut front = Front {
        home: home.clone(),
        pool,
        slots: Vec::new(),
        free: Vec::new(),
        timers: BTreeSet::new(),
        buffers: Vec::new(),
        refused: 0,
        shutdown: None,
        port: port.fd(),
    };
    let mut events = Events::with_capacity(EVENTS);
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(32);
    let mut back: Vec<Held> = Vec::new();
    loop {
        let ms = front.timeout_ms(Instant::now());
        home.epoll.wait_ms(&mut events, ms)?;
        for ev in events.iter() {
            match ev.token {
                PORT => front.accept(&mut port, &mut fds)?,
                WAKE => front.take_back(&mut back),
                token => front.ready(token),
            }
        }
        let now = Instant::now();
        front.expire(now);
        if let Some(deadline) = front.shutdown
            && (live.count() == 0 || now >= deadline)
        {
            break;
        }
    }
    // Past the deadline: what the front still holds is closed (what pool
    // threads hold ends with the process).
    front.close_all();
    if let Some(log) = &ctx.access_log {
        log.flush();
    }
    Ok(())
}

impl Front {
    fn ctx(&self) -> &Ctx {
        &self.home.owner.ctx
    }

    /// The `epoll_wait` timeout: until the earliest deadline.
    fn timeout_ms(&self, now: Instant) -> i32 {
        let first = self.timers.first().map(|(due, _)| *due);
        match first.into_iter().chain(self.shutdown).min() {
            Some(t) => crate::blocking::poll_timeout_ms(t.saturating_duration_since(now)),
            None => -1,
        }
    }

    /// Takes the connections the dispatcher handed over.
    fn accept(&mut self, port: &mut WorkerPort, fds: &mut Vec<OwnedFd>) -> io::Result<()> {
        if self.shutdown.is_some() {
            return Ok(());
        }
        loop {
            let batch = port.poll_batch(fds)?;
            let now = Instant::now();
            for fd in fds.drain(..) {
                self.admit(fd, now);
            }
            match batch {
                Batch::WouldBlock => return Ok(()),
                Batch::Fds(_) => {}
                Batch::Shutdown { deadline } => {
                    self.begin_shutdown(deadline, now);
                    return Ok(());
                }
            }
        }
    }

    /// A new connection: parked, or refused while the queue is full.
    fn admit(&mut self, fd: OwnedFd, now: Instant) {
        let owner = self.home.owner.clone();
        let ctx = &*owner.ctx;
        ctx.stats.connections.fetch_add(1, Ordering::Relaxed);
        owner.live.enter();
        if self.pool.is_full() {
            return self.refuse(fd, now);
        }
        let stream = TcpStream::from(fd);
        if stream.set_nonblocking(false).is_err() {
            drop(stream);
            return owner.closed();
        }
        // Fails on a Unix socket, which has no Nagle to turn off.
        let _ = stream.set_nodelay(true);
        let io = Blocking::new(stream);
        let on = tls::surface(ctx, &io);
        let held = if tls::expects_proxy_header(ctx, &io, on) {
            // An untrusted peer is refused before it sends a byte.
            if let Err(refused) = ctx.config.proxy.admit(io.fd()) {
                refused.trace(io.fd());
                refused.count(&ctx.stats);
                drop(io);
                return owner.closed();
            }
            Held::Start {
                io,
                on,
                accepted: now,
            }
        } else if let Some(tls) = ctx.tls.on(on) {
            match Session::new(tls) {
                Ok(session) => {
                    let io = TlsIo::over(io, session);
                    Held::Tls(Box::new(Parked::new(ctx, io, None, on)))
                }
                Err(_) => {
                    ctx.stats.error(ErrorKind::Io);
                    drop(io);
                    return owner.closed();
                }
            }
        } else {
            Held::Plain(Box::new(Parked::new(ctx, io, None, on)))
        };
        self.park(held, now, true);
    }

    /// Answers 503 and drains the connection for a few ms.
    fn refuse(&mut self, fd: OwnedFd, now: Instant) {
        let mut r = reject(fd, self.home.owner.clone(), &self.pool);
        if r.drain() == Drained::Done || self.refused >= LINGER_MAX {
            return r.close();
        }
        let (fd, due) = (r.fd(), r.until.max(now));
        let token = self.insert(State::Refused(r), due, Due::Linger);
        self.refused += 1;
        // SAFETY: the refused connection's fd, open: it was just put in
        // `slots`, which owns it until `close_entry`.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        if self.home.epoll.add(fd, DRAINING, token).is_err() {
            self.close_entry(token);
        }
    }

    /// Parks `held` in the epoll set (added if `new`, re-armed if not), or
    /// closes it if shutdown has begun and it has no request coming.
    fn park(&mut self, held: Held, now: Instant, new: bool) {
        // SAFETY: `held` owns the fd, and is closed (or moved into `slots`,
        // which then owns it) only after the last use of this borrow below.
        let fd = unsafe { BorrowedFd::borrow_raw(held.fd()) };
        let Some((due, on_due)) = self.due_of(&held, now) else {
            if !new {
                let _ = self.home.epoll.delete(fd);
            }
            held.close(self.ctx());
            return self.home.owner.closed();
        };
        let token = self.insert(State::Held(held), due, on_due);
        self.home.gauges.parked.fetch_add(1, Ordering::Relaxed);
        let armed = match new {
            true => self.home.epoll.add(fd, PARKED, token),
            false => self.home.epoll.modify(fd, PARKED, token),
        };
        if armed.is_err() {
            self.ctx().stats.error(ErrorKind::Io);
            self.close_entry(token);
        }
    }

    /// When `held` is given up on, and how; `None`: close it now
    /// (shutdown, with no request coming).
    fn due_of(&self, held: &Held, now: Instant) -> Option<(Instant, Due)> {
        let config = &self.ctx().config;
        let (due, on_due) = match held {
            Held::Start { accepted, .. } => (*accepted + config.header_timeout, Due::ProxyHeader),
            Held::Plain(p) => timeout(p.deadline(config)),
            Held::Tls(p) => timeout(p.deadline(config)),
        };
        if self.shutdown.is_none() || !held.is_idle() {
            return Some((due, on_due));
        }
        // Shutting down, and no byte of a request here: an idle keep-alive
        // connection closes now, a new one once its first request could
        // no longer be on its way (as `threads` does).
        let grace_over = held.accepted()? + first_request_grace(config);
        if grace_over <= now {
            return None;
        }
        Some(match grace_over < due {
            true => (grace_over, Due::Close),
            false => (due, on_due),
        })
    }

    /// A parked connection is readable (or hung up).
    fn ready(&mut self, token: u64) {
        let Some(index) = self.index(token) else {
            return; // gone since (a stale event)
        };
        let Front {
            home,
            slots,
            buffers,
            ..
        } = self;
        let ctx = &*home.owner.ctx;
        let Some(entry) = slots[index].entry.as_mut() else {
            return;
        };
        let fed = match &mut entry.state {
            State::Refused(r) => match r.drain() {
                Drained::Done => Feed::Closed,
                Drained::More => return,
            },
            State::Held(Held::Plain(p)) => {
                let buffer = || {
                    buffers
                        .pop()
                        .unwrap_or_else(|| BytesMut::with_capacity(BUF_SIZE))
                };
                p.feed(ctx, buffer)
            }
            // Its thread reads it.
            State::Held(Held::Start { .. } | Held::Tls(_)) => Feed::Ready,
        };
        match fed {
            Feed::Ready => {
                if let Some(State::Held(held)) = self.remove(token) {
                    self.hand(held);
                }
            }
            Feed::Closed => self.close_entry(token),
            Feed::More => self.rearm(token),
        }
    }

    /// A parked connection read part of a head: its deadline may have
    /// moved (the header timeout starts with a head's first byte), and it
    /// waits for more.
    fn rearm(&mut self, token: u64) {
        let now = Instant::now();
        let Some(State::Held(held)) = self.remove(token) else {
            return;
        };
        self.home.gauges.parked.fetch_sub(1, Ordering::Relaxed);
        self.park(held, now, false);
    }

    /// Gives a connection with a request (or, TLS, with bytes) to the
    /// queue.
    fn hand(&mut self, mut held: Held) {
        let now = Instant::now();
        match &mut held {
            Held::Plain(p) => p.hand(now),
            Held::Tls(p) => p.hand(now),
            Held::Start { .. } => {}
        }
        let gauges = &self.home.gauges;
        gauges.parked.fetch_sub(1, Ordering::Relaxed);
        gauges.handed.fetch_add(1, Ordering::Relaxed);
        self.pool.push_ready(Turn {
            held,
            home: self.home.clone(),
        });
    }

    /// Parks the connections pool threads gave back.
    fn take_back(&mut self, back: &mut Vec<Held>) {
        // Cleared before the list is taken: a connection given back after
        // the take rings again.
        let _ = reactor::sys::read(self.home.wake.as_fd(), &mut [0u8; 8]);
        self.home.woken.store(false, Ordering::SeqCst);
        std::mem::swap(
            back,
            &mut *self.home.back.lock().unwrap_or_else(|e| e.into_inner()),
        );
        let now = Instant::now();
        for mut held in back.drain(..) {
            let buffer = match &mut held {
                Held::Plain(p) => p.take_empty_buffer(),
                Held::Tls(p) => p.take_empty_buffer(),
                Held::Start { .. } => None,
            };
            if let Some(mut b) = buffer
                && self.buffers.len() < SPARE_BUFFERS
                && b.capacity() <= 64 * BUF_SIZE
            {
                b.clear();
                self.buffers.push(b);
            }
            self.park(held, now, false);
        }
    }

    /// Acts on every deadline that has come.
    fn expire(&mut self, now: Instant) {
        while let Some(&(due, token)) = self.timers.first() {
            if due > now {
                return;
            }
            let on_due = self.index(token).and_then(|i| {
                let entry = self.slots[i].entry.as_ref()?;
                Some(entry.on_due)
            });
            let stats = &self.home.owner.ctx.stats;
            match on_due {
                Some(Due::Timeout(kind)) => stats.timeout(kind),
                Some(Due::ProxyHeader) => stats.error(ErrorKind::ProxyHeader),
                Some(Due::Linger) => {
                    if let Some(Entry {
                        state: State::Refused(r),
                        ..
                    }) = self.index(token).and_then(|i| self.slots[i].entry.as_mut())
                    {
                        // One last read, so that nothing that came since
                        // is unread.
                        r.drain();
                    }
                }
                Some(Due::Close) => {}
                None => {
                    // Not in the table: a timer left behind (cannot
                    // happen, but must not spin).
                    self.timers.remove(&(due, token));
                    continue;
                }
            }
            self.close_entry(token);
        }
    }

    /// Shutdown: stop taking connections, close the idle ones, let the
    /// others finish until `deadline`.
    fn begin_shutdown(&mut self, deadline: Instant, now: Instant) {
        self.shutdown = Some(deadline);
        // SAFETY: the port is `run`'s, borrowed for the front's whole life.
        let _ = self
            .home
            .epoll
            .delete(unsafe { BorrowedFd::borrow_raw(self.port) });
        // Event streams and sleeps on pool threads end, and answers say
        // `Connection: close`.
        self.ctx().idle.begin_shutdown();
        let tokens: Vec<u64> = self.timers.iter().map(|(_, token)| *token).collect();
        for token in tokens {
            let Some(i) = self.index(token) else {
                continue;
            };
            let Some(Entry {
                state: State::Held(held),
                due,
                on_due,
            }) = &self.slots[i].entry
            else {
                continue;
            };
            let now_due = (*due, *on_due);
            match self.due_of(held, now) {
                None => self.close_entry(token),
                Some(next) if next != now_due => {
                    self.timers.remove(&(now_due.0, token));
                    self.timers.insert((next.0, token));
                    if let Some(entry) = self.slots[i].entry.as_mut() {
                        (entry.due, entry.on_due) = next;
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// Closes everything the front holds (at the end of shutdown).
    fn close_all(&mut self) {
        let tokens: Vec<u64> = self.timers.iter().map(|(_, token)| *token).collect();
        for token in tokens {
            self.close_entry(token);
        }
    }

    /// Takes the entry of `token` out of the table, the epoll set and the
    /// timers, closes it and counts the close.
    fn close_entry(&mut self, token: u64) {
        let Some(index) = self.index(token) else {
            return;
        };
        let fd = match &self.slots[index].entry {
            Some(Entry {
                state: State::Held(held),
                ..
            }) => held.fd(),
            Some(Entry {
                state: State::Refused(r),
                ..
            }) => r.fd(),
            None => return,
        };
        // SAFETY: the entry still owns the fd; it is removed (and closed)
        // below, after this.
        let _ = self
            .home
            .epoll
            .delete(unsafe { BorrowedFd::borrow_raw(fd) });
        match self.remove(token) {
            Some(State::Held(held)) => {
                self.home.gauges.parked.fetch_sub(1, Ordering::Relaxed);
                held.close(self.ctx());
                self.home.owner.closed();
            }
            Some(State::Refused(r)) => {
                self.refused -= 1;
                r.close();
            }
            None => {}
        }
    }

    /// A new entry, with its deadline; its token.
    fn insert(&mut self, state: State, due: Instant, on_due: Due) -> u64 {
        let index = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.entry = Some(Entry { state, due, on_due });
        let token = (u64::from(slot.generation) << 32) | index as u64;
        self.timers.insert((due, token));
        token
    }

    /// Takes the entry of `token` out of the table and the timers (not
    /// out of the epoll set).
    fn remove(&mut self, token: u64) -> Option<State> {
        let index = self.index(token)?;
        let slot = &mut self.slots[index];
        let entry = slot.entry.take()?;
        // Any token of this slot handed out so far is now stale.
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index as u32);
        self.timers.remove(&(entry.due, token));
        Some(entry.state)
    }

    /// The table index of `token`, if it is still that entry's.
    fn index(&self, token: u64) -> Option<usize> {
        let index = (token & u64::from(u32::MAX)) as usize;
        let slot = self.slots.get(index)?;
        (slot.entry.is_some() && u64::from(slot.generation) == token >> 32).then_some(index)
    }
}

/// A parked connection's deadline as the front acts on it.
fn timeout((due, kind): (Instant, TimeoutKind)) -> (Instant, Due) {
    (due, Due::Timeout(kind))
}
