//! The aarch64 context switch (AAPCS64: Linux, the BSDs, macOS).
//!
//! What the ABI makes callee-saved, and so what a switch must keep:
//!
//! | what          | why                                                      |
//! | ------------- | -------------------------------------------------------- |
//! | `x19`–`x28`   | the general-purpose callee-saved registers               |
//! | `x29` (fp)    | the frame pointer, callee-saved                          |
//! | `x30` (lr)    | the link register: where `switch` returns to. Not callee-saved by the ABI, but it *is* the saved instruction pointer |
//! | `sp`          | the stack pointer: *is* the context, stored in memory    |
//! | `d8`–`d15`    | the low 64 bits of `v8`–`v15` are callee-saved (the upper halves are not) |
//! | `fpcr`        | see below                                                |
//!
//! **FPCR, only with the `fp-state` feature.** AAPCS64 treats the FPCR's
//! mode fields (rounding mode, flush-to-zero, default-NaN, alternative half
//! precision) as preserved across calls, as System V does MXCSR's control
//! bits on x86_64. As there (see `x86_64.rs`), the default switch does not
//! keep it: Rust code cannot change the floating-point environment, and
//! corosensei and Go do not keep it either. The `fp-state` feature adds one
//! `mrs` and one `msr` per switch (`msr fpcr` can be slow on some cores: it
//! may synchronise the FP pipeline; not measured, no aarch64 machine here).
//! The frame keeps FPCR's slot either way: it is the padding that keeps `sp`
//! 16-aligned. The status register FPSR is caller-saved and not kept.
//!
//! **Why this one is a naked function, symmetric, unlike x86_64's.** The
//! return address lives in `x30`, not on the stack, so one `switch` saves it
//! with the other registers and serves all three directions; but it is
//! entered by `bl` and left by `ret` into the *other* context, which is the
//! return-predictor mistake `x86_64.rs` describes, and it saves all of
//! `x19`–`x28` and `d8`–`d15` where inline `asm!` would let the compiler save
//! only the live ones. An inline-`asm!` version (as corosensei's) is the
//! likely faster design; it stays to be written and measured on an aarch64
//! machine, which this project does not have (only `cargo check` and the
//! qemu harness below run it here).
//!
//! `x18` is the platform register (reserved on Apple and Windows, a scratch
//! register on Linux); it is never callee-saved and is not touched.
//!
//! ## The frame `switch` leaves on a suspended stack (176 bytes)
//!
//! ```text
//!   higher addresses
//!   ┌──────────────────────┐
//!   │ ... caller's frames  │
//!   ├──────────────────────┤ ◀── sp before the switch
//!   │ fpcr │ (padding)     │ sp + 160   padding keeps sp 16-aligned
//!   │ d14  │ d15           │ sp + 144
//!   │ d12  │ d13           │ sp + 128
//!   │ d10  │ d11           │ sp + 112
//!   │ d8   │ d9            │ sp + 96
//!   │ x29  │ x30 (lr)      │ sp + 80    lr = where `switch` returns to
//!   │ x27  │ x28           │ sp + 64
//!   │ x25  │ x26           │ sp + 48
//!   │ x23  │ x24           │ sp + 32
//!   │ x21  │ x22           │ sp + 16
//!   │ x19  │ x20           │ sp + 0
//!   └──────────────────────┘ ◀── saved sp (what `*save` receives)
//!   lower addresses             (each cell is 8 bytes: `stp` stores pairs)
//! ```
//!
//! Unlike x86_64, `bl` does not push the return address: it leaves it in
//! `x30`, so the switch stores `x30` with the other registers and its final
//! `ret` jumps to the restored `x30`.
//!
//! [`init_frame`] forges the same 22 words for a coroutine that has never
//! run: `x20` holds the entry function, `x19` its argument, `x29` zero (the
//! end of the frame-record chain), `fpcr` zero (the Linux default: round to
//! nearest, no flush-to-zero; read only with `fp-state`) and `x30` is
//! [`trampoline`].
//!
//! ## The stack pointers
//!
//! `switch` stores the outgoing stack pointer in `*save` and also hands it
//! to the incoming context as the return value of *its* `switch` call (in
//! `x0`). [`resume`] returns it: the coroutine's stack pointer when it
//! suspends, null when it finished ([`switch_final`] hands over zero). So
//! the interface is the one `x86_64.rs` has, where the register matters
//! for speed; here the coroutine's own `*save` is a local nobody reads.
//!
//! ## How it is checked
//!
//! The project's machines are x86_64, so CI never runs this file.
//! `scripts/aarch64-check.sh` does: it cross-compiles the crate's tests for
//! `aarch64-unknown-linux-gnu` and runs them under `qemu-aarch64`, with and
//! without `fp-state` (generators, the scheduler, echo servers, blocking
//! calls: every test file but the overflow tests, whose child processes
//! cannot start under user-mode qemu). It found the `fp-state` build
//! clobbering the handed-over stack pointer with FPCR's scratch register
//! the first time it ran.

