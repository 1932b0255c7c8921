//! A worker thread on the proactor: takes connections from the dispatcher
//! and spawns one task per connection.
//!
//! Both dispatch modes come through the same port: in acceptor mode its fd
//! is the handoff pipe, in reuseport mode a small epoll of the dispatch
//! crate's own holding this worker's listener. Either way it is one fd
//! that becomes readable, so the worker waits on it with a one-shot
//! `IORING_OP_POLL_ADD` and then drains it with the port's own
//! `poll_batch`, which keeps the connection limit, the fd accounting and
//! the in-band shutdown exactly as on the other runtimes.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dispatch::{Batch, WorkerPort};
use executor::Runtime;
use proactor::{Proactor, TcpStream};
use site::access_log::AccessLog;
use site::routes::App;
use site::stats::WorkerStats;

use super::conn;
use super::ctx::WorkerCtx;
use crate::config::Config;
use crate::stackless::accept::{self, Worker};
use crate::stackless::ctx::ActivePool;

/// SQ entries of a worker's ring (the CQ gets four times as many).
const ENTRIES: u32 = 1024;
/// Provided buffers of a worker's ring, and their size: shared by every
/// connection of the worker, each holding one only between a CQE and the
/// copy into its request state.
const BUFFERS: u16 = 1024;
const BUFFER_SIZE: u32 = 4096;

/// The proactor every worker builds (and `setup::check` tries first).
pub(super) fn builder() -> proactor::Builder {
    Proactor::builder()
        .entries(ENTRIES)
        .buffers(BUFFERS, BUFFER_SIZE)
}

/// Runs one worker until shutdown completes.
pub fn run(
    mut port: WorkerPort,
    app: Arc<App>,
    config: Arc<Config>,
    stats: Arc<WorkerStats>,
    access_log: Option<AccessLog>,
    tls: crate::tls::TlsByListener,
) -> io::Result<()> {
    let rt = Runtime::with_driver(builder().build()?)?;
    stats.set_runtime(Box::new(crate::probes::Uring {
        proactor: rt.driver().stats_handle(),
    }));
    http1::refresh_date();
    let limits = config.limits;
    let ctx = Rc::new(WorkerCtx {
        app,
        config,
        stats,
        proactor: rt.driver().clone(),
        pool: ActivePool::new(limits),
        shutdown: Cell::new(false),
        access_log,
        closer: port.closer(),
        open: Cell::new(0),
        all_closed: RefCell::new(None),
        proxy_clients: RefCell::default(),
        tls,
        tls_conns: RefCell::default(),
    });
    // Keeps `http1`'s `Date` current beside the worker loop.
    rt.spawn(date_clock());
    let result = rt.block_on(accept::accept_loop(&mut port, ctx.clone()));
    // Whatever is still open at the deadline is cancelled here: dropping the
    // runtime drops every connection task (its recv cancelled, its socket
    // closed), then the proactor waits for the kernel's last CQEs.
    drop(rt);
    if let Some(log) = &ctx.access_log {
        log.flush();
    }
    result
}

/// How the io_uring worker waits, for the loop both stackless workers
/// share.
impl Worker for WorkerCtx {
    /// Nothing: each wait is a one-shot poll operation of its own.
    type Handoff = ();

    fn handoff(&self, _: &mut WorkerPort) -> io::Result<()> {
        Ok(())
    }

    async fn next_batch(
        &self,
        _: &(),
        port: &mut WorkerPort,
        fds: &mut Vec<OwnedFd>,
    ) -> io::Result<Batch> {
        loop {
            match port.poll_batch(fds)? {
                Batch::WouldBlock => {}
                batch => return Ok(batch),
            }
            // SAFETY: the port owns its fd (the handoff pipe or its epoll)
            // and is borrowed for this whole wait, which awaits the poll to
            // its end; and the port outlives the runtime (`run` drops it
            // first), whose proactor's teardown would wait for the poll's
            // last CQE were this future dropped.
            let poll = unsafe { proactor::op::poll(&self.proactor, port.fd(), libc::POLLIN) };
            poll.await?;
        }
    }

    /// No TCP_NODELAY yet: the connection sets it before its second send
    /// (see `driver::Nagle`). The connection's guard reports its close to
    /// the port.
    fn serve(self: &Rc<Self>, _: &WorkerPort, fd: OwnedFd) {
        let stream = TcpStream::from_fd(fd);
        if let Some(task) = conn::serve(self.clone(), stream) {
            executor::spawn(task);
        }
    }

    fn sleep(d: Duration) -> impl Future<Output = ()> + 'static {
        proactor::time::sleep(d)
    }

    fn access_log(&self) -> Option<&AccessLog> {
        self.access_log.as_ref()
    }

    fn begin_shutdown(&self) {
        WorkerCtx::begin_shutdown(self);
    }

    fn open(&self) -> &Cell<usize> {
        &self.open
    }

    fn all_closed(&self) -> &RefCell<Option<Waker>> {
        &self.all_closed
    }
}

/// Keeps `http1`'s cached `Date` current: refreshed at each whole second.
async fn date_clock() {
    loop {
        http1::refresh_date();
        let subsec = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        proactor::time::sleep(Duration::from_nanos(1_000_000_000 - u64::from(subsec))).await;
    }
}
