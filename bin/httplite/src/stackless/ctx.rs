//! What every connection task of one stackless worker shares: the
//! worker's context, the pool of request-time states ([`Active`]) and the
//! shutdown flag. Its own module so that the worker (which builds them) and
//! the connection (which uses them) do not import each other.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;

use bytes::BytesMut;
use dispatch::Closer;
use http1::{Decoder, Limits};
use reactor::Reactor;
use site::access_log::AccessLog;
use site::routes::App;
use site::stats::WorkerStats;

use crate::config::Config;

/// Read and write buffers start at this size.
const BUF_SIZE: usize = 4096;
/// Request states (buffers and decoder) a worker keeps for reuse; more are freed, so a burst of activity
/// does not pin memory that idle connections no longer need.
const POOL_MAX: usize = 32;

/// What every connection task of one worker shares.
pub struct WorkerCtx {
    /// Routing and the static root.
    pub app: Arc<App>,
    /// Limits and timeouts.
    pub config: Arc<Config>,
    /// This worker's counters.
    pub stats: Arc<WorkerStats>,
    /// The worker's reactor (for its cached clock).
    pub reactor: Reactor,
    /// Buffers and decoders of busy connections.
    pub pool: ActivePool,
    /// Set when shutdown begins.
    pub shutdown: ShutdownFlag,
    /// The idle timeout is at least every other deadline a connection's
    /// timer is set to (header, write, linger): going idle can then never
    /// move the timer earlier, and skips it.
    pub idle_is_longest: bool,
    /// The access log, if enabled.
    pub access_log: Option<AccessLog>,
    /// Stops the worker's port (its accept side) at shutdown.
    pub(super) closer: Closer,
    /// Connections open on this worker.
    pub(super) open: Cell<usize>,
    /// The shutdown wait, woken when the last connection closes.
    pub(super) all_closed: RefCell<Option<Waker>>,
    /// `--tls-cert`, `--admin-tls-cert`: which connections are HTTPS.
    pub(super) tls: crate::tls::TlsByListener,
}

impl WorkerCtx {
    /// Counts a connection open until the guard drops (even if the task is
    /// cancelled at the shutdown deadline).
    pub fn open_connection(self: Rc<Self>) -> ConnGuard {
        self.open.set(self.open.get() + 1);
        self.stats
            .connections
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ConnGuard { ctx: self }
    }
}

/// Marks a connection closed when dropped; the connection reaches the
/// worker's context through it.
pub struct ConnGuard {
    ctx: Rc<WorkerCtx>,
}

impl std::ops::Deref for ConnGuard {
    type Target = Rc<WorkerCtx>;

    #[inline]
    fn deref(&self) -> &Rc<WorkerCtx> {
        &self.ctx
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let ctx = &self.ctx;
        ctx.open.set(ctx.open.get() - 1);
        ctx.stats
            .closed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ctx.closer.connection_closed();
        if ctx.open.get() == 0
            && let Some(w) = ctx.all_closed.borrow_mut().take()
        {
            w.wake();
        }
    }
}

/// What a connection needs only while it has a request in hand: its read
/// and write buffers and its HTTP decoder. A connection takes one from the
/// worker's [`ActivePool`] when bytes arrive and gives it back when it goes
/// idle, so an idle keep-alive connection holds neither buffers nor decoder,
/// only a pointer's worth of room for them (nginx frees its buffers on idle
/// connections for the same reason).
pub struct Active {
    /// Bytes read and not yet decoded.
    pub rbuf: BytesMut,
    /// Encoded responses not yet written.
    pub wbuf: BytesMut,
    /// The request decoder (idle whenever the state is pooled).
    pub decoder: Decoder,
}

impl Active {
    /// Whether nothing of a next request has arrived: no buffered bytes, and
    /// the decoder between messages.
    #[inline]
    pub fn is_between_requests(&self) -> bool {
        self.rbuf.is_empty() && self.decoder.is_idle()
    }
}

/// A per-worker free list of [`Active`] states.
pub struct ActivePool {
    // Boxed on purpose: connections hold the box (one pointer), so taking
    // and returning a state moves a pointer, not ~190 bytes.
    #[expect(clippy::vec_box, reason = "connections own the boxes")]
    free: RefCell<Vec<Box<Active>>>,
    limits: Limits,
}

impl ActivePool {
    /// A pool whose decoders apply `limits`.
    pub fn new(limits: Limits) -> ActivePool {
        ActivePool {
            free: RefCell::new(Vec::new()),
            limits,
        }
    }