use std::arch::naked_asm;

use super::Entry;

// FPCR save and restore, spliced into `switch` as string literals: nothing
// by default, the slot at sp + 160 with the `fp-state` feature.
#[cfg(not(feature = "fp-state"))]
macro_rules! save_fpcr {
    () => {
        ""
    };
}
#[cfg(not(feature = "fp-state"))]
macro_rules! load_fpcr {
    () => {
        ""
    };
}
#[cfg(feature = "fp-state")]
macro_rules! save_fpcr {
    () => {
        "mrs x9, fpcr\nstr x9, [sp, #160]"
    };
}
#[cfg(feature = "fp-state")]
macro_rules! load_fpcr {
    () => {
        "ldr x9, [sp, #160]\nmsr fpcr, x9"
    };
}

// Restoring a frame, shared by `switch` and `switch_final`: reload the
// registers `switch` saved at `sp`, pop the frame, and `ret` to the restored
// `x30` with `x0` as the value the switch returns there.
macro_rules! restore_frame {
    () => {
        concat!(
            "ldp d14, d15, [sp, #144]\n", // restore in reverse order
            "ldp d12, d13, [sp, #128]\n",
            "ldp d10, d11, [sp, #112]\n",
            "ldp d8, d9, [sp, #96]\n",
            "ldp x29, x30, [sp, #80]\n", // x30 = where the incoming context resumes
            "ldp x27, x28, [sp, #64]\n",
            "ldp x25, x26, [sp, #48]\n",
            "ldp x23, x24, [sp, #32]\n",
            "ldp x21, x22, [sp, #16]\n",
            "ldp x19, x20, [sp, #0]\n",
            "add sp, sp, #176\n", // pop the frame
            "ret",                // branch to x30
        )
    };
}

/// Saves the current context on the current stack, stores the stack pointer
/// in `*save`, and resumes the context whose stack pointer is `to`. Returns
/// when something switches back, with the stack pointer that context left
/// (what *its* `*save` received), or null from [`switch_final`].
///
/// # Safety
/// `save` must be valid for a pointer-sized write. `to` must be a stack
/// pointer produced by [`init_frame`] or stored by an earlier `switch`, whose
/// context has not been resumed since, on a stack that is still mapped.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn switch(save: *mut *mut u8, to: *mut u8) -> *mut u8 {
    naked_asm!(
        // On entry: x0 = save, x1 = to, x30 = our return address.
        // --- save the outgoing context on its own stack ---
        "sub sp, sp, #176",       // room for the frame (a multiple of 16)
        "stp x19, x20, [sp, #0]", // callee-saved pairs...
        "stp x21, x22, [sp, #16]",
        "stp x23, x24, [sp, #32]",
        "stp x25, x26, [sp, #48]",
        "stp x27, x28, [sp, #64]",
        "stp x29, x30, [sp, #80]", // frame pointer and return address
        "stp d8, d9, [sp, #96]",   // low halves of v8-v15
        "stp d10, d11, [sp, #112]",
        "stp d12, d13, [sp, #128]",
        "stp d14, d15, [sp, #144]",
        save_fpcr!(),   // fp-state only: FPCR into its slot (x9 is scratch)
        "mov x9, sp",   // sp cannot be stored directly...
        "str x9, [x0]", // ...so go through x9: *save = sp
        "mov x0, x9",   // what the incoming side's `switch` returns: our sp
        // --- from here on we run on the incoming stack ---
        "mov sp, x1", // the switch itself
        load_fpcr!(), // fp-state only: the incoming FPCR (x9 is scratch)
        restore_frame!(),
    )
}

/// Switches to the context whose stack pointer is `to` without saving the
/// current one; that context's `switch` returns null.
///
/// # Safety
/// As [`switch`] for `to`; the current context is never resumed.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn switch_final(to: *mut u8) -> ! {
    naked_asm!(
        "mov sp, x0",  // the switch itself
        "mov x0, xzr", // what the incoming `switch` returns: finished
        load_fpcr!(),  // fp-state only: the incoming FPCR (x9 is scratch)
        restore_frame!(),
    )
}

