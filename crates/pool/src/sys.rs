//! The scheduling knobs a pool thread sets on itself (Linux): its niceness
//! or scheduling class, and its CPU affinity.
//!
//! Affinity needs care because a thread inherits its creator's. Pool
//! threads start lazily, from whichever thread submits work; if that is an
//! event loop pinned to one CPU, every pool thread it starts would be pinned
//! there too, and "4 pool threads" would share one core with the loop they
//! were meant to relieve. So the pool records the affinity of the thread
//! that *built* it and gives each new thread that one.

use std::io;
use std::mem::MaybeUninit;

/// A CPU affinity mask.
#[derive(Clone, Copy)]
pub(crate) struct CpuSet(libc::cpu_set_t);

impl std::fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: CPU_COUNT only reads the set.
        let n = unsafe { libc::CPU_COUNT(&self.0) };
        write!(f, "CpuSet({n} cpus)")
    }
}

/// The calling thread's affinity.
pub(crate) fn current_affinity() -> io::Result<CpuSet> {
    let mut set = MaybeUninit::<libc::cpu_set_t>::zeroed();
    // SAFETY: `set` is a writable cpu_set_t of the size passed; pid 0 means
    // the calling thread.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), set.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: sched_getaffinity succeeded and filled it (zeroed anyway).
    Ok(CpuSet(unsafe { set.assume_init() }))
}

/// Gives the calling thread `set`.
pub(crate) fn set_affinity(set: &CpuSet) -> io::Result<()> {
    // SAFETY: `set.0` is a valid cpu_set_t of the size passed; pid 0 means
    // the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set.0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the calling thread's nice value (on Linux niceness is per thread:
/// `PRIO_PROCESS` with a thread id). Raising it needs no privilege.
pub(crate) fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    // SAFETY: plain integer arguments; an invalid value is EINVAL/EACCES.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Moves the calling thread to the `SCHED_IDLE` class: it runs on CPU time
/// no normal thread wants, and a waking normal thread preempts it at once.
/// Entering it needs no privilege.
pub(crate) fn set_sched_idle() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for the call; pid 0 means the
    // calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_round_trips_and_nice_can_be_raised() {
        let set = current_affinity().unwrap();
        set_affinity(&set).unwrap();
        std::thread::spawn(|| {
            set_nice(5).unwrap();
            // SAFETY: plain integer arguments.
            let now =
                unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
            assert!(now >= 5, "nice is now {now}");
            set_sched_idle().unwrap();
            // SAFETY: no arguments but the calling thread (0).
            assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_IDLE);
        })
        .join()
        .unwrap();
    }
}