    /// A state with empty buffers and an idle decoder.
    #[inline]
    pub fn get(&self) -> Box<Active> {
        let reused = self.free.borrow_mut().pop();
        match reused {
            Some(active) => active,
            None => self.fresh(),
        }
    }

    #[cold]
    #[inline(never)]
    fn fresh(&self) -> Box<Active> {
        Box::new(Active {
            rbuf: BytesMut::with_capacity(BUF_SIZE),
            wbuf: BytesMut::with_capacity(BUF_SIZE),
            decoder: Decoder::new(self.limits),
        })
    }

    /// The state in `slot`, taken from the pool first if it is empty.
    #[inline]
    pub fn ensure<'a>(&self, slot: &'a mut Option<Box<Active>>) -> &'a mut Active {
        if slot.is_none() {
            *slot = Some(self.get());
        }
        // Just filled if it was empty.
        slot.as_deref_mut().unwrap_or_else(|| unreachable!())
    }

    /// Takes back a state whose buffers are already empty and whose decoder
    /// is between requests (a connection going idle after answering
    /// everything it read): nothing to clear.
    #[inline]
    pub fn put_drained(&self, active: Box<Active>) {
        debug_assert!(active.is_between_requests() && active.wbuf.is_empty());
        self.keep(active);
    }

    /// Takes a state back for reuse, emptied. Buffers that grew large are
    /// swapped for small ones (a burst must not pin memory); their room is
    /// otherwise restored lazily, by the `reserve` before the next read.
    #[inline]
    pub fn put(&self, mut active: Box<Active>) {
        active.rbuf.clear();
        active.wbuf.clear();
        if !active.decoder.is_idle() {
            active.decoder = Decoder::new(self.limits); // closed mid-request
        }
        self.keep(active);
    }

    /// Keeps an emptied state unless its buffers grew large or the pool is
    /// full.
    #[inline(always)]
    fn keep(&self, active: Box<Active>) {
        if active.rbuf.capacity() > 64 * BUF_SIZE || active.wbuf.capacity() > 64 * BUF_SIZE {
            return;
        }
        let mut free = self.free.borrow_mut();
        if free.len() < POOL_MAX {
            free.push(active);
        }
    }
}

/// Whether the worker is shutting down. Idle connections do not register
/// for it: when it begins, every task on the worker is woken once
/// ([`executor::wake_all`]) and the idle ones see the flag and close, so
/// waiting between requests costs no extra registration per request.
#[derive(Default)]
pub struct ShutdownFlag {
    shutting_down: Cell<bool>,
}

impl ShutdownFlag {
    /// Whether shutdown has begun.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.shutting_down.get()
    }

    /// Sets the flag and wakes every task of the worker to see it.
    pub(super) fn set(&self) {
        self.shutting_down.set(true);
        executor::wake_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http1::Message;

    /// A state given back by a connection that closed mid-request (half a
    /// head decoded, a body half read) must come out of the pool as good as
    /// new: empty buffers and a decoder that reads the next request from
    /// its first byte.
    #[test]
    fn states_come_back_clean_after_a_connection_dies_mid_request() {
        let pool = ActivePool::new(Limits::default());
        let mut a = pool.get();
        a.rbuf
            .extend_from_slice(b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc");
        assert!(matches!(
            a.decoder.decode(&mut a.rbuf),
            Ok(Some(Message::Head(_)))
        ));
        assert!(a.decoder.in_body(), "the body is still being read");
        a.wbuf.extend_from_slice(b"an answer never sent");
        pool.put(a);

        let mut b = pool.get();
        assert!(b.rbuf.is_empty() && b.wbuf.is_empty());
        assert!(b.decoder.is_idle());
        b.rbuf
            .extend_from_slice(b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n");
        match b.decoder.decode(&mut b.rbuf) {
            Ok(Some(Message::Head(req))) => assert_eq!(req.target(), "/next"),
            other => panic!("expected the next request's head, got {other:?}"),
        }
    }

    /// Buffers that grew for one big request are not kept: a burst must not
    /// pin memory in the pool.
    #[test]
    fn grown_states_are_not_pooled() {
        let pool = ActivePool::new(Limits::default());
        let mut a = pool.get();
        a.wbuf.reserve(128 * BUF_SIZE);
        pool.put(a);
        assert!(pool.free.borrow().is_empty());
        pool.put(pool.get());
        assert_eq!(pool.free.borrow().len(), 1);
    }
}
