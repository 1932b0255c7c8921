//! A tunnel in blocking style: after an upstream's `101 Switching
//! Protocols` (a WebSocket handshake), the client's connection and the
//! upstream's carry bytes both ways, unread, until either side ends.
//!
//! ```text
//!   what the client sent after its head ─▶ upstream
//!   what the upstream sent after its 101 ─▶ client
//!   loop: wait for either side (BlockingIo::wait_either, --idle-timeout)
//!         read what it has ─▶ write all of it to the other side
//!         a side's end, error or the timeout ─▶ both close
//! ```
//!
//! One thread of control runs both directions: a write waits for its
//! peer to take the bytes, and the other direction waits meanwhile (a
//! client that reads nothing slows the upstream's messages to it, and
//! its own). Either side's end closes both, once what the other had
//! sent is passed on: a WebSocket ends with its own close handshake
//! first, so no message is lost. Under the thread pool, a tunnel holds
//! its pool thread until it ends, as a request body does.

use std::io;
use std::time::Instant;

use bytes::BytesMut;
use site::stats::TimeoutKind;

use super::{Conn, Stop};
use crate::blocking::upstream::{Side, Upstream};
use crate::blocking::{BlockingIo, Deadline};

impl<I: BlockingIo> Conn<'_, I> {
    /// Runs the tunnel to its end: the bytes the client got through it,
    /// and why the client's side stopped, if not by an end (a timeout, or
    /// its socket's error). `ubuf` holds what the upstream sent after its
    /// `101`; `rbuf` what the client sent after its head.
    pub(super) fn tunnel(
        &mut self,
        up: &Upstream<I::Waits>,
        ubuf: &mut BytesMut,
    ) -> (u64, Option<Stop>) {
        let idle = self.ctx.config.idle_timeout;
        let mut sent = 0u64;
        loop {
            if !self.rbuf.is_empty() {
                if up.write_all(&self.rbuf, Instant::now() + idle).is_err() {
                    return (sent, None);
                }
                self.rbuf.clear();
            }
            if !ubuf.is_empty() {
                sent += ubuf.len() as u64;
                self.wbuf.extend_from_slice(ubuf);
                ubuf.clear();
                if let Err(stop) = self.flush() {
                    return (sent, Some(stop));
                }
            }
            let side = match self.io.wait_either(up, Deadline::After(idle)) {
                Ok(side) => side,
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    return (sent, Some(Stop::Timeout(TimeoutKind::Idle)));
                }
                Err(e) => return (sent, Some(Stop::Io(e))),
            };
            let ended = match side {
                Side::Client => match self.read_some(Deadline::After(idle)) {
                    Ok(n) => n == 0,
                    Err(e) => return (sent, Some(Stop::Io(e))),
                },
                Side::Upstream => match up.read(ubuf, Instant::now() + idle) {
                    Ok(n) => n == 0,
                    Err(_) => true,
                },
            };
            if ended {
                // Everything read before was passed on: each wait comes
                // after the writes.
                return (sent, None);
            }
        }
    }
}
