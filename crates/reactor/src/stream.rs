//! Byte-stream operations on a registered fd (a socket; reads also work on a
//! pipe), with the edge-triggered rules applied in one place: an `EAGAIN`
//! clears readiness, and so does a short read or write (see
//! [`Registration::after_read`]). The executor's and the coroutine
//! scheduler's `TcpStream`s are thin wrappers over these, each adding its own
//! way of waiting.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::task::{Context, Poll};

use crate::interest::Interest;
use crate::reactor::Registration;
use crate::sys;

impl Registration {
    /// One non-blocking read, without consulting readiness first.
    #[inline]
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len();
        let res = self.try_io(Interest::Readable, || sys::read(self.borrowed_fd(), buf));
        self.after_read(&res, len);
        res
    }

    /// [`Registration::try_read`] into uninitialised memory (a buffer's
    /// spare capacity); returns how many bytes at the start of `buf` are now
    /// initialised. Inlined: it is the read of every request.
    #[inline(always)]
    pub fn try_read_uninit(&self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        let len = buf.len();
        let res = self.try_io(Interest::Readable, || {
            sys::read_uninit(self.borrowed_fd(), buf)
        });
        self.after_read(&res, len);
        res
    }

    /// One non-blocking `send` with `MSG_NOSIGNAL` (a vanished peer is an
    /// `EPIPE`, never a signal), without consulting readiness first.
    /// Inlined: it is the write of every response.
    #[inline(always)]
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        let res = self.try_io(Interest::Writable, || sys::send(self.borrowed_fd(), buf));
        self.after_write(&res, buf.len());
        res
    }

    /// [`Registration::try_send`] with `MSG_MORE` ([`sys::send_more`]): more
    /// bytes follow at once, so the kernel need not send a short segment.
    pub fn try_send_more(&self, buf: &[u8]) -> io::Result<usize> {
        let res = self.try_io(Interest::Writable, || {
            sys::send_more(self.borrowed_fd(), buf)
        });
        self.after_write(&res, buf.len());
        res
    }

    /// Reads if the fd is ready; otherwise stores `cx`'s waker for the next
    /// edge.
    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let len = buf.len();
        let res = self.poll_io(cx, Interest::Readable, || {
            sys::read(self.borrowed_fd(), buf)
        });
        if let Poll::Ready(r) = &res {
            self.after_read(r, len);
        }
        res
    }

    /// [`Registration::poll_read`] into uninitialised memory.
    pub fn poll_read_uninit(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        let res = self.poll_io(cx, Interest::Readable, || {
            sys::read_uninit(self.borrowed_fd(), buf)
        });
        if let Poll::Ready(r) = &res {
            self.after_read(r, len);
        }
        res
    }

    /// Sends some of `buf` if the fd is ready; otherwise stores `cx`'s
    /// waker for the next edge.
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let res = self.poll_io(cx, Interest::Writable, || {
            sys::send(self.borrowed_fd(), buf)
        });
        if let Poll::Ready(r) = &res {
            self.after_write(r, buf.len());
        }
        res
    }

    /// Sends up to `count` bytes of the open file `file` from `*offset` with
    /// `sendfile(2)`, advancing `*offset`, if the fd is ready; otherwise
    /// stores `cx`'s waker. `Ok(0)` means the file ended early.
    pub fn poll_sendfile(
        &self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        self.poll_io(cx, Interest::Writable, || {
            sys::sendfile(self.borrowed_fd(), file, offset, count)
        })
    }

    /// [`Registration::poll_sendfile`] through a copy: `pread(2)` into
    /// `scratch`, then `send(2)` (see [`sys::send_file_copied`]). A short
    /// send clears write readiness, so the next call waits for an edge
    /// instead of reading the file for nothing.
    pub fn poll_send_file_copied(
        &self,
        cx: &mut Context<'_>,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
        scratch: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let res = self.poll_io(cx, Interest::Writable, || {
            sys::send_file_copied(self.borrowed_fd(), file, offset, count, scratch)
        });
        res.map_ok(|(sent, read)| {
            self.after_write(&Ok(sent), read);
            sent
        })
    }
}
