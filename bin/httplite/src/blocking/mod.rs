//! Blocking-style servers: one connection = one thread of control that
//! simply calls `read` and `write` and is put to sleep while it waits.
//!
//! The same connection code ([`conn`]) runs on two designs through the
//! [`BlockingIo`] trait:
//! - `threads`: an OS thread per connection over blocking sockets, with
//!   socket timeouts standing in for the header, idle and write timeouts (the
//!   classic design every comparison needs as a baseline);
//! - `stackful`: a coroutine per connection (the `coroutine` crate), parked
//!   in the same reactor the stackless server uses.
//!
//! Shutdown reaches a connection blocked between requests through
//! [`IdleSet`]: the worker shuts down the read side of every idle socket,
//! which makes its blocked read return end-of-file, whatever the design.

pub mod conn;
mod idle;
pub mod socket;
pub mod stackful;
pub mod threadpool;
pub mod threads;
pub mod tls;
pub mod upstream;

use std::io;
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{BorrowedFd, RawFd};
use std::time::{Duration, Instant};

pub use idle::{IdleSet, IdleSlot};

/// When a blocking call gives up. Relative deadlines are resolved only if
/// the call actually has to wait: most reads and writes complete at once,
/// and then cost no clock read.
#[derive(Debug, Clone, Copy)]
pub enum Deadline {
    /// This long after the call starts waiting.
    After(Duration),
    /// At this instant.
    At(Instant),
    /// This long after an instant: `At(start + timeout)`, with the sum left
    /// for when the call has to wait.
    Since(Instant, Duration),
}

impl Deadline {
    /// The absolute deadline, reading the clock with `now` if needed.
    pub fn at(self, now: impl FnOnce() -> Instant) -> Instant {
        match self {
            Deadline::After(d) => now() + d,
            Deadline::At(t) => t,
            Deadline::Since(start, d) => start + d,
        }
    }
}

/// The poll(2) timeout that lasts until `left` has passed: whole
/// milliseconds rounded up (a timeout rounded down ends the wait short of
/// its deadline, and a second wait follows), at most `i32::MAX`.
pub fn poll_timeout_ms(left: Duration) -> libc::c_int {
    ceil_millis(left).min(libc::c_int::MAX as u64) as libc::c_int
}

/// `d` in whole milliseconds, rounded up, in 64-bit arithmetic (a `u128`
/// division from `as_nanos` is a library call of ~45 instructions, paid on
/// every timed read of the blocking designs).
#[inline]
pub(crate) fn ceil_millis(d: Duration) -> u64 {
    let ms = u64::from(d.subsec_nanos().div_ceil(1_000_000));
    d.as_secs().saturating_mul(1000).saturating_add(ms)
}

/// A piece of a file to send (see [`BlockingIo::send_file`]).
#[derive(Debug)]
pub struct FileChunk<'a> {
    /// The file.
    pub file: BorrowedFd<'a>,
    /// Where the piece starts; moved past what was sent.
    pub offset: &'a mut u64,
    /// How many bytes to send at most.
    pub count: usize,
    /// Through a copy rather than `sendfile(2)` (a file beyond
    /// `--sendfile-max`).
    pub copy: bool,
}

