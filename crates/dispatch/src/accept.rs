//! One `accept4` and what its outcome means, shared by the acceptor thread
//! and the reuseport ports; plus the back-off used when nothing else helps.
//!
//! The `EMFILE` trick: when the process is out of fds, the pending connection
//! stays in the kernel's queue and the listener stays readable. Retrying
//! spins; ignoring it leaves the client hanging with no answer, and in
//! edge-triggered mode no new edge comes for the ones already queued. So one
//! fd (`/dev/null`) is kept in reserve: close it, accept the connection into
//! the freed slot, close that connection at once (the client gets a clean
//! close instead of a hang), and reopen the reserve. Each pending connection
//! costs four syscalls and the queue empties, after which epoll sleeps until
//! the next client: CPU stays bounded by the arrival rate. No other accept
//! in the process runs while a slot is freed (`SHEDDING`), so a sibling
//! port cannot take it; if the reserve is gone all the same (a file opened
//! elsewhere took the slot), back off with a timer and retry.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use crate::sys;

/// The outcome of one accept attempt.
#[derive(Debug)]
pub(crate) enum Step {
    /// A connection, non-blocking and close-on-exec.
    Conn(OwnedFd),
    /// `EAGAIN`: the queue is empty; wait for the next edge.
    Empty,
    /// A per-connection failure (aborted handshake, pending network error):
    /// count it and accept the next one.
    Retry,
    /// Out of fds: one queued connection was accepted into the reserve's slot
    /// and closed. Keep going: the queue shrinks by one each time.
    Shed,
    /// Out of fds or memory and nothing to shed with: back off. The error
    /// is the one that made shedding impossible.
    Exhausted(io::Error),
    /// Anything else (a broken listener): back off rather than spin.
    Failed(io::Error),
}

/// Keeps every other `accept4` in the process out of the slot a shedding
/// thread has just freed. In reuseport mode each worker's port sheds with
/// its own reserve; were a sibling's `accept4` to land in the freed slot, it
/// would keep that connection, the shedder could not reopen its reserve, and
/// its queue would hang for as long as the fd table stays full. Accepts take
/// it shared (uncontended with one acceptor thread), a shed exclusively.
static SHEDDING: RwLock<()> = RwLock::new(());

/// `accept4` once on a non-blocking listener, shedding with `reserve` if the
/// process is out of fds.
pub(crate) fn step(listener: BorrowedFd<'_>, reserve: &mut Option<OwnedFd>) -> Step {
    let accepted = {
        let _no_shed = SHEDDING.read().unwrap_or_else(|e| e.into_inner());
        reactor::sys::accept_fd(listener)
    };
    match accepted {
        Ok(fd) => Step::Conn(fd),
        Err(e) => match classify(&e) {
            Class::Empty => Step::Empty,
            Class::Retry => Step::Retry,
            Class::OutOfFds => shed(listener, reserve, e),
            Class::OutOfMemory => Step::Exhausted(e),
            Class::Fatal => Step::Failed(e),
        },
    }
}

enum Class {
    Empty,
    Retry,
    OutOfFds,
    OutOfMemory,
    Fatal,
}

fn classify(e: &io::Error) -> Class {
    match e.raw_os_error() {
        Some(libc::EAGAIN) => Class::Empty,
        // accept(2): Linux reports errors already pending on the new socket
        // through accept; they concern that connection only.
        Some(
            libc::EINTR
            | libc::ECONNABORTED
            | libc::EPROTO
            | libc::EPERM
            | libc::ENETDOWN
            | libc::ENOPROTOOPT
            | libc::EHOSTDOWN
            | libc::ENONET
            | libc::EHOSTUNREACH
            | libc::EOPNOTSUPP
            | libc::ENETUNREACH
            | libc::ETIMEDOUT,
        ) => Class::Retry,
        Some(libc::EMFILE | libc::ENFILE) => Class::OutOfFds,
        Some(libc::ENOBUFS | libc::ENOMEM) => Class::OutOfMemory,
        _ => Class::Fatal,
    }
}

fn shed(listener: BorrowedFd<'_>, reserve: &mut Option<OwnedFd>, emfile: io::Error) -> Step {
    let _alone = SHEDDING.write().unwrap_or_else(|e| e.into_inner());
    let Some(spare) = reserve.take() else {
        // Try to get the reserve back for next time; this attempt backs off.
        *reserve = sys::open_reserve().ok();
        return Step::Exhausted(emfile);
    };
    drop(spare);
    let step = match reactor::sys::accept_fd(listener) {
        Ok(conn) => {
            drop(conn);
            Step::Shed
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Step::Empty,
        // Someone else took the freed slot (or the error was not about fds).
        Err(e) => Step::Exhausted(e),
    };
    *reserve = sys::open_reserve().ok();
    step
}

/// Exponential back-off between accept attempts that cannot succeed yet:
/// 5 ms doubling to 200 ms, reset by the next successful accept.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    until: Option<Instant>,
    step: Duration,
}

const FIRST: Duration = Duration::from_millis(5);
const LONGEST: Duration = Duration::from_millis(200);

impl Backoff {
    /// Starts (or lengthens) a pause; returns its length.
    pub(crate) fn start(&mut self) -> Duration {
        self.step = if self.step.is_zero() {
            FIRST
        } else {
            (self.step * 2).min(LONGEST)
        };
        self.until = Some(Instant::now() + self.step);
        self.step
    }

    /// Forgets past failures after a success.
    pub(crate) fn reset(&mut self) {
        self.until = None;
        self.step = Duration::ZERO;
    }

    /// Time left in the current pause, if any; clears an expired pause.
    pub(crate) fn remaining(&mut self) -> Option<Duration> {
        let until = self.until?;
        let now = Instant::now();
        if now >= until {
            self.until = None;
            None
        } else {
            Some(until - now)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn backoff_doubles_up_to_a_cap_and_resets() {
        let mut b = Backoff::default();
        assert_eq!(b.remaining(), None);
        assert_eq!(b.start(), Duration::from_millis(5));
        assert_eq!(b.start(), Duration::from_millis(10));
        assert!(b.remaining().is_some());
        for _ in 0..10 {
            b.start();
        }
        assert_eq!(b.start(), LONGEST);
        b.reset();
        assert_eq!(b.remaining(), None);
        assert_eq!(b.start(), FIRST);
    }

    #[test]
    fn empty_queue_is_empty_and_connection_is_conn() {
        let l = reactor::sys::tcp_listener(
            "127.0.0.1:0".parse().unwrap(),
            reactor::sys::ListenOptions::default(),
        )
        .unwrap();
        let addr = reactor::sys::local_addr(l.as_fd()).unwrap();
        let mut reserve = sys::open_reserve().ok();
        assert!(matches!(step(l.as_fd(), &mut reserve), Step::Empty));
        let _c = std::net::TcpStream::connect(addr).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match step(l.as_fd(), &mut reserve) {
                Step::Conn(_) => break,
                Step::Empty if Instant::now() < deadline => std::thread::yield_now(),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn errors_are_classified() {
        let c = |n| classify(&io::Error::from_raw_os_error(n));
        assert!(matches!(c(libc::ECONNABORTED), Class::Retry));
        assert!(matches!(c(libc::EMFILE), Class::OutOfFds));
        assert!(matches!(c(libc::ENFILE), Class::OutOfFds));
        assert!(matches!(c(libc::ENOBUFS), Class::OutOfMemory));
        assert!(matches!(c(libc::EBADF), Class::Fatal));
        assert!(matches!(c(libc::EAGAIN), Class::Empty));
    }
}
