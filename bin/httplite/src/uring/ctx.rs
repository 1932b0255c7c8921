//! What every connection task of one uring worker shares. Its own module
//! so that the worker (which builds it) and the connections (which use it)
//! do not import each other.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Waker;

use dispatch::Closer;
use proactor::Proactor;
use site::access_log::AccessLog;
use site::routes::App;
use site::stats::WorkerStats;

use crate::config::Config;
use crate::stackless::ctx::ActivePool;

/// What every connection task of one worker shares.
pub(super) struct WorkerCtx {
    /// Routing and the static root.
    pub app: Arc<App>,
    /// Limits and timeouts.
    pub config: Arc<Config>,
    /// This worker's counters.
    pub stats: Arc<WorkerStats>,
    /// The worker's proactor (for the operations the stream has no method
    /// for: polls, `sendfile(2)`'s waits).
    pub proactor: Proactor,
    /// Buffers and decoders of busy connections (the stackless driver's
    /// pool: an idle connection holds none).
    pub pool: ActivePool,
    /// Set when shutdown begins; every task is then woken once
    /// ([`executor::wake_all`]) to see it.
    pub shutdown: Cell<bool>,
    /// The access log, if enabled.
    pub access_log: Option<AccessLog>,
    /// Stops the worker's port (its accept side) at shutdown.
    pub closer: Closer,
    /// Connections open on this worker.
    pub open: Cell<usize>,
    /// The shutdown wait, woken when the last connection closes.
    pub all_closed: RefCell<Option<Waker>>,
    /// The client a PROXY header named, by connection fd, for the
    /// connections that sent one (kept beside the connections rather
    /// than in each, so that an idle connection without the option stays
    /// as small as it was; an entry goes when its connection ends).
    pub proxy_clients: RefCell<HashMap<RawFd, SocketAddr>>,
    /// `--tls-cert`, `--admin-tls-cert`: which connections are HTTPS.
    pub tls: crate::tls::TlsByListener,
    /// The TLS sessions of the HTTPS connections, by connection fd (beside
    /// the connections, as `proxy_clients`, so that a plain idle connection
    /// is not made larger by them; an entry goes when its connection ends).
    pub tls_conns: RefCell<HashMap<RawFd, Box<super::tls::TlsConn>>>,
}

impl WorkerCtx {
    /// Counts a connection open until the guard drops (even if the task is
    /// cancelled at the shutdown deadline).
    pub fn open_connection(self: &Rc<Self>) -> ConnGuard {
        self.open.set(self.open.get() + 1);
        self.stats.connections.fetch_add(1, Ordering::Relaxed);
        ConnGuard { ctx: self.clone() }
    }

    /// Begins shutdown: idle connections close, busy ones finish the
    /// request in hand.
    pub fn begin_shutdown(&self) {
        self.shutdown.set(true);
        executor::wake_all();
    }
}

/// Marks a connection closed when dropped; meanwhile, the connection's
/// reference to its worker.
pub(super) struct ConnGuard {
    ctx: Rc<WorkerCtx>,
}

impl std::ops::Deref for ConnGuard {
    type Target = Rc<WorkerCtx>;

    fn deref(&self) -> &Rc<WorkerCtx> {
        &self.ctx
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let ctx = &self.ctx;
        ctx.open.set(ctx.open.get() - 1);
        ctx.stats.closed.fetch_add(1, Ordering::Relaxed);
        ctx.closer.connection_closed();
        if ctx.open.get() == 0
            && let Some(w) = ctx.all_closed.borrow_mut().take()
        {
            w.wake();
        }
    }
}
