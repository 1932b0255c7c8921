//! One-shot operations with owned buffers: the future holds the buffer while
//! the kernel works, and gives it back with the result.
//!
//! ```text
//!   send(fd, buf) ──▶ Oneshot { key, buf } ──poll──▶ Pending … CQE ──▶ (res, buf)
//!                          │ dropped before the CQE
//!                          ▼
//!              Proactor::release(key, buf): buf parked in the slot,
//!              ASYNC_CANCEL submitted, buf freed at the last CQE
//! ```
//!
//! ## Fds
//!
//! The operations that name an fd by number are `unsafe fn`s: the kernel
//! looks the number up in the thread's fd table on its own schedule, and a
//! borrow of the fd cannot cover an operation that outlives its future.
//! Their contract is that the number keeps naming the same open file until
//! the kernel has looked it up and holds its own reference to the file:
//!
//! - [`send`], [`send_with`], [`read`], [`poll`] (and `transfer::recv`
//!   and `transfer::send_zc`) are issued inline when `io_uring_enter`
//!   submits their SQE, and the kernel takes its reference right there. So
//!   the fd must stay open while the future lives and, if the future is
//!   dropped before it completes, until the proactor has submitted the
//!   SQE: its next turn, or a later one if the SQ was full.
//! - [`shutdown`] (and `transfer::splice`) are run by the kernel in its
//!   worker threads, which look the fd up when they start on it, after the
//!   submission (a cancel stops one that has not started). So the fd must
//!   stay open while the future lives and, if the future is dropped before
//!   it completes, until the operation's last CQE.
//!
//! Closing the fd through the same proactor keeps both promises by
//! itself: [`close`] (and the drop of a [`crate::TcpStream`] or
//! [`crate::TcpListener`]) queues the close behind every SQE already
//! queued, and holds it back until the last CQE of any `SHUTDOWN` or
//! `SPLICE` in flight that names the fd. So does closing it after the
//! proactor is dropped: the teardown submits what is queued and waits for
//! every last CQE.

use std::any::Any;
use std::future::Future;
use std::io;
use std::os::fd::{IntoRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::Proactor;
use crate::abi::*;
use crate::ops::{Completion, Kind, OpKey};

/// A buffer whose bytes stay at the same address however the value moves
/// (heap memory), so the kernel may use them while the owner is moved into a
/// future or a slot.
///
/// # Safety
/// `as_ptr` must return the same pointer, valid for `capacity` bytes
/// (`len` of them initialised), for as long as the value lives, whatever
/// moves it goes through.
pub unsafe trait IoBuf: 'static {
    /// The start of the bytes.
    fn as_ptr(&self) -> *const u8;
    /// Initialised bytes (what a send sends).
    fn len(&self) -> usize;
    /// Whether there are no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A buffer the kernel may also write (a read's destination).
///
/// # Safety
/// As [`IoBuf`], and `as_mut_ptr` is valid for `capacity` writable bytes.
pub unsafe trait IoBufMut: IoBuf {
    /// The start of the writable bytes.
    fn as_mut_ptr(&mut self) -> *mut u8;
    /// Writable bytes from the start.
    fn capacity(&self) -> usize;
    /// Records that the first `n` bytes are initialised.
    ///
    /// # Safety
    /// `n <= capacity` and those bytes were written.
    unsafe fn set_len(&mut self, n: usize);
}

// SAFETY: a Vec's heap buffer does not move when the Vec value does.
unsafe impl IoBuf for Vec<u8> {
    fn as_ptr(&self) -> *const u8 {
        Vec::as_ptr(self)
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

// SAFETY: as above; capacity bytes are allocated.
unsafe impl IoBufMut for Vec<u8> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        Vec::as_mut_ptr(self)
    }
    fn capacity(&self) -> usize {
        Vec::capacity(self)
    }
    unsafe fn set_len(&mut self, n: usize) {
        // SAFETY: forwarded contract.
        unsafe { Vec::set_len(self, n) }
    }
}

// SAFETY: static memory never moves or goes away.
unsafe impl IoBuf for &'static [u8] {
    fn as_ptr(&self) -> *const u8 {
        <[u8]>::as_ptr(self)
    }
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}

// SAFETY: a boxed slice's heap memory does not move with the Box.
unsafe impl IoBuf for Box<[u8]> {
    fn as_ptr(&self) -> *const u8 {
        <[u8]>::as_ptr(self)
    }
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}

/// A submitted one-shot operation holding the resource `R` the kernel uses.
/// Resolves to the CQE and `R`; dropping it early parks `R` and cancels.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Oneshot<R: 'static> {
    p: Proactor,
    key: Option<OpKey>,
    res: Option<R>,
}

