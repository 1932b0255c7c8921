//! One fd's place in the reactor: registering it (at once, or at the
//! first wait of a socket just accepted) and the [`Registration`] that
//! owns its slot, through which every wait and every non-blocking attempt
//! keeps the edge-triggered contract.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::task::{Context, Poll};

use super::Reactor;
use crate::epoll::ALL_EDGE;
use crate::interest::{Interest, Readiness};
use crate::registry::SlotKey;

impl Reactor {
    /// Registers `fd` (edge-triggered, both directions) and returns the
    /// registration that owns the slot.
    ///
    /// The registration keeps the fd's number past this call: it reads,
    /// sends and deregisters through it ([`Registration::try_read`],
    /// [`Registration::poll_send`], its `Drop`), so a borrow for the call
    /// alone cannot cover it. Safe code cannot register an fd:
    ///
    /// ```compile_fail,E0133
    /// use std::os::fd::AsFd;
    /// let reactor = reactor::Reactor::new().unwrap();
    /// let (r, _w) = reactor::sys::pipe().unwrap();
    /// let _ = reactor.register(r.as_fd());
    /// ```
    ///
    /// # Safety
    /// `fd` must stay open, and refer to the same open file, until the
    /// returned [`Registration`] is dropped. The I/O types of the runtimes
    /// keep the registration beside the fd they own and drop it first.
    pub unsafe fn register(&self, fd: BorrowedFd<'_>) -> io::Result<Registration> {
        let key = self.inner.registry.borrow_mut().insert(fd.as_raw_fd());
        if let Err(e) = self.inner.epoll.add(fd, ALL_EDGE, key.token()) {
            drop(self.inner.registry.borrow_mut().remove(key));
            return Err(e);
        }
        // SAFETY: this function's contract is `registration`'s.
        Ok(unsafe { self.registration(key, fd) })
    }

    /// [`Reactor::register`] for a socket just accepted, whose owner tries
    /// its first read without asking (as the stackless connection does):
    /// the fd enters epoll only at its first wait, so a connection that is
    /// answered and closed on the bytes it brought with it (a
    /// `Connection: close` request that arrived before the accept) never
    /// costs an `EPOLL_CTL_ADD`, nor the removal at its close, nor an
    /// event. Adding it at that wait loses nothing to a race: with edge
    /// triggering, `EPOLL_CTL_ADD` reports what is ready at that moment,
    /// bytes that came after an `EAGAIN` included. Until then the
    /// registration knows no readiness: an owner that asks before it reads
    /// waits, and that wait adds the fd at once (no gain, no loss).
    ///
    /// Should the late `EPOLL_CTL_ADD` fail (out of memory, or the
    /// per-user watch limit), the wait never ends by readiness: the
    /// caller's own timeout ends the connection.
    ///
    /// # Safety
    /// As [`Reactor::register`].
    pub unsafe fn register_accepted(&self, fd: BorrowedFd<'_>) -> Registration {
        let key = self
            .inner
            .registry
            .borrow_mut()
            .insert_unwatched(fd.as_raw_fd());
        // SAFETY: this function's contract is `registration`'s.
        unsafe { self.registration(key, fd) }
    }

    /// The registration of `fd` under `key`, a slot just taken for it.
    ///
    /// # Safety
    /// `fd` must stay open, and refer to the same open file, until the
    /// registration is dropped.
    unsafe fn registration(&self, key: SlotKey, fd: BorrowedFd<'_>) -> Registration {
        self.sync_registered();
        Registration {
            reactor: self.clone(),
            key,
            // SAFETY: the caller keeps `fd` open until the registration is
            // dropped (this function's contract). `borrowed_fd` shortens
            // each use to a borrow of the registration.
            fd: unsafe { BorrowedFd::borrow_raw(fd.as_raw_fd()) },
        }
    }
}

/// One fd's place in the reactor. Dropping it removes the fd from epoll, so
/// drop the registration *before* closing the fd (I/O types do this by
/// declaring the registration before the fd field).
pub struct Registration {
    reactor: Reactor,
    key: SlotKey,
    /// Borrowed once, at registration, so that each syscall does not check
    /// the number again (see [`Registration::borrowed_fd`]).
    fd: BorrowedFd<'static>,
}

impl Registration {
    /// Ready when an operation in `interest`'s direction is worth trying.
    /// Ready at once while readiness is set; it stays set until
    /// [`Registration::clear_readiness`] after an `EAGAIN`. Always inlined:
    /// it is every wait of the hot path, and LLVM otherwise keeps it out
    /// of line since it may add the fd to epoll (its first wait).
    #[inline(always)]
    pub fn poll_ready(&self, cx: &mut Context<'_>, interest: Interest) -> Poll<Readiness> {
        let (poll, watch) =
            (self.reactor.inner.registry.borrow_mut()).poll_wait(self.key, cx, interest);
        if watch {
            self.watch();
        }
        poll
    }

