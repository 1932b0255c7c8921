//! A uring connection on a `--proxy-protocol` listener: admit the peer,
//! read the PROXY header under the header timeout, then serve the
//! connection as any other with the header's client as its address (see
//! [`crate::proxy`] for the rules).
//!
//! The connection's bytes normally come from its multishot recv, which
//! fills ring buffers with whatever has arrived: it would take the first
//! request's bytes together with the header's. So the header is read
//! before that recv is armed, as the other drivers read it: peek at what
//! has arrived, read exactly the header's bytes off the non-blocking
//! socket, and wait for more with a one-shot `IORING_OP_POLL_ADD`. What
//! follows the header stays in the socket for the recv.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::Instant;

use proactor::{TcpStream, op};

use super::ctx::WorkerCtx;
use crate::proxy::{self, Refused};

/// The header's client (`None`: keep the socket's peer), or why the
/// connection is refused (the caller traces, counts and closes it).
pub(super) async fn read_header(
    ctx: &WorkerCtx,
    stream: &TcpStream,
    accepted: Instant,
) -> Result<Option<SocketAddr>, Refused> {
    let fd = stream.as_raw_fd();
    ctx.config.proxy.admit(fd)?;
    let at = accepted + ctx.config.header_timeout;
    let left = at.saturating_duration_since(Instant::now());
    match proactor::time::timeout(left, read(ctx, stream)).await {
        Ok(read) => read,
        Err(_) => Err(Refused::Header(
            "no whole PROXY header within --header-timeout",
        )),
    }
}

/// The header, each read taking at most its buffer's length off the
/// non-blocking socket and waiting for the first byte with a one-shot
/// poll on the ring.
async fn read(ctx: &WorkerCtx, stream: &TcpStream) -> Result<Option<SocketAddr>, Refused> {
    let fd = stream.as_raw_fd();
    proxy::read_header(fd, async |buf: &mut [u8]| {
        loop {
            match reactor::sys::read(stream.as_fd(), buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // SAFETY: `stream` owns the socket and is borrowed while
                    // this future lives; dropped (at the header timeout), the
                    // poll's SQE is already queued, and the stream's close goes
                    // through this ring behind it (`proactor::TcpStream`'s Drop).
                    unsafe { op::poll(&ctx.proactor, fd, libc::POLLIN) }.await?;
                }
                read => return read,
            }
        }
    })
    .await
}
