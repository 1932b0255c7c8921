//! A safe wrapper over one epoll instance: create, add, delete, wait.
//!
//! The reactor never modifies a registration: it registers each fd once for
//! everything it may ever want (`EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET`)
//! and keeps the readiness itself, so an operation never costs an extra
//! `epoll_ctl`. [`Epoll::modify`] is for users of `EPOLLONESHOT`, who re-arm
//! an fd each time they take it back (the thread pool's front in
//! httplite).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::syscall;

/// The flags every fd is registered with: both directions, peer hang-up,
/// edge-triggered.
pub const ALL_EDGE: u32 =
    (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;

/// An epoll instance (close-on-exec).
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: no pointers; returns a new fd or -1.
        let fd = syscall!(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: the fd was just created and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    /// Adds `fd` with the given event `flags`; `token` comes back in every
    /// event for it.
    ///
    /// The fd is borrowed from its owner, not named by number (a number may
    /// already belong to someone else's file):
    ///
    /// ```compile_fail,E0308
    /// let ep = reactor::epoll::Epoll::new().unwrap();
    /// let _ = ep.add(3, reactor::epoll::ALL_EDGE, 0);
    /// ```
    pub fn add(&self, fd: BorrowedFd<'_>, flags: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, flags, token)
    }

    /// Changes the event `flags` (and `token`) of `fd`, already added: with
    /// `EPOLLONESHOT`, the way to re-arm it after its event. Flags without
    /// any event (`0`) keep `fd` in the set but silence it;
    /// setting events again re-checks readiness, so an edge-triggered `fd`
    /// that is ready reports at once.
    pub fn modify(&self, fd: BorrowedFd<'_>, flags: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, flags, token)
    }

    /// `epoll_ctl(op)` with an event.
    fn ctl(&self, op: libc::c_int, fd: BorrowedFd<'_>, flags: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: flags,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call;
        // `fd` is borrowed, so open.
        syscall!(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd.as_raw_fd(), &mut ev) })?;
        Ok(())
    }

    /// Removes `fd`. Must happen before the fd is closed: epoll tracks the
    /// open file description, and a `dup`ed copy would keep reporting.
    ///
    /// ```compile_fail,E0308
    /// let ep = reactor::epoll::Epoll::new().unwrap();
    /// let _ = ep.delete(3);
    /// ```
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        // SAFETY: a null event pointer is allowed for EPOLL_CTL_DEL (since 2.6.9).
        syscall!(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd.as_raw_fd(),
                std::ptr::null_mut(),
            )
        })?;
        Ok(())
    }

    /// Waits for events. `None` blocks until one arrives; a timeout is rounded
    /// *up* to whole milliseconds so that a timer due in 0.3 ms never turns
    /// into a 0 ms busy loop, and never fires early. `EINTR` returns 0 events.
    pub fn wait(&self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        self.wait_ms(events, timeout_ms(timeout))
    }

    /// [`Epoll::wait`] with the timeout already in epoll's milliseconds (`-1`:
    /// none).
    #[inline]
    pub fn wait_ms(&self, events: &mut Events, ms: i32) -> io::Result<usize> {
        events.len = 0;
        let cap = events.buf.capacity() as i32;
        // SAFETY: the buffer is valid for `cap` writes of epoll_event; the
        // kernel writes at most `cap` entries, and `len` is set from its answer.
        let n = match syscall!(unsafe {
            crate::sys::raw::epoll_wait(self.fd.as_raw_fd(), events.buf.as_mut_ptr(), cap, ms)
        }) {
            Ok(n) => n as usize,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) => return Err(e),
        };
        events.len = n;
        Ok(n)
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Epoll {
    /// The epoll fd itself, e.g. to nest this set in another epoll or ring.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Converts an optional timeout to epoll's milliseconds, rounding up.
#[inline]
pub(crate) fn timeout_ms(timeout: Option<Duration>) -> i32 {
    match timeout {
        None => -1,
        Some(d) => {
            // u64 arithmetic: `as_nanos` is a u128 and its division a libcall
            // on every turn. Seconds past i32::MAX ms saturate anyway.
            let secs = d.as_secs().min(i32::MAX as u64 / 1000 + 1);
            let ms = secs * 1000 + u64::from(d.subsec_nanos().div_ceil(1_000_000));
            ms.min(i32::MAX as u64) as i32
        }
    }
}

/// A reusable buffer of events filled by [`Epoll::wait`].
#[derive(Debug)]
pub struct Events {
    buf: Vec<libc::epoll_event>,
    len: usize,
}

impl Events {
    /// A buffer that receives up to `capacity` events per wait.
    pub fn with_capacity(capacity: usize) -> Events {
        Events {
            buf: Vec::with_capacity(capacity.max(1)),
            len: 0,
        }
    }

    /// Number of events from the last wait.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the last wait returned no events.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The events of the last wait as `(token, flags)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        // SAFETY: the kernel initialised the first `len` entries.
        let filled = unsafe { std::slice::from_raw_parts(self.buf.as_ptr(), self.len) };
        filled.iter().map(|e| Event {
            token: e.u64,
            flags: e.events,
        })
    }
}

