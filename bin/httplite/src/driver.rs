//! What every driver shares that is about the connection rather than the
//! site: the `http` trace lines (the reactor's tracing, which the site
//! must not know) and the reading of a socket error.

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::time::Instant;

use bytes::BytesMut;
use http1::Request;
use site::respond::Outcome;
use site::stats::WorkerStats;

/// At shutdown, how long after its accept a connection that has not sent
/// its first request yet may still send it: a client accepted just before
/// (or, in an upgrade, at) the shutdown has its request on the way, and
/// closing over it would fail that request. Connections older than this,
/// and idle keep-alive ones, close at once.
pub const FIRST_REQUEST_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// How long after its accept a new connection that has not sent its first
/// request may still send it once shutdown has begun
/// ([`FIRST_REQUEST_GRACE`], at most the header timeout).
#[inline]
pub fn first_request_grace(config: &crate::config::Config) -> std::time::Duration {
    FIRST_REQUEST_GRACE.min(config.header_timeout)
}

/// The `http` trace line of one answered request; on a timeline, a slice
/// from `started` (the request's first bytes, or this poll's start if
/// later) with the method, path and status as arguments.
#[inline]
pub fn trace_outcome(fd: RawFd, req: &Request, out: Outcome, started: Instant) {
    if reactor::trace::chrome::on() {
        trace_request(fd, req, out, started);
        return;
    }
    reactor::trace!(
        "http",
        "fd={fd} {} {} {} -> {} body={}B{}",
        req.method().as_str(),
        req.target(),
        req.version().as_str(),
        out.status.code(),
        out.bytes,
        if out.keep_alive { "" } else { " close" }
    );
}

#[cold]
fn trace_request(fd: RawFd, req: &Request, out: Outcome, started: Instant) {
    use reactor::trace::chrome::{self, Json};
    let method = req.method().as_str();
    let target = req.target();
    let path = target.split('?').next().unwrap_or(target);
    chrome::complete_since(
        &format!("{method} {path}"),
        started,
        format_args!(
            "\"fd\":{fd},\"method\":{},\"path\":{},\"status\":{},\"body_bytes\":{},\"keep_alive\":{}",
            Json(method),
            Json(target),
            out.status.code(),
            out.bytes,
            out.keep_alive
        ),
    );
}

/// A connection's first poll (or its thread's first step): on a timeline,
/// the end of the flow arrow that its handoff started.
#[inline]
pub fn trace_arrival(fd: RawFd) {
    if reactor::trace::chrome::on() {
        let chrome_flow = reactor::trace::chrome::take_fd_flow(fd);
        reactor::trace::chrome::flow_end(chrome_flow);
    }
}

/// Encodes the answer to a protocol error (see
/// [`site::respond::reject_reply`]), traced; the caller flushes and closes.
pub fn reject(wbuf: &mut BytesMut, stats: &WorkerStats, e: &http1::Error, head_only: bool) {
    reactor::trace!("http", "reject {} ({e})", e.status().code());
    site::respond::reject_reply(wbuf, stats, e, head_only);
}

/// Bytes copied per `pread` + `send` when a file body is larger than
/// `--sendfile-max` (one buffer per thread, allocated on first use).
const COPY_CHUNK: usize = 256 * 1024;

thread_local! {
    static COPY_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's copy buffer (`COPY_CHUNK` bytes). `f` must
/// not wait: every connection of a worker shares the buffer, so what one
/// reads into it is sent before another can use it.
pub fn with_copy_buffer<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    COPY_BUFFER.with(|b| {
        let mut b = b.borrow_mut();
        if b.is_empty() {
            b.resize(COPY_CHUNK, 0);
        }
        f(&mut b)
    })
}

/// Whether a socket error is the peer going away (not counted as an error).
pub fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::UnexpectedEof
    )
}

/// The send buffer of an event stream's socket (the kernel doubles it).
const EVENT_STREAM_SNDBUF: libc::c_int = 8 * 1024;

/// Caps an event stream's socket send buffer, once, when the stream
/// opens. Autotuning grows an idle stream's buffer to megabytes (4 MiB
/// measured here, under `threads`), which at an event a second would hide
/// a viewer that stopped reading for an hour before a write ever blocked
/// and the write timeout could start. Best effort: on failure the
/// stream just keeps the larger buffer.
pub fn cap_event_stream_buffer(fd: RawFd) {
    let size = EVENT_STREAM_SNDBUF;
    // SAFETY: `fd` is the connection's open socket; the option value is a
    // valid c_int that outlives the call.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&raw const size).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// How a driver sends what its write buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// As it is: an answer the client is waiting for.
    Now,
    /// With `MSG_MORE`: a file body follows at once, and the head's last
    /// partial segment waits to fill up with it, as `TCP_CORK` (nginx's
    /// `tcp_nopush`) would make it, without the two `setsockopt` calls.
    BodyFollows,
    /// With `MSG_MORE`, right before the connection closes: the last
    /// partial segment waits for the FIN that the `close` (or a lingering
    /// close's `shutdown`) queues next, and the two leave as one segment.
    /// The client's kernel then takes one arrival instead of two and sends
    /// one ACK for both: 8 segments per `Connection: close` exchange
    /// instead of 10 (docs/request-path.md).
    Last,
}

impl Flush {
    /// Whether the send takes `MSG_MORE`.
    #[inline(always)]
    pub fn more(self) -> bool {
        self != Flush::Now
    }

    /// The `send(2)` flags it adds (to `MSG_NOSIGNAL`).
    #[inline(always)]
    pub fn send_flags(self) -> libc::c_int {
        if self.more() { libc::MSG_MORE } else { 0 }
    }
}

/// Nagle's algorithm on a connection. It holds a small segment back while
/// earlier data is unacknowledged, so a connection's first write always
/// leaves at once, and only a later one can wait (for the client's delayed
/// ACK, up to 40 ms). So the drivers set `TCP_NODELAY` just before a
/// connection's second write: a `Connection: close` client answered in one
/// write never pays the `setsockopt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nagle {
    /// Nothing written yet.
    Unwritten,
    /// One write out: set `TCP_NODELAY` before the next.
    Written,
    /// `TCP_NODELAY` is set.
    Off,
}

impl Nagle {
    /// Before a write sent as `how`: whether `TCP_NODELAY` must be set
    /// first. A head whose file body follows at once turns it off now: set
    /// between the two, `TCP_NODELAY` would push the head out in a segment
    /// of its own. A write before a close never needs it: the FIN pushes
    /// out whatever is queued.
    #[inline(always)]
    pub fn before_write(&mut self, how: Flush) -> bool {
        match (*self, how) {
            (Nagle::Off, _) | (_, Flush::Last) => false,
            (Nagle::Unwritten, Flush::Now) => {
                *self = Nagle::Written;
                false
            }
            (Nagle::Unwritten | Nagle::Written, _) => {
                *self = Nagle::Off;
                true
            }
        }
    }
}
