//! The waiting halves of writing: a send with the buffer moved into the
//! operation, `sendfile(2)` on a socket the ring polls, and any of them
//! under a deadline.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::pin::pin;
use std::task::Poll;
use std::time::Instant;

use bytes::BytesMut;
use proactor::op::{self, IoBuf};
use proactor::{Proactor, TcpStream};
use site::stats::TimeoutKind;

use super::conn::{Res, Stop};

/// The unsent part of a write buffer, `buf[start..]`, owned by a send
/// while the kernel reads it.
pub(super) struct SendBuf {
    pub(super) buf: BytesMut,
    pub(super) start: usize,
}

// SAFETY: a `BytesMut`'s bytes live on the heap and do not move when the
// value moves; nothing mutates it while it is owned by a send (the future,
// or the proactor's slot if the future is dropped); `start ≤ len`.
unsafe impl IoBuf for SendBuf {
    fn as_ptr(&self) -> *const u8 {
        self.buf[self.start..].as_ptr()
    }
    fn len(&self) -> usize {
        self.buf.len() - self.start
    }
}

/// Runs `fut` until `at`; past it, drops it (which cancels its operation:
/// the proactor keeps the buffer until the kernel lets go) and fails with a
/// timeout of `kind`.
pub(super) async fn until<F: Future>(at: Instant, kind: TimeoutKind, fut: F) -> Res<F::Output> {
    let mut fut = pin!(fut);
    // Made on first need: most operations complete before it matters, and
    // a `Sleep` only touches the timer map once polled.
    let mut sleep = pin!(proactor::time::sleep_until(at));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(Stop::Timeout(kind)));
        }
        Poll::Pending
    })
    .await
}

/// Sends all of `buf` (one `IORING_OP_SEND` nearly always), the write
/// timeout counted from the start; the buffer comes back emptied, ready
/// for the next answers (a fresh one if a timeout left it with the kernel).
/// `flags`: more `send(2)` flags (`MSG_MORE` before a file body).
pub(super) async fn send_all(
    stream: &TcpStream,
    buf: BytesMut,
    at: Instant,
    flags: libc::c_int,
) -> (Res, BytesMut) {
    let mut tail = SendBuf { buf, start: 0 };
    while tail.start < tail.buf.len() {
        let (r, t) = match until(at, TimeoutKind::Write, stream.send_with(tail, flags)).await {
            Ok(sent) => sent,
            Err(stop) => return (Err(stop), BytesMut::new()),
        };
        tail = t;
        match r {
            Ok(0) => return (Err(Stop::Io(io::ErrorKind::WriteZero.into())), tail.buf),
            Ok(n) => tail.start += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // The ring retries a full socket itself; should it answer
                // EAGAIN all the same, wait for room through the ring.
                let p = Proactor::current();
                if let Err(stop) = wait_writable(&p, stream, at).await {
                    return (Err(stop), tail.buf);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (Err(Stop::Io(e)), tail.buf),
        }
    }
    let mut buf = tail.buf;
    buf.clear();
    (Ok(()), buf)
}

/// Waits (a one-shot `IORING_OP_POLL_ADD`) until `stream` takes more
/// bytes, or `at`.
pub(super) async fn wait_writable(p: &Proactor, stream: &TcpStream, at: Instant) -> Res {
    // SAFETY: the connection's stream owns the socket and is borrowed while
    // this future lives. Past `at`, `until` drops the poll and the
    // connection ends: dropping its `Conn` drops the stream, whose close
    // goes through this ring behind the poll's SQE (`proactor::TcpStream`'s
    // Drop), after the kernel took its own reference to the socket.
    let poll = unsafe { op::poll(p, stream.as_raw_fd(), libc::POLLOUT) };
    match until(at, TimeoutKind::Write, poll).await? {
        Ok(_) => Ok(()),
        Err(e) => Err(Stop::Io(e)),
    }
}

/// One `sendfile(2)` from `*offset` on the non-blocking socket, advancing
/// the offset: bytes sent (0 at the file's end), or `WouldBlock`.
pub(super) fn sendfile_once(
    sock: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    let mut off = *offset as libc::off_t;
    // SAFETY: `off` is a valid, writable offset the kernel advances; both
    // fds are borrowed, so open, for the call.
    let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    *offset = off as u64;
    Ok(n as usize)
}

/// One `pread(2)` of `file` at `offset` into `buf` (a copied file body,
/// beyond `--sendfile-max`): bytes read.
pub(super) fn pread(file: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` writable bytes for the call.
    let n = unsafe {
        libc::pread(
            file.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            offset as libc::off_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
