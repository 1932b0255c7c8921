//! The ring itself: `io_uring_setup`, the three shared mappings, pushing
//! SQEs, one `io_uring_enter` per turn, reaping CQEs.
//!
//! # The ordering contract
//!
//! The submission queue (SQ) and the completion queue (CQ) are single-producer
//! single-consumer rings in memory shared with the kernel. Each has a `head`
//! (advanced by its consumer) and a `tail` (advanced by its producer); the
//! free-running `u32` indices wrap, and `index & mask` picks the slot.
//!
//! | ring | producer | consumer | we load            | we store           |
//! |------|----------|----------|--------------------|--------------------|
//! | SQ   | us       | kernel   | `head`, *Acquire*  | `tail`, *Release*  |
//! | CQ   | kernel   | us       | `tail`, *Acquire*  | `head`, *Release*  |
//!
//! - **SQ tail, Release.** We write an SQE into its slot *then* publish the
//!   new tail. The release store orders the SQE's bytes before the tail, so
//!   a kernel that sees the tail sees the whole SQE.
//! - **SQ head, Acquire.** The kernel advances the head once it has copied an
//!   SQE. Loading it with acquire orders the kernel's reads of the slot before
//!   our next write to that slot, so a slot is never overwritten while the
//!   kernel still reads it.
//! - **CQ tail, Acquire.** The kernel writes a CQE then publishes the tail
//!   (its release). Our acquire load makes the CQE's bytes visible before we
//!   read them.
//! - **CQ head, Release.** We copy CQEs out *then* publish the new head. The
//!   release store orders our reads before the kernel may reuse the slots.
//!
//! The other side of each pair is the kernel's own `smp_load_acquire` /
//! `smp_store_release` on the same words. Forgetting one of ours is invisible
//! on x86 (its stores are already ordered) and a heisenbug on arm64.
//!
//! Without `IORING_SETUP_SQPOLL` the kernel reads the SQ only inside
//! `io_uring_enter`, so the store of the SQ tail just before the call is all
//! the publishing there is; the syscall is the doorbell.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::abi::*;
use crate::sys::{self, Mmap};

/// How the kernel runs completion work for this ring (the setup flags that
/// were accepted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskRun {
    /// `SINGLE_ISSUER | DEFER_TASKRUN` (kernel ≥ 6.1): completion work runs
    /// only when this thread enters with `GETEVENTS`, never as an
    /// interrupting task-work at an arbitrary syscall.
    Deferred,
    /// `COOP_TASKRUN | TASKRUN_FLAG` (kernel ≥ 5.19): the fallback; the
    /// kernel raises `IORING_SQ_TASKRUN` instead of interrupting us.
    Cooperative,
}

/// The SQ has no free slot: submit (`enter`) and push again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqFull;

/// A set-up io_uring instance: the fd and the three mappings.
///
/// `!Send` and `!Sync` (raw pointers): with `SINGLE_ISSUER` only the
/// creating thread may submit, and nothing here is synchronised.
#[derive(Debug)]
pub struct Ring {
    sq_head: *const AtomicU32,
    sq_tail: *const AtomicU32,
    sq_flags: *const AtomicU32,
    sq_mask: u32,
    sq_entries: u32,
    sqes: *mut Sqe,
    /// Our tail: SQEs written, not necessarily published yet.
    sqe_tail: u32,

    cq_head: *const AtomicU32,
    cq_tail: *const AtomicU32,
    cq_mask: u32,
    cq_entries: u32,
    cqes: *const Cqe,

    task_run: TaskRun,
    setup_flags: u32,
    refused_flags: Vec<(u32, i32)>,
    features: u32,

    /// Enters still to fail as the kernel's `-EAGAIN` does (nothing
    /// consumed, no wait, no CQE): [`Ring::stall_enters`].
    #[cfg(any(test, feature = "fault-injection"))]
    stalled_enters: u32,

    // Field order is drop order: unmap, then close the fd.
    _sqe_map: Mmap,
    _cq_map: Option<Mmap>,
    _sq_map: Mmap,
    fd: OwnedFd,
}

