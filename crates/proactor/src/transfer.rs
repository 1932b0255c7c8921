//! The other ways to move bytes out, measured against the plain ones
//! (`examples/send_paths.rs`, figures in `docs/io-uring.md`):
//!
//! - **`IORING_OP_SEND_ZC`** ([`send_zc`]): the kernel sends from our pages
//!   instead of copying them into socket buffers, so the buffer stays the
//!   kernel's until a **second CQE**, the notification (`IORING_CQE_F_NOTIF`),
//!   says the last reference to the pages is gone:
//!
//!   ```text
//!   SQE SEND_ZC ──▶ CQE {res=bytes, F_MORE}      the send is done, the
//!                                                 pages are still in use
//!               ──▶ CQE {res=0|COPIED, F_NOTIF}   now the buffer is ours
//!   ```
//!
//!   The future returns the buffer only after the notification; dropped
//!   earlier, the buffer is parked until it (the cancellation rule).
//! - **`IORING_OP_SPLICE`** ([`splice`]): file → pipe → socket inside the
//!   kernel, two linked SQEs per chunk, a ring operation where `sendfile(2)`
//!   is a plain system call.
//! - **Registered (fixed) files** ([`register_files`], [`send_fixed`],
//!   [`recv_fixed`]): the SQE names an index into a table registered once,
//!   instead of an fd the kernel looks up (and reference-counts) per
//!   operation.
//!
//! The operations that name an fd by number are `unsafe fn`s, under the
//! contract of [`crate::op`]'s [module docs](crate::op#fds).

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::Proactor;
use crate::abi::*;
use crate::op::{IoBuf, IoBufMut, Oneshot, result, send_sqe};
use crate::ops::{Kind, OpKey};
use crate::sys;

/// What a zero-copy send reports: bytes sent, and whether the kernel
/// copied them after all (its notification's `COPIED` bit: what loopback
/// does, see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZcSent {
    /// Bytes sent.
    pub bytes: usize,
    /// The kernel fell back to copying.
    pub copied: bool,
}

/// `IORING_OP_SEND_ZC` with `MSG_NOSIGNAL`: resolves after the
/// notification CQE, when the kernel no longer reads `buf`. The SQE is
/// queued by this call, not by the first poll.
///
/// ```compile_fail,E0133
/// # fn f(p: &proactor::Proactor) {
/// let _ = proactor::transfer::send_zc(p, 3, vec![1u8]);
/// # }
/// ```
///
/// # Safety
/// `fd` must stay open, naming the same file, from this call while the
/// returned future lives and, if it is dropped before it completes, until
/// the proactor has submitted the SQE (the kernel issues `SEND_ZC` inline
/// and takes its own reference then). Closing it through the same proactor
/// ([`crate::op::close`]) keeps this promise by itself (see
/// [`op`](crate::op#fds)).
pub unsafe fn send_zc<B: IoBuf>(p: &Proactor, fd: RawFd, buf: B) -> SendZc<B> {
    let sqe = Sqe {
        opcode: IORING_OP_SEND_ZC,
        fd,
        ioprio: IORING_SEND_ZC_REPORT_USAGE,
        addr: buf.as_ptr() as u64,
        len: buf.len().min(u32::MAX as usize) as u32,
        op_flags: libc::MSG_NOSIGNAL as u32,
        ..Sqe::default()
    };
    // SAFETY: `addr` points into `buf`'s stable memory (IoBuf), which the
    // SendZc holds until the notification CQE, or parks if dropped first;
    // `fd` is our caller's to keep open.
    let key = unsafe { p.start(Kind::Other, sqe) };
    SendZc {
        p: p.clone(),
        key: Some(key),
        buf: Some(buf),
        sent: None,
    }
}

/// The future of [`send_zc`]: two CQEs, then the buffer back.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct SendZc<B: 'static> {
    p: Proactor,
    key: Option<OpKey>,
    buf: Option<B>,
    /// The first CQE's result, once it came.
    sent: Option<i32>,
}

impl<B: 'static> Unpin for SendZc<B> {}

impl<B: 'static> Future for SendZc<B> {
    type Output = (io::Result<ZcSent>, B);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let key = self.key.expect("SendZc polled after completion");
        loop {
            let c = std::task::ready!(self.p.poll_next(key, cx));
            let last = c.flags & IORING_CQE_F_MORE == 0;
            let copied = if c.flags & IORING_CQE_F_NOTIF != 0 {
                c.res as u32 & IORING_NOTIF_USAGE_ZC_COPIED != 0
            } else {
                // The send's own result; a notification follows iff F_MORE.
                self.sent = Some(c.res);
                false
            };
            if last {
                self.p.release(key, None);
                self.key = None;
                let res = result(self.sent.unwrap_or(c.res)).map(|bytes| ZcSent { bytes, copied });
                return Poll::Ready((res, self.buf.take().expect("buffer")));
            }
        }
    }
}

