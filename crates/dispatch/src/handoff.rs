//! The handoff pipe protocol between the acceptor and one worker.
//!
//! A connection changes threads as a bare fd number: the acceptor writes it
//! into the worker's pipe as a native-endian `i32` (4 bytes) and forgets it;
//! the worker reads it back and owns it. Both ends are in the same process,
//! so the number means the same open file on both sides; no `SCM_RIGHTS`
//! needed.
//!
//! Why this is safe to batch:
//! - A write of at most `PIPE_BUF` (4096) bytes is atomic: all of it or,
//!   with `O_NONBLOCK`, `EAGAIN` and nothing. A batch is at most 32 records
//!   (128 bytes), so a record is never split and a full pipe never takes
//!   half a batch.
//! - A read returns whatever whole records are there, up to 32, in one
//!   syscall: one `read` for a burst of connections instead of one each.
//! - A short read (fewer than 32) means the pipe was empty at that instant,
//!   so any later write is an empty → non-empty transition, which always
//!   wakes an epoll waiter. The reader may skip the `read` that would only
//!   say `EAGAIN`.
//! - When the write end closes, the reader gets every record first and then
//!   end-of-file: that is how shutdown reaches a worker, in order.
//!
//! Ownership: an fd is owned by exactly one side at any time. Until the
//! write succeeds the acceptor keeps the [`OwnedFd`]; after it, the number
//! sits in the pipe and the pipe's read end is the owner, which is why the
//! server drains every pipe (closing what it finds) after the threads joined.
//! Keeping every read end open until then also means a write can never meet
//! a pipe without readers, so no `SIGPIPE` (pipes have no `MSG_NOSIGNAL`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::sys;

/// Most fds moved by one `read` or one `write`.
pub(crate) const BATCH: usize = 32;
/// Bytes per fd in the pipe.
const RECORD: usize = std::mem::size_of::<i32>();
const BATCH_BYTES: usize = BATCH * RECORD;
const _: () = assert!(BATCH_BYTES <= libc::PIPE_BUF, "batches must be atomic");

/// Creates a handoff pipe: the acceptor's [`Sender`] and the worker's read
/// end. `size` shrinks or grows the pipe (`F_SETPIPE_SZ`).
pub(crate) fn channel(size: Option<usize>) -> io::Result<(Sender, OwnedFd)> {
    let (rd, wr) = reactor::sys::pipe()?;
    if let Some(size) = size {
        sys::set_pipe_size(wr.as_raw_fd(), size)?;
    }
    Ok((Sender { fd: wr }, rd))
}

/// The acceptor's end of one worker's pipe.
#[derive(Debug)]
pub(crate) struct Sender {
    fd: OwnedFd,
}

impl Sender {
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Writes up to [`BATCH`] fds from the front of `fds` in one `write`.
    /// On success they leave `fds` and belong to the reader, and
    /// `handed_off` grows by their number; on any error (`WouldBlock`: the
    /// pipe is full) `fds` is untouched.
    ///
    /// The counter is raised *after* the write so that it never counts a
    /// batch the pipe refused; a reader that closes a connection at once may
    /// briefly make `closed` overtake it, which `WorkerStats::open` absorbs.
    pub(crate) fn send(&self, fds: &mut Vec<OwnedFd>, handed_off: &AtomicU64) -> io::Result<usize> {
        let k = fds.len().min(BATCH);
        if k == 0 {
            return Ok(0);
        }
        let mut buf = [0u8; BATCH_BYTES];
        for (slot, fd) in buf.chunks_exact_mut(RECORD).zip(&fds[..k]) {
            slot.copy_from_slice(&fd.as_raw_fd().to_ne_bytes());
        }
        match reactor::sys::write(self.fd.as_fd(), &buf[..k * RECORD]) {
            Ok(n) => {
                // Atomicity (n <= PIPE_BUF) rules out a partial write; if it
                // ever happened, the written fds would be owned twice.
                assert_eq!(n, k * RECORD, "pipe write of <= PIPE_BUF was split");
                for fd in fds.drain(..k) {
                    // The number now lives in the pipe; the reader owns it.
                    let _ = fd.into_raw_fd();
                }
                handed_off.fetch_add(k as u64, Relaxed);
                Ok(k)
            }
            Err(e) => Err(e),
        }
    }
}

/// What one [`recv`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Recv {
    /// `n` fds were appended; `drained` says the pipe was empty after them.
    Fds { n: usize, drained: bool },
    /// Nothing there (`EAGAIN`).
    Empty,
    /// End of file: the acceptor closed its end.
    Closed,
}

