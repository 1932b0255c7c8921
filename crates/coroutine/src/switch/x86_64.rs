//! The x86_64 context switch (System V ABI: Linux, the BSDs, macOS).
//!
//! What the ABI makes callee-saved, and so what a switch must keep:
//!
//! | what            | why                                                    |
//! | --------------- | ------------------------------------------------------ |
//! | `rbx`, `rbp`, `r12`–`r15` | the general-purpose callee-saved registers    |
//! | `rsp`           | the stack pointer: *is* the context, stored in memory  |
//! | MXCSR control bits | SSE rounding mode, flush-to-zero, exception masks (only with the `fp-state` feature: see below) |
//! | x87 control word   | x87 precision, rounding, exception masks (likewise) |
//!
//! Everything else (`rax`, `rcx`, `rdx`, `rsi`, `rdi`, `r8`–`r11`, all of
//! `xmm0`–`xmm15`, the flags, the MXCSR *status* bits, the x87 status word)
//! is caller-saved: the compiler keeps nothing in them across a call.
//!
//! ## Why the switch is inline assembly, and asymmetric
//!
//! The obvious switch is one function, `switch(save, to)`: push the
//! callee-saved registers, swap stack pointers, pop, `ret`. It is correct,
//! and it costs ~10 ns more per round trip than it should, because of the
//! CPU's **return stack buffer** (RSB): every `call` pushes its return
//! address on a small hidden stack, and every `ret` is predicted to go to the
//! top entry. A symmetric switch is entered by a `call` from one context and
//! leaves by a `ret` into another, so that `ret` and then every `ret` up the
//! other context's call chain mispredicts (~15–20 cycles each).
//!
//! So the two directions differ, and each is inline assembly in the function
//! that switches:
//!
//! - [`resume`] (into a coroutine) **calls** the coroutine's saved
//!   continuation address: to the RSB this is an ordinary `call`;
//! - [`suspend`] (back to the resumer) **returns** to the address that
//!   `call` pushed: the RSB's top entry, so predicted right.
//!
//! The coroutine's side keeps its own continuation as a plain word on its
//! stack (`lea rax, [rip + 2f]; push rax`), reached by the resumer's
//! `call [rdx]` through the indirect-branch predictor, which learns it.
//! Between a resume and the next suspend the RSB stays balanced, *provided*
//! the coroutine does not return from a function it entered before it
//! suspended: that is why [`suspend`] (and every function down to the
//! `asm!`, `raw::suspend` and `Yielder::suspend`) is `#[inline(always)]`.
//!
//! **Why not `#[unsafe(naked)]` functions** (or `global_asm!`), as the
//! first frame's [`trampoline`] is: a naked `suspend` is a function, entered
//! by a `call` in the coroutine that pushes an RSB entry, and it would leave
//! by a `ret` into the *resumer*, which is exactly the symmetric switch's
//! misprediction. And a naked function is opaque to the compiler, so it must
//! push and pop all six callee-saved registers every time, where an inline
//! `asm!` declares `r12`–`r15` clobbered and the compiler saves only those it
//! has live across the switch (in the benchmark loop: none). Only `rbx` and
//! `rbp`, which LLVM reserves and so cannot be declared clobbered, are
//! pushed by hand. This is also what corosensei does.
//!
//! ## The floating-point control state (the `fp-state` feature)
//!
//! The ABI makes the MXCSR control bits and the x87 control word
//! callee-saved, but by default the switch does not keep them: Rust does
//! not support changing the floating-point environment at all (LLVM
//! assumes the default rounding mode, and `_mm_setcsr` is deprecated for
//! that reason), so no Rust code can tell the difference, and corosensei
//! and Go's runtime do not keep them either. Coroutines that call C code
//! which changes the rounding mode (`fesetround`) can enable the crate's
//! `fp-state` feature, which saves both words on the stack with
//! `stmxcsr`/`fnstcw` and reloads them with `ldmxcsr`/`fldcw` on every
//! switch.
//!
//! The feature is off by default because of what it costs: `stmxcsr` is a
//! serialising instruction, not a store. It must report the exception
//! flags of every SSE instruction before it, so the CPU runs it only once
//! the floating-point pipeline has drained, microcoded, one at a time. A
//! round trip does two save-and-reload pairs, which take most of its time
//! when they are there (docs/results.md has the measured round trips with
//! and without the feature). A cost that blocks the whole pipeline weighs
//! most where there is little else to overlap it with, which is what a
//! bare switch is.
//!
//! ## What else the switch leaves out
//!
//! - **Bookkeeping written on one side and read on the other.** Nothing
//!   that one side of the switch writes is read back by the other a few
//!   instructions later: the scheduler's thread-locals are not cleared and
//!   restored around a generator's resume, no `Running`/`Suspended` cell is
//!   written by both sides (see `raw::State`), and a zero-sized yield value
//!   has no `Option` slot. Each of those sat on the round trip's critical
//!   path.
//! - **The stack pointer never goes through memory.** `suspend` hands the
//!   coroutine's stack pointer over in `rsi` and [`resume`] returns it; a
//!   generator keeps it in its `RawCoroutine` (the scheduler, which resumes
//!   by control-block pointer, keeps its coroutines' in the block). A store
//!   of it followed by a load a dozen instructions later would feed the
//!   landing's `lea rsp, [rdx + 8]` and every pop after it through a
//!   store-to-load forward.
//! - **The coroutine does not escape.** Once a function that is not
//!   inlined receives `&mut` the coroutine, any later `asm!` (the switch
//!   itself, criterion's `black_box`) may have changed it, and the loop
//!   stores and reloads it every round trip; so the functions on the path
//!   take values, and stay `#[inline]` or generic (without cross-crate
//!   inlining the whole path is several times slower).
//! - **Only the guards callers rely on.** Generators do not keep the
//!   thread's `RUNNING` pointer (the SIGSEGV handler and `current_id` find
//!   them by stack address); what remains is the test for a runtime whose
//!   thread-locals must be hidden from the body (its clearing path out of
//!   line), the check that `Yielder::suspend` runs on the coroutine's own
//!   stack (one compare of the stack pointer with the stack's bounds), and
//!   `thread::panicking()`. A cancelled body that suspends again bounces
//!   back to the drop, which resumes it until it ends, so no cancel check
//!   sits before the switch.
//!
//! The same code can run at different speeds depending on where the
//! resumer's stack lies relative to the coroutine's, modulo a page (a
//! pattern that fits *4K aliasing*: a load whose address matches a recent
//! store's in its low 12 bits is held back as if it depended on it);
//! `benches/examples/switch_offsets.rs` resumes from 256 depths 16 bytes
//! apart to check it, and `benches/examples/switch_loop.rs` counts the
//! round trip's instructions under callgrind.
//!
//! ## The frames
//!
//! ```text
//!   a suspended coroutine's stack        the resumer's stack while the
//!   (pushed by `suspend`):               coroutine runs (pushed by `resume`):
//!   ┌──────────────────────┐             ┌──────────────────────┐
//!   │ ... its frames       │             │ ... its frames       │
//!   │ rbx                  │             │ rbx                  │
//!   │ rbp                  │             │ rbp                  │
//!   │ [x87 CW │ MXCSR]     │             │ [x87 CW │ MXCSR]     │ fp-state only
//!   │ continuation (`2:`)  │ sp + 0      │ return address       │ ◀ pushed by
//!   └──────────────────────┘ ◀ its sp    └──────────────────────┘   `call`;
//!     (handed to the resumer in rsi,               ▲ ctl.caller_sp
//!      returned by `resume`)                         (stored by the landing)
//! ```
//!
//! Both have the same shape, so one landing sequence restores either: skip
//! the address word, (reload the FP control state,) pop `rbp` and `rbx`.
//!
//! [`init_frame`] forges the first frame of a coroutine that has never run,
//! whose "continuation" is [`trampoline`].

