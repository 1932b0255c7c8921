//! The few syscalls dispatch needs beyond [`reactor::sys`], in the same style:
//! `-1` becomes an [`io::Error`] through a `syscall!` macro that wraps the
//! call expression (so the `unsafe` block and its `// SAFETY:` comment stay at
//! the call site), and every new fd is close-on-exec and comes back as an
//! [`OwnedFd`].
//!
//! The public functions are process-level knobs a server (or a test) wants
//! next to the connection machinery: the file-descriptor limit, CPU pinning,
//! the CPU time spent, the number of open fds.

use std::io;
use std::mem;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// `syscall!(unsafe { libc::f(..) })`: the C convention (`-1` and `errno`)
/// becomes an `io::Result` carrying the return value. It mirrors
/// `reactor::syscall!`, kept local so that this crate does not depend on the
/// shape of another crate's macro.
macro_rules! syscall {
    ($call:expr) => {
        $crate::sys::cvt($call)
    };
}
pub(crate) use syscall;

/// `-1` becomes the thread's `errno` as an `io::Error`; anything else is `Ok`.
#[inline]
pub(crate) fn cvt<T: Copy + PartialEq + From<i8>>(res: T) -> io::Result<T> {
    if res == T::from(-1) {
        Err(io::Error::last_os_error())
    } else {
        Ok(res)
    }
}

/// Adds one to an eventfd's counter, waking whoever polls it.
///
/// A full counter (`EAGAIN`, after 2^64-2 unread wakes) already means "a wake
/// is pending", so it counts as success.
pub(crate) fn eventfd_wake(fd: RawFd) -> io::Result<()> {
    let one = 1u64.to_ne_bytes();
    // SAFETY: the kernel reads 8 bytes from a live local; the fd is a number
    // the kernel checks (crate-private: callers pass eventfds they hold).
    match syscall!(unsafe { libc::write(fd, one.as_ptr().cast(), one.len()) }) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
        Err(e) => Err(e),
    }
}

/// Reads (and so resets) an eventfd's counter; `0` if nothing was pending.
pub(crate) fn eventfd_drain(fd: RawFd) -> io::Result<u64> {
    let mut buf = [0u8; 8];
    // SAFETY: the kernel writes at most 8 bytes into a live local; the fd is
    // a number the kernel checks (crate-private, as above).
    match syscall!(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) }) {
        Ok(8) => Ok(u64::from_ne_bytes(buf)),
        Ok(_) => Ok(0),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
        Err(e) => Err(e),
    }
}

/// Sets a pipe's capacity (`F_SETPIPE_SZ`); the kernel rounds up to a power of
/// two pages and returns the size it chose.
pub(crate) fn set_pipe_size(fd: RawFd, bytes: usize) -> io::Result<usize> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: F_SETPIPE_SZ takes an int argument; no memory is passed.
    let size = syscall!(unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, bytes) })?;
    Ok(size as usize)
}

/// Opens `/dev/null`: the "reserved fd" kept aside so that `EMFILE` can be
/// answered by closing a connection instead of spinning on it.
pub(crate) fn open_reserve() -> io::Result<OwnedFd> {
    // SAFETY: the path is a NUL-terminated literal; no other pointers.
    let fd =
        syscall!(unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    // SAFETY: open succeeded, so the fd is new and ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A non-blocking, close-on-exec, disarmed monotonic timerfd.
pub(crate) fn timerfd() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; returns a new fd or -1.
    let fd = syscall!(unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    })?;
    // SAFETY: the fd was just created and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms a timerfd to fire once, `after` from now.
pub(crate) fn timerfd_arm(fd: RawFd, after: Duration) -> io::Result<()> {
    // A zero it_value would disarm the timer instead of firing at once.
    let after = after.max(Duration::from_nanos(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: after.as_secs() as libc::time_t,
            tv_nsec: after.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: `spec` is a valid itimerspec for the call; the old value is not asked for.
    syscall!(unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) })?;
    Ok(())
}

/// The CPUs this thread may run on (`sched_getaffinity`), in increasing order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    // SAFETY: `set` is writable and its size is passed along.
    syscall!(unsafe { libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) })?;
    let max = 8 * mem::size_of::<libc::cpu_set_t>();
    // SAFETY: every index is below the set's capacity in bits.
    Ok((0..max)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Pins the calling thread to one CPU (`sched_setaffinity`).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    let max = 8 * mem::size_of::<libc::cpu_set_t>();
    if cpu >= max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cpu index beyond cpu_set_t",
        ));
    }
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    // SAFETY: `cpu` was checked to be below the set's capacity.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 means "this thread".
    syscall!(unsafe { libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set) })?;
    Ok(())
}

