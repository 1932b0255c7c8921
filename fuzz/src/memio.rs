//! An in-memory transport for httplite's blocking connection code: the
//! client's bytes arrive in given reads, what the server writes is kept,
//! and no call ever waits (so no deadline ever passes).

use std::cell::Cell;
use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Shutdown, SocketAddr};
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use httplite::blocking::upstream::{PollWaits, Side, Upstream};
use httplite::blocking::{BlockingIo, Deadline, FileChunk};

use crate::Knobs;

/// What happened on the wire, kept after the connection code has finished.
#[derive(Debug, Default)]
pub struct Wire {
    /// Everything the server wrote.
    pub output: Vec<u8>,
    /// The server shut down its write side.
    pub write_shut: bool,
    /// Client bytes the server has read.
    pub consumed: usize,
    /// When the server let go of the socket, bytes the client had sent
    /// were still unread (the rest of the read in progress, which a read
    /// with room for more would have returned).
    pub unread_at_close: bool,
}

/// One connection's socket, in memory.
#[derive(Debug)]
pub struct MemIo<'a> {
    input: &'a [u8],
    reads: std::vec::IntoIter<Range<usize>>,
    current: Range<usize>,
    knobs: Knobs,
    /// Set by `shutdown(&self)`; copied to the wire on drop.
    write_shut: Cell<bool>,
    wire: &'a mut Wire,
}

impl Drop for MemIo<'_> {
    fn drop(&mut self) {
        self.wire.write_shut = self.write_shut.get();
        self.wire.unread_at_close = !self.current.is_empty();
    }
}

impl<'a> MemIo<'a> {
    /// A socket on which the client sends `input` in the reads `splits`
    /// and then closes its side; `knobs` decide how much each write takes.
    pub fn new(
        input: &'a [u8],
        splits: Vec<Range<usize>>,
        knobs: Knobs,
        wire: &'a mut Wire,
    ) -> Self {
        MemIo {
            input,
            reads: splits.into_iter(),
            current: 0..0,
            knobs,
            write_shut: Cell::new(false),
            wire,
        }
    }
}

// SAFETY: `read_uninit` counts `n <= buf.len()` bytes and writes each of
// them from the input.
unsafe impl BlockingIo for MemIo<'_> {
    type Waits = PollWaits;

    fn read_uninit(&mut self, buf: &mut [MaybeUninit<u8>], _: Deadline) -> io::Result<usize> {
        if self.current.is_empty() {
            match self.reads.next() {
                Some(r) => self.current = r,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        let src = &self.input[self.current.start..self.current.start + n];
        for (dst, &b) in buf.iter_mut().zip(src) {
            dst.write(b);
        }
        self.current.start += n;
        self.wire.consumed += n;
        Ok(n)
    }

    fn write(&mut self, buf: &[u8], _: Deadline) -> io::Result<usize> {
        assert!(!self.write_shut.get(), "write after shutdown(Write)");
        // Short writes, sometimes, to exercise the callers' loops.
        let n = if buf.is_empty() || self.knobs.one_in(2) {
            buf.len()
        } else {
            1 + self.knobs.below(buf.len())
        };
        self.wire.output.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn send_file(&mut self, chunk: FileChunk<'_>, _: Deadline) -> io::Result<usize> {
        assert!(!self.write_shut.get(), "send_file after shutdown(Write)");
        // Copied whatever `chunk.copy` says: memory has no zero-copy path.
        let mut buf = vec![0u8; chunk.count.min(64 * 1024)];
        let at = libc::off_t::try_from(*chunk.offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes,
        // and `chunk.file` is the open file the server is sending.
        let n = unsafe {
            libc::pread(
                chunk.file.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                at,
            )
        };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        self.wire.output.extend_from_slice(&buf[..n]);
        *chunk.offset += n as u64;
        Ok(n)
    }

    fn wait_readable(&mut self, _: Deadline) -> io::Result<()> {
        Ok(()) // data, or the end of the stream, is always there
    }

    fn wait_either(&mut self, _: &Upstream<Self::Waits>, _: Deadline) -> io::Result<Side> {
        // No sockets here: a proxied tunnel cannot be driven from memory.
        Err(io::ErrorKind::Unsupported.into())
    }

    fn sleep(&mut self, _: Duration) {}

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        if matches!(how, Shutdown::Write | Shutdown::Both) {
            self.write_shut.set(true);
        }
        Ok(())
    }

    fn fd(&self) -> RawFd {
        -1 // only used to wake idle connections at shutdown, which never comes
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 40000)))
    }
}