use std::arch::{asm, naked_asm};

use super::Entry;

// The floating-point control state, spliced into the switch's assembly as
// string literals: empty by default, a stack slot with the `fp-state`
// feature. `save_fp!` runs with rsp at the saved `rbp`; `load_fp!` with rsp
// at the slot, and leaves rsp at the saved `rbp`.
#[cfg(not(feature = "fp-state"))]
macro_rules! save_fp {
    () => {
        ""
    };
}
#[cfg(not(feature = "fp-state"))]
macro_rules! load_fp {
    () => {
        ""
    };
}
#[cfg(feature = "fp-state")]
macro_rules! save_fp {
    () => {
        "sub rsp, 8\nstmxcsr [rsp]\nfnstcw [rsp + 4]"
    };
}
#[cfg(feature = "fp-state")]
macro_rules! load_fp {
    () => {
        "ldmxcsr [rsp]\nfldcw [rsp + 4]\nadd rsp, 8"
    };
}

/// Default MXCSR: all exceptions masked, round to nearest, no flush-to-zero
/// (the value the ABI specifies at process start).
#[cfg(feature = "fp-state")]
const MXCSR_DEFAULT: u64 = 0x1F80;
/// Default x87 control word: all exceptions masked, 64-bit precision, round
/// to nearest.
#[cfg(feature = "fp-state")]
const X87_CW_DEFAULT: u64 = 0x037F;

