//! The access log and trace line of each answered request.

use std::net::SocketAddr;
use std::time::Instant;

use http1::Request;
use site::access_log::{AccessLog, Entry, UpstreamLog};
use site::exposure::Surface;
use site::respond::Outcome;

use super::Ctx;
use crate::blocking::BlockingIo;
use crate::driver;

/// Writes the access-log line, if logging is on. Inlined: with logging
/// and tracing off (the common case) it is two tests.
#[inline(always)]
pub(super) fn log<I: BlockingIo>(
    ctx: &Ctx,
    io: &I,
    client: Option<SocketAddr>,
    on: Surface,
    req: &Request,
    out: Outcome,
    started: Instant,
) {
    driver::trace_outcome(io.fd(), req, out, started);
    if let Some(log) = &ctx.access_log {
        access_log(ctx, log, io, client, on, req, out, started, None);
    }
}

/// [`log`] for a proxied request, whose line names its upstream.
#[allow(clippy::too_many_arguments)]
pub(super) fn log_proxied<I: BlockingIo>(
    ctx: &Ctx,
    io: &I,
    client: Option<SocketAddr>,
    on: Surface,
    req: &Request,
    out: Outcome,
    started: Instant,
    upstream: UpstreamLog<'_>,
) {
    driver::trace_outcome(io.fd(), req, out, started);
    if let Some(log) = &ctx.access_log {
        access_log(ctx, log, io, client, on, req, out, started, Some(upstream));
    }
}

#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn access_log<I: BlockingIo>(
    ctx: &Ctx,
    log: &AccessLog,
    io: &I,
    client: Option<SocketAddr>,
    on: Surface,
    req: &Request,
    out: Outcome,
    started: Instant,
    upstream: Option<UpstreamLog<'_>>,
) {
    let (status, bytes) = (out.status.code(), out.bytes);
    let peer = (ctx.config.proxy).client_of(client, io.fd(), req, || io.peer_addr());
    log.log(&Entry {
        upstream,
        ..Entry::new(peer, req, on, status, bytes, Some(started))
    });
}
