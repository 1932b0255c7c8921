//! The x86_64 context switch (System V ABI: Linux, the BSDs, macOS).
//!
//! What the ABI makes callee-saved, and so what a switch must keep:
//!
//! | what            | why                                                    |
//! | --------------- | ------------------------------------------------------ |
//! | `rbx`, `rbp`, `r12`–`r15` | the general-purpose callee-saved registers    |
//! | `rsp`           | the stack pointer: *is* the context, stored in memory  |
//! | MXCSR control bits | SSE rounding mode, flush-to-zero, exception masks   |
//! | x87 control word   | x87 precision, rounding, exception masks            |
//!
//! Everything else (`rax`, `rcx`, `rdx`, `rsi`, `rdi`, `r8`–`r11`, all of
//! `xmm0`–`xmm15`, the flags, the MXCSR *status* bits, the x87 status word)
//! is caller-saved: the compiler has already put whatever it needs from them
//! somewhere safe before calling [`switch`], because it would have to before
//! any call. That is why a hand-written switch is so short.
//!
//! ## The frame `switch` leaves on a suspended stack
//!
//! ```text
//!   higher addresses
//!   ┌──────────────────────┐
//!   │ ... caller's frames  │
//!   ├──────────────────────┤
//!   │ return address       │ sp + 56   pushed by `call switch`
//!   │ rbp                  │ sp + 48
//!   │ rbx                  │ sp + 40
//!   │ r12                  │ sp + 32
//!   │ r13                  │ sp + 24
//!   │ r14                  │ sp + 16
//!   │ r15                  │ sp + 8
//!   │ x87 CW │ MXCSR       │ sp + 0    (bytes 4-5 │ bytes 0-3)
//!   └──────────────────────┘ ◀── saved sp (what `*save` receives)
//!   lower addresses
//! ```
//!
//! [`init_frame`] forges the same eight words for a coroutine that has never
//! run: `r12` holds the entry function, `rbx` its argument, `rbp` zero (the
//! end of the frame-pointer chain, for debuggers and profilers), and the
//! return address is [`trampoline`].

use std::arch::naked_asm;

use super::Entry;

/// Default MXCSR: all exceptions masked, round to nearest, no flush-to-zero
/// (the value the ABI specifies at process start).
const MXCSR_DEFAULT: u64 = 0x1F80;
/// Default x87 control word: all exceptions masked, 64-bit precision, round
/// to nearest.
const X87_CW_DEFAULT: u64 = 0x037F;

/// Saves the current context on the current stack, stores the stack pointer
/// in `*save`, and resumes the context whose stack pointer is `to`.
///
/// From the caller's point of view it is an ordinary function that returns
/// when somebody switches back to the saved context.
///
/// # Safety
/// `save` must be valid for a pointer-sized write. `to` must be a stack
/// pointer produced by [`init_frame`] or stored by an earlier `switch`, whose
/// context has not been resumed since, on a stack that is still mapped.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn switch(save: *mut *mut u8, to: *mut u8) {
    naked_asm!(
        // On entry: rdi = save, rsi = to, [rsp] = our return address.
        // --- save the outgoing context on its own stack ---
        "push rbp",         // callee-saved: frame pointer
        "push rbx",         // callee-saved
        "push r12",         // callee-saved
        "push r13",         // callee-saved
        "push r14",         // callee-saved
        "push r15",         // callee-saved
        "sub rsp, 8",       // one slot for the floating-point control state
        "stmxcsr [rsp]",    // MXCSR (4 bytes) into bytes 0-3 of the slot
        "fnstcw [rsp + 4]", // x87 control word (2 bytes) into bytes 4-5
        "mov [rdi], rsp",   // publish the outgoing stack pointer: *save = rsp
        // --- from here on we run on the incoming stack ---
        "mov rsp, rsi",    // the switch itself: one register load
        "ldmxcsr [rsp]",   // restore the incoming MXCSR
        "fldcw [rsp + 4]", // restore the incoming x87 control word
        "add rsp, 8",      // drop the floating-point slot
        "pop r15",         // restore callee-saved registers, in reverse order
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret", // pop the incoming return address and jump to it
    )
}

