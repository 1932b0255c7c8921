//! The context switch keeps every register the ABI says a call preserves.
//!
//! Many coroutines interleave switches while each holds its own values in
//! every callee-saved register (rbx, rbp, r12-r15) and, with the
//! `fp-state` feature, its own MXCSR and x87 control word (without it, every
//! context keeps the defaults, which the switch must leave alone): a value
//! set before a switch must be there after it,
//! on the coroutine's side (it suspended and was resumed) and on the
//! resumer's side (it resumed and got control back). The stack must be
//! 16-byte aligned at every function entry inside a coroutine (the ABI's
//! rule, which the forged first frame has to honour).
//!
//! The values are loaded and read back by inline assembly around a call
//! into the code that switches (`yield_now`, `Yielder::suspend`,
//! `Coroutine::resume`): the compiler cannot keep them anywhere else, so
//! only the switch can preserve them. Only the rounding-control bits of
//! MXCSR and of the x87 control word vary: valgrind (CI runs this file
//! under memcheck) models the rounding modes but not flush-to-zero,
//! denormals-are-zero or x87 precision control, and exception masks must
//! stay set so that no FP exception traps.
//!
//! x86_64 only: the aarch64 switch (x19-x29, d8-d15, FPCR) would need its
//! own assembly here, and CI has no aarch64 machine to run it on.
#![cfg(target_arch = "x86_64")]

mod common;

use std::arch::{asm, naked_asm};
use std::cell::Cell;
use std::ffi::c_void;
use std::rc::Rc;
use std::time::Duration;

use common::Watchdog;
use coroutine::{Coroutine, CoroutineResult, Yielder};

/// Register file image: rbx, rbp, r12, r13, r14, r15, MXCSR, x87 CW.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Regs {
    gp: [u64; 6],
    mxcsr: u32,
    x87_cw: u16,
    _pad: u16,
}

/// MXCSR rounding control (bits 13-14) and x87 rounding control (bits
/// 10-11); everything else stays at the ABI default (all exceptions masked).
const MXCSR_DEFAULT: u32 = 0x1F80;
const X87_CW_DEFAULT: u16 = 0x037F;
/// The MXCSR bits that are control, not sticky exception flags.
const MXCSR_CONTROL: u32 = 0xFFC0;

/// Distinct values for coroutine `who` in round `round`: every register
/// differs from every other coroutine's and from the same coroutine's in
/// the previous round, and none is a small number the switch code could
/// plausibly leave behind.
fn values(who: u64, round: u64) -> Regs {
    let mut gp = [0u64; 6];
    for (r, v) in gp.iter_mut().enumerate() {
        *v = 0xA5A5_0000_0000_0000 ^ (who << 32) ^ (round << 8) ^ (r as u64 + 1);
    }
    // Rounding modes vary only where the switch keeps them per context.
    let fp = u64::from(cfg!(feature = "fp-state"));
    Regs {
        gp,
        mxcsr: MXCSR_DEFAULT | (((fp * (who + round) % 4) as u32) << 13),
        x87_cw: X87_CW_DEFAULT | (((fp * (who + 2 * round + 1) % 4) as u16) << 10),
        _pad: 0,
    }
}

/// Loads `set` into the callee-saved registers and FP control registers,
/// calls `f(arg)`, and returns what those registers hold after the call;
/// restores its caller's rbx, rbp and FP control state.
fn around_call(set: &Regs, f: extern "C" fn(*mut c_void), arg: *mut c_void) -> Regs {
    let mut got = Regs::default();
    // SAFETY: rbx and rbp (which the compiler does not let asm name as
    // operands) are saved on the stack and restored; r12-r15 are declared
    // clobbered; the caller's MXCSR and x87 control word are saved and
    // restored; `set` and `got` are valid for the reads and writes at the
    // offsets of their `repr(C)` fields. Without `nostack`, rsp is
    // call-aligned at entry, and the four pushed words keep it so at the
    // `call`. `f` follows the C ABI, which is what is being tested.
    unsafe {
        asm!(
            "push rbx",
            "push rbp",
            "sub rsp, 16",
            "stmxcsr [rsp]",
            "fnstcw [rsp + 4]",
            "mov [rsp + 8], rsi",
            "mov rbx, [rdi]",
            "mov rbp, [rdi + 8]",
            "mov r12, [rdi + 16]",
            "mov r13, [rdi + 24]",
            "mov r14, [rdi + 32]",
            "mov r15, [rdi + 40]",
            "ldmxcsr [rdi + 48]",
            "fldcw [rdi + 52]",
            "mov rdi, rcx",
            "call rdx",
            "mov rax, [rsp + 8]",
            "mov [rax], rbx",
            "mov [rax + 8], rbp",
            "mov [rax + 16], r12",
            "mov [rax + 24], r13",
            "mov [rax + 32], r14",
            "mov [rax + 40], r15",
            "stmxcsr [rax + 48]",
            "fnstcw [rax + 52]",
            "ldmxcsr [rsp]",
            "fldcw [rsp + 4]",
            "add rsp, 16",
            "pop rbp",
            "pop rbx",
            in("rdi") set as *const Regs,
            in("rsi") &mut got as *mut Regs,
            in("rdx") f,
            in("rcx") arg,
            out("r12") _, out("r13") _, out("r14") _, out("r15") _,
            clobber_abi("C"),
        );
    }
    got.mxcsr &= MXCSR_CONTROL;
    got
}

