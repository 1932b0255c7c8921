//! A worker thread on the stackless runtime: takes connections from the
//! dispatcher and spawns one task per connection.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use dispatch::{Batch, WorkerPort};
use executor::io::Async;
use executor::net::TcpStream;
use reactor::Reactor;

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
struct PortFd(RawFd);

impl AsFd for PortFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the port outlives every `PortFd`: `accept_loop` drops its
        // `handoff` before it returns the port's borrow.
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

async fn accept_loop(port: &mut WorkerPort, ctx: Rc<WorkerCtx>) -> io::Result<()> {
    let handoff = Async::new(PortFd(port.fd()))?;
    port.ready();
    if ctx.access_log.is_some() {
        let c = ctx.clone();
        executor::spawn(async move {
            let mut tick = executor::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                if let Some(log) = &c.access_log {
                    log.flush();
                }
            }
        });
    }
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(32);
    let deadline = loop {
        let batch = handoff
            .read_with(|_| match port.poll_batch(&mut fds) {
                Ok(Batch::WouldBlock) => Err(io::ErrorKind::WouldBlock.into()),
                other => other,
            })
            .await?;
        for fd in fds.drain(..) {
            // Accepted with SOCK_NONBLOCK by the dispatcher. (No
            // TCP_NODELAY yet: see the connection's `Nagle`.)
            match TcpStream::from_nonblocking_fd(fd) {
                Ok(stream) => {
                    // SAFETY: `stream` owns the socket, open for this call.
                    let fd = unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) };
                    let on = ctx.config.admin.surface_of(fd);
                    if on == Surface::Admin {
                        ctx.stats.admin_connection();
                    }
                    // The PROXY protocol is the balancer's, on public
                    // listeners only (an operator reaches --admin directly).
                    if on == Surface::Public && ctx.config.proxy.expects_header(stream.as_raw_fd())
                    {
                        executor::spawn(proxied::serve(ctx.clone(), stream, on));
                        continue;
                    }
                    match ctx.tls.on(on) {
                        None => {
                            executor::spawn(conn::serve(ctx.clone(), stream, on));
                        }
                        // Each transport has its own compiled connection
                        // loop (see `transport`).
                        Some(tls) => match TlsStream::new(stream, tls) {
                            Ok(stream) => {
                                executor::spawn(conn::serve(ctx.clone(), stream, on));
                            }
                            Err(_) => port.connection_closed(),
                        },
                    }
                }
                Err(_) => port.connection_closed(),
            }
        }
        if let Batch::Shutdown { deadline } = batch {
            break deadline;
        }
    };
    drop(handoff);
    // Stop taking requests: idle connections close now, busy ones finish the
    // request in hand (answered with `Connection: close`), until the deadline.
    ctx.shutdown.set();
    let all_closed = std::future::poll_fn(|cx| {
        if ctx.open.get() == 0 {
            Poll::Ready(())
        } else {
            *ctx.all_closed.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        }
    });
    let remaining = deadline.saturating_duration_since(Instant::now());
    let _ = executor::timeout(remaining, all_closed).await;
    Ok(())
}
