//! Event mode's connections between the front and the pool threads: what
//! the front holds ([`Held`]), what it queues ([`Turn`]), and a pool
//! thread's turn ([`serve_turn`]), which ends with the connection given
//! back to its front ([`Home`]) or closed.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::BytesMut;
use reactor::epoll::Epoll;
use site::exposure::Surface;

use super::Owner;
use crate::blocking::BlockingIo;
use crate::blocking::conn::park;
use crate::blocking::conn::{Ctx, Parked, Turn as Ended};
use crate::blocking::socket::Blocking;
use crate::blocking::tls::{self, Started, TlsIo};

/// A write buffer larger than 64 times this is not kept for the next turn.
const BUF_SIZE: usize = 4096;

/// A connection the front holds, or hands to a pool thread.
pub(super) enum Held {
    /// New, on a listener that takes a PROXY header: its first turn reads
    /// it.
    Start {
        io: Blocking,
        on: Surface,
        accepted: Instant,
    },
    /// Plain HTTP: the front reads and decodes its bytes.
    Plain(Box<Parked<Blocking>>),
    /// HTTPS: its thread reads it.
    Tls(Box<Parked<TlsIo<Blocking>>>),
}

impl Held {
    pub(super) fn fd(&self) -> RawFd {
        match self {
            Held::Start { io, .. } => io.fd(),
            Held::Plain(p) => p.io().fd(),
            Held::Tls(p) => p.io().fd(),
        }
    }

    /// Whether no byte of a request has come (the PROXY header's wait
    /// counts as such).
    pub(super) fn is_idle(&self) -> bool {
        match self {
            Held::Start { .. } => true,
            Held::Plain(p) => p.is_idle(),
            Held::Tls(p) => p.is_idle(),
        }
    }

    /// When it was accepted, while it has not answered a request.
    pub(super) fn accepted(&self) -> Option<Instant> {
        match self {
            Held::Start { accepted, .. } => Some(*accepted),
            Held::Plain(p) => p.accepted(),
            Held::Tls(p) => p.accepted(),
        }
    }

    /// Closes it (its socket is out of the epoll set or never was in it).
    pub(super) fn close(self, ctx: &Ctx) {
        match self {
            Held::Start { io, .. } => drop(io),
            Held::Plain(p) => drop(p.close(ctx)),
            Held::Tls(p) => drop(p.close(ctx)),
        }
    }
}

/// A connection on its way to a pool thread.
pub(super) struct Turn {
    pub(super) held: Held,
    pub(super) home: Arc<Home>,
}

/// A front's side that its connections' pool threads reach.
pub(super) struct Home {
    pub(super) owner: Arc<Owner>,
    pub(super) epoll: Epoll,
    /// Rung (written) when `back` gets a connection.
    pub(super) wake: OwnedFd,
    pub(super) woken: AtomicBool,
    pub(super) back: Mutex<Vec<Held>>,
    pub(super) gauges: Arc<Gauges>,
}

/// A front's connections, for the stats.
#[derive(Debug, Default)]
pub(super) struct Gauges {
    /// In the epoll set, waiting for a head.
    pub(super) parked: AtomicUsize,
    /// Given to the queue and not given back yet.
    pub(super) handed: AtomicUsize,
}

impl Gauges {
    pub(super) fn parked(&self) -> usize {
        self.parked.load(Ordering::Relaxed)
    }

    pub(super) fn handed(&self) -> usize {
        self.handed.load(Ordering::Relaxed)
    }
}

impl Home {
    /// A pool thread is done with `held` for now.
    fn give_back(&self, held: Held) {
        self.back
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(held);
        self.ring();
    }

    /// Wakes the front; a ring already pending covers this one.
    fn ring(&self) {
        if !self.woken.swap(true, Ordering::AcqRel) {
            let _ = reactor::sys::write(self.wake.as_fd(), &1u64.to_ne_bytes());
        }
    }

    /// A pool thread closed one of this front's connections, which was out
    /// of its epoll set and is now closed.
    fn closed(&self) {
        self.owner.closed();
        // At shutdown the front waits for its last connection.
        if self.owner.ctx.idle.is_shutting_down() {
            self.ring();
        }
    }
}

/// Serves one turn of a connection on the calling pool thread, then gives
/// it back to its front or closes it. `wbuf` is the thread's write buffer.
pub(super) fn serve_turn(turn: Turn, wbuf: &mut BytesMut) {
    let Turn { held, home } = turn;
    let ctx = &*home.owner.ctx;
    match held {
        Held::Start { io, on, .. } => match tls::start(ctx, io, on) {
            Ok((Started::Plain(io), client)) => {
                let parked = Parked::new(ctx, io, client, on);
                end(&home, park::resume(ctx, parked, false, wbuf), Held::Plain);
            }
            Ok((Started::Tls(io), client)) => {
                let parked = Parked::new(ctx, io, client, on);
                end(&home, park::resume(ctx, parked, true, wbuf), Held::Tls);
            }
            Err(io) => end(&home, Ended::Close(io), Held::Plain),
        },
        Held::Plain(parked) => {
            end(&home, park::resume(ctx, *parked, false, wbuf), Held::Plain);
        }
        Held::Tls(parked) => {
            end(&home, park::resume(ctx, *parked, true, wbuf), Held::Tls);
        }
    }
    // A large answer's buffer is not kept for the next small one.
    if wbuf.capacity() > 64 * BUF_SIZE {
        *wbuf = BytesMut::new();
    }
}

/// How a turn ended: back to the front, or closed.
fn end<I: BlockingIo>(home: &Home, ended: Ended<I>, held: impl FnOnce(Box<Parked<I>>) -> Held) {
    home.gauges.handed.fetch_sub(1, Ordering::Relaxed);
    match ended {
        Ended::Park(parked) => home.give_back(held(parked)),
        Ended::Close(io) => {
            // Out of the epoll set before the close.
            // SAFETY: `io` owns the fd and is dropped only after this.
            let _ = home
                .epoll
                .delete(unsafe { BorrowedFd::borrow_raw(io.fd()) });
            drop(io);
            home.closed();
        }
    }
}