/// Where a new coroutine's first `switch` "returns" to: calls `entry(arg)`
/// with the two values [`init_frame`] left in `r12` and `rbx`.
///
/// The CFI directives tell unwinders (panics, backtraces, debuggers) that
/// this is the outermost frame of the coroutine's stack: the return address
/// is undefined, so a backtrace ends here instead of wandering into memory
/// above the stack top.
///
/// # Safety
/// Never called directly: only reached by `ret` from [`switch`] on a frame
/// built by [`init_frame`].
#[unsafe(naked)]
unsafe extern "C" fn trampoline() {
    naked_asm!(
        ".cfi_startproc",     // unwind info for this function starts here
        ".cfi_undefined rip", // no caller: backtraces stop at this frame
        "mov rdi, rbx",       // first argument: the entry's argument
        "call r12",           // entry(arg); rsp is 16-aligned before this call
        "ud2",                // entry never returns; trap if it does
        ".cfi_endproc",
    )
}

/// Forges the frame of a coroutine that has never run, below `top`, and
/// returns the stack pointer to give [`switch`] to start it.
///
/// ```text
///   top ─────────▶ ┌──────────────────┐ (16-aligned)
///                  │ 0                │ top - 8    padding: after `ret` rsp = top - 16,
///                  │ 0                │ top - 16   16-aligned, as `call r12` needs
///                  │ trampoline       │ top - 24   "return address"
///                  │ rbp = 0          │ top - 32
///                  │ rbx = arg        │ top - 40
///                  │ r12 = entry      │ top - 48
///                  │ r13 = 0          │ top - 56
///                  │ r14 = 0          │ top - 64
///                  │ r15 = 0          │ top - 72
///   returned sp ─▶ │ x87 CW │ MXCSR   │ top - 80   ABI defaults
///                  └──────────────────┘
/// ```
///
/// # Safety
/// `top` must be 16-aligned, and the 80 bytes below it writable memory that
/// stays mapped, and otherwise unused, until the coroutine has finished.
pub(crate) unsafe fn init_frame(top: *mut u8, entry: Entry, arg: *mut u8) -> *mut u8 {
    debug_assert_eq!(top as usize % 16, 0);
    let words: [u64; 10] = [
        (X87_CW_DEFAULT << 32) | MXCSR_DEFAULT,  // FP control slot
        0,                                       // r15
        0,                                       // r14
        0,                                       // r13
        entry as usize as u64,                   // r12
        arg as u64,                              // rbx
        0,                                       // rbp: end of the frame chain
        trampoline as *const () as usize as u64, // return address
        0,                                       // padding
        0,                                       // padding
    ];
    // SAFETY: the caller guarantees 80 writable bytes below `top`, which is
    // 16-aligned, so the u64 writes are aligned.
    unsafe {
        let sp = top.cast::<u64>().sub(words.len());
        sp.copy_from_nonoverlapping(words.as_ptr(), words.len());
        sp.cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        static MAIN_SP: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
        static CO_SP: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
        static SEEN: Cell<u32> = const { Cell::new(0) };
    }

    fn mxcsr() -> u32 {
        let mut v: u32 = 0;
        // SAFETY: stmxcsr writes 4 bytes to a valid local.
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v, options(nostack)) };
        v
    }

    fn set_mxcsr(v: u32) {
        // SAFETY: loads a valid MXCSR value (no reserved bits set) from a local.
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &v, options(nostack)) };
    }

    unsafe extern "C" fn entry(_: *mut u8) -> ! {
        SEEN.with(|s| s.set(mxcsr()));
        let main = MAIN_SP.with(|m| m.get());
        let save = CO_SP.with(|c| c.as_ptr());
        // SAFETY: `main` was saved by the switch that started us.
        unsafe { switch(save, main) };
        unreachable!()
    }

    #[test]
    fn each_context_keeps_its_own_rounding_mode() {
        let mut stack = vec![0u128; 1024];
        // SAFETY: one past the end of the allocation, 16-aligned.
        let top = unsafe { stack.as_mut_ptr().add(stack.len()) }.cast::<u8>();
        // SAFETY: the buffer is ours, large enough and 16-aligned at `top`.
        let sp = unsafe { init_frame(top, entry, std::ptr::null_mut()) };
        let saved = mxcsr();
        let round_toward_zero = (saved & !0x6000) | 0x6000;
        set_mxcsr(round_toward_zero);
        let save = MAIN_SP.with(|m| m.as_ptr());
        // SAFETY: `sp` was made by init_frame just above.
        unsafe { switch(save, sp) };
        let in_main_after = mxcsr();
        set_mxcsr(saved);
        assert_eq!(
            SEEN.with(|s| s.get()) & 0xFFC0,
            0x1F80,
            "the new coroutine starts with the ABI default"
        );
        assert_eq!(
            in_main_after & 0xFFC0,
            round_toward_zero & 0xFFC0,
            "switching back restores ours"
        );
        drop(stack);
    }
}