impl<B: 'static> Drop for SendZc<B> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            // Parked until the last CQE (the notification): the kernel may
            // still read the pages after the send's own CQE.
            let parked = self
                .buf
                .take()
                .map(|b| Box::new(b) as Box<dyn std::any::Any>);
            self.p.release(key, parked);
        }
    }
}

/// `splice(2)` as a ring operation: up to `len` bytes from `fd_in` (at
/// `off_in`, or its position if `None`) to `fd_out` (likewise); one side
/// must be a pipe. `link` chains the next SQE to this one
/// (`IOSQE_IO_LINK`: it starts only after this one succeeds). The SQE is
/// queued by this call.
///
/// ```compile_fail,E0133
/// # fn f(p: &proactor::Proactor) {
/// let _ = proactor::transfer::splice(p, 3, Some(0), 4, None, 4096, false);
/// # }
/// ```
///
/// # Safety
/// The kernel runs `SPLICE` in its worker threads and looks both fds up
/// there, when it starts the operation (for a linked SQE, after the one
/// before it completed): `fd_in` and `fd_out` must stay open, naming the
/// same files, from this call until the operation is over, i.e. while the
/// returned future lives and, if it is dropped before it completes, until
/// the operation's last CQE. Closing them through the same proactor
/// ([`crate::op::close`]) keeps this promise by itself (see
/// [`op`](crate::op#fds)).
pub unsafe fn splice(
    p: &Proactor,
    fd_in: RawFd,
    off_in: Option<u64>,
    fd_out: RawFd,
    off_out: Option<u64>,
    len: u32,
    link: bool,
) -> Oneshot<()> {
    let sqe = Sqe {
        opcode: IORING_OP_SPLICE,
        flags: if link { IOSQE_IO_LINK } else { 0 },
        fd: fd_out,
        off: off_out.unwrap_or(u64::MAX),
        addr: off_in.unwrap_or(u64::MAX),
        len,
        op_flags: libc::SPLICE_F_MOVE,
        splice_fd_in: fd_in,
        ..Sqe::default()
    };
    // SAFETY: SPLICE points to no memory of ours; the fds are our caller's
    // to keep open.
    unsafe { Oneshot::new(p, Kind::Other, sqe, ()) }
}

/// Sends all of a file's range `[off, off + len)` to `sock` through
/// `pipe` (read end first; a blocking pipe), one pair of linked splices
/// per chunk of at most `chunk` bytes (the pipe's size). Bytes sent.
///
/// The kernel runs `SPLICE` in its io-wq worker threads (it cannot be
/// tried inline), so a splice costs a hand-off to a worker and back.
///
/// ```compile_fail,E0133
/// # async fn f(p: &proactor::Proactor) {
/// let _ = proactor::transfer::splice_file(p, 3, 0, 10, [4, 5], 6, 4096).await;
/// # }
/// ```
///
/// # Safety
/// As [`splice`], for `file`, both ends of `pipe` and `sock`: they must
/// stay open while the future lives and, if it is dropped before it
/// completes, until the last CQE of the splices it started.
pub async unsafe fn splice_file(
    p: &Proactor,
    file: RawFd,
    mut off: u64,
    len: u64,
    pipe: [RawFd; 2],
    sock: RawFd,
    chunk: u32,
) -> io::Result<u64> {
    let mut sent = 0;
    while sent < len {
        let want = (len - sent).min(u64::from(chunk)) as u32;
        // Both SQEs go in the same submission, the second linked after the
        // first: one enter moves a chunk in and out of the pipe.
        // SAFETY: the fds are our caller's to keep open (the same contract).
        let into_pipe = unsafe { splice(p, file, Some(off), pipe[1], None, want, true) };
        // SAFETY: as above.
        let out_of_pipe = unsafe { splice(p, pipe[0], None, sock, None, want, false) };
        let (a, ()) = into_pipe.await;
        let (b, ()) = out_of_pipe.await;
        let n = result(a.res)?;
        if n == 0 {
            break; // the file is shorter than asked
        }
        // A short first splice breaks the link (-ECANCELED), and a full
        // non-blocking socket answers -EAGAIN: what the pipe still holds
        // goes out below, unlinked.
        let mut out = match b.res {
            r if r >= 0 => r as usize,
            r if r == -libc::ECANCELED || r == -libc::EAGAIN => 0,
            r => return Err(io::Error::from_raw_os_error(-r)),
        };
        while out < n {
            // SAFETY: as above.
            let rest = unsafe { splice(p, pipe[0], None, sock, None, (n - out) as u32, false) };
            let (c, ()) = rest.await;
            match c.res {
                r if r > 0 => out += r as usize,
                0 => return Err(io::ErrorKind::WriteZero.into()),
                r if r == -libc::EAGAIN => {
                    // SAFETY: `sock` is our caller's to keep open, for longer
                    // than `poll` asks.
                    unsafe { crate::op::poll(p, sock, libc::POLLOUT) }.await?;
                }
                r => return Err(io::Error::from_raw_os_error(-r)),
            }
        }
        off += n as u64;
        sent += n as u64;
    }
    Ok(sent)
}