    /// The first wait of a [`Reactor::register_accepted`] socket: into
    /// epoll now, which reports whatever is ready already. A failure leaves
    /// the wait to the caller's timeout (see there). Out of line: every
    /// other wait skips it, and inlined it made the per-request path
    /// longer.
    #[cold]
    #[inline(never)]
    fn watch(&self) {
        let _ = (self.reactor.inner.epoll).add(self.fd, ALL_EDGE, self.key.token());
    }

    /// Forgets readiness in one direction. Call it only when the operation
    /// returned `EAGAIN`: that is what guarantees another edge will come.
    #[inline]
    pub fn clear_readiness(&self, interest: Interest) {
        self.reactor
            .inner
            .registry
            .borrow_mut()
            .clear(self.key, interest);
    }

    /// The current readiness bits.
    #[inline]
    pub fn readiness(&self) -> Readiness {
        self.reactor.inner.registry.borrow().readiness(self.key)
    }

    /// Runs a non-blocking operation when the fd is ready: tries `op`; on
    /// `EAGAIN` clears readiness and waits for the next edge; retries on
    /// `EINTR`. This is the whole edge-triggered contract in one function.
    pub fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
        mut op: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            if self.poll_ready(cx, interest).is_pending() {
                return Poll::Pending;
            }
            match self.try_io(interest, &mut op) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                res => return Poll::Ready(res),
            }
        }
    }

    /// One non-blocking attempt at an operation, without waiting: an
    /// `EAGAIN` clears readiness (the edge-triggered contract), anything else
    /// is returned as is. For callers that wait their own way. Always
    /// inlined: it is every read and write of the hot path, and with the
    /// borrowed fd's check in its closure LLVM kept it out of line (~45
    /// instructions per request).
    #[inline(always)]
    pub fn try_io<R>(
        &self,
        interest: Interest,
        op: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        let res = op();
        if matches!(&res, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            self.clear_readiness(interest);
        }
        res
    }

    /// Records what a read of `requested` bytes from a stream (a socket or
    /// a pipe) returned. A short read means the receive queue is empty: as
    /// good as `EAGAIN`, one syscall cheaper, so readiness is cleared. Any
    /// byte that arrives later raises a new edge, so this loses nothing.
    #[inline]
    pub fn after_read(&self, res: &io::Result<usize>, requested: usize) {
        if let Ok(n) = res
            && *n > 0
            && *n < requested
        {
            self.clear_readiness(Interest::Readable);
        }
    }

    /// Records what a write of `requested` bytes to a stream returned: a
    /// short write means the send buffer is full, the same reasoning.
    #[inline]
    pub fn after_write(&self, res: &io::Result<usize>, requested: usize) {
        if let Ok(n) = res
            && *n < requested
        {
            self.clear_readiness(Interest::Writable);
        }
    }

    /// The registered fd.
    #[inline]
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The registered fd, borrowed for a call into [`crate::sys`].
    #[inline(always)]
    pub(crate) fn borrowed_fd(&self) -> BorrowedFd<'_> {
        // Shortened to `&self`'s lifetime: `register` requires the fd to
        // stay open until the registration is dropped.
        self.fd
    }

    /// The reactor this fd is registered with.
    pub fn reactor(&self) -> &Reactor {
        &self.reactor
    }

    /// Declares that the fd is closed as soon as this registration is
    /// dropped, and that no other fd refers to its open file (no `dup`, no
    /// child process holding it): closing it then takes it out of epoll,
    /// so the drop skips `EPOLL_CTL_DEL`, one system call fewer per
    /// connection. Were a duplicate to exist after all, epoll would keep
    /// reporting its events under this registration's token, whose
    /// generation the freed slot no longer matches: they are ignored, as
    /// any stale token is.
    pub fn deregister_by_close(&self) {
        (self.reactor.inner.registry.borrow_mut()).set_closed_by_owner(self.key);
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("fd", &self.fd.as_raw_fd())
            .field("token", &self.key.token())
            .field("readiness", &self.readiness())
            .finish()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Deregister first: the fd is still open here (its owner closes it
        // after us), so epoll forgets it before the number can be reused;
        // unless the owner's close will (`deregister_by_close`), or it
        // never entered epoll (`register_accepted`).
        let mut registry = self.reactor.inner.registry.borrow_mut();
        if registry.needs_delete(self.key) {
            let _ = self.reactor.inner.epoll.delete(self.fd);
        }
        let woken = registry.remove(self.key);
        drop(registry);
        self.reactor.sync_registered();
        drop(woken);
    }
}
