//! The only place in this crate that makes raw syscalls: the three io_uring
//! calls, `mmap`/`munmap` of the shared rings, and the few fd helpers the
//! driver needs. Each wrapper turns `-1`/`errno` into an [`io::Error`].
//!
//! Private to the crate: these calls take raw fds and hand the kernel
//! memory to use, and only the ring and the driver know which fds are
//! theirs and how long that memory lives. Outside code cannot reach them:
//!
//! ```compile_fail,E0603
//! proactor::sys::close(3);
//! ```

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use crate::abi::{GeteventsArg, Params};

/// `-1` becomes `errno` as an `io::Error`.
fn cvt(res: libc::c_long) -> io::Result<libc::c_long> {
    if res == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(res)
    }
}

/// `IORING_SETUP_NO_MMAP`: the rings live in memory the caller names in
/// `params`, which the kernel then writes.
const IORING_SETUP_NO_MMAP: u32 = 1 << 14;

/// `IORING_SETUP_ATTACH_WQ`: `params.wq_fd` names another ring's fd.
const IORING_SETUP_ATTACH_WQ: u32 = 1 << 5;

/// `io_uring_setup(entries, params)`: a new ring, as an owned fd.
///
/// ```compile_fail,E0603
/// let mut p = proactor::abi::Params::default();
/// let _ = proactor::sys::io_uring_setup(8, &mut p);
/// ```
///
/// # Panics
/// If `params` asks for `IORING_SETUP_NO_MMAP` or `IORING_SETUP_ATTACH_WQ`:
/// with them the kernel would use memory or an fd that `params` only names.
pub fn io_uring_setup(entries: u32, params: &mut Params) -> io::Result<OwnedFd> {
    assert_eq!(
        params.flags & (IORING_SETUP_NO_MMAP | IORING_SETUP_ATTACH_WQ),
        0,
        "io_uring_setup: NO_MMAP and ATTACH_WQ are not supported"
    );
    // SAFETY: `params` is a valid, exclusively borrowed io_uring_params for
    // the duration of the call; the kernel reads and writes only it.
    let fd = cvt(unsafe {
        libc::syscall(
            libc::SYS_io_uring_setup,
            entries as libc::c_long,
            params as *mut Params,
        )
    })?;
    // SAFETY: the kernel just created this fd (close-on-exec by default for
    // io_uring fds) and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `io_uring_enter(fd, to_submit, min_complete, flags, arg, sizeof arg)`.
///
/// With `arg` the call carries `IORING_ENTER_EXT_ARG` (the caller sets the
/// flag) and the timeout it points to. Returns the number of SQEs consumed.
///
/// ```compile_fail,E0603
/// let _ = proactor::sys::io_uring_enter(3, 1, 0, 0, None);
/// ```
pub fn io_uring_enter(
    fd: BorrowedFd<'_>,
    to_submit: u32,
    min_complete: u32,
    flags: u32,
    arg: Option<&GeteventsArg>,
) -> io::Result<u32> {
    let (ptr, size) = match arg {
        Some(a) => (
            a as *const GeteventsArg as *const libc::c_void,
            std::mem::size_of::<GeteventsArg>(),
        ),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: `arg` (if any) is a valid getevents_arg whose `ts` field is 0
    // or points to a timespec the caller keeps alive across this call; the
    // kernel only reads it. The SQEs it consumes were published by the ring
    // (see ring.rs) and point to memory the driver owns until completion.
    let n = cvt(unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            fd.as_raw_fd() as libc::c_long,
            to_submit as libc::c_long,
            min_complete as libc::c_long,
            flags as libc::c_long,
            ptr,
            size,
        )
    })?;
    Ok(n as u32)
}

/// `io_uring_register(fd, opcode, arg, nr_args)`.
///
/// # Safety
/// `arg` must point to what `opcode` expects (`nr_args` of them), valid for
/// the call; memory it registers must outlive the registration.
pub unsafe fn io_uring_register(
    fd: RawFd,
    opcode: u32,
    arg: *const libc::c_void,
    nr_args: u32,
) -> io::Result<i64> {
    // SAFETY: forwarded to the caller's contract.
    let r = cvt(unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            fd as libc::c_long,
            opcode as libc::c_long,
            arg,
            nr_args as libc::c_long,
        )
    })?;
    Ok(r as i64)
}

/// A memory mapping, unmapped on drop. Either one of the ring's shared
/// regions (mapped from the ring fd) or anonymous memory the kernel is told
/// about (a provided-buffer ring).
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mmap {
    /// Maps `len` bytes of the ring fd at `offset` (`IORING_OFF_*`), shared
    /// with the kernel and populated up front.
    pub fn ring(fd: BorrowedFd<'_>, len: usize, offset: i64) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping chosen by the kernel (addr = NULL); no
        // existing memory is affected. The result is checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset,
            )
        };
        Mmap::checked(p, len)
    }

    /// `len` bytes of zeroed, page-aligned anonymous memory.
    pub fn anonymous(len: usize) -> io::Result<Mmap> {
        // SAFETY: as in `ring`: a fresh private mapping, checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        Mmap::checked(p, len)
    }

    fn checked(p: *mut libc::c_void, len: usize) -> io::Result<Mmap> {
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: NonNull::new(p as *mut u8).expect("mmap returned NULL"),
            len,
        })
    }

    /// The start of the mapping.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// A pointer `offset` bytes in, as a `T`.
    ///
    /// # Panics
    /// If a `T` at `offset` would not fit inside the mapping.
    pub fn at<T>(&self, offset: u32) -> *mut T {
        let offset = offset as usize;
        assert!(offset + std::mem::size_of::<T>() <= self.len);
        // SAFETY: checked just above to stay inside the mapping.
        unsafe { self.ptr.as_ptr().add(offset) as *mut T }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: the mapping was created by `mmap` with this length and is
        // unmapped exactly once. Its owners (ring.rs, bufring.rs) drop it only
        // once the kernel can no longer write to it (see their Drop comments).
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// A non-blocking, close-on-exec eventfd.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; returns a new fd or -1.
    let fd =
        cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) } as libc::c_long)?;
    // SAFETY: just created; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Adds one to an eventfd's counter (what other threads call to wake a ring).
///
/// ```compile_fail,E0603
/// let _ = proactor::sys::eventfd_write(3);
/// ```
pub fn eventfd_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live local to an fd the caller holds open.
    let r = unsafe { libc::write(fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    match cvt(r as libc::c_long) {
        Ok(_) => Ok(()),
        // The counter is saturated: the ring will wake anyway.
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
        Err(e) => Err(e),
    }
}

/// `close(2)` of a raw fd the caller owns (for fds arriving in completions
/// that nobody will adopt).
///
/// ```compile_fail,E0603
/// proactor::sys::close(3);
/// ```
///
/// # Safety
/// `fd` is open, owned by the caller and by nothing else, and never used
/// again: closing an fd another owner holds would let that owner act on
/// whatever the kernel reuses the number for.
pub unsafe fn close(fd: RawFd) {
    // SAFETY: the caller's contract.
    unsafe { libc::close(fd) };
}

/// The page size.
pub fn page_size() -> usize {
    // SAFETY: no pointers.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}
