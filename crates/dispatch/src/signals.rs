//! Opt-in SIGINT/SIGTERM handling through a self-pipe (an eventfd).
//!
//! Why not `signalfd`: it only works if the signals are blocked in *every*
//! thread, and a library cannot block them in threads it did not create (the
//! main thread, a test harness's threads). An unblocked thread would take the
//! default action and kill the process. A `sigaction` handler works whatever
//! the masks are; it does the one async-signal-safe thing needed, `write`
//! one to an eventfd, and the acceptor (or control) thread, which polls that
//! eventfd, does the real work outside signal context.
//!
//! One server at a time may own the signals. The eventfd is created once and
//! never closed, so a handler running late on another thread can never write
//! into a recycled fd number. After the first signal the previous handlers
//! are restored, so a second Ctrl-C falls through to the default action and
//! kills a shutdown that hangs.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::sys::syscall;

use crate::sys;

/// The signals that ask for a graceful shutdown.
const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// The fd the handler writes to; read with a lock-free atomic load, which is
/// async-signal-safe.
static HANDLER_FD: AtomicI32 = AtomicI32::new(-1);
/// Set while some server owns the signals.
static OWNED: AtomicBool = AtomicBool::new(false);
/// The process-lifetime eventfd behind `HANDLER_FD`.
static EVENTFD: OnceLock<OwnedFd> = OnceLock::new();

extern "C" fn on_signal(_signal: libc::c_int) {
    // SAFETY: __errno_location returns this thread's errno slot; saving and
    // restoring it keeps the interrupted code's errno intact.
    let saved = unsafe { *libc::__errno_location() };
    let fd = HANDLER_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let one = 1u64;
        // SAFETY: write(2) is async-signal-safe; `one` is a live 8-byte value.
        // A failure (full counter) already means a pending wake.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// Ownership of SIGINT/SIGTERM; dropping it restores the previous handlers.
pub(crate) struct SignalGuard {
    fd: BorrowedFd<'static>,
    previous: Option<[libc::sigaction; 2]>,
}

impl std::fmt::Debug for SignalGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignalGuard")
            .field("fd", &self.fd)
            .field("installed", &self.previous.is_some())
            .finish()
    }
}

/// Installs the handlers. Fails if another server already owns the signals.
pub(crate) fn install() -> io::Result<SignalGuard> {
    if OWNED
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "another dispatch::Server already handles SIGINT/SIGTERM",
        ));
    }
    match install_owned() {
        Ok(guard) => Ok(guard),
        Err(e) => {
            OWNED.store(false, Ordering::SeqCst);
            Err(e)
        }
    }
}

fn install_owned() -> io::Result<SignalGuard> {
    // Borrowed for 'static: the eventfd is never closed.
    let fd = match EVENTFD.get() {
        Some(fd) => fd.as_fd(),
        None => {
            let new = reactor::sys::eventfd()?;
            EVENTFD.get_or_init(|| new).as_fd()
        }
    };
    // A signal that reached a previous server must not stop this one.
    sys::eventfd_drain(fd.as_raw_fd())?;
    HANDLER_FD.store(fd.as_raw_fd(), Ordering::SeqCst);

    // SAFETY: an all-zero sigaction is a valid starting point (no flags,
    // SIG_DFL); the fields that matter are set below.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SA_RESTART: blocking calls elsewhere in the program resume instead of
    // failing with EINTR because of us. SA_ONSTACK: the handler's frame goes
    // on the thread's alternate signal stack (Rust's threads have one, and
    // the coroutine crate gives one to every thread that runs coroutines),
    // not on whatever stack was interrupted: a coroutine's may have less
    // room left than a signal frame takes, and then the kernel kills the
    // process with SIGSEGV instead of delivering the signal.
    action.sa_flags = libc::SA_RESTART | libc::SA_ONSTACK;
    // SAFETY: sa_mask is a valid sigset_t to initialise.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: all-zero sigactions, to be filled in by the kernel.
    let mut previous: [libc::sigaction; 2] = unsafe { std::mem::zeroed() };
    for (i, &signal) in SIGNALS.iter().enumerate() {
        // SAFETY: `action` is a valid handler description; `previous[i]` is
        // writable; the handler only does async-signal-safe work.
        if let Err(e) = syscall!(unsafe { libc::sigaction(signal, &action, &mut previous[i]) }) {
            restore(&previous[..i]);
            return Err(e);
        }
    }
    Ok(SignalGuard {
        fd,
        previous: Some(previous),
    })
}

fn restore(previous: &[libc::sigaction]) {
    for (signal, old) in SIGNALS.iter().zip(previous) {
        // SAFETY: `old` is what the kernel gave back for this signal.
        let _ = syscall!(unsafe { libc::sigaction(*signal, old, std::ptr::null_mut()) });
    }
}

impl SignalGuard {
    /// The eventfd that becomes readable when a signal arrives.
    pub(crate) fn fd(&self) -> BorrowedFd<'static> {
        self.fd
    }

    /// Puts the previous handlers back (once).
    pub(crate) fn restore(&mut self) {
        if let Some(previous) = self.previous.take() {
            restore(&previous);
        }
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        self.restore();
        OWNED.store(false, Ordering::SeqCst);
    }
}