/// Registers `fds` as the ring's fixed-file table (index `i` names
/// `fds[i]`); replaces nothing (unregister first). The kernel takes its
/// own reference to each file, so the fds are only borrowed for the call:
/// the table keeps the files even if they are closed afterwards.
///
/// ```compile_fail,E0308
/// # fn f(p: &proactor::Proactor) {
/// let _ = proactor::transfer::register_files(p, &[3, 4]);
/// # }
/// ```
pub fn register_files(p: &Proactor, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let ring_fd = p.inner.ring.borrow().fd();
    // SAFETY: `fds` is a valid array of `len` ints for the call
    // (`BorrowedFd` is `repr(transparent)` over the fd number), each an
    // open fd; the kernel takes its own references to the files.
    unsafe {
        sys::io_uring_register(
            ring_fd,
            IORING_REGISTER_FILES,
            fds.as_ptr().cast(),
            fds.len() as u32,
        )?
    };
    Ok(())
}

/// Drops the fixed-file table.
pub fn unregister_files(p: &Proactor) -> io::Result<()> {
    let ring_fd = p.inner.ring.borrow().fd();
    // SAFETY: no argument memory.
    unsafe { sys::io_uring_register(ring_fd, IORING_UNREGISTER_FILES, std::ptr::null(), 0)? };
    Ok(())
}

fn recv_sqe(fd: i32, fixed: bool, ptr: *mut u8, cap: usize) -> Sqe {
    Sqe {
        opcode: IORING_OP_RECV,
        flags: if fixed { IOSQE_FIXED_FILE } else { 0 },
        fd,
        addr: ptr as u64,
        len: cap.min(u32::MAX as usize) as u32,
        ..Sqe::default()
    }
}

/// `send` on the fixed file at `index` ([`register_files`]).
pub async fn send_fixed<B: IoBuf>(p: &Proactor, index: u32, buf: B) -> (io::Result<usize>, B) {
    let sqe = Sqe {
        flags: IOSQE_FIXED_FILE,
        ..send_sqe(index as i32, buf.as_ptr(), buf.len(), 0)
    };
    // SAFETY: `addr` points into `buf`'s stable memory, `len` bytes.
    let (c, buf) = unsafe { Oneshot::new(p, Kind::Other, sqe, buf) }.await;
    (result(c.res), buf)
}

/// A one-shot `recv(fd)` into the buffer's capacity from its start (its
/// length set to what came); the owned-buffer form, beside the stream's
/// multishot recv on the buffer ring.
///
/// ```compile_fail,E0133
/// # async fn f(p: &proactor::Proactor) {
/// let _ = proactor::transfer::recv(p, 3, Vec::with_capacity(8)).await;
/// # }
/// ```
///
/// # Safety
/// As [`crate::op::read`]: `fd` stays open while the future lives and, if
/// it is dropped first, until the proactor has submitted the SQE.
pub async unsafe fn recv<B: IoBufMut>(p: &Proactor, fd: RawFd, buf: B) -> (io::Result<usize>, B) {
    // SAFETY: our caller's contract.
    unsafe { recv_on(p, fd, false, buf) }.await
}

/// [`recv`] on the fixed file at `index` ([`register_files`]).
pub async fn recv_fixed<B: IoBufMut>(p: &Proactor, index: u32, buf: B) -> (io::Result<usize>, B) {
    // SAFETY: a fixed-file index names a slot of the ring's own table,
    // which holds its own references to the files; the kernel checks it.
    unsafe { recv_on(p, index as i32, true, buf) }.await
}

/// A one-shot recv on `fd`, or on the fixed file `fd` if `fixed`.
///
/// # Safety
/// Unless `fixed`, as [`recv`].
async unsafe fn recv_on<B: IoBufMut>(
    p: &Proactor,
    fd: i32,
    fixed: bool,
    mut buf: B,
) -> (io::Result<usize>, B) {
    let sqe = recv_sqe(fd, fixed, buf.as_mut_ptr(), buf.capacity());
    // SAFETY: `addr` points into `buf`'s stable memory, capacity bytes;
    // `fd` is our caller's to keep open.
    let (c, mut buf) = unsafe { Oneshot::new(p, Kind::Read, sqe, buf) }.await;
    if c.res >= 0 {
        // SAFETY: the kernel wrote c.res ≤ capacity bytes from the start.
        unsafe { buf.set_len(c.res as usize) };
    }
    (result(c.res), buf)
}