/// Switches from the resumer into a coroutine whose stack pointer is `to`,
/// storing the resumer's stack pointer in `*caller_sp`. Returns when the
/// coroutine [`suspend`]s, with its new stack pointer (the value to pass as
/// `to` next time), or when it [`finish`]es, with null.
///
/// # Safety
/// `caller_sp` must be valid for a pointer-sized write until the coroutine
/// switches back. `to` must come from [`init_frame`] or an earlier
/// [`suspend`] of a coroutine not running now, on a stack still mapped.
#[inline(always)]
pub(crate) unsafe fn resume(caller_sp: *mut *mut u8, to: *mut u8) -> *mut u8 {
    let back: *mut u8;
    // SAFETY: the caller's contract; every register the coroutine may
    // change is declared clobbered, and rbx/rbp are saved by hand.
    unsafe {
        asm!(
            "push rbx", // LLVM-reserved callee-saved register
            "push rbp", // the frame pointer
            save_fp!(),
            // The switch: push our return address (the RSB gets it too) and
            // jump to the coroutine's continuation, the word at the top of
            // its stack. The code there stores rsp into [rdi] (= *caller_sp)
            // and moves onto the coroutine's stack (rdx).
            "call [rdx]",
            // Back: the coroutine's `ret` popped the return address, so rsp
            // points at what we pushed again, and rsi holds the coroutine's
            // stack pointer (0 if it finished).
            load_fp!(),
            "pop rbp",
            "pop rbx",
            in("rdi") caller_sp,
            in("rdx") to,
            lateout("rsi") back,
            // Everything else the coroutine's code may have changed: the
            // caller-saved registers, and r12-r15 (the compiler saves them
            // around this block only if it has values in them).
            out("r12") _, out("r13") _, out("r14") _, out("r15") _,
            clobber_abi("C"),
        );
    }
    back
}

/// On a running coroutine's stack: saves its context and returns into the
/// resumer whose stack pointer is `caller_sp`, handing it the coroutine's
/// stack pointer in a register (what its [`resume`] returns). Returns when
/// the coroutine is resumed again.
///
/// # Safety
/// `caller_sp` must be the value the [`resume`] that is running this
/// coroutine stored.
#[inline(always)]
pub(crate) unsafe fn suspend(caller_sp: *mut u8) {
    // SAFETY: the caller's contract; as in `resume` for the clobbers.
    unsafe {
        asm!(
            "push rbx",
            "push rbp",
            save_fp!(),
            "lea rax, [rip + 2f]", // where the next resume continues us
            "push rax",
            "mov rsi, rsp", // our stack pointer, for the resumer: a register, not memory
            "mov rsp, rcx", // onto the resumer's stack...
            "ret",          // ...and back after its `call` (RSB-predicted)
            // The next `resume` lands here by `call [rdx]`: rsp is the
            // resumer's stack (its return address on top), rdi = caller_sp
            // slot, rdx = our saved stack pointer.
            "2:",
            "mov [rdi], rsp",     // publish the resumer's stack pointer
            "lea rsp, [rdx + 8]", // back onto our stack, past the continuation
            load_fp!(),
            "pop rbp",
            "pop rbx",
            in("rcx") caller_sp,
            out("r12") _, out("r13") _, out("r14") _, out("r15") _,
            clobber_abi("C"),
        );
    }
}

