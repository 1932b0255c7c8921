//! Reporting stack overflows: a SIGSEGV handler that recognises our guard
//! pages.
//!
//! When a coroutine runs off the bottom of its stack it touches the guard
//! page and the kernel sends SIGSEGV. Two problems stand between that and a
//! useful message:
//!
//! 1. **The handler needs a stack.** The signal arrives on a thread whose
//!    stack pointer is in the guard page: pushing the signal frame there would
//!    fault again and the kernel would kill the process silently. So each
//!    thread that runs coroutines gets an *alternate signal stack*
//!    (`sigaltstack`) and the handler is installed with `SA_ONSTACK`. Rust's
//!    standard library already gives its own threads one (for its own
//!    stack-overflow message); we add one only where none exists.
//! 2. **Knowing whose fault it is.** The handler may only do
//!    async-signal-safe things: no locks, no allocation. It reads two
//!    thread-locals that need neither (see `raw.rs`): the control block of
//!    the scheduled coroutine being run, and the head of the thread's list of
//!    live generators, linked through their control blocks. Each block holds
//!    its coroutine's id and its guard page's range; if the faulting address
//!    (`si_addr`) is inside one, the handler writes a message with
//!    `write(2)` and calls `abort()`.
//!
//! 3. **Overflows that fault in the kernel.** When a signal arrives for a
//!    handler installed without `SA_ONSTACK` while a coroutine is near the
//!    bottom of its stack, the kernel cannot write the signal frame: it then
//!    forces a SIGSEGV of its own, with `si_code == SI_KERNEL` and no fault
//!    address. The handler then looks at the interrupted stack pointer
//!    instead: within a signal frame's size of the guard page, on one of
//!    those coroutines' stacks, it is the same overflow, one signal frame
//!    early, and reported as such.
//!
//! Any other fault is not ours: the handler passes it on to the handler that
//! was installed before (Rust's own, which reports overflows of the thread's
//! main stack), or restores the default action and returns, so that the
//! faulting instruction runs again and the process dies of SIGSEGV as it
//! would have without us.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// The SIGSEGV disposition before ours, to pass foreign faults on to.
struct Previous(libc::sigaction);
// SAFETY: plain data (a function address, a mask, flags), only read.
unsafe impl Sync for Previous {}
// SAFETY: as above.
unsafe impl Send for Previous {}

static PREVIOUS: OnceLock<Previous> = OnceLock::new();
static INSTALL: Once = Once::new();
/// How close to the guard page (bytes) a stack pointer must be for a
/// kernel-forced SIGSEGV to count as an overflow: the largest signal frame
/// the kernel writes, plus a page of slack for the red zone and alignment.
/// Set once by `install`, read by the handler (an atomic load is
/// async-signal-safe).
static FRAME_MARGIN: AtomicUsize = AtomicUsize::new(0);

/// `getauxval` key for the kernel's signal frame size (Linux ≥ 5.14 on
/// x86_64; aarch64 has it too). Not in the libc crate for glibc targets.
const AT_MINSIGSTKSZ: libc::c_ulong = 51;
/// The frame size to assume when the kernel does not say (glibc's
/// `SIGSTKSZ`, larger than any frame without AVX-512 or AMX state).
const FALLBACK_FRAME: usize = 8192;

/// Size of the alternate signal stacks we create (formatting a message and
/// a `write` need far less; this leaves room for a chained handler).
const ALT_STACK_SIZE: usize = 64 * 1024;

thread_local! {
    static ALT_CHECKED: Cell<bool> = const { Cell::new(false) };
    static ALT_OWNED: AltStack = const { AltStack(Cell::new(std::ptr::null_mut())) };
}

/// An alternate signal stack we mapped for this thread; disabled and
/// unmapped when the thread exits.
struct AltStack(Cell<*mut libc::c_void>);

impl Drop for AltStack {
    fn drop(&mut self) {
        let base = self.0.get();
        if base.is_null() {
            return;
        }
        let off = libc::stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // SAFETY: disables this thread's alternate stack (ours) before the
        // memory goes; no signal handler runs on it now, since we are in
        // ordinary code on the thread's own stack.
        unsafe {
            libc::sigaltstack(&off, std::ptr::null_mut());
            libc::munmap(base, ALT_STACK_SIZE + crate::stack::page_size());
        }
    }
}

/// Installs the handler (once per process) and an alternate signal stack
/// (once per thread, if the thread has none). Cheap after the first call.
pub(crate) fn install() {
    if ALT_CHECKED.with(|c| c.replace(true)) {
        return;
    }
    ensure_alt_stack();
    INSTALL.call_once(|| {
        // SAFETY: getauxval only reads the auxiliary vector; 0 means absent.
        let frame = match unsafe { libc::getauxval(AT_MINSIGSTKSZ) } as usize {
            0 => FALLBACK_FRAME,
            n => n,
        };
        FRAME_MARGIN.store(frame + crate::stack::page_size(), Ordering::Relaxed);
        // SAFETY: all-zero is a valid sigaction to be filled in.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only queries the current one.
        unsafe { libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut old) };
        let _ = PREVIOUS.set(Previous(old));
        // SAFETY: as above.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = on_segv as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: sa_mask is a valid sigset_t to initialise; the handler is
        // an `extern "C"` function with the SA_SIGINFO signature.
        unsafe {
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(libc::SIGSEGV, &new, std::ptr::null_mut());
        }
    });
}

