//! One child of `--runtime fork`: it serves the one connection it was
//! forked for with the blocking connection loop, then `_exit`s.
//!
//! The child starts as a copy of a single-threaded parent, so every lock in
//! it is free and it may allocate, and it needs no thread of its own: a
//! directory listing is built right here (the socket's `offload` is the
//! [`BlockingIo`] default, as under `threads`; the parent closed its own
//! blocking pool before the first fork, so no thread can start), and jobs
//! go to the jobs process through the door the child inherited (see
//! `fork::jobs`).
//!
//! Shutdown: the parent sends `SIGTERM`. The child keeps `SIGINT` and
//! `SIGTERM` blocked, except inside the wait for a next request, which is a
//! `ppoll(2)` that unblocks them atomically: a connection at rest between
//! requests closes at once, and one with a request under way answers it
//! first (the signal stays pending until the loop goes idle again). A
//! connection younger than [`crate::driver::FIRST_REQUEST_GRACE`] is not
//! at rest: its first request may be on the way (the parent forked for it
//! just before, or, in an upgrade, at, the stop), so the stop waits until
//! that age, as the other designs' first-request wait does.

use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::blocking::conn::Ctx;
use crate::blocking::socket::Blocking;
use crate::blocking::{BlockingIo, BlockingIoWrapper, Deadline, IdleSet};

/// Set by the handler when the parent asks the children to finish.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_signal: libc::c_int) {
    // An atomic store is async-signal-safe.
    STOP.store(true, Ordering::Relaxed);
}

/// Serves `conn` and exits the process: status 0, or 101 if the
/// connection code panicked outside a handler (the parent counts it as a
/// crash). `close` are the parent's fds the child must not keep (the
/// listening socket, the signalfd); `parent` is the parent's pid, taken
/// before the fork.
pub(super) fn run(conn: OwnedFd, close: &[RawFd], parent: libc::pid_t, ctx: &Ctx) -> ! {
    // First of all: nothing may be traced under the parent's label, nor
    // with the parent's unwritten timeline events copied into this process.
    let fd = conn.as_raw_fd();
    trace_start(fd, parent);
    for &fd in close {
        // SAFETY: these fds were the parent's and are this process's copies;
        // the parent's `OwnedFd`s for them are never dropped in the child
        // (it leaves through `_exit`), so no one closes them twice.
        unsafe { libc::close(fd) };
    }
    let code = match setup_signals(parent) {
        Ok(()) => {
            let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let stream = TcpStream::from(conn);
                if stream.set_nonblocking(false).is_ok() {
                    let _ = stream.set_nodelay(true);
                    let grace = crate::driver::first_request_grace(&ctx.config);
                    let io = ChildIo {
                        inner: Blocking::new(stream),
                        idle: &ctx.idle,
                        young_until: Instant::now() + grace,
                    };
                    crate::blocking::tls::serve(ctx, io);
                }
            }));
            if served.is_ok() { 0 } else { 101 }
        }
        Err(_) => 1,
    };
    trace_end(code);
    // SAFETY: `_exit` ends the process without running the parent's exit
    // handlers or flushing its copies of stdio buffers (which would write
    // the parent's pending output twice). Nothing is left to clean up:
    // the kernel closes the socket.
    unsafe { libc::_exit(code) }
}

/// Labels this child's trace (`c<pid>` for its lines and its track;
/// `fork child <pid>` for its process on a timeline) and opens its
/// `connection` slice, or prints its first line.
fn trace_start(fd: RawFd, parent: libc::pid_t) {
    if !reactor::trace::active() {
        return;
    }
    let pid = std::process::id();
    reactor::trace::after_fork(&format!("c{pid}"), &format!("fork child {pid}"));
    if reactor::trace::chrome::on() {
        reactor::trace::chrome::begin("connection", format_args!("\"fd\":{fd}"));
    } else {
        reactor::trace!("child", "fd={fd} parent={parent}");
    }
}

/// Closes the `connection` slice and writes this child's timeline events
/// (each process writes its own: see `reactor::trace::before_exit`), or
/// prints its last line.
fn trace_end(code: i32) {
    if !reactor::trace::active() {
        return;
    }
    if reactor::trace::chrome::on() {
        reactor::trace::chrome::end(format_args!("\"exit\":{code}"));
        reactor::trace::before_exit();
    } else {
        reactor::trace!("child", "exit={code}");
    }
}

/// Handlers for SIGINT and SIGTERM (kept blocked: see the module doc),
/// SIGHUP and SIGUSR2 ignored (the parent takes them, to reopen the access
/// log and to upgrade; the child's waits unblock every signal, and one
/// sent to the whole process group must not end a connection), and SIGCHLD
/// unblocked again (the parent blocks it for its signalfd).
fn setup_signals(parent: libc::pid_t) -> io::Result<()> {
    for signal in [libc::SIGHUP, libc::SIGUSR2] {
        // SAFETY: SIG_IGN installs no handler code.
        if unsafe { libc::signal(signal, libc::SIG_IGN) } == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: an all-zero sigaction is valid (no flags, empty mask); the
    // handler and mask are set below.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: `sa_mask` is a valid sigset_t to initialise.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `action` is valid; the handler only stores an atomic.
        reactor::syscall!(unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) })?;
    }
    // If the parent dies without asking (SIGKILL), the child is told as
    // if it had asked; checked afterwards in case it died just before.
    // SAFETY: PR_SET_PDEATHSIG takes a signal number; no memory is passed.
    reactor::syscall!(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) })?;
    // Compared with the parent's own pid, not with 1: in a container the
    // parent may be pid 1 itself, and every child would start stopping.
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        STOP.store(true, Ordering::Relaxed);
    }
    let set = sigset(&[libc::SIGCHLD]);
    // SAFETY: `set` is an initialised sigset_t; the old mask is not asked for.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// A sigset holding `signals`.