/// Leaves a coroutine for good: returns into the resumer whose stack
/// pointer is `caller_sp`, whose [`resume`] then returns null.
///
/// # Safety
/// As [`suspend`]; nothing on this stack may be used again.
#[inline(always)]
pub(crate) unsafe fn finish(caller_sp: *mut u8) -> ! {
    // SAFETY: the caller's contract.
    unsafe {
        asm!(
            "xor esi, esi", // no stack pointer: finished
            "mov rsp, rdi", // onto the resumer's stack
            "ret",          // into `resume`, after its `call`
            // A named register, not `in(reg)`: the compiler could pick rsi,
            // which the first line clears before rsp is loaded from it.
            in("rdi") caller_sp,
            options(noreturn),
        );
    }
}

/// The stack pointer of the calling code, for "is this code running on
/// that stack?" checks.
#[inline(always)]
pub(crate) fn current_sp() -> usize {
    let sp: usize;
    // SAFETY: reads a register, touches no memory.
    unsafe { asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

/// A new coroutine's first "continuation": reached from [`resume`]'s
/// `call [rdx]` with rsp on the resumer's stack, rdi = the caller_sp slot,
/// rdx = the frame [`init_frame`] forged. Lands like `suspend`'s `2:`, then
/// jumps to `entry(arg)`.
///
/// The CFI directives tell unwinders (panics, backtraces, debuggers) that
/// this is the outermost frame of the coroutine's stack, so a backtrace
/// ends here instead of wandering into memory above the stack top.
///
/// # Safety
/// Never called directly: only reached from [`resume`] on a frame built by
/// [`init_frame`].
#[unsafe(naked)]
unsafe extern "C" fn trampoline() {
    naked_asm!(
        ".cfi_startproc",
        ".cfi_undefined rip", // no caller: backtraces stop at this frame
        "mov [rdi], rsp",     // publish the resumer's stack pointer
        "lea rsp, [rdx + 8]", // onto our stack, past this trampoline's address
        load_fp!(),           // (fp-state: the ABI's default FP control state)
        "pop rbp",            // 0: the end of the frame-pointer chain
        "pop rdi",            // the entry's argument
        "pop rax",            // the entry function
        // Enter it with a `jmp` and a hand-pushed return address rather
        // than a `call`: the entry never returns (it leaves by `finish`'s
        // `ret`), and a `call` would leave an RSB entry nobody pops.
        "lea rcx, [rip + 3f]",
        "push rcx", // rsp is now 16-aligned minus 8, as at any entry
        "jmp rax",
        "3:",
        "ud2", // entry never returns; trap if it does
        ".cfi_endproc",
    )
}

/// Forges the frame of a coroutine that has never run, below `top`, and
/// returns the stack pointer to give [`resume`] to start it.
///
/// ```text
///   top ─────────▶ ┌──────────────────┐ (16-aligned)
///                  │ entry            │ top - 8
///                  │ arg              │ top - 16
///                  │ rbp = 0          │ top - 24
///                  │ [x87 CW │ MXCSR] │ (fp-state only: ABI defaults)
///   returned sp ─▶ │ trampoline       │ top - 32 (top - 40 with fp-state)
///                  └──────────────────┘
/// ```
///
/// The trampoline pops the words above its own, so rsp is back at `top`
/// (16-aligned) before it pushes the entry's return address.
///
/// # Safety
/// `top` must be 16-aligned, and the 40 bytes below it writable memory that
/// stays mapped, and otherwise unused, until the coroutine has finished.
pub(crate) unsafe fn init_frame(top: *mut u8, entry: Entry, arg: *mut u8) -> *mut u8 {
    debug_assert_eq!(top as usize % 16, 0);
    let words = [
        trampoline as *const () as usize as u64, // continuation
        #[cfg(feature = "fp-state")]
        ((X87_CW_DEFAULT << 32) | MXCSR_DEFAULT), // FP control slot
        0,                                       // rbp: end of the frame chain
        arg as u64,                              // popped into rdi
        entry as usize as u64,                   // popped into rax, jumped to
    ];
    // SAFETY: the caller guarantees 40 writable bytes below `top`, which is
    // 16-aligned, so the u64 writes are aligned; `words` is at most 5 words.
    unsafe {
        let sp = top.cast::<u64>().sub(words.len());
        sp.copy_from_nonoverlapping(words.as_ptr(), words.len());
        sp.cast()
    }
}

// The FP control state is kept only with the `fp-state` feature; without
// it, a coroutine and its resumer share one rounding mode, as all Rust code
// on the thread does.
#[cfg(all(test, feature = "fp-state"))]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        static MAIN_SP: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
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
        // SAFETY: `main` was stored by the resume that started us.
        unsafe { suspend(main) };
        unreachable!()
    }

    #[test]
    fn each_context_keeps_its_own_rounding_mode() {
        let mut stack = vec![0u128; 1024];
        // SAFETY: one past the end of the allocation, 16-aligned.
        let top = unsafe { stack.as_mut_ptr().add(stack.len()) }.cast::<u8>();
        // Announce the buffer as a stack, so that memcheck (scripts/valgrind.sh)
        // takes the switch onto it for a switch, not for a 6 MB stack frame.
        let vg = crate::valgrind::stack_register(stack.as_ptr().cast(), top);
        // SAFETY: the buffer is ours, large enough and 16-aligned at `top`.
        let sp = unsafe { init_frame(top, entry, std::ptr::null_mut()) };
        let saved = mxcsr();
        let round_toward_zero = (saved & !0x6000) | 0x6000;
        set_mxcsr(round_toward_zero);
        let save = MAIN_SP.with(|m| m.as_ptr());
        // SAFETY: `sp` was made by init_frame just above.
        unsafe { resume(save, sp) };
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
        crate::valgrind::stack_deregister(vg);
        drop(stack);
    }
}