/// Reads up to [`BATCH`] fds with one `read` and appends them to `out`.
pub(crate) fn recv(fd: BorrowedFd<'_>, out: &mut Vec<OwnedFd>) -> io::Result<Recv> {
    let mut buf = [0u8; BATCH_BYTES];
    let n = loop {
        match reactor::sys::read(fd, &mut buf) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Recv::Empty),
            Err(e) => return Err(e),
        }
    };
    if n == 0 {
        return Ok(Recv::Closed);
    }
    for record in buf[..n].chunks_exact(RECORD) {
        let raw = i32::from_ne_bytes(record.try_into().expect("4-byte chunk"));
        if raw < 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "negative fd in handoff pipe",
            ));
        }
        // SAFETY: the acceptor wrote this number after giving up its OwnedFd
        // (into_raw_fd), and a pipe delivers each record exactly once, so this
        // is now the only owner of an open descriptor.
        out.push(unsafe { OwnedFd::from_raw_fd(raw) });
    }
    if n % RECORD != 0 {
        // Writes are whole records and atomic, so this cannot happen; say so
        // loudly rather than guess at a half fd number.
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "torn record in handoff pipe",
        ));
    }
    Ok(Recv::Fds {
        n: n / RECORD,
        drained: n < BATCH_BYTES,
    })
}

/// Reads the pipe dry and closes every fd in it; returns how many. Used once
/// no writer can add more (after the acceptor stopped, or for a dead worker).
pub(crate) fn drain_and_close(fd: BorrowedFd<'_>) -> usize {
    let mut fds = Vec::new();
    let mut total = 0;
    while let Ok(Recv::Fds { n, .. }) = recv(fd, &mut fds) {
        total += n;
        fds.clear();
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::RawFd;

    fn fds(n: usize) -> Vec<OwnedFd> {
        (0..n).map(|_| reactor::sys::eventfd().unwrap()).collect()
    }

    #[test]
    fn fds_cross_in_batches_of_32() {
        let (tx, rx) = channel(None).unwrap();
        let counter = AtomicU64::new(0);
        let mut send = fds(40);
        let raws: Vec<RawFd> = send.iter().map(|f| f.as_raw_fd()).collect();
        assert_eq!(tx.send(&mut send, &counter).unwrap(), 32);
        assert_eq!(tx.send(&mut send, &counter).unwrap(), 8);
        assert!(send.is_empty());
        assert_eq!(counter.load(Relaxed), 40);

        let mut got = Vec::new();
        let first = recv(rx.as_fd(), &mut got).unwrap();
        assert_eq!(
            first,
            Recv::Fds {
                n: 32,
                drained: false
            }
        );
        let second = recv(rx.as_fd(), &mut got).unwrap();
        assert_eq!(
            second,
            Recv::Fds {
                n: 8,
                drained: true
            }
        );
        assert_eq!(recv(rx.as_fd(), &mut got).unwrap(), Recv::Empty);
        let got_raw: Vec<RawFd> = got.iter().map(|f| f.as_raw_fd()).collect();
        assert_eq!(got_raw, raws);
    }

    #[test]
    fn full_pipe_keeps_the_fds_with_the_sender() {
        let (tx, rx) = channel(Some(4096)).unwrap();
        let counter = AtomicU64::new(0);
        // 4096 bytes hold 1024 records: 32 full batches.
        for _ in 0..32 {
            let mut batch = fds(32);
            assert_eq!(tx.send(&mut batch, &counter).unwrap(), 32);
        }
        let mut more = fds(3);
        let err = tx.send(&mut more, &counter).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(more.len(), 3, "nothing lost on a full pipe");
        assert_eq!(counter.load(Relaxed), 1024);
        assert_eq!(drain_and_close(rx.as_fd()), 1024);
        assert_eq!(tx.send(&mut more, &counter).unwrap(), 3);
    }

    #[test]
    fn closing_the_sender_is_end_of_file_after_the_data() {
        let (tx, rx) = channel(None).unwrap();
        let counter = AtomicU64::new(0);
        let mut one = fds(1);
        tx.send(&mut one, &counter).unwrap();
        drop(tx);
        let mut got = Vec::new();
        assert_eq!(
            recv(rx.as_fd(), &mut got).unwrap(),
            Recv::Fds {
                n: 1,
                drained: true
            }
        );
        assert_eq!(recv(rx.as_fd(), &mut got).unwrap(), Recv::Closed);
    }
}