pub(super) fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the zeroed set; sigaddset only
    // writes into it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// The child's socket: the shared [`Blocking`] one, whose waits also
/// notice the parent's `SIGTERM`.
#[derive(Debug)]
struct ChildIo<'a> {
    inner: Blocking,
    /// The connection's idle set: told when the stop request arrives, so
    /// that answers from then on say `Connection: close` and the idle wait
    /// ends (as a worker's `begin_shutdown` does under `threads`).
    idle: &'a IdleSet,
    /// Until then a stop request does not end a wait: the first request
    /// may still be on its way (see the module doc).
    young_until: Instant,
}

impl ChildIo<'_> {
    /// Passes a stop request on to the connection loop (once).
    fn stop(&self) {
        STOP.store(true, Ordering::Relaxed);
        if !self.idle.is_shutting_down() {
            self.idle.begin_shutdown();
        }
    }

    /// Waits for input with every signal unblocked; on a stop request
    /// (once the connection is no longer young), shuts the read side down
    /// so that the read that follows sees the end of the stream and the
    /// connection closes cleanly.
    fn wait_idle(&mut self, deadline: Deadline) -> io::Result<()> {
        let at = deadline.at(Instant::now);
        let fd = self.inner.fd();
        let open = sigset(&[]);
        loop {
            let now = Instant::now();
            let stopping = STOP.load(Ordering::Relaxed);
            if stopping {
                // From now on answers say `Connection: close`.
                self.stop();
                if now >= self.young_until {
                    let _ = self.inner.shutdown(Shutdown::Read);
                    return Ok(());
                }
            }
            if now >= at {
                return Err(io::ErrorKind::TimedOut.into());
            }
            // To the nanosecond: a timeout short of the deadline would
            // wake to find nothing due and wait again. A stop asked while
            // the connection is young is taken when it stops being so.
            let wake = if stopping {
                at.min(self.young_until)
            } else {
                at
            };
            let left = wake.saturating_duration_since(now);
            let ts = libc::timespec {
                tv_sec: left.as_secs() as libc::time_t,
                tv_nsec: left.subsec_nanos() as libc::c_long,
            };
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN | libc::POLLRDHUP,
                revents: 0,
            };
            // SAFETY: one valid pollfd, a valid timespec and sigset, all
            // alive for the call.
            match reactor::syscall!(unsafe { libc::ppoll(&mut pfd, 1, &ts, &open) }) {
                Ok(0) => continue, // a wake-up time has passed (checked above)
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Sleeps `d`, taking a stop request that arrives meanwhile (with
    /// `sigtimedwait`, the signals staying blocked) so that the answer
    /// after the sleep says `Connection: close`.
    fn sleep_watching(&self, d: Duration) {
        let end = Instant::now() + d;
        let stops = sigset(&[libc::SIGINT, libc::SIGTERM]);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let ts = libc::timespec {
                tv_sec: left.as_secs() as libc::time_t,
                tv_nsec: left.subsec_nanos() as libc::c_long,
            };
            // SAFETY: a valid sigset and timespec; no siginfo is asked for.
            let r = unsafe { libc::sigtimedwait(&stops, std::ptr::null_mut(), &ts) };
            if r > 0 {
                self.stop();
            }
        }
    }
}

// SAFETY: `read_uninit` is the inner `Blocking`'s, which keeps the
// contract; only the waits are this socket's, and they read nothing.
unsafe impl BlockingIoWrapper for ChildIo<'_> {
    type Inner = Blocking;

    #[inline]
    fn inner(&self) -> &Blocking {
        &self.inner
    }

    #[inline]
    fn inner_mut(&mut self) -> &mut Blocking {
        &mut self.inner
    }

    fn wait_readable(&mut self, deadline: Deadline) -> io::Result<()> {
        self.wait_idle(deadline)
    }

    fn sleep(&mut self, d: Duration) {
        self.sleep_watching(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocking::socket::tests::{quiet_socket, sleeps};

    #[test]
    fn the_idle_wait_reaches_its_deadline_in_one_sleep() {
        let (socket, _peer) = quiet_socket();
        let idle = IdleSet::default();
        let mut io = ChildIo {
            inner: Blocking::new(socket),
            idle: &idle,
            young_until: Instant::now(),
        };
        for micros in [1_900, 2_500, 100, 2_000] {
            let deadline = Deadline::After(Duration::from_micros(micros));
            let before = sleeps();
            let e = io.wait_idle(deadline).unwrap_err();
            let slept = sleeps() - before;
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
            assert_eq!(slept, 1, "{micros} µs away: {slept} sleeps");
        }
    }
}
