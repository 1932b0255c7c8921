//! Blocking-style I/O on any non-blocking fd registered with the reactor.
//!
//! Every operation follows the edge-triggered contract (see the `reactor`
//! crate): try the syscall while the reactor says the fd is ready; on
//! `EAGAIN` clear the readiness and park until the next edge; on `EINTR` try
//! again. [`wait_readable`] and [`wait_writable`] are the parking half alone,
//! for fds whose reads someone else does (the dispatcher's handoff pipe:
//! wait for readability, then call `poll_batch` until it says
//! `WouldBlock`, then [`Registration::clear_readiness`]).

use std::fmt;
use std::io::{self, Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Instant;

use reactor::sys;
use reactor::{Interest, Reactor, Readiness, Registration};

use crate::wait;

/// Blocks the running coroutine until `reg`'s fd is readable (data, EOF, a
/// hang-up or an error), or until `deadline` (`io::ErrorKind::TimedOut`).
/// Readiness is not cleared: the caller does that when its read says
/// `EAGAIN`.
///
/// # Panics
/// Outside a coroutine (when it has to wait).
pub fn wait_readable(reg: &Registration, deadline: Option<Instant>) -> io::Result<Readiness> {
    wait_ready(reg, Interest::Readable, deadline)
}

/// Like [`wait_readable`] for writability.
///
/// # Panics
/// Outside a coroutine (when it has to wait).
pub fn wait_writable(reg: &Registration, deadline: Option<Instant>) -> io::Result<Readiness> {
    wait_ready(reg, Interest::Writable, deadline)
}

fn wait_ready(
    reg: &Registration,
    interest: Interest,
    deadline: Option<Instant>,
) -> io::Result<Readiness> {
    Ok(wait::wait_until(reg.reactor(), deadline, |cx| {
        reg.poll_ready(cx, interest)
    })?)
}

/// Runs a non-blocking operation on `reg`'s fd, parking the coroutine on
/// `EAGAIN` until the next edge or `deadline`. The whole edge-triggered
/// contract, blocking-style: the fast path (fd ready, op succeeds) costs no
/// waker, no timer and no switch.
pub fn blocking_io<R>(
    reg: &Registration,
    interest: Interest,
    deadline: Option<Instant>,
    mut op: impl FnMut() -> io::Result<R>,
) -> io::Result<R> {
    loop {
        if reg.readiness().is_ready_for(interest) {
            match reg.try_io(interest, &mut op) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                res => return res,
            }
        }
        wait_ready(reg, interest, deadline)?;
    }
}

/// An fd-owning I/O object (pipe, eventfd, a socket type we do not wrap),
/// made non-blocking and registered with this thread's reactor, with
/// blocking-style operations.
///
/// ```
/// use std::io::{Read, Write};
/// coroutine::run(|| {
///     let (r, w) = std::io::pipe()?;
///     let r = coroutine::io::Fd::new(r)?;
///     let w = coroutine::io::Fd::new(w)?;
///     coroutine::spawn(move || (&w).write_all(b"ping"));
///     let mut buf = [0u8; 4];
///     (&r).read_exact(&mut buf)?;
///     assert_eq!(&buf, b"ping");
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
pub struct Fd<T: AsFd> {
    // Dropped by hand, registration first: deregister, then close.
    reg: ManuallyDrop<Registration>,
    io: ManuallyDrop<T>,
}

impl<T: AsFd> Fd<T> {
    /// Makes `io`'s fd non-blocking and registers it.
    ///
    /// # Panics
    /// Outside a thread with a current reactor (a runtime).
    pub fn new(io: T) -> io::Result<Fd<T>> {
        sys::set_nonblocking(io.as_fd(), true)?;
        // SAFETY: `io` moves into the Fd, which drops the registration
        // before it (Drop, `into_inner`) and lends it out only as `&T`; a
        // type that lends out its fd from `&self` cannot close that fd from
        // `&self`.
        let reg = unsafe { Reactor::current().register(io.as_fd()) }?;
        Ok(Fd {
            reg: ManuallyDrop::new(reg),
            io: ManuallyDrop::new(io),
        })
    }

    /// The wrapped object.
    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// The registration, for code that follows the contract itself.
    pub fn registration(&self) -> &Registration {
        &self.reg
    }

    /// Runs `op` when readable, parking on `EAGAIN`, until `deadline`.
    pub fn read_with<R>(
        &self,
        deadline: Option<Instant>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        blocking_io(&self.reg, Interest::Readable, deadline, || op(&self.io))
    }

    /// Runs `op` when writable, parking on `EAGAIN`, until `deadline`.
    pub fn write_with<R>(
        &self,
        deadline: Option<Instant>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        blocking_io(&self.reg, Interest::Writable, deadline, || op(&self.io))
    }

    /// Waits until readable; see [`wait_readable`].
    pub fn wait_readable(&self, deadline: Option<Instant>) -> io::Result<Readiness> {
        wait_readable(&self.reg, deadline)
    }

    /// Deregisters and returns the object (still non-blocking).
    pub fn into_inner(self) -> T {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; each field is taken
        // exactly once, the registration first.
        unsafe {
            ManuallyDrop::drop(&mut this.reg);
            ManuallyDrop::take(&mut this.io)
        }
    }
}

impl<T: AsFd> Read for &Fd<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fd = self.io.as_fd();
        blocking_io(&self.reg, Interest::Readable, None, || sys::read(fd, buf))
    }
}

impl<T: AsFd> Write for &Fd<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let fd = self.io.as_fd();
        blocking_io(&self.reg, Interest::Writable, None, || sys::write(fd, buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<T: AsFd> AsRawFd for Fd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_fd().as_raw_fd()
    }
}

impl<T: AsFd> Drop for Fd<T> {
    fn drop(&mut self) {
        // SAFETY: fields are dropped once, here, registration first so the
        // fd leaves epoll before `io` closes it.
        unsafe {
            ManuallyDrop::drop(&mut self.reg);
            ManuallyDrop::drop(&mut self.io);
        }
    }
}

impl<T: AsFd + fmt::Debug> fmt::Debug for Fd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fd")
            .field("io", &*self.io)
            .field("registration", &*self.reg)
            .finish()
    }
}