/// One event: the registration's token and the `EPOLL*` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The `u64` given at registration.
    pub token: u64,
    /// `EPOLLIN`, `EPOLLOUT`, `EPOLLRDHUP`, `EPOLLHUP`, `EPOLLERR`...
    pub flags: u32,
}

impl Event {
    /// Data (or a FIN) can be read.
    pub fn is_readable(&self) -> bool {
        self.flags & (libc::EPOLLIN | libc::EPOLLPRI) as u32 != 0
    }
    /// Buffer space is available for writing.
    pub fn is_writable(&self) -> bool {
        self.flags & libc::EPOLLOUT as u32 != 0
    }
    /// The peer shut down its writing side (we will read EOF).
    pub fn is_read_closed(&self) -> bool {
        self.flags & (libc::EPOLLRDHUP | libc::EPOLLHUP) as u32 != 0
    }
    /// Both directions are closed.
    pub fn is_hangup(&self) -> bool {
        self.flags & libc::EPOLLHUP as u32 != 0
    }
    /// An error is pending on the fd.
    pub fn is_error(&self) -> bool {
        self.flags & libc::EPOLLERR as u32 != 0
    }
}

/// Renders `EPOLL*` flags for humans (`IN|OUT|RDHUP`), for traces and tests.
pub fn flags_to_string(flags: u32) -> String {
    crate::trace::EpollFlags(flags).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys;

    #[test]
    fn timeout_rounds_up() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_ms(Some(Duration::from_micros(300))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_millis(5))), 5);
        assert_eq!(timeout_ms(Some(Duration::from_micros(5001))), 6);
        assert_eq!(timeout_ms(Some(Duration::from_secs(u64::MAX))), i32::MAX);
    }

    #[test]
    fn edge_triggered_reports_once_per_edge() {
        let ep = Epoll::new().unwrap();
        let (r, w) = sys::pipe().unwrap();
        ep.add(r.as_fd(), ALL_EDGE, 7).unwrap();
        let mut events = Events::with_capacity(8);
        assert_eq!(ep.wait(&mut events, Some(Duration::ZERO)).unwrap(), 0);
        sys::write(w.as_fd(), b"abc").unwrap();
        assert_eq!(ep.wait(&mut events, Some(Duration::ZERO)).unwrap(), 1);
        let ev = events.iter().next().unwrap();
        assert_eq!(ev.token, 7);
        assert!(ev.is_readable());
        // No new edge: the data is still there but ET stays quiet.
        assert_eq!(ep.wait(&mut events, Some(Duration::ZERO)).unwrap(), 0);
        drop(w);
        assert_eq!(ep.wait(&mut events, Some(Duration::ZERO)).unwrap(), 1);
        assert!(events.iter().next().unwrap().is_hangup());
        ep.delete(r.as_fd()).unwrap();
    }

    #[test]
    fn oneshot_reports_once_until_modified() {
        let ep = Epoll::new().unwrap();
        let (r, w) = sys::pipe().unwrap();
        let oneshot = (libc::EPOLLIN | libc::EPOLLONESHOT) as u32;
        ep.add(r.as_fd(), oneshot, 1).unwrap();
        sys::write(w.as_fd(), b"abc").unwrap();
        let mut events = Events::with_capacity(8);
        assert_eq!(ep.wait(&mut events, Some(Duration::ZERO)).unwrap(), 1);
        // Disarmed, though level-triggered and still readable.
        assert_eq!(ep.wait(&mut events, Some(Duration::ZERO)).unwrap(), 0);
        // Re-armed with a new token: the bytes still there are reported.
        ep.modify(r.as_fd(), oneshot, 2).unwrap();
        assert_eq!(ep.wait(&mut events, Some(Duration::ZERO)).unwrap(), 1);
        assert_eq!(events.iter().next().unwrap().token, 2);
        ep.delete(r.as_fd()).unwrap();
    }

    #[test]
    fn flags_render() {
        let f = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        assert_eq!(flags_to_string(f), "IN|RDHUP");
        assert_eq!(flags_to_string(0), "-");
    }
}
