//! TCP over the ring: a listener with a **multishot accept**, and a stream
//! with a **multishot recv** on the provided-buffer ring plus owned-buffer
//! sends.
//!
//! A multishot operation is one SQE that keeps posting CQEs (each with
//! `IORING_CQE_F_MORE`) until the kernel ends it; its last CQE comes without
//! `F_MORE` (an error, EOF, `-ENOBUFS`, or the kernel's own limit). Whoever
//! reads the CQEs must then **re-arm** it, or the connection goes silent:
//! nothing is wrong, nothing is submitted, nothing ever arrives.
//!
//! Both own their fd and close it through the ring when dropped, queued
//! behind every SQE that names it: the kernel looks the fd up when it
//! submits those SQEs (or, for a `SHUTDOWN`, the close waits for its last
//! CQE), so the number can never be reused under an operation still in
//! flight. That is what makes their methods safe wrappers of the `unsafe`
//! operations of [`crate::op`].

use std::future::poll_fn;
use std::io;
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::ops::Deref;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};

use crate::Proactor;
use crate::abi::*;
use crate::op::{self, IoBuf};
use crate::ops::{Kind, OpKey};
use std::cell::Cell;

/// A listening socket whose connections arrive through one multishot accept.
#[derive(Debug)]
pub struct TcpListener {
    /// Always `Some` until `Drop` hands it to the ring's close.
    fd: Option<OwnedFd>,
    p: Proactor,
    op: Cell<Option<OpKey>>,
}

impl TcpListener {
    /// Binds `addr` (with `SO_REUSEADDR`, as std does) on the current proactor.
    pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
        TcpListener::from_std(StdListener::bind(addr)?)
    }

    /// Adopts a listening socket (e.g. one of `SO_REUSEPORT` listeners).
    pub fn from_std(l: StdListener) -> io::Result<TcpListener> {
        l.set_nonblocking(true)?;
        Ok(TcpListener {
            fd: Some(l.into()),
            p: Proactor::current(),
            op: Cell::new(None),
        })
    }

    fn raw(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        // Borrow the fd as a std listener without taking ownership.
        let l = std::mem::ManuallyDrop::new(
            // SAFETY: the fd is ours and open; ManuallyDrop never closes it.
            unsafe { StdListener::from_raw_fd(self.raw()) },
        );
        l.local_addr()
    }

    fn arm(&self) -> OpKey {
        let sqe = Sqe {
            opcode: IORING_OP_ACCEPT,
            fd: self.raw(),
            ioprio: IORING_ACCEPT_MULTISHOT,
            op_flags: (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u32,
            ..Sqe::default()
        };
        // SAFETY: a multishot accept with no address buffer points to no
        // memory. The fd is ours, and Drop closes it through the ring after
        // this SQE (see the module docs).
        let key = unsafe { self.p.start(Kind::Accept, sqe) };
        self.op.set(Some(key));
        key
    }

    /// The next connection (non-blocking, close-on-exec).
    pub async fn accept(&self) -> io::Result<TcpStream> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<TcpStream>> {
        let key = match self.op.get() {
            Some(k) => k,
            None => self.arm(),
        };
        let c = std::task::ready!(self.p.poll_next(key, cx));
        if self.p.is_finished(key) {
            // No F_MORE: the multishot ended; the next accept re-arms.
            self.p.release(key, None);
            self.op.set(None);
            self.p.inner.stats.rearms.bump();
        }
        Poll::Ready(if c.res >= 0 {
            // SAFETY: a CQE of accept carries a new fd that nobody else owns.
            Ok(TcpStream::adopt(
                unsafe { OwnedFd::from_raw_fd(c.res) },
                &self.p,
            ))
        } else {
            Err(io::Error::from_raw_os_error(-c.res))
        })
    }
}

impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_ref().expect("open listener").as_fd()
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        // Cancels the multishot; fds that still arrive are closed (ops.rs Kind::Accept).
        if let Some(key) = self.op.take() {
            self.p.release(key, None);
        }
        // Through the ring, behind the accept's SQE: a close now could let
        // the number be reused before the kernel submits the accept.
        if let Some(fd) = self.fd.take() {
            self.p.close_detached(fd);
        }
    }
}

