//! The `http` trace line and the access-log line of each answered request
//! on the io_uring driver; a proxied request's line names its upstream.

use std::os::fd::BorrowedFd;
use std::time::Instant;

use http1::Request;
use site::access_log::Entry;
use site::exposure::Surface;
use site::respond::Outcome;

use crate::driver;
use crate::uring::ctx::WorkerCtx;

/// The `http` trace line and the access-log line of one answer.
#[inline]
pub(in crate::uring) fn log(
    ctx: &WorkerCtx,
    fd: std::os::fd::RawFd,
    on: Surface,
    req: &Request,
    out: Outcome,
    started: Instant,
) {
    log_with(ctx, fd, on, req, out, started, None);
}

/// [`log`] for a proxied request, whose line names its upstream.
pub(in crate::uring) fn log_proxied(
    ctx: &WorkerCtx,
    fd: std::os::fd::RawFd,
    on: Surface,
    req: &Request,
    out: Outcome,
    started: Instant,
    upstream: site::access_log::UpstreamLog<'_>,
) {
    log_with(ctx, fd, on, req, out, started, Some(upstream));
}

fn log_with(
    ctx: &WorkerCtx,
    fd: std::os::fd::RawFd,
    on: Surface,
    req: &Request,
    out: Outcome,
    started: Instant,
    upstream: Option<site::access_log::UpstreamLog<'_>>,
) {
    driver::trace_outcome(fd, req, out, started);
    if let Some(log) = &ctx.access_log {
        // The client a PROXY header named, if this connection sent one.
        let client = match ctx.config.proxy.listeners {
            crate::proxy::Listeners::None => None,
            _ => ctx.proxy_clients.borrow().get(&fd).copied(),
        };
        let peer = (ctx.config.proxy).client_of(client, fd, req, || {
            // SAFETY: `fd` is this connection's socket, open until the
            // connection ends, after this call.
            reactor::sys::peer_addr(unsafe { BorrowedFd::borrow_raw(fd) }).ok()
        });
        log.log(&Entry {
            upstream,
            ..Entry::new(peer, req, on, out.status.code(), out.bytes, Some(started))
        });
    }
}