// `finish` clears rsi (the resumer's "finished" value) before it loads rsp
// from `caller_sp`, so `caller_sp` must not be in rsi then. The code the
// compiler emits is what can go wrong, so the tests look at it twice: by
// running a `finish` whose operand arrives in rsi, and in the disassembly.
#[cfg(test)]
mod finish_tests {
    use super::*;
    use std::cell::Cell;
    use std::process::Command;

    thread_local! {
        static MAIN_SP: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
    }

    /// `finish` with `caller_sp` in rsi on entry (the second argument's
    /// register), where a free register choice is most likely to leave it.
    /// Called through a pointer the optimiser cannot see through, so that it
    /// keeps the C ABI's argument registers instead of dropping `_rdi`.
    unsafe extern "C" fn finish_from_rsi(_rdi: usize, caller_sp: *mut u8) -> ! {
        // SAFETY: the caller's, as for `finish`.
        unsafe { finish(caller_sp) }
    }

    unsafe extern "C" fn entry(_: *mut u8) -> ! {
        let main = MAIN_SP.with(|m| m.get());
        let f = std::hint::black_box(finish_from_rsi as unsafe extern "C" fn(usize, *mut u8) -> !);
        // SAFETY: `main` was stored by the resume that started us; nothing
        // on this stack is used again.
        unsafe { f(0, main) }
    }

    /// Set in the child process that runs the switch itself: a wrong stack
    /// pointer crashes it, and the parent reports how.
    const CHILD: &str = "COROUTINE_FINISH_TEST_CHILD";