/// Where a new coroutine's first `switch` "returns" to: calls `entry(arg)`
/// with the two values [`init_frame`] left in `x20` and `x19`.
///
/// The CFI directives mark this as the outermost frame of the coroutine's
/// stack (the return address is undefined), so backtraces stop here.
///
/// # Safety
/// Never called directly: only reached by `ret` from [`switch`] on a frame
/// built by [`init_frame`].
#[unsafe(naked)]
unsafe extern "C" fn trampoline() {
    naked_asm!(
        ".cfi_startproc",     // unwind info for this function starts here
        ".cfi_undefined x30", // no caller: backtraces stop at this frame
        "mov x0, x19",        // first argument: the entry's argument
        "blr x20",            // entry(arg); sp is 16-aligned
        "brk #1",             // entry never returns; trap if it does
        ".cfi_endproc",
    )
}

/// Forges the frame of a coroutine that has never run, below `top`, and
/// returns the stack pointer to give [`switch`] to start it.
///
/// ```text
///   top ─────────▶ ┌──────────────────┐ (16-aligned)
///                  │ 0 │ 0            │ top - 16    padding
///                  │ fpcr = 0 │ 0     │ top - 32
///                  │ d8..d15 = 0      │ top - 96 .. top - 33
///                  │ x29 = 0 │ x30 = trampoline │ top - 112
///                  │ x21..x28 = 0     │ top - 176 .. top - 113
///   returned sp ─▶ │ x19 = arg │ x20 = entry │ top - 192
///                  └──────────────────┘
/// ```
///
/// After the switch pops its 176 bytes, `sp` is `top - 16`: 16-aligned, as
/// the ABI requires at every instruction that uses `sp`.
///
/// # Safety
/// `top` must be 16-aligned, and the 192 bytes below it writable memory that
/// stays mapped, and otherwise unused, until the coroutine has finished.
pub(crate) unsafe fn init_frame(top: *mut u8, entry: Entry, arg: *mut u8) -> *mut u8 {
    debug_assert_eq!(top as usize % 16, 0);
    let mut words = [0u64; 24];
    words[0] = arg as u64; // x19
    words[1] = entry as usize as u64; // x20
    words[10] = 0; // x29: end of the frame-record chain
    words[11] = trampoline as *const () as usize as u64; // x30: the "return address"
    words[20] = 0; // fpcr: Linux default
    // SAFETY: the caller guarantees 192 writable bytes below `top`, which is
    // 16-aligned, so the u64 writes are aligned.
    unsafe {
        let sp = top.cast::<u64>().sub(words.len());
        sp.copy_from_nonoverlapping(words.as_ptr(), words.len());
        sp.cast()
    }
}

// The interface the rest of the crate uses. On aarch64 the return address
// lives in a register (`x30`), not on the stack, so the symmetric `switch`
// serves all three directions.

/// Switches from the resumer into the coroutine whose stack pointer is `to`,
/// saving the resumer's in `*caller_sp`. Returns the coroutine's stack
/// pointer when it suspends, null when it finished.
///
/// # Safety
/// As [`switch`] (`caller_sp` is its `save`).
#[inline(always)]
pub(crate) unsafe fn resume(caller_sp: *mut *mut u8, to: *mut u8) -> *mut u8 {
    // SAFETY: the caller's contract.
    unsafe { switch(caller_sp, to) }
}

/// Switches from a running coroutine back to its resumer, whose `resume`
/// returns the coroutine's stack pointer.
///
/// # Safety
/// As [`switch`] (`caller_sp` is its `to`).
#[inline(always)]
pub(crate) unsafe fn suspend(caller_sp: *mut u8) {
    // `switch` also stores the pointer it hands over; the resumer takes it
    // from the return value, so the copy goes to a local nobody reads.
    let mut unused: *mut u8 = std::ptr::null_mut();
    // SAFETY: the caller's contract.
    unsafe { switch(&mut unused, caller_sp) };
}

/// Leaves a coroutine for good, back to its resumer, whose `resume` returns
/// null.
///
/// # Safety
/// As [`suspend`]; this context is never resumed.
#[inline(always)]
pub(crate) unsafe fn finish(caller_sp: *mut u8) -> ! {
    // SAFETY: as above.
    unsafe { switch_final(caller_sp) }
}

/// The stack pointer of the calling code, for "is this code running on
/// that stack?" checks.
#[inline(always)]
pub(crate) fn current_sp() -> usize {
    let sp: usize;
    // SAFETY: reads a register, touches no memory.
    unsafe { std::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}
