//! The context switch: the only place where one stack becomes another.
//!
//! A *context* is what a CPU needs to continue a computation: an instruction
//! pointer, a stack pointer, and the registers whose values the code after
//! the switch expects to find again. A function call already tells us which
//! registers those are. The C calling convention (the *ABI*) splits the
//! registers in two:
//!
//! - **caller-saved** (scratch) registers may be destroyed by any call; the
//!   compiler never keeps a value in them across one;
//! - **callee-saved** registers must hold the same value after the call as
//!   before it.
//!
//! So if the switch looks like a function call to the compiler, it has
//! already spilled everything it cares about *except* the callee-saved
//! registers. Saving those, plus the stack pointer and an address to come back
//! to, is a complete context.
//!
//! Three operations make the interface: [`resume`] switches from a resumer
//! into a coroutine, [`suspend`] from the coroutine back to its resumer, and
//! [`finish`] leaves a coroutine for good. (On aarch64 all three are one
//! symmetric `switch` function; x86_64 splits them so that the CPU's
//! return-address predictor stays right: see `x86_64.rs`.)
//!
//! The two stack pointers travel differently. The resumer's is stored in
//! memory (`*caller_sp`, in the coroutine's control block), because the
//! coroutine may suspend from any function, far from the code it landed
//! in. The coroutine's comes back in a register, as [`resume`]'s return
//! value (null once it has finished), so a resumer can keep it in a
//! register from one resume to the next instead of reading back what the
//! other side just wrote: that store-and-reload cost a third of the round
//! trip (see `x86_64.rs`, "What a round trip costs").
//!
//! ```text
//!   context A switches into B                    coroutine B (suspended earlier)
//!   ┌──────────────┐                             ┌──────────────┐
//!   │ A's frames   │                             │ B's frames   │
//!   │ return addr  │◀─ where A continues         │ continuation │
//!   │ callee-saved │◀─ saved by the switch       │ callee-saved │◀─ B.sp
//!   └──────────────┘◀─ stored into A.sp          └──────────────┘
//!                      then sp := B.sp, restore B's registers, continue B
//! ```
//!
//! (With the `fp-state` feature the frame also holds the floating-point
//! control state; see `x86_64.rs` for why that is not the default.) Each
//! architecture file has the exact layout of its frame. A frame for a
//! coroutine that has never run is forged by [`init_frame`]: its "saved"
//! registers carry the entry function and its argument, and its continuation
//! is a small trampoline that calls `entry(arg)`.
//!
//! Only x86_64 and aarch64 are implemented; any other target fails to build
//! with a message saying so.

#[cfg(target_arch = "x86_64")]
#[path = "x86_64.rs"]
mod arch;

#[cfg(target_arch = "aarch64")]
#[path = "aarch64.rs"]
mod arch;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!(
    "the coroutine crate's context switch is written by hand for x86_64 and aarch64 only; \
     porting it means writing src/switch/<arch>.rs: save the callee-saved registers of that \
     architecture's C ABI, swap stack pointers, restore (see src/switch/x86_64.rs)"
);

pub(crate) use arch::{current_sp, finish, init_frame, resume, suspend};

/// A coroutine's first function: called by the trampoline with the argument
/// given to [`init_frame`], on the coroutine's own stack. It must never
/// return (there is nothing to return to): it ends by switching away for the
/// last time.
pub(crate) type Entry = unsafe extern "C" fn(arg: *mut u8) -> !;

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    // A hand-made coroutine, without the rest of the crate: one stack, one
    // entry, two switches per round.
    thread_local! {
        static MAIN_SP: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
        static CO_SP: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
        static LOG: Cell<u64> = const { Cell::new(0) };
    }

    unsafe extern "C" fn entry(arg: *mut u8) -> ! {
        let step = arg as u64; // 1: the dangling (well-aligned, non-null) pointer
        for i in 0..3 {
            LOG.with(|l| l.set(l.get() * 10 + step + i));
            let main = MAIN_SP.with(|m| m.get());
            // SAFETY: `main` was stored by the resume that is running us.
            unsafe { suspend(main) };
        }
        unreachable!("the test never resumes a fourth time")
    }

    #[test]
    fn switch_round_trips() {
        let mut stack = vec![0u128; 1024]; // 16 KiB, 16-aligned
        // SAFETY: one past the end of the allocation, 16-aligned.
        let top = unsafe { stack.as_mut_ptr().add(stack.len()) }.cast::<u8>();
        // Announce the buffer as a stack, so that memcheck (scripts/valgrind.sh)
        // takes the switch onto it for a switch, not for a 6 MB stack frame.
        let vg = crate::valgrind::stack_register(stack.as_ptr().cast(), top);
        // SAFETY: the buffer is ours, large enough and 16-aligned at `top`.
        let sp = unsafe { init_frame(top, entry, std::ptr::dangling_mut::<u8>()) };
        CO_SP.with(|c| c.set(sp));
        for _ in 0..3 {
            let save = MAIN_SP.with(|m| m.as_ptr());
            let to = CO_SP.with(|c| c.get());
            // SAFETY: `to` is a frame made by init_frame or handed back by
            // the last suspend.
            let back = unsafe { resume(save, to) };
            assert!(!back.is_null(), "the entry never finishes");
            CO_SP.with(|c| c.set(back));
        }
        assert_eq!(LOG.with(|l| l.get()), 123);
        crate::valgrind::stack_deregister(vg);
        drop(stack);
    }
}