/// Bytes a multishot recv delivered, in a buffer of the provided ring.
/// Dropping it returns the buffer to the ring (the kernel may fill it again).
pub struct RecvBuf {
    p: Proactor,
    bid: u16,
    len: u32,
}

impl std::fmt::Debug for RecvBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBuf")
            .field("bid", &self.bid)
            .field("len", &self.len)
            .finish()
    }
}

impl RecvBuf {
    /// The buffer id the CQE named (`cqe.flags >> 16`).
    pub fn bid(&self) -> u16 {
        self.bid
    }
}

impl Deref for RecvBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: a CQE handed `bid` to this RecvBuf (the kernel is done
        // writing it) and only our Drop returns it to the ring.
        unsafe { self.p.inner.bufs.bytes(self.bid, self.len) }
    }
}

impl Drop for RecvBuf {
    fn drop(&mut self) {
        self.p.recycle(self.bid);
    }
}

/// A [`TcpStream`]'s `send` word with no detached send in flight: a
/// `user_data` no operation has (the notifier's).
const NO_SEND: u64 = crate::driver::NOTIFY_UD;

/// A connected socket driven by the ring.
#[derive(Debug)]
pub struct TcpStream {
    fd: Option<OwnedFd>,
    p: Proactor,
    recv: Cell<Option<OpKey>>,
    /// The `user_data` of the detached send in flight
    /// ([`TcpStream::send_detached`]), or [`NO_SEND`] (a word, not an
    /// `Option<OpKey>`: every idle connection keeps one).
    send: Cell<u64>,
}

impl TcpStream {
    /// Adopts a connected socket handed over by another thread (the
    /// acceptor mode of the dispatch crate) or made by std.
    pub fn from_std(s: StdStream) -> io::Result<TcpStream> {
        s.set_nonblocking(true)?;
        Ok(TcpStream::adopt(s.into(), &Proactor::current()))
    }

    /// Adopts a connected socket fd.
    pub fn from_fd(fd: OwnedFd) -> TcpStream {
        TcpStream::adopt(fd, &Proactor::current())
    }

    fn adopt(fd: OwnedFd, p: &Proactor) -> TcpStream {
        TcpStream {
            fd: Some(fd),
            p: p.clone(),
            recv: Cell::new(None),
            send: Cell::new(NO_SEND),
        }
    }

    fn raw(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }

    fn arm(&self) -> OpKey {
        let sqe = Sqe {
            opcode: IORING_OP_RECV,
            fd: self.raw(),
            ioprio: IORING_RECV_MULTISHOT,
            flags: IOSQE_BUFFER_SELECT,
            buf_group: self.p.inner.bufs.bgid(),
            ..Sqe::default()
        };
        // SAFETY: the recv's memory is the driver's buffer ring (group
        // `bgid`), which outlives every operation (driver Drop). The fd is
        // ours, and Drop closes it through the ring after this SQE.
        let key = unsafe { self.p.start(Kind::Recv, sqe) };
        self.recv.set(Some(key));
        key
    }