impl Ring {
    /// Sets up a ring with `entries` SQEs (a power of two) and a CQ four
    /// times that, trying `SINGLE_ISSUER | DEFER_TASKRUN` first, then
    /// `COOP_TASKRUN | TASKRUN_FLAG`.
    ///
    /// Errors are the kernel's: `ENOSYS` (no io_uring), `EPERM`
    /// (`kernel.io_uring_disabled`, or a seccomp filter), `ENOMEM` (memlock).
    /// A kernel without `IORING_FEAT_EXT_ARG` (< 5.11) is refused with
    /// `Unsupported`: the turn's timeout needs it.
    pub fn new(entries: u32) -> io::Result<Ring> {
        let base = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP | IORING_SETUP_SUBMIT_ALL;
        let tries = [
            (
                IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
                TaskRun::Deferred,
            ),
            (
                IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
                TaskRun::Cooperative,
            ),
        ];
        let mut refused = Vec::new();
        for (extra, task_run) in tries {
            let mut p = Params {
                flags: base | extra,
                // At least twice the SQ: multishot
                // operations post many CQEs per SQE, and with NODROP an
                // overflow costs a slow path, not a loss.
                cq_entries: entries * 4,
                ..Params::default()
            };
            match sys::io_uring_setup(entries, &mut p) {
                Ok(fd) => return Ring::map(fd, p, task_run, refused),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    refused.push((extra, libc::EINVAL));
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "io_uring_setup refused both DEFER_TASKRUN and COOP_TASKRUN (kernel < 5.19)",
        ))
    }

