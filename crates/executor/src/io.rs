//! [`Async`]: any non-blocking fd (pipe, eventfd, stdin, a socket type we do
//! not wrap) made awaitable through the reactor.

use std::fmt;
use std::io::{self, Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::task::{Context, Poll};

use reactor::sys;
use reactor::{Interest, Reactor, Registration};

/// Wraps an I/O object that owns an fd: puts it in non-blocking mode,
/// registers it with the thread's reactor, and turns `EAGAIN` into waiting.
///
/// The registration keeps the fd's number until the `Async` is dropped, so
/// the object must keep that fd open all along: shared access (`&T`) cannot
/// close it, and the few methods that hand out `&mut T` (through which the
/// object could be replaced, closing its fd) are `unsafe`. Reads and writes
/// go through `&T` (`&File`, `&PipeReader` and the like implement
/// `Read` and `Write`).
///
/// ```no_run
/// # executor::block_on(async {
/// use executor::io::Async;
/// let (r, w) = std::io::pipe()?;
/// let mut r = Async::new(r)?;
/// let mut w = Async::new(w)?;
/// w.write_all(b"ping").await?;
/// let mut buf = [0u8; 4];
/// r.read_exact(&mut buf).await?;
/// assert_eq!(&buf, b"ping");
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub struct Async<T: AsFd> {
    // Dropped by hand, before `io`: deregister, then close.
    reg: ManuallyDrop<Registration>,
    io: ManuallyDrop<T>,
}

impl<T: AsFd> Async<T> {
    /// Makes `io`'s fd non-blocking and registers it.
    pub fn new(io: T) -> io::Result<Async<T>> {
        sys::set_nonblocking(io.as_fd(), true)?;
        Async::from_nonblocking(io)
    }

    /// [`Async::new`] for an fd that is non-blocking already (a socket made
    /// with `SOCK_NONBLOCK`): registered without the `fcntl`. A blocking fd
    /// here would stall the whole thread on its first wait; debug builds
    /// check the flag.
    pub fn from_nonblocking(io: T) -> io::Result<Async<T>> {
        debug_assert!(
            sys::is_nonblocking(io.as_fd()).unwrap_or(true),
            "Async::from_nonblocking: a blocking fd"
        );
        // SAFETY: `io` moves into the Async, which drops the registration
        // before it (Drop, `into_inner`); in between safe code reaches it
        // only as `&T`, and a type that lends out its fd from `&self`
        // cannot close that fd from `&self`. The `&mut T` paths are
        // `unsafe fn`s whose callers promise to keep the fd.
        let reg = unsafe { Reactor::current().register(io.as_fd()) }?;
        Ok(Async {
            reg: ManuallyDrop::new(reg),
            io: ManuallyDrop::new(io),
        })
    }

    /// The wrapped object.
    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// The wrapped object, mutably. Do not change its blocking mode.
    ///
    /// Through `&mut T` the object could be replaced, closing the fd the
    /// registration still names, so safe code cannot have it:
    ///
    /// ```compile_fail,E0133
    /// # fn f(a: &mut executor::io::Async<std::fs::File>) {
    /// let _ = a.get_mut();
    /// # }
    /// ```
    ///
    /// # Safety
    /// The object must keep the fd it was registered with open: do not
    /// replace it, take it apart or otherwise close that fd while the
    /// `Async` lives (the registration reads, sends and deregisters
    /// through the fd's number until then).
    pub unsafe fn get_mut(&mut self) -> &mut T {
        &mut self.io
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

    /// Runs `op` when readable, waiting on `EAGAIN`.
    pub async fn read_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        std::future::poll_fn(|cx| self.reg.poll_io(cx, Interest::Readable, || op(&self.io))).await
    }

    /// Runs `op` with `&mut T` when readable, waiting on `EAGAIN`.
    ///
    /// # Safety
    /// As [`Async::get_mut`]: `op` must not close the registered fd.
    pub async unsafe fn read_with_mut<R>(
        &mut self,
        mut op: impl FnMut(&mut T) -> io::Result<R>,
    ) -> io::Result<R> {
        let Async { reg, io } = self;
        std::future::poll_fn(|cx| reg.poll_io(cx, Interest::Readable, || op(io))).await
    }

    /// Runs `op` when writable, waiting on `EAGAIN`.
    pub async fn write_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        std::future::poll_fn(|cx| self.reg.poll_io(cx, Interest::Writable, || op(&self.io))).await
    }

    /// Runs `op` with `&mut T` when writable, waiting on `EAGAIN`.
    ///
    /// # Safety
    /// As [`Async::get_mut`]: `op` must not close the registered fd.
    pub async unsafe fn write_with_mut<R>(
        &mut self,
        mut op: impl FnMut(&mut T) -> io::Result<R>,
    ) -> io::Result<R> {
        let Async { reg, io } = self;
        std::future::poll_fn(|cx| reg.poll_io(cx, Interest::Writable, || op(io))).await
    }

    /// Poll-style readiness, for hand-written futures.
    pub fn poll_ready(&self, cx: &mut Context<'_>, interest: Interest) -> Poll<()> {
        self.reg.poll_ready(cx, interest).map(|_| ())
    }

    /// The registration, for hand-written futures that follow the
    /// edge-triggered contract themselves.
    pub fn registration(&self) -> &Registration {
        &self.reg
    }
}

impl<T: AsFd> Async<T>
where
    for<'a> &'a T: Read,
{
    /// Reads into `buf`; `Ok(0)` is end of file.
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_with(|mut io| io.read(buf)).await
    }

    /// Reads exactly `buf.len()` bytes.
    pub async fn read_exact(&mut self, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.read(buf).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            buf = &mut buf[n..];
        }
        Ok(())
    }
}

impl<T: AsFd> Async<T>
where
    for<'a> &'a T: Write,
{
    /// Writes some of `buf`.
    pub async fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_with(|mut io| io.write(buf)).await
    }

    /// Writes all of `buf`.
    pub async fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.write(buf).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            buf = &buf[n..];
        }
        Ok(())
    }
}

impl<T: AsFd> AsRawFd for Async<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_fd().as_raw_fd()
    }
}

impl<T: AsFd> Drop for Async<T> {
    fn drop(&mut self) {
        // SAFETY: fields are dropped once, here, registration first so the
        // fd leaves epoll before `io` closes it.
        unsafe {
            ManuallyDrop::drop(&mut self.reg);
            ManuallyDrop::drop(&mut self.io);
        }
    }
}

impl<T: AsFd + fmt::Debug> fmt::Debug for Async<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Async")
            .field("io", &*self.io)
            .field("registration", &*self.reg)
            .finish()
    }
}