/// The process's `RLIMIT_NOFILE` as `(soft, hard)`.
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a writable rlimit.
    syscall!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Sets the soft `RLIMIT_NOFILE` (the hard limit is left alone). Lowering it
/// is how tests provoke `EMFILE`; raising it up to the hard limit needs no
/// privilege.
pub fn set_nofile_limit(soft: u64) -> io::Result<()> {
    let (_, hard) = nofile_limit()?;
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `lim` is a valid rlimit for the call.
    syscall!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    Ok(())
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns it. Servers
/// call this at start-up: the default soft limit (often 1024) is far below
/// what a connection-heavy process needs.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let (soft, hard) = nofile_limit()?;
    if soft < hard {
        set_nofile_limit(hard)?;
    }
    Ok(hard)
}

/// User plus system CPU time consumed by the whole process so far
/// (`getrusage(RUSAGE_SELF)`).
pub fn process_cpu_time() -> io::Result<Duration> {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { mem::zeroed() };
    // SAFETY: `usage` is a writable rusage.
    syscall!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) })?;
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    Ok(tv(usage.ru_utime) + tv(usage.ru_stime))
}

/// Number of fds the process has open, from `/proc/self/fd` (not counting
/// the one used to list it).
pub fn open_fd_count() -> io::Result<usize> {
    let n = std::fs::read_dir("/proc/self/fd")?.count();
    Ok(n.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn eventfd_wake_then_drain() {
        let fd = reactor::sys::eventfd().unwrap();
        assert_eq!(eventfd_drain(fd.as_raw_fd()).unwrap(), 0);
        eventfd_wake(fd.as_raw_fd()).unwrap();
        eventfd_wake(fd.as_raw_fd()).unwrap();
        assert_eq!(eventfd_drain(fd.as_raw_fd()).unwrap(), 2);
        assert_eq!(eventfd_drain(fd.as_raw_fd()).unwrap(), 0);
    }

    #[test]
    fn pipe_size_can_be_shrunk_to_a_page() {
        let (r, _w) = reactor::sys::pipe().unwrap();
        let size = set_pipe_size(r.as_raw_fd(), 4096).unwrap();
        assert_eq!(size, 4096);
    }

    #[test]
    fn timerfd_fires_once() {
        let t = timerfd().unwrap();
        assert_eq!(eventfd_drain(t.as_raw_fd()).unwrap(), 0);
        timerfd_arm(t.as_raw_fd(), Duration::from_millis(1)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // A timerfd reads like an eventfd: an 8-byte expiry count.
        assert_eq!(eventfd_drain(t.as_raw_fd()).unwrap(), 1);
        assert_eq!(eventfd_drain(t.as_raw_fd()).unwrap(), 0);
    }

    #[test]
    fn pinning_restricts_the_thread() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        let last = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(last).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![last]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn limits_and_usage_are_readable() {
        let (soft, hard) = nofile_limit().unwrap();
        assert!(soft <= hard);
        assert!(open_fd_count().unwrap() >= 3);
        assert!(process_cpu_time().is_ok());
        assert!(open_reserve().is_ok());
    }
}