/// What the blocking connection code needs from its socket. Every call
/// blocks the calling thread of control until done or until its deadline
/// (then `io::ErrorKind::TimedOut`).
///
/// # Safety
///
/// [`conn::serve`] trusts [`read_uninit`](BlockingIo::read_uninit)'s count:
/// it marks that many bytes of its buffer's spare capacity as initialised
/// (`Vec::set_len`) without looking at them. So an implementation must
/// return `Ok(n)` only with `n <= buf.len()` and the first `n` elements of
/// `buf` written (by the kernel's `read(2)` or by the implementation). A
/// larger count, or one covering bytes it did not write, would expose
/// uninitialised or out-of-bounds memory as request bytes.
///
/// The trait is `unsafe` rather than checked because the second half of
/// the contract cannot be checked (no one can tell written bytes from
/// unwritten ones), and zeroing every read buffer first would cost the hot
/// path a `memset` per read.
///
/// ```compile_fail,E0200
/// use std::mem::MaybeUninit;
/// use httplite::blocking::{BlockingIo, Deadline};
/// struct Liar;
/// // error[E0200]: the trait `BlockingIo` requires an `unsafe impl`
/// impl BlockingIo for Liar {
///     fn read_uninit(&mut self, buf: &mut [MaybeUninit<u8>], _: Deadline)
///         -> std::io::Result<usize> { Ok(buf.len() + 1) }
///     fn write(&mut self, buf: &[u8], _: Deadline) -> std::io::Result<usize> { Ok(buf.len()) }
///     fn send_file(&mut self, _: httplite::blocking::FileChunk<'_>, _: Deadline)
///         -> std::io::Result<usize> { Ok(0) }
///     fn wait_readable(&mut self, _: Deadline) -> std::io::Result<()> { Ok(()) }
///     fn sleep(&mut self, _: std::time::Duration) {}
///     fn now(&self) -> std::time::Instant { std::time::Instant::now() }
///     fn shutdown(&mut self, _: std::net::Shutdown) -> std::io::Result<()> { Ok(()) }
///     fn fd(&self) -> std::os::fd::RawFd { -1 }
///     fn peer_addr(&self) -> Option<std::net::SocketAddr> { None }
/// }
/// ```
pub unsafe trait BlockingIo {
    /// How the reverse proxy's upstream sockets wait under this design
    /// (the same way as the client's socket: see [`upstream`]).
    type Waits: upstream::UpstreamWaits;
    /// Whether the bytes are TLS records under the plaintext this reads
    /// (a short read of plaintext then says nothing of what the socket
    /// still holds; see the connection's `close`).
    const ENCRYPTED: bool = false;
    /// Whether the thread of control running the connection is its alone
    /// (a thread per connection, a fork child, a connection-mode pool
    /// thread): the thread's buffer pool then keeps buffers for this one
    /// connection, so an idle wait frees them instead (see the connection
    /// loop's `idle_wait`). Coroutines share their worker's pool.
    const OWN_THREAD: bool = false;
    /// Whether a new connection's first request is read at once
    /// ([`BlockingIo::read_now`]) rather than waited for first (the
    /// connection's `first_request`). A thread per connection saves a
    /// `poll` by it. Not for TLS, whose handshake comes first; nor for a
    /// fork child, which learns of a stop only while it waits (an answer
    /// given during a shutdown must say `Connection: close`); nor for
    /// coroutines, which gained nothing measurable by it (the wait's
    /// `epoll_ctl` saved, a `read` more when the request is not there yet)
    /// and whose stacks went deeper on that path (a second page for about
    /// one in eighty idle connections).
    const READ_FIRST: bool = false;
    /// The connection ends and this is its socket's only holder: a
    /// reactor-registered socket can let its close take it out of epoll
    /// (no `EPOLL_CTL_DEL`). Nothing to do for a plain blocking socket.
    fn will_close(&mut self) {}
    /// Turns Nagle's algorithm off on the socket, for an I/O whose accept
    /// left it on (see [`crate::driver::Nagle`]); others set it at accept
    /// and keep this no-op.
    fn set_nodelay(&mut self) {}
    /// Reads into uninitialised memory; returns how many bytes at the start
    /// of `buf` are now initialised (`0`: end of stream). See the trait's
    /// safety contract: the count must be at most `buf.len()` and cover only
    /// bytes that were written.
    fn read_uninit(&mut self, buf: &mut [MaybeUninit<u8>], deadline: Deadline)
    -> io::Result<usize>;
    /// [`BlockingIo::read_uninit`] without waiting: `WouldBlock` if
    /// nothing is there yet (same safety contract). For a new connection's
    /// first request, which nearly always came with it; asked only of an
    /// I/O with [`BlockingIo::READ_FIRST`].
    fn read_now(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        let _ = buf;
        Err(io::ErrorKind::WouldBlock.into())
    }
    /// Writes some of `buf` (never raising `SIGPIPE`).
    fn write(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize>;
    /// [`BlockingIo::write`] when more follows at once (a file body after
    /// its head): a socket adds `MSG_MORE`, so the head shares the body's
    /// first segment instead of leaving alone. An I/O that copies anyway
    /// (TLS) makes it its `write` (this default).
    fn write_more(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        self.write(buf, deadline)
    }
    /// Sends up to `chunk.count` bytes of `chunk.file` from
    /// `*chunk.offset` (moved past them): with `sendfile(2)`, or if
    /// `chunk.copy`, with `pread(2)` into the thread's buffer
    /// (`driver::with_copy_buffer`), then `send(2)`. An I/O that copies
    /// every file anyway (TLS encrypts it; a test's memory) ignores `copy`.
    fn send_file(&mut self, chunk: FileChunk<'_>, deadline: Deadline) -> io::Result<usize>;
    /// Waits until a read would not block (data, end of stream, error).
    fn wait_readable(&mut self, deadline: Deadline) -> io::Result<()>;
    /// A proxied tunnel's wait (after an upstream's `101`): until a read
    /// of this connection (under TLS: of its plaintext) or of `up` would
    /// not block, or `deadline` (`TimedOut`); which side, the client's if
    /// both. An I/O without sockets (a test's memory) answers
    /// `Unsupported`.
    fn wait_either(
        &mut self,
        up: &upstream::Upstream<Self::Waits>,
        deadline: Deadline,
    ) -> io::Result<upstream::Side>;
    /// The thread pool's event mode, where the connection loop would wait
    /// for the next bytes of a head: takes in what the socket holds if
    /// `readable` (it was seen readable and nothing has read it since),
    /// without waiting for more, and says whether a read would now return
    /// without the socket becoming readable again. False parks the
    /// connection in its front, which watches the socket.
    ///
    /// A plain socket keeps its bytes in the kernel, where the front reads
    /// them itself: false (the default). TLS ([`tls::TlsIo`]) takes one
    /// step of the session (handshake messages, records; or a piece of
    /// plain HTTP sent to the TLS port) and answers true when rustls holds
    /// plaintext, or when the session is over (the read that follows
    /// reports how).
    fn settle(&mut self, readable: bool, deadline: Deadline) -> io::Result<bool> {
        let _ = (readable, deadline);
        Ok(false)
    }
    /// Sleeps without holding up other connections.
    fn sleep(&mut self, d: Duration);
    /// The current time, as precise as the design's deadlines need (an
    /// event loop's cached clock is enough).
    fn now(&self) -> Instant;
    /// Shuts down one or both directions.
    fn shutdown(&mut self, how: Shutdown) -> io::Result<()>;
    /// The socket's fd (for [`IdleSet`]).
    fn fd(&self) -> RawFd;
    /// The client's address (for the access log).
    fn peer_addr(&self) -> Option<SocketAddr>;
    /// Runs blocking work (a directory listing) where it holds up no other
    /// connection. By default right here, which is right when this thread
    /// of control is the connection's alone (a thread per connection);
    /// designs that share a thread hand it to `pool`.
    fn offload<T: Send + 'static>(
        &mut self,
        pool: &pool::Pool,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Result<T, pool::JoinError>, pool::Full> {
        let _ = pool;
        Ok(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .map_err(pool::JoinError::Panicked))
    }
}

/// A [`BlockingIo`] built around another one that writes only the calls it
/// changes: every call defaults to the same call on the inner I/O, and a
/// blanket implementation makes each wrapper a [`BlockingIo`]. The fork
/// child's socket changes the waits (they notice the parent's stop
/// request); TLS ([`tls::TlsIo`]) changes the reads and writes and keeps
/// the inner socket's clock, fd, address and offloading.
///
/// A wrapper that changes a call another call defaults to must change
/// that one too: [`BlockingIo::write_more`] here defaults to the inner
/// socket's, not to the wrapper's own `write` (TLS makes it its own).
///
/// # Safety
///
/// [`BlockingIo`]'s contract, for [`read_uninit`](BlockingIoWrapper::read_uninit):
/// `Ok(n)` only with `n <= buf.len()` and the first `n` elements of `buf`
/// written. The default keeps it by returning the inner I/O's count, which
/// its own `unsafe impl` vouches for; a wrapper that overrides the call
/// vouches for its override.
pub unsafe trait BlockingIoWrapper {
    /// The I/O underneath.
    type Inner: BlockingIo;
    /// [`BlockingIo::ENCRYPTED`].
    const ENCRYPTED: bool = <Self::Inner as BlockingIo>::ENCRYPTED;
    /// [`BlockingIo::OWN_THREAD`].
    const OWN_THREAD: bool = <Self::Inner as BlockingIo>::OWN_THREAD;
    /// The I/O underneath.
    fn inner(&self) -> &Self::Inner;
    /// The I/O underneath, to call.
    fn inner_mut(&mut self) -> &mut Self::Inner;
    /// [`BlockingIo::will_close`].
    #[inline]
    fn will_close(&mut self) {
        self.inner_mut().will_close();
    }
    /// [`BlockingIo::set_nodelay`].
    #[inline]
    fn set_nodelay(&mut self) {
        self.inner_mut().set_nodelay();
    }
    /// [`BlockingIo::read_uninit`], under the trait's safety contract.
    #[inline]
    fn read_uninit(
        &mut self,
        buf: &mut [MaybeUninit<u8>],
        deadline: Deadline,
    ) -> io::Result<usize> {
        self.inner_mut().read_uninit(buf, deadline)
    }
    /// [`BlockingIo::write`].
    #[inline]
    fn write(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        self.inner_mut().write(buf, deadline)
    }
    /// [`BlockingIo::write_more`]: the inner I/O's (see the trait).
    #[inline]
    fn write_more(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        self.inner_mut().write_more(buf, deadline)
    }
    /// [`BlockingIo::send_file`].
    #[inline]
    fn send_file(&mut self, chunk: FileChunk<'_>, deadline: Deadline) -> io::Result<usize> {
        self.inner_mut().send_file(chunk, deadline)
    }
    /// [`BlockingIo::wait_readable`].
    #[inline]
    fn wait_readable(&mut self, deadline: Deadline) -> io::Result<()> {
        self.inner_mut().wait_readable(deadline)
    }
    /// [`BlockingIo::wait_either`].
    #[inline]
    fn wait_either(
        &mut self,
        up: &upstream::Upstream<<Self::Inner as BlockingIo>::Waits>,
        deadline: Deadline,
    ) -> io::Result<upstream::Side> {
        self.inner_mut().wait_either(up, deadline)
    }
    /// [`BlockingIo::settle`].
    #[inline]
    fn settle(&mut self, readable: bool, deadline: Deadline) -> io::Result<bool> {
        self.inner_mut().settle(readable, deadline)
    }
    /// [`BlockingIo::sleep`].
    #[inline]
    fn sleep(&mut self, d: Duration) {
        self.inner_mut().sleep(d);
    }
    /// [`BlockingIo::now`].
    #[inline]
    fn now(&self) -> Instant {
        self.inner().now()
    }
    /// [`BlockingIo::shutdown`].
    #[inline]
    fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        self.inner_mut().shutdown(how)
    }
    /// [`BlockingIo::fd`].
    #[inline]
    fn fd(&self) -> RawFd {
        self.inner().fd()
    }
    /// [`BlockingIo::peer_addr`].
    #[inline]
    fn peer_addr(&self) -> Option<SocketAddr> {
        self.inner().peer_addr()
    }
    /// [`BlockingIo::offload`].
    #[inline]
    fn offload<T: Send + 'static>(
        &mut self,
        pool: &pool::Pool,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Result<T, pool::JoinError>, pool::Full> {
        self.inner_mut().offload(pool, f)
    }
}

// SAFETY: `read_uninit` returns the wrapper's `read_uninit`, which keeps
// `BlockingIoWrapper`'s safety contract, the same as this trait's.
// Every call is the wrapper's, inlined, so a wrapper costs what writing
// out its `BlockingIo` would.
unsafe impl<W: BlockingIoWrapper> BlockingIo for W {
    type Waits = <W::Inner as BlockingIo>::Waits;
    const ENCRYPTED: bool = <W as BlockingIoWrapper>::ENCRYPTED;
    const OWN_THREAD: bool = <W as BlockingIoWrapper>::OWN_THREAD;
    // `READ_FIRST` and `read_now` stay the trait's defaults: the inner
    // I/O's read is not the wrapper's own (TLS decrypts what it reads, a
    // fork child takes its stop signal in waits).
    #[inline]
    fn will_close(&mut self) {
        BlockingIoWrapper::will_close(self);
    }
    #[inline]
    fn set_nodelay(&mut self) {
        BlockingIoWrapper::set_nodelay(self);
    }
    #[inline]
    fn read_uninit(
        &mut self,
        buf: &mut [MaybeUninit<u8>],
        deadline: Deadline,
    ) -> io::Result<usize> {
        BlockingIoWrapper::read_uninit(self, buf, deadline)
    }
    #[inline]
    fn write(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        BlockingIoWrapper::write(self, buf, deadline)
    }
    #[inline]
    fn write_more(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        BlockingIoWrapper::write_more(self, buf, deadline)
    }
    #[inline]
    fn send_file(&mut self, chunk: FileChunk<'_>, deadline: Deadline) -> io::Result<usize> {
        BlockingIoWrapper::send_file(self, chunk, deadline)
    }
    #[inline]
    fn wait_readable(&mut self, deadline: Deadline) -> io::Result<()> {
        BlockingIoWrapper::wait_readable(self, deadline)
    }
    #[inline]
    fn wait_either(
        &mut self,
        up: &upstream::Upstream<Self::Waits>,
        deadline: Deadline,
    ) -> io::Result<upstream::Side> {
        BlockingIoWrapper::wait_either(self, up, deadline)
    }
    #[inline]
    fn settle(&mut self, readable: bool, deadline: Deadline) -> io::Result<bool> {
        BlockingIoWrapper::settle(self, readable, deadline)
    }
    #[inline]
    fn sleep(&mut self, d: Duration) {
        BlockingIoWrapper::sleep(self, d);
    }
    #[inline]
    fn now(&self) -> Instant {
        BlockingIoWrapper::now(self)
    }
    #[inline]
    fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        BlockingIoWrapper::shutdown(self, how)
    }
    #[inline]
    fn fd(&self) -> RawFd {
        BlockingIoWrapper::fd(self)
    }
    #[inline]
    fn peer_addr(&self) -> Option<SocketAddr> {
        BlockingIoWrapper::peer_addr(self)
    }
    #[inline]
    fn offload<T: Send + 'static>(
        &mut self,
        pool: &pool::Pool,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Result<T, pool::JoinError>, pool::Full> {
        BlockingIoWrapper::offload(self, pool, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_timeouts_round_up_to_whole_milliseconds() {
        let ms = |micros| poll_timeout_ms(Duration::from_micros(micros));
        assert_eq!(ms(1_900), 2);
        assert_eq!(ms(100), 1);
        assert_eq!(ms(0), 0);
        assert_eq!(ms(2_000), 2);
        assert_eq!(ms(2_001), 3);
        assert_eq!(poll_timeout_ms(Duration::from_nanos(1)), 1);
        assert_eq!(poll_timeout_ms(Duration::MAX), libc::c_int::MAX);
    }
}
