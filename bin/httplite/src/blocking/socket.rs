//! A blocking socket as a [`BlockingIo`]: the one the designs that give a
//! connection a whole thread of control share (`threads`, `threadpool`,
//! and the child process of `fork`). Socket timeouts
//! (`SO_RCVTIMEO`/`SO_SNDTIMEO`) stand in for the header, idle and write
//! deadlines; waits that are not a read or a write use poll(2).

use std::io;
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use reactor::sys;

use super::upstream::Side;
use super::{BlockingIo, Deadline, FileChunk};

/// A blocking socket with deadline-driven timeouts.
#[derive(Debug)]
pub struct Blocking {
    stream: TcpStream,
    /// The receive/send timeouts last set, so that unchanged deadlines cost
    /// no `setsockopt`.
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

/// Sets a socket timeout to what is left of `deadline` through `set`,
/// unless `cached` (the last one set) is within 50 ms of it: one
/// setsockopt per change that matters, not one per read or write.
fn refresh_timeout(
    cached: &mut Option<Duration>,
    deadline: Deadline,
    set: impl FnOnce(Duration) -> io::Result<()>,
) -> io::Result<()> {
    let t = remaining(deadline)?;
    if cached.is_none_or(|old| old.abs_diff(t) > Duration::from_millis(50)) {
        set(t)?;
        *cached = Some(t);
    }
    Ok(())
}

/// The socket timeout a deadline becomes: in whole milliseconds, rounded
/// up (never short of the deadline, and never zero, which would mean "no
/// timeout"), so that repeated calls with the same deadline usually need
/// no new `setsockopt`. A relative deadline needs no clock read at all.
pub(crate) fn remaining(deadline: Deadline) -> io::Result<Duration> {
    let left = match deadline {
        Deadline::After(d) => d,
        Deadline::At(t) => t.saturating_duration_since(Instant::now()),
        Deadline::Since(start, d) => (start + d).saturating_duration_since(Instant::now()),
    };
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    Ok(Duration::from_millis(super::ceil_millis(left)))
}

/// `poll(2)` on `pfds` until one reports an event (or an error or
/// hang-up), or the deadline passes (`TimedOut`); `revents` say which.
#[inline]
fn poll_until(pfds: &mut [libc::pollfd], deadline: Deadline) -> io::Result<()> {
    let at = deadline.at(Instant::now);
    loop {
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        let ms = super::poll_timeout_ms(left);
        // SAFETY: `pfds` holds `pfds.len()` valid pollfds for the call.
        match reactor::syscall!(unsafe {
            libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms)
        }) {
            Ok(0) => continue, // the deadline has passed (checked above)
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Blocking calls report an expired socket timeout as `EAGAIN`.
fn timeout_error(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        io::ErrorKind::TimedOut.into()
    } else {
        e
    }
}

impl Blocking {
    /// Wraps a connected socket (already in blocking mode).
    pub fn new(stream: TcpStream) -> Blocking {
        Blocking {
            stream,
            read_timeout: None,
            write_timeout: None,
        }
    }

    /// The socket.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }

    fn set_read_deadline(&mut self, deadline: Deadline) -> io::Result<()> {
        refresh_timeout(&mut self.read_timeout, deadline, |t| {
            self.stream.set_read_timeout(Some(t))
        })
    }

    /// Waits with poll(2) until one of `events` (or an error or hang-up)
    /// is reported, or the deadline passes (`TimedOut`).
    pub(crate) fn wait(&self, events: libc::c_short, deadline: Deadline) -> io::Result<()> {
        let mut pfd = [libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events,
            revents: 0,
        }];
        poll_until(&mut pfd, deadline)
    }

    fn set_write_deadline(&mut self, deadline: Deadline) -> io::Result<()> {
        refresh_timeout(&mut self.write_timeout, deadline, |t| {
            self.stream.set_write_timeout(Some(t))
        })
    }

    /// A blocking `send` by `op` (plain, or with `MSG_MORE`) under
    /// `deadline` (SO_SNDTIMEO).
    fn send_with(
        &mut self,
        buf: &[u8],
        deadline: Deadline,
        op: fn(BorrowedFd<'_>, &[u8]) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.set_write_deadline(deadline)?;
        loop {
            match op(self.stream.as_fd(), buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r.map_err(timeout_error),
            }
        }
    }

    /// Runs a file-sending `op` on the socket in non-blocking mode, waiting
    /// for room with poll(2) against the deadline.
    ///
    /// Not SO_SNDTIMEO: a blocking sendfile(2) splices a large count in
    /// pieces and each piece's wait gets the whole timeout afresh, so a
    /// client that takes a few bytes now and then stretches one call far
    /// past it (scripts/soak.sh measured 8 s for --write-timeout 2s).
    fn send_without_blocking(
        &mut self,
        deadline: Deadline,
        mut op: impl FnMut(BorrowedFd<'_>) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let at = deadline.at(Instant::now);
        loop {
            self.stream.set_nonblocking(true)?;
            let sent = op(self.stream.as_fd());
            self.stream.set_nonblocking(false)?;
            match sent {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.wait(libc::POLLOUT, Deadline::At(at))?
                }
                r => return r,
            }
        }
    }
}

// SAFETY: `read_uninit` returns what `read(2)` returned (reactor's
// `sys::read_uninit`): at most `buf.len()`, all written by the kernel.
unsafe impl BlockingIo for Blocking {
    type Waits = super::upstream::PollWaits;
    const OWN_THREAD: bool = true;
    const READ_FIRST: bool = true;
    fn read_uninit(
        &mut self,
        buf: &mut [MaybeUninit<u8>],
        deadline: Deadline,
    ) -> io::Result<usize> {
        self.set_read_deadline(deadline)?;
        loop {
            match sys::read_uninit(self.stream.as_fd(), buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r.map_err(timeout_error),
            }
        }
    }

    fn read_now(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        sys::recv_nowait(self.stream.as_fd(), buf)
    }

    fn write(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        self.send_with(buf, deadline, sys::send)
    }

    fn write_more(&mut self, buf: &[u8], deadline: Deadline) -> io::Result<usize> {
        self.send_with(buf, deadline, sys::send_more)
    }

    fn send_file(&mut self, chunk: FileChunk<'_>, deadline: Deadline) -> io::Result<usize> {
        let FileChunk {
            file,
            offset,
            count,
            copy,
        } = chunk;
        self.send_without_blocking(deadline, |sock| match copy {
            false => sys::sendfile(sock, file, offset, count),
            true => crate::driver::with_copy_buffer(|buf| {
                sys::send_file_copied(sock, file, offset, count, buf).map(|(sent, _)| sent)
            }),
        })
    }

    fn wait_readable(&mut self, deadline: Deadline) -> io::Result<()> {
        self.wait(libc::POLLIN | libc::POLLRDHUP, deadline)
    }

    /// `poll(2)` on both sockets: level-triggered, so a side it reports
    /// can be read at once.
    fn wait_either(
        &mut self,
        up: &super::upstream::Upstream<super::upstream::PollWaits>,
        deadline: Deadline,
    ) -> io::Result<Side> {
        let mut pfds = [self.stream.as_raw_fd(), up.fd().as_raw_fd()].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        });
        poll_until(&mut pfds, deadline)?;
        Ok(if pfds[0].revents != 0 {
            Side::Client
        } else {
            Side::Upstream
        })
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        self.stream.shutdown(how)
    }

    fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.stream.peer_addr().ok()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The calling thread's voluntary context switches so far: one per
    /// sleep in a blocking call such as poll(2).
    pub(crate) fn sleeps() -> i64 {
        // SAFETY: an all-zero rusage is a valid value for getrusage to
        // overwrite.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid, writable rusage.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        usage.ru_nvcsw
    }

    /// A connected socket on which nothing arrives (and its peer).
    pub(crate) fn quiet_socket() -> (TcpStream, TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (server, client)
    }

    #[test]
    fn a_timed_wait_reaches_its_deadline_in_one_sleep() {
        let (socket, _peer) = quiet_socket();
        let io = Blocking::new(socket);
        // Between whole milliseconds, below one, on one.
        for micros in [1_900, 2_500, 100, 2_000] {
            let deadline = Deadline::After(Duration::from_micros(micros));
            let before = sleeps();
            let e = io.wait(libc::POLLIN, deadline).unwrap_err();
            let slept = sleeps() - before;
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
            assert_eq!(slept, 1, "{micros} µs away: {slept} sleeps");
        }
    }
}