fn ensure_alt_stack() {
    // SAFETY: all-zero is a valid stack_t to be filled in.
    let mut cur: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: a null new stack only queries the current one.
    unsafe { libc::sigaltstack(std::ptr::null(), &mut cur) };
    if cur.ss_flags & libc::SS_DISABLE == 0 {
        return; // the thread has one (Rust's runtime made it, or the user)
    }
    let page = crate::stack::page_size();
    // SAFETY: a fresh anonymous mapping; no existing memory is affected.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            ALT_STACK_SIZE + page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return; // overflows will still kill the process, just less clearly
    }
    // SAFETY: the first page of the mapping we just made, as a guard for the
    // signal stack itself; the rest becomes the alternate stack.
    unsafe {
        libc::mprotect(base, page, libc::PROT_NONE);
        let alt = libc::stack_t {
            ss_sp: base.cast::<u8>().add(page).cast(),
            ss_flags: 0,
            ss_size: ALT_STACK_SIZE,
        };
        libc::sigaltstack(&alt, std::ptr::null_mut());
    }
    let _ = ALT_OWNED.try_with(|a| a.0.set(base));
}

/// The SIGSEGV handler. Runs on the alternate stack.
extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO handlers.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let mut msg = Buf::default();
    let overflow = if code == libc::SI_KERNEL {
        // Forced by the kernel (no fault address): most likely it could not
        // write a signal frame below the interrupted stack pointer.
        let sp = interrupted_sp(ctx);
        crate::raw::frame_overflow(sp, FRAME_MARGIN.load(Ordering::Relaxed)).inspect(|o| {
            let _ = write!(
                msg,
                "\ncoroutine {} overflowed its stack: the kernel found no room for a signal \
                 frame below sp {sp:#x}, {} bytes above the guard page",
                o.id,
                sp.saturating_sub(o.stack.0),
            );
        })
    } else {
        crate::raw::guard_hit(addr).inspect(|o| {
            let _ = write!(
                msg,
                "\ncoroutine {} overflowed its stack: fault at {addr:#x} in the guard page",
                o.id
            );
        })
    };
    if let Some(crate::raw::Overflow { guard, stack, .. }) = overflow {
        let _ = writeln!(
            msg,
            " [{:#x}, {:#x}) below its stack [{:#x}, {:#x}) ({} bytes). Give it a larger \
             stack (coroutine::Builder::stack_size). Aborting.",
            guard.0,
            guard.1,
            stack.0,
            stack.1,
            stack.1 - stack.0
        );
        // SAFETY: write(2) and abort(3) are async-signal-safe; the buffer is
        // a local of this frame on the alternate stack.
        unsafe {
            libc::write(2, msg.bytes.as_ptr().cast(), msg.len);
            libc::abort();
        }
    }
    pass_on(sig, info, ctx);
}

/// The stack pointer of the code the signal interrupted.
fn interrupted_sp(ctx: *mut libc::c_void) -> usize {
    let uc = ctx.cast::<libc::ucontext_t>();
    // SAFETY: for an SA_SIGINFO handler the kernel passes its ucontext_t as
    // the third argument, valid for the handler's duration.
    #[cfg(target_arch = "x86_64")]
    let sp = unsafe { (*uc).uc_mcontext.gregs[libc::REG_RSP as usize] } as usize;
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    let sp = unsafe { (*uc).uc_mcontext.sp } as usize;
    sp
}

/// Hands a fault that is not ours to the previous disposition.
fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = PREVIOUS.get().map(|p| p.0.sa_sigaction);
    match prev {
        Some(h) if h != libc::SIG_DFL && h != libc::SIG_IGN => {
            let flags = PREVIOUS.get().map_or(0, |p| p.0.sa_flags);
            if flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed with SA_SIGINFO,
                // so it has this signature; we pass the kernel's arguments.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(h) };
                f(sig, info, ctx);
            } else {
                // SAFETY: a plain handler takes only the signal number.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
                f(sig);
            }
        }
        _ => {
            // Default action: restore it and return; the instruction faults
            // again and the kernel terminates the process with SIGSEGV.
            // SAFETY: all-zero (SIG_DFL, empty mask, no flags) is valid.
            let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
            dfl.sa_sigaction = libc::SIG_DFL;
            // SAFETY: sigaction is async-signal-safe.
            unsafe { libc::sigaction(sig, &dfl, std::ptr::null_mut()) };
        }
    }
}

/// A fixed buffer that `write!` can format into without allocating.
struct Buf {
    bytes: [u8; 512],
    len: usize,
}

impl Default for Buf {
    fn default() -> Self {
        Buf {
            bytes: [0; 512],
            len: 0,
        }
    }
}

impl std::fmt::Write for Buf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}