impl<R: 'static> Oneshot<R> {
    /// Starts `sqe` with `res` as the memory it uses.
    ///
    /// # Safety
    /// The SQE's pointers point into `res`'s heap memory (which does not move
    /// with `res`), or to nothing. The Oneshot then keeps `res` until the
    /// CQE, or parks it in the slot when dropped first.
    pub(crate) unsafe fn new(p: &Proactor, kind: Kind, sqe: Sqe, res: R) -> Oneshot<R> {
        // SAFETY: forwarded to our caller's contract.
        let key = unsafe { p.start(kind, sqe) };
        Oneshot {
            p: p.clone(),
            key: Some(key),
            res: Some(res),
        }
    }
}

impl<R: 'static> Unpin for Oneshot<R> {}

impl<R: 'static> Future for Oneshot<R> {
    type Output = (Completion, R);
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let key = self.key.expect("Oneshot polled after completion");
        match self.p.poll_next(key, cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(c) => {
                // One-shot: this was the last CQE; the slot can go.
                self.p.release(key, None);
                self.key = None;
                Poll::Ready((c, self.res.take().expect("resource")))
            }
        }
    }
}

impl<R: 'static> Drop for Oneshot<R> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let parked = self.res.take().map(|r| Box::new(r) as Box<dyn Any>);
            self.p.release(key, parked);
        }
    }
}

pub(crate) fn result(res: i32) -> io::Result<usize> {
    if res < 0 {
        Err(io::Error::from_raw_os_error(-res))
    } else {
        Ok(res as usize)
    }
}

/// `send(fd, buf, MSG_NOSIGNAL)`: bytes sent, and the buffer back.
///
/// [`crate::TcpStream::send`] is the safe form. Safe code cannot name an
/// fd by number:
///
/// ```compile_fail,E0133
/// # async fn f(p: &proactor::Proactor) {
/// let _ = proactor::op::send(p, 3, vec![1u8]).await;
/// # }
/// ```
///
/// # Safety
/// `fd` must stay open, naming the same file, while the future lives and,
/// if it is dropped before it completes, until the proactor has submitted
/// the SQE. Closing it through the same proactor ([`close`]) keeps this
/// promise by itself (see [the module docs](self#fds)).
pub async unsafe fn send<B: IoBuf>(p: &Proactor, fd: RawFd, buf: B) -> (io::Result<usize>, B) {
    // SAFETY: our caller's contract, which is send_with's.
    unsafe { send_with(p, fd, buf, 0) }.await
}

/// `send(fd, buf, MSG_NOSIGNAL | flags)`: [`send`] with more flags, e.g.
/// `MSG_MORE` for a response head whose file body follows at once (the
/// kernel then holds the short segment for it).
///
/// ```compile_fail,E0133
/// # async fn f(p: &proactor::Proactor) {
/// let _ = proactor::op::send_with(p, 3, vec![1u8], libc::MSG_MORE).await;
/// # }
/// ```
///
/// # Safety
/// As [`send`].
pub async unsafe fn send_with<B: IoBuf>(
    p: &Proactor,
    fd: RawFd,
    buf: B,
    flags: libc::c_int,
) -> (io::Result<usize>, B) {
    let sqe = send_sqe(fd, buf.as_ptr(), buf.len(), flags);
    // SAFETY: `addr` points into `buf`'s stable memory (IoBuf), `len` bytes;
    // `fd` is our caller's to keep open.
    let (c, buf) = unsafe { Oneshot::new(p, Kind::Other, sqe, buf) }.await;
    (result(c.res), buf)
}

/// The SQE of `send(fd, ptr, len, MSG_NOSIGNAL | flags)` (also on a fixed
/// file, with `IOSQE_FIXED_FILE` added: `transfer::send_fixed`).
pub(crate) fn send_sqe(fd: RawFd, ptr: *const u8, len: usize, flags: libc::c_int) -> Sqe {
    Sqe {
        opcode: IORING_OP_SEND,
        fd,
        addr: ptr as u64,
        len: len.min(u32::MAX as usize) as u32,
        op_flags: (libc::MSG_NOSIGNAL | flags) as u32,
        ..Sqe::default()
    }
}

