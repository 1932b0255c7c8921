//! A worker thread on the stackless runtime: takes connections from the
//! dispatcher and spawns one task per connection.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use dispatch::{Batch, WorkerPort};
use executor::io::Async;
use executor::net::TcpStream;
use reactor::Reactor;

use super::accept::{Worker, accept_loop};
use super::conn;
use super::ctx::{ActivePool, ShutdownFlag, WorkerCtx};
use super::proxied;
use super::transport::TlsStream;
use crate::config::Config;
use crate::date_clock::DateClock;
use crate::tls::TlsByListener;
use site::access_log::AccessLog;
use site::exposure::Surface;
use site::routes::App;
use site::stats::WorkerStats;

/// The dispatcher's handoff fd, borrowed (the port owns and closes it).
pub(crate) struct PortFd(RawFd);

impl AsFd for PortFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the port outlives every `PortFd`: the shared
        // `accept_loop` (`super::accept`) drops its `handoff` before it
        // returns the port's borrow.
        unsafe { BorrowedFd::borrow_raw(self.0) }
    }
}

/// Runs one worker until shutdown completes.
pub fn run(
    mut port: WorkerPort,
    app: Arc<App>,
    config: Arc<Config>,
    stats: Arc<WorkerStats>,
    access_log: Option<AccessLog>,
    tls: TlsByListener,
) -> io::Result<()> {
    let rt = executor::Builder::new()
        .on_turn({
            let date = DateClock::default();
            move |r: &Reactor| date.tick(r.tick())
        })
        .build()?;
    stats.set_runtime(Box::new(crate::probes::Stackless {
        reactor: rt.reactor().stats_handle(),
        executor: rt.stats_handle(),
    }));
    http1::refresh_date();
    let closer = port.closer();
    let limits = config.limits;
    let idle_is_longest = config.idle_timeout
        >= config
            .header_timeout
            .max(config.write_timeout)
            .max(conn::LINGER);
    let ctx = Rc::new(WorkerCtx {
        app,
        config,
        stats,
        reactor: rt.reactor().clone(),
        pool: ActivePool::new(limits),
        shutdown: ShutdownFlag::default(),
        idle_is_longest,
        access_log,
        closer,
        open: Cell::new(0),
        all_closed: RefCell::new(None),
        tls,
    });
    let result = rt.block_on(accept_loop(&mut port, ctx.clone()));
    // Whatever is still open at the deadline is cancelled here: dropping the
    // runtime drops every connection task, closing its socket.
    drop(rt);
    if let Some(log) = &ctx.access_log {
        log.flush();
    }
    result
}

/// How the epoll worker waits, for the loop both stackless workers share.
impl Worker for WorkerCtx {
    /// The port's fd, registered with the reactor.
    type Handoff = Async<PortFd>;

    fn handoff(&self, port: &mut WorkerPort) -> io::Result<Async<PortFd>> {
        let handoff = Async::new(PortFd(port.fd()))?;
        // It waits for readiness before its first poll of the port.
        port.ready();
        Ok(handoff)
    }

    fn next_batch(
        &self,
        handoff: &Async<PortFd>,
        port: &mut WorkerPort,
        fds: &mut Vec<OwnedFd>,
    ) -> impl Future<Output = io::Result<Batch>> {
        handoff.read_with(move |_| match port.poll_batch(fds) {
            Ok(Batch::WouldBlock) => Err(io::ErrorKind::WouldBlock.into()),
            other => other,
        })
    }

    fn serve(self: &Rc<Self>, port: &WorkerPort, fd: OwnedFd) {
        // Accepted with SOCK_NONBLOCK by the dispatcher. (No TCP_NODELAY
        // yet: see the connection's `Nagle`.) Into epoll only if it has to
        // wait: its first read is tried at once.
        let stream = TcpStream::from_accepted_fd(fd);
        // SAFETY: `stream` owns the socket, open for this call.
        let fd = unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) };
        let on = self.config.admin.surface_of(fd);
        if on == Surface::Admin {
            self.stats.admin_connection();
        }
        // The PROXY protocol is the balancer's, on public listeners only
        // (an operator reaches --admin directly).
        if on == Surface::Public && self.config.proxy.expects_header(stream.as_raw_fd()) {
            executor::spawn(proxied::serve(self.clone(), stream, on));
            return;
        }
        match self.tls.on(on) {
            None => {
                executor::spawn(conn::serve(self.clone(), stream, on));
            }
            // Each transport has its own compiled connection loop (see
            // `transport`).
            Some(tls) => match TlsStream::new(stream, tls) {
                Ok(stream) => {
                    executor::spawn(conn::serve(self.clone(), stream, on));
                }
                Err(_) => port.connection_closed(),
            },
        }
    }

    fn sleep(d: Duration) -> impl Future<Output = ()> + 'static {
        executor::sleep(d)
    }

    fn access_log(&self) -> Option<&AccessLog> {
        self.access_log.as_ref()
    }

    fn begin_shutdown(&self) {
        self.shutdown.set();
    }

    fn open(&self) -> &Cell<usize> {
        &self.open
    }

    fn all_closed(&self) -> &RefCell<Option<Waker>> {
        &self.all_closed
    }
}