/// The stack pointer at this function's entry (after the `call` pushed the
/// return address).
#[unsafe(naked)]
extern "C" fn rsp_at_entry() -> usize {
    naked_asm!("mov rax, rsp", "ret")
}

/// Asserts the ABI's alignment rule held at the entry of a function called
/// from here: rsp + 8 (the return address popped) is 16-aligned.
fn assert_aligned(who: &str) {
    let sp = rsp_at_entry();
    assert_eq!(
        (sp + 8) % 16,
        0,
        "{who}: stack misaligned at entry ({sp:#x})"
    );
}

fn check(who: &str, round: u64, set: &Regs, got: &Regs) {
    assert_eq!(
        got, set,
        "{who}, round {round}: registers changed across a switch"
    );
}

extern "C" fn call_yield_now(_: *mut c_void) {
    assert_aligned("yield_now's caller");
    coroutine::yield_now();
}

extern "C" fn call_suspend(y: *mut c_void) {
    // SAFETY: `y` is the `&Yielder<()>` the generator passed, alive for
    // the body's whole run.
    let y = unsafe { &*y.cast::<Yielder<()>>() };
    y.suspend(());
}

extern "C" fn call_resume(g: *mut c_void) {
    // SAFETY: `g` is the `&mut Coroutine` the resumer passed, used only
    // for this call.
    let g = unsafe { &mut *g.cast::<Coroutine<(), u64>>() };
    assert!(matches!(g.resume(), CoroutineResult::Yield(())));
}

const COROUTINES: u64 = 64;
const ROUNDS: u64 = 200;

/// Scheduled coroutines: each switches out through `yield_now`, so every
/// switch goes to the scheduler and on into another coroutine.
#[test]
fn scheduled_coroutines_keep_their_registers_across_switches() {
    let _w = Watchdog::new(
        Duration::from_secs(120),
        "scheduled_coroutines_keep_registers",
    );
    let switches = Rc::new(Cell::new(0u64));
    coroutine::run(|| {
        let handles: Vec<_> = (0..COROUTINES)
            .map(|who| {
                let switches = switches.clone();
                coroutine::spawn(move || {
                    assert_aligned("a scheduled coroutine's body");
                    for round in 0..ROUNDS {
                        let set = values(who, round);
                        let got = around_call(&set, call_yield_now, std::ptr::null_mut());
                        check(&format!("coroutine {who}"), round, &set, &got);
                        switches.set(switches.get() + 1);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    assert_eq!(switches.get(), COROUTINES * ROUNDS);
}

/// Generators resumed round-robin from the thread's own stack, which holds
/// values of its own around every resume: both sides of the switch are
/// checked.
#[test]
fn generators_and_their_resumer_keep_their_registers_across_switches() {
    let _w = Watchdog::new(Duration::from_secs(120), "generators_keep_registers");
    let mut gens: Vec<Coroutine<(), u64>> = (0..COROUTINES)
        .map(|who| {
            Coroutine::new(move |y: &Yielder<()>| {
                assert_aligned("a generator's body");
                let yp = y as *const Yielder<()> as *mut c_void;
                for round in 0..ROUNDS {
                    let set = values(who, round);
                    let got = around_call(&set, call_suspend, yp);
                    check(&format!("generator {who}"), round, &set, &got);
                }
                who
            })
        })
        .collect();
    // The resumer is "coroutine" COROUTINES + 1, distinct from all of them.
    let me = COROUTINES + 1;
    for round in 0..ROUNDS {
        for (i, g) in gens.iter_mut().enumerate() {
            let set = values(me, round * COROUTINES + i as u64);
            let got = around_call(&set, call_resume, (g as *mut Coroutine<(), u64>).cast());
            check("the resumer", round, &set, &got);
        }
    }
    for (who, mut g) in gens.drain(..).enumerate() {
        assert_eq!(g.resume(), CoroutineResult::Return(who as u64));
    }
}