    fn map(
        fd: OwnedFd,
        p: Params,
        task_run: TaskRun,
        refused: Vec<(u32, i32)>,
    ) -> io::Result<Ring> {
        if p.features & IORING_FEAT_EXT_ARG == 0 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring lacks IORING_FEAT_EXT_ARG (kernel < 5.11)",
            ));
        }
        let raw = fd.as_fd();
        let sq_len = p.sq_off.array as usize + p.sq_entries as usize * 4;
        let cq_len = p.cq_off.cqes as usize + p.cq_entries as usize * std::mem::size_of::<Cqe>();
        // With SINGLE_MMAP (5.4+) one mapping holds both rings.
        let single = p.features & IORING_FEAT_SINGLE_MMAP != 0;
        let sq_map = Mmap::ring(
            raw,
            if single { sq_len.max(cq_len) } else { sq_len },
            IORING_OFF_SQ_RING,
        )?;
        let cq_map = if single {
            None
        } else {
            Some(Mmap::ring(raw, cq_len, IORING_OFF_CQ_RING)?)
        };
        let sqe_map = Mmap::ring(
            raw,
            p.sq_entries as usize * std::mem::size_of::<Sqe>(),
            IORING_OFF_SQES,
        )?;
        let cq = cq_map.as_ref().unwrap_or(&sq_map);

        // The SQ's indirection array: slot i always names SQE i, so the SQE
        // array itself is the queue. Written once, before any submission.
        let array: *mut u32 = sq_map.at(p.sq_off.array);
        for i in 0..p.sq_entries {
            // SAFETY: `array` has sq_entries u32s (sq_len above covers them);
            // the kernel reads it only during io_uring_enter.
            unsafe { array.add(i as usize).write(i) };
        }
        // SAFETY (for every `*const AtomicU32` below): the offsets come from
        // the kernel and lie inside the mappings (`at` checks the bounds);
        // each is a 4-aligned u32 that the kernel also accesses atomically,
        // and the mappings live as long as the Ring.
        let ring = Ring {
            sq_head: sq_map.at(p.sq_off.head),
            sq_tail: sq_map.at(p.sq_off.tail),
            sq_flags: sq_map.at(p.sq_off.flags),
            // SAFETY: as above; ring_mask is written once by the kernel at setup.
            sq_mask: unsafe { *sq_map.at::<u32>(p.sq_off.ring_mask) },
            sq_entries: p.sq_entries,
            sqes: sqe_map.ptr() as *mut Sqe,
            sqe_tail: 0,
            cq_head: cq.at(p.cq_off.head),
            cq_tail: cq.at(p.cq_off.tail),
            // SAFETY: as above.
            cq_mask: unsafe { *cq.at::<u32>(p.cq_off.ring_mask) },
            cq_entries: p.cq_entries,
            cqes: cq.at::<Cqe>(p.cq_off.cqes) as *const Cqe,
            task_run,
            setup_flags: p.flags,
            refused_flags: refused,
            features: p.features,
            #[cfg(any(test, feature = "fault-injection"))]
            stalled_enters: 0,
            _sqe_map: sqe_map,
            _cq_map: cq_map,
            _sq_map: sq_map,
            fd,
        };
        Ok(ring)
    }

    fn sq_head(&self) -> u32 {
        // SAFETY: see `map`: a live, aligned, shared u32.
        unsafe { (*self.sq_head).load(Ordering::Acquire) }
    }

    /// Queues one SQE; `Err` when the SQ is full (the caller then submits
    /// and retries, see [`Ring::enter`]).
    ///
    /// # Safety
    /// The kernel will read and write whatever the SQE points to (`addr`,
    /// `off`/`addr2`, `addr3`, the buffer group) at any time until the
    /// operation's last CQE: that memory must stay valid and unused by
    /// anyone else until then, and the fd must be one the caller owns.
    #[inline]
    pub unsafe fn push(&mut self, sqe: &Sqe) -> Result<(), SqFull> {
        // Acquire: the kernel has finished reading every slot before `head`.
        if self.sqe_tail.wrapping_sub(self.sq_head()) >= self.sq_entries {
            return Err(SqFull);
        }
        let idx = (self.sqe_tail & self.sq_mask) as usize;
        // SAFETY: idx < sq_entries, inside the SQE mapping; the slot is free
        // (the kernel consumed it: head is past it, loaded with Acquire), and
        // the kernel reads it only after the Release store of the tail.
        unsafe { self.sqes.add(idx).write(*sqe) };
        self.sqe_tail = self.sqe_tail.wrapping_add(1);
        Ok(())
    }

    /// SQEs pushed and not yet consumed by the kernel.
    pub fn pending(&self) -> u32 {
        self.sqe_tail.wrapping_sub(self.sq_head())
    }

    /// One `io_uring_enter`: publishes and submits every queued SQE, runs
    /// deferred completion work, and waits until `min_complete` CQEs are in
    /// the CQ or `timeout` passes (`None`: no limit). `EINTR`, `ETIME` and
    /// `EBUSY` (CQ overflow backlog) are normal ends of a wait and return
    /// `Ok`. Returns the number of SQEs the kernel consumed.
    pub fn enter(&mut self, min_complete: u32, timeout: Option<Duration>) -> io::Result<u32> {
        #[cfg(any(test, feature = "fault-injection"))]
        if self.stalled_enters > 0 {
            self.stalled_enters -= 1;
            return Ok(0);
        }
        // Release: every SQE written above is visible before the new tail.
        // SAFETY: see `map`.
        unsafe { (*self.sq_tail).store(self.sqe_tail, Ordering::Release) };
        let to_submit = self.pending();
        let ts = timeout.map(|d| Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: d.subsec_nanos() as i64,
        });
        let arg = GeteventsArg {
            sigmask: 0,
            sigmask_sz: (libc::SIGRTMAX() as u32).div_ceil(8).max(8),
            min_wait_usec: 0,
            ts: ts.as_ref().map_or(0, |t| t as *const Timespec as u64),
        };
        let flags = IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG;
        match sys::io_uring_enter(self.fd.as_fd(), to_submit, min_complete, flags, Some(&arg)) {
            Ok(n) => Ok(n),
            Err(e) => match e.raw_os_error() {
                Some(libc::EINTR | libc::ETIME | libc::EBUSY | libc::EAGAIN) => Ok(0),
                _ => Err(e),
            },
        }
    }

    /// Makes the next `n` calls of [`Ring::enter`] return `Ok(0)` at once,
    /// without calling the kernel: what an enter whose first request the
    /// kernel could not allocate (`-EAGAIN`) looks like. For tests of the
    /// full-SQ paths (the `fault-injection` feature outside this crate).
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn stall_enters(&mut self, n: u32) {
        self.stalled_enters = n;
    }

    /// Enters [`Ring::stall_enters`] has still to stall.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn stalled_enters(&self) -> u32 {
        self.stalled_enters
    }

    /// Moves every CQE now in the CQ into `out` (appending) and frees their
    /// slots. Returns how many.
    #[inline]
    pub fn reap(&mut self, out: &mut Vec<Cqe>) -> usize {
        // SAFETY: see `map` (a live, aligned, shared u32). We are the only
        // writer of the CQ head, so a relaxed load reads our own last store.
        let head = unsafe { (*self.cq_head).load(Ordering::Relaxed) };
        // Acquire: the kernel's writes of these CQEs happened before its
        // release store of the tail.
        // SAFETY: see `map`.
        let tail = unsafe { (*self.cq_tail).load(Ordering::Acquire) };
        let n = tail.wrapping_sub(head);
        out.reserve(n as usize);
        for i in 0..n {
            let idx = (head.wrapping_add(i) & self.cq_mask) as usize;
            // SAFETY: idx < cq_entries, inside the CQ mapping; the entry is
            // complete (Acquire above) and we read it before releasing it.
            out.push(unsafe { self.cqes.add(idx).read() });
        }
        // Release: our reads of the slots happen before the kernel may
        // overwrite them.
        // SAFETY: see `map`.
        unsafe { (*self.cq_head).store(tail, Ordering::Release) };
        n as usize
    }

    /// `IORING_SQ_CQ_OVERFLOW` is set: completions wait in the kernel's
    /// overflow list (kept thanks to `FEAT_NODROP`) for the next enter.
    pub fn cq_overflowed(&self) -> bool {
        // SAFETY: see `map`.
        unsafe { (*self.sq_flags).load(Ordering::Relaxed) & IORING_SQ_CQ_OVERFLOW != 0 }
    }

    /// The ring's fd (for `io_uring_register`).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// How completion work runs (which setup flags the kernel accepted).
    pub fn task_run(&self) -> TaskRun {
        self.task_run
    }

    /// The `IORING_SETUP_*` flags in effect.
    pub fn setup_flags(&self) -> u32 {
        self.setup_flags
    }

    /// Flag sets the kernel refused before one was accepted, with the errno.
    pub fn refused_flags(&self) -> &[(u32, i32)] {
        &self.refused_flags
    }

    /// `io_uring_params.features` as the kernel reported them.
    pub fn features(&self) -> u32 {
        self.features
    }

    /// The names of the feature bits set in [`Ring::features`].
    pub fn feature_names(&self) -> Vec<&'static str> {
        FEATURE_NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.features & (1 << i) != 0)
            .map(|(_, n)| *n)
            .collect()
    }

    /// SQ and CQ sizes.
    pub fn sizes(&self) -> (u32, u32) {
        (self.sq_entries, self.cq_entries)
    }

    /// The opcodes this kernel supports (`IORING_REGISTER_PROBE`).
    pub fn probe(&self) -> io::Result<Vec<u8>> {
        let mut probe = Probe {
            last_op: 0,
            ops_len: 0,
            resv: 0,
            resv2: [0; 3],
            ops: [ProbeOp::default(); 256],
        };
        // SAFETY: `probe` has room for 256 io_uring_probe_op entries, the
        // count passed; the kernel writes only inside it during the call.
        unsafe {
            sys::io_uring_register(
                self.fd(),
                IORING_REGISTER_PROBE,
                &mut probe as *mut Probe as *const libc::c_void,
                256,
            )?
        };
        Ok(probe.ops[..probe.ops_len as usize]
            .iter()
            .filter(|o| o.flags & IO_URING_OP_SUPPORTED != 0)
            .map(|o| o.op)
            .collect())
    }
}

