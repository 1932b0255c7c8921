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
use crate::proxy_protocol::{HeaderReader, Step};

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

async fn read(ctx: &WorkerCtx, stream: &TcpStream) -> Result<Option<SocketAddr>, Refused> {
    let fd = stream.as_raw_fd();
    let mut reader = HeaderReader::default();
    loop {
        let peeked = proxy::peek(fd, reader.spare()).map_err(Refused::Io)?;
        let (max, done) = match reader.step(peeked) {
            Step::Invalid(why) => return Err(Refused::Header(why)),
            Step::Read(max) => (max, None),
            Step::Done { consume, source } => (consume, Some(source)),
        };
        // `Read`: at most `max` bytes, waiting for the first. `Done`:
        // exactly `max` more, which have arrived (the peek saw them).
        let mut left = max;
        while left > 0 {
            match reactor::sys::read(stream.as_fd(), &mut reader.spare()[..left]) {
                Ok(0) => return Err(Refused::Header("closed inside the PROXY header")),
                Ok(n) => {
                    reader.consumed(n);
                    left = match done {
                        Some(_) => left - n,
                        None => 0,
                    };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // SAFETY: `stream` owns the socket and is borrowed while
                    // this future lives; dropped (at the header timeout),
                    // the poll's SQE is already queued, and the stream's
                    // close goes through this ring behind it
                    // (`proactor::TcpStream`'s Drop).
                    let poll = unsafe { op::poll(&ctx.proactor, fd, libc::POLLIN) };
                    poll.await.map_err(Refused::Io)?;
                }
                Err(e) => return Err(Refused::Io(e)),
            }
        }
        if let Some(source) = done {
            return Ok(source);
        }
    }
}