    /// The next bytes, in a ring buffer; `None` at end of stream.
    ///
    /// The first call arms a multishot recv that then stays armed across
    /// calls: data arriving between calls queues in its slot and the next
    /// call returns it at once, with no submission. Dropping this future
    /// loses nothing. A CQE without `F_MORE` ends the multishot and the next
    /// call re-arms it; `-ENOBUFS` (the ring ran dry) waits until a buffer
    /// comes back, then re-arms (back-pressure).
    pub async fn recv(&self) -> io::Result<Option<RecvBuf>> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Poll form of [`TcpStream::recv`].
    pub fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<RecvBuf>>> {
        loop {
            let key = match self.recv.get() {
                Some(k) => k,
                None => self.arm(),
            };
            let c = std::task::ready!(self.p.poll_next(key, cx));
            if self.p.is_finished(key) {
                self.p.release(key, None);
                self.recv.set(None);
                if c.res > 0 || c.res == -libc::ENOBUFS {
                    self.p.inner.stats.rearms.bump();
                }
            }
            if c.flags & IORING_CQE_F_BUFFER != 0 {
                let bid = (c.flags >> IORING_CQE_BUFFER_SHIFT) as u16;
                let buf = RecvBuf {
                    p: self.p.clone(),
                    bid,
                    len: c.res.max(0) as u32,
                };
                if c.res > 0 {
                    return Poll::Ready(Ok(Some(buf)));
                }
                drop(buf); // an empty buffer goes straight back
            }
            match c.res {
                0 => return Poll::Ready(Ok(None)),
                r if r == -libc::ENOBUFS => {
                    self.p.inner.stats.enobufs.bump();
                    if self.p.inner.bufs.available() == 0 {
                        self.p.wait_for_buffer(cx.waker());
                        return Poll::Pending;
                    }
                    // Buffers came back meanwhile: loop and re-arm.
                }
                r if r < 0 => return Poll::Ready(Err(io::Error::from_raw_os_error(-r))),
                _ => {}
            }
        }
    }