    #[test]
    fn finish_with_caller_sp_in_rsi_returns_null() {
        if std::env::var_os(CHILD).is_none() {
            let name = concat!(
                module_path!(),
                "::finish_with_caller_sp_in_rsi_returns_null"
            );
            let name = name.split_once("::").expect("crate::path").1;
            let out = Command::new(std::env::current_exe().unwrap())
                .args([name, "--exact", "--nocapture", "--test-threads=1"])
                .env(CHILD, "1")
                .output()
                .expect("re-running the test binary");
            assert!(
                out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
                "the coroutine's finish did not land in its resumer ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let mut stack = vec![0u128; 1024];
        // SAFETY: one past the end of the allocation, 16-aligned.
        let top = unsafe { stack.as_mut_ptr().add(stack.len()) }.cast::<u8>();
        let vg = crate::valgrind::stack_register(stack.as_ptr().cast(), top);
        // SAFETY: the buffer is ours, large enough and 16-aligned at `top`.
        let sp = unsafe { init_frame(top, entry, std::ptr::null_mut()) };
        let save = MAIN_SP.with(|m| m.as_ptr());
        // SAFETY: `sp` was made by init_frame just above.
        let back = unsafe { resume(save, sp) };
        assert!(back.is_null(), "a finished coroutine hands back null");
        crate::valgrind::stack_deregister(vg);
        drop(stack);
    }

    /// The 64-bit register a general-purpose register name is part of.
    fn full(reg: &str) -> Option<&'static str> {
        const REGS: [[&str; 4]; 16] = [
            ["rax", "eax", "ax", "al"],
            ["rbx", "ebx", "bx", "bl"],
            ["rcx", "ecx", "cx", "cl"],
            ["rdx", "edx", "dx", "dl"],
            ["rsi", "esi", "si", "sil"],
            ["rdi", "edi", "di", "dil"],
            ["rbp", "ebp", "bp", "bpl"],
            ["rsp", "esp", "sp", "spl"],
            ["r8", "r8d", "r8w", "r8b"],
            ["r9", "r9d", "r9w", "r9b"],
            ["r10", "r10d", "r10w", "r10b"],
            ["r11", "r11d", "r11w", "r11b"],
            ["r12", "r12d", "r12w", "r12b"],
            ["r13", "r13d", "r13w", "r13b"],
            ["r14", "r14d", "r14w", "r14b"],
            ["r15", "r15d", "r15w", "r15b"],
        ];
        REGS.iter().find(|r| r.contains(&reg)).map(|r| r[0])
    }

    #[test]
    fn finish_loads_rsp_from_a_register_it_did_not_clear() {
        let exe = std::env::current_exe().unwrap();
        let out = Command::new("objdump")
            .args(["-d", "-M", "intel", "--no-show-raw-insn"])
            .arg(&exe)
            .output()
            .unwrap_or_else(|e| panic!("objdump: {e} (install binutils to run this test)"));
        assert!(out.status.success(), "objdump failed: {}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        // (mnemonic, operands) of every instruction, in address order.
        let insns: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|l| {
                let (addr, insn) = l.split_once(":\t")?;
                u64::from_str_radix(addr.trim(), 16).ok()?;
                let insn = insn.trim();
                Some(
                    insn.split_once(' ')
                        .map_or((insn, ""), |(m, o)| (m, o.trim())),
                )
            })
            .collect();
        let mut sites = 0;
        let mut bad = Vec::new();
        for w in insns.windows(2) {
            let [(m0, o0), (m1, o1)] = [w[0], w[1]];
            let Some(src) = o1.strip_prefix("rsp,").filter(|_| m1 == "mov") else {
                continue;
            };
            // `finish`'s signature: rsi cleared, then rsp loaded.
            if m0 == "xor" && o0 == "esi,esi" {
                sites += 1;
            }
            // A register zeroed by the instruction just before is no stack pointer.
            let zeroed = (m0 == "xor")
                .then(|| o0.split_once(','))
                .flatten()
                .filter(|(a, b)| a == b)
                .and_then(|(a, _)| full(a));
            if zeroed.is_some() && zeroed == full(src) {
                bad.push(format!("{m0} {o0}; {m1} {o1}"));
            }
        }
        assert!(
            sites > 0,
            "no `xor esi,esi; mov rsp,..` (finish) in {exe:?}"
        );
        assert!(
            bad.is_empty(),
            "finish loads rsp from the register it just cleared: {bad:?}"
        );
    }
}