/// `read(fd, buf)` into the buffer's spare capacity from its start (the
/// buffer's length is set to what was read). Dropped early: the buffer is
/// parked until the kernel lets go, and bytes read meanwhile are counted in
/// [`crate::ProactorStats::discarded_bytes`].
///
/// ```compile_fail,E0133
/// # async fn f(p: &proactor::Proactor) {
/// let _ = proactor::op::read(p, 0, Vec::with_capacity(8)).await;
/// # }
/// ```
///
/// # Safety
/// As [`send`]: `fd` stays open while the future lives and, if it is
/// dropped first, until the proactor has submitted the SQE.
pub async unsafe fn read<B: IoBufMut>(
    p: &Proactor,
    fd: RawFd,
    mut buf: B,
) -> (io::Result<usize>, B) {
    let sqe = Sqe {
        opcode: IORING_OP_READ,
        fd,
        addr: buf.as_mut_ptr() as u64,
        len: buf.capacity().min(u32::MAX as usize) as u32,
        // -1: the file position for files; ignored for pipes and sockets.
        off: u64::MAX,
        ..Sqe::default()
    };
    // SAFETY: `addr` points into `buf`'s stable memory (IoBufMut), capacity
    // bytes; `fd` is our caller's to keep open.
    let (c, mut buf) = unsafe { Oneshot::new(p, Kind::Read, sqe, buf) }.await;
    if c.res >= 0 {
        // SAFETY: the kernel wrote c.res ≤ capacity bytes from the start.
        unsafe { buf.set_len(c.res as usize) };
    }
    (result(c.res), buf)
}

/// `shutdown(fd, how)` as a ring operation.
///
/// [`crate::TcpStream::shutdown`] is the safe form.
///
/// ```compile_fail,E0133
/// # async fn f(p: &proactor::Proactor) {
/// let _ = proactor::op::shutdown(p, 3, std::net::Shutdown::Write).await;
/// # }
/// ```
///
/// # Safety
/// The kernel looks `fd` up in one of its worker threads, after the
/// submission: `fd` must stay open, naming the same file, until the
/// operation is over, i.e. while the future lives and, if it is dropped
/// before it completes, until the operation's last CQE. Closing it
/// through the same proactor ([`close`]) keeps this promise by itself
/// (see [the module docs](self#fds)).
pub async unsafe fn shutdown(p: &Proactor, fd: RawFd, how: std::net::Shutdown) -> io::Result<()> {
    let how = match how {
        std::net::Shutdown::Read => libc::SHUT_RD,
        std::net::Shutdown::Write => libc::SHUT_WR,
        std::net::Shutdown::Both => libc::SHUT_RDWR,
    };
    let sqe = Sqe {
        opcode: IORING_OP_SHUTDOWN,
        fd,
        len: how as u32,
        ..Sqe::default()
    };
    // SAFETY: SHUTDOWN points to no memory; `fd` is our caller's to keep.
    result(unsafe { Oneshot::new(p, Kind::Other, sqe, ()) }.await.0.res).map(drop)
}

/// Waits until `fd` is ready for `events` (`POLLIN`, `POLLOUT`...) with a
/// one-shot `IORING_OP_POLL_ADD`; the ready events (`revents`).
///
/// The completion model still needs readiness now and then: an fd whose
/// work is a plain syscall that is not a ring operation here (`sendfile(2)`
/// on a full socket, a handoff pipe read in batches by another crate)
/// waits with this, then makes the call itself.
///
/// ```compile_fail,E0133
/// # async fn f(p: &proactor::Proactor) {
/// let _ = proactor::op::poll(p, 3, libc::POLLIN).await;
/// # }
/// ```
///
/// # Safety
/// As [`send`]: `fd` stays open while the future lives and, if it is
/// dropped first, until the proactor has submitted the SQE.
pub async unsafe fn poll(p: &Proactor, fd: RawFd, events: i16) -> io::Result<u32> {
    let sqe = Sqe {
        opcode: IORING_OP_POLL_ADD,
        fd,
        // `poll32_events`: the events in the low 16 bits (little endian).
        op_flags: events as u16 as u32,
        ..Sqe::default()
    };
    // SAFETY: POLL_ADD points to no memory; `fd` is our caller's to keep.
    result(unsafe { Oneshot::new(p, Kind::Other, sqe, ()) }.await.0.res).map(|n| n as u32)
}

/// `close(fd)` as a ring operation, awaited. The caller gives up the fd.
///
/// The close is queued by this call, behind every SQE already queued, so
/// an operation submitted before it has its own reference to the file by
/// then. An operation in flight that the kernel looks its fds up for late
/// ([`shutdown`], `transfer::splice`) and that names `fd` holds the close
/// back until its last CQE instead; the future then resolves at once with
/// `Ok(())`, and the fd is closed later, without a result.
pub fn close(p: &Proactor, fd: OwnedFd) -> impl Future<Output = io::Result<()>> + use<> {
    let fd = p.inner.ops.borrow_mut().defer_close(fd);
    let op = fd.map(|fd| {
        let sqe = Sqe {
            opcode: IORING_OP_CLOSE,
            fd: fd.into_raw_fd(),
            ..Sqe::default()
        };
        // SAFETY: CLOSE points to no memory; the fd was ours to close.
        unsafe { Oneshot::new(p, Kind::Other, sqe, ()) }
    });
    async move {
        match op {
            Some(op) => result(op.await.0.res).map(drop),
            None => Ok(()),
        }
    }
}
