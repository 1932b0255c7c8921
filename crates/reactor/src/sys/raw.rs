//! The hot syscalls (read, send, epoll_wait) made directly.
//!
//! glibc's `read`, `send` and `epoll_wait` are pthread cancellation points:
//! each call switches asynchronous cancellation on and off around the
//! syscall, about 60 instructions per call that a Rust program, which never
//! uses `pthread_cancel`, pays for nothing. Even glibc's generic `syscall(2)`
//! shuffles every argument one register over and back. So on x86_64 and
//! aarch64 these wrappers execute the trap instruction themselves (see
//! [`raw::trap`](trap)); elsewhere they call `syscall(2)`. They keep the
//! contracts of the libc functions they replace, `-1` and `errno` on
//! failure included.

use libc::{c_int, c_void, size_t, ssize_t};

/// `read(2)` without the cancellation-point wrapper.
///
/// # Safety
/// As `libc::read`: `buf` valid for `count` writable bytes.
#[inline]
pub unsafe fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    // SAFETY: forwarded to the caller's contract.
    unsafe { trap::call(libc::SYS_read, [fd as usize, buf as usize, count, 0, 0, 0]) }
}

/// `send(2)` (as `sendto` with no address) without the wrapper.
///
/// # Safety
/// As `libc::send`: `buf` valid for `len` readable bytes.
#[inline]
pub unsafe fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    // SAFETY: forwarded to the caller's contract; a null address with
    // length 0 makes sendto behave as send.
    unsafe {
        trap::call(
            libc::SYS_sendto,
            [fd as usize, buf as usize, len, flags as usize, 0, 0],
        )
    }
}

/// `epoll_wait(2)` (as `epoll_pwait` with no signal mask, which every
/// architecture has) without the wrapper.
///
/// # Safety
/// As `libc::epoll_wait`: `events` valid for `maxevents` writes.
#[inline]
pub unsafe fn epoll_wait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    maxevents: c_int,
    timeout: c_int,
) -> c_int {
    // Sign-extended: the kernel reads the low 32 bits of an int argument.
    let args = [
        epfd as usize,
        events as usize,
        maxevents as usize,
        timeout as isize as usize,
        0, // no signal mask: epoll_pwait is then epoll_wait
        8, // sizeof(sigset_t) as the kernel counts it
    ];
    // SAFETY: forwarded to the caller's contract.
    unsafe { trap::call(libc::SYS_epoll_pwait, args) as c_int }
}

/// The system call itself.
///
/// Linux returns `-errno` in the result register for a failed call (a
/// value in `-4095..=-1`); the C convention these wrappers keep is `-1`
/// with `errno` set, so a failure stores the code where `errno` lives.
pub mod trap {
    use libc::c_long;

    /// Calls system call `nr` with six arguments (unused ones are
    /// ignored by the kernel) and returns its result the C way.
    ///
    /// # Safety
    /// The arguments must satisfy system call `nr`'s contract (valid
    /// pointers for what it reads and writes).
    #[inline(always)]
    pub unsafe fn call(nr: c_long, args: [usize; 6]) -> isize {
        // SAFETY: forwarded to the caller's contract.
        let ret = unsafe { raw_call(nr, args) };
        if (-4095..0).contains(&ret) {
            // SAFETY: `__errno_location` returns this thread's errno.
            unsafe { *libc::__errno_location() = -ret as i32 };
            return -1;
        }
        ret
    }

    /// x86_64: number in `rax`, arguments in `rdi rsi rdx r10 r8 r9`
    /// (`r10`, not `rcx`: the `syscall` instruction overwrites `rcx`
    /// with the return address and `r11` with the flags), result in
    /// `rax`.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn raw_call(nr: c_long, a: [usize; 6]) -> isize {
        let ret: isize;
        // SAFETY: the caller upholds the call's contract. No `nomem`:
        // the kernel reads and writes memory through the arguments, so
        // the compiler must not keep values in registers across it.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") nr as isize => ret,
                in("rdi") a[0],
                in("rsi") a[1],
                in("rdx") a[2],
                in("r10") a[3],
                in("r8") a[4],
                in("r9") a[5],
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    /// aarch64: number in `x8`, arguments in `x0`–`x5`, result in `x0`;
    /// `svc #0` traps into the kernel.
    #[cfg(target_arch = "aarch64")]
    #[inline(always)]
    unsafe fn raw_call(nr: c_long, a: [usize; 6]) -> isize {
        let ret: isize;
        // SAFETY: as on x86_64.
        unsafe {
            std::arch::asm!(
                "svc #0",
                in("x8") nr,
                inlateout("x0") a[0] as isize => ret,
                in("x1") a[1],
                in("x2") a[2],
                in("x3") a[3],
                in("x4") a[4],
                in("x5") a[5],
                options(nostack),
            );
        }
        ret
    }

    /// Elsewhere: glibc's generic `syscall(2)`, already the C way (so
    /// it is mapped back to the kernel's convention for `call`).
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    #[inline(always)]
    unsafe fn raw_call(nr: c_long, a: [usize; 6]) -> isize {
        // SAFETY: forwarded to the caller's contract.
        let ret = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) } as isize;
        if ret == -1 {
            -(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO) as isize)
        } else {
            ret
        }
    }
}