impl AsFd for Ring {
    /// The ring's fd, borrowed (for `io_uring_register`, e.g.
    /// [`crate::BufRing::unregister`]).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nop_round_trip_and_timeout() {
        let mut ring = Ring::new(8).expect("io_uring_setup (io_uring must work here)");
        let (sq, cq) = ring.sizes();
        assert!(cq >= 2 * sq, "CQ {cq} < 2 × SQ {sq}");
        for i in 0..3u64 {
            let sqe = Sqe {
                opcode: IORING_OP_NOP,
                user_data: 100 + i,
                ..Sqe::default()
            };
            // SAFETY: a NOP points to nothing.
            unsafe { ring.push(&sqe) }.unwrap();
        }
        assert_eq!(ring.pending(), 3);
        assert_eq!(ring.enter(3, None).unwrap(), 3);
        let mut out = Vec::new();
        assert_eq!(ring.reap(&mut out), 3);
        let ids: Vec<u64> = out.iter().map(|c| c.user_data).collect();
        assert_eq!(ids, [100, 101, 102]);
        // An empty wait ends at its timeout (ETIME is Ok).
        let t = std::time::Instant::now();
        ring.enter(1, Some(Duration::from_millis(20))).unwrap();
        assert!(t.elapsed() >= Duration::from_millis(19));
        assert_eq!(ring.reap(&mut out), 0);
    }

    #[test]
    fn full_sq_gives_the_sqe_back() {
        let mut ring = Ring::new(4).unwrap();
        let (sq, _) = ring.sizes();
        let sqe = Sqe {
            opcode: IORING_OP_NOP,
            ..Sqe::default()
        };
        // A NOP points to nothing, so pushing it is always sound.
        let push = |ring: &mut Ring| {
            // SAFETY: a NOP points to no memory.
            unsafe { ring.push(&sqe) }
        };
        for _ in 0..sq {
            push(&mut ring).unwrap();
        }
        assert!(push(&mut ring).is_err());
        ring.enter(0, None).unwrap();
        assert_eq!(ring.pending(), 0);
        push(&mut ring).unwrap();
    }

    #[test]
    fn prints_kernel_features() {
        let ring = Ring::new(8).unwrap();
        let ops = ring.probe().unwrap();
        eprintln!(
            "task_run={:?} setup_flags={:#x} refused={:?} features={:#x} {:?} ops={}",
            ring.task_run(),
            ring.setup_flags(),
            ring.refused_flags(),
            ring.features(),
            ring.feature_names(),
            ops.len()
        );
        for op in [
            IORING_OP_ACCEPT,
            IORING_OP_RECV,
            IORING_OP_SEND,
            IORING_OP_ASYNC_CANCEL,
            IORING_OP_CLOSE,
            IORING_OP_SHUTDOWN,
            IORING_OP_TIMEOUT,
        ] {
            assert!(ops.contains(&op), "kernel lacks opcode {op}");
        }
    }
}