    /// Sends `buf` (once: may be partial); the buffer comes back with the count.
    pub async fn send<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        // SAFETY: the stream owns the fd and is borrowed while the future
        // lives; if the future is dropped first, the stream's close goes
        // through the ring behind this SQE (module docs).
        unsafe { op::send(&self.p, self.raw(), buf) }.await
    }

    /// [`TcpStream::send`] with more `send(2)` flags ([`op::send_with`]).
    pub async fn send_with<B: IoBuf>(&self, buf: B, flags: libc::c_int) -> (io::Result<usize>, B) {
        // SAFETY: as in `send`.
        unsafe { op::send_with(&self.p, self.raw(), buf, flags) }.await
    }

    /// Sends all of `buf`, resubmitting the rest after partial sends.
    pub async fn send_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let mut tail = Tail { buf, start: 0 };
        while tail.start < tail.buf.len() {
            // SAFETY: as in `send`.
            let (r, t) = unsafe { op::send(&self.p, self.raw(), tail) }.await;
            tail = t;
            match r {
                Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), tail.buf),
                Ok(n) => tail.start += n,
                Err(e) => return (Err(e), tail.buf),
            }
        }
        (Ok(()), tail.buf)
    }

    /// Sends all of `buf` without waiting for it (`MSG_WAITALL`: the
    /// kernel sends the rest of a short send itself): the stream keeps the
    /// operation, the proactor the buffer. A completion that reports every
    /// byte sent frees both and wakes nobody; any other is kept for
    /// [`TcpStream::poll_detached`], which the next send must wait on
    /// first (two sends in flight could interleave their bytes).
    ///
    /// Dropping the stream with the send in flight cancels it.
    ///
    /// # Panics
    /// If a detached send is still in flight, or `buf` is 4 GiB or more.
    pub fn send_detached<B: IoBuf>(&self, buf: B, flags: libc::c_int) {
        assert!(self.send.get() == NO_SEND, "a detached send in flight");
        let len = u32::try_from(buf.len()).expect("a send under 4 GiB");
        let sqe = op::send_sqe(
            self.raw(),
            buf.as_ptr(),
            buf.len(),
            libc::MSG_WAITALL | flags,
        );
        let buf: Box<dyn std::any::Any> = Box::new(buf);
        // SAFETY: the SQE points into `buf`'s stable memory (IoBuf), which
        // the table keeps until the slot is freed, after the last CQE. The
        // stream owns the fd, and its close goes through the ring behind
        // this SQE (module docs).
        let key = unsafe {
            self.p
                .start_with(Kind::Send { awaits: false }, sqe, |ops, key| {
                    ops.insert_detached(key, len, buf)
                })
        };
        self.send.set(key.user_data());
    }

    /// Whether a detached send was started and not yet seen to end by
    /// [`TcpStream::poll_detached`].
    pub fn has_detached(&self) -> bool {
        self.send.get() != NO_SEND
    }

    /// Whether the detached send has ended: `Ready(None)` if it sent every
    /// byte (or there is none), `Ready(Some((result, buf)))` if it did not
    /// (an error, or a count short of the whole: the caller sends the rest),
    /// with the buffer back; `Pending` (with `cx` woken at that end) while
    /// it is in flight. `B` must be the type given to
    /// [`TcpStream::send_detached`].
    ///
    /// `awaits`: whether `cx` is to be woken when everything is sent too,
    /// not only on a failure (an idle connection wants no wake for a send
    /// that went well; one about to close does).
    pub fn poll_detached<B: IoBuf>(
        &self,
        cx: &mut Context<'_>,
        awaits: bool,
    ) -> Poll<Option<(io::Result<usize>, B)>> {
        let ud = self.send.get();
        if ud == NO_SEND {
            return Poll::Ready(None);
        }
        let mut ops = self.p.inner.ops.borrow_mut();
        let Some(slot) = ops.get(ud) else {
            // Freed by its CQE: everything went.
            self.send.set(NO_SEND);
            return Poll::Ready(None);
        };
        let Some(c) = slot.cqes.pop_front() else {
            slot.kind = Kind::Send { awaits };
            match &slot.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => slot.waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        };
        let buf = ops.remove(ud as u32).expect("a detached send's buffer");
        self.p.inner.stats.in_flight.set(ops.live() as u64);
        drop(ops);
        self.send.set(NO_SEND);
        let buf = buf.downcast::<B>().expect("the type the send was given");
        Poll::Ready(Some((op::result(c.res), *buf)))
    }

    /// `shutdown(2)` through the ring.
    pub async fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        // SAFETY: the stream owns the fd and is borrowed while the future
        // lives. The kernel looks the fd up late, in a worker thread; if
        // the future is dropped first, the stream's close (Drop, `close`)
        // is held back until the shutdown's last CQE (`Ops::defer_close`).
        unsafe { op::shutdown(&self.p, self.raw(), how) }.await
    }

    /// Cancels the recv and closes the socket through the ring, awaited
    /// (at once, without a result, if a dropped `shutdown` is still in the
    /// kernel: the close then waits for it, see [`op::close`]).
    pub async fn close(mut self) -> io::Result<()> {
        if let Some(key) = self.recv.take() {
            self.p.release(key, None);
        }
        let fd = self.fd.take().expect("open stream");
        op::close(&self.p, fd).await
    }

    /// The raw fd (still owned by the stream).
    pub fn as_raw_fd(&self) -> RawFd {
        self.raw()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_ref().expect("open stream").as_fd()
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        // The recv is cancelled first; what it still delivers is returned to
        // the ring and counted as discarded. The close is queued behind
        // every SQE that names the fd (the recv, sends, polls): the kernel
        // took its own reference to the socket when it submitted them, so
        // the number may be reused at once without reaching them. A
        // shutdown still in the kernel holds the close back until its last
        // CQE (`Proactor::close_detached`).
        if let Some(key) = self.recv.take() {
            self.p.release(key, None);
        }
        let ud = self.send.replace(NO_SEND);
        if ud != NO_SEND && self.p.inner.ops.borrow_mut().get(ud).is_some() {
            let key = OpKey {
                idx: ud as u32,
                generation: (ud >> 32) as u32,
            };
            self.p.release(key, None);
        }
        if let Some(fd) = self.fd.take() {
            self.p.close_detached(fd);
        }
    }
}

/// The unsent part of a Vec: `buf[start..]`.
struct Tail {
    buf: Vec<u8>,
    start: usize,
}

// SAFETY: the Vec's heap bytes do not move with the value; `start ≤ len`.
unsafe impl IoBuf for Tail {
    fn as_ptr(&self) -> *const u8 {
        self.buf[self.start..].as_ptr()
    }
    fn len(&self) -> usize {
        self.buf.len() - self.start
    }
}
