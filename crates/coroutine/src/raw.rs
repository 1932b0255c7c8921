//! The untyped core shared by [`crate::Coroutine`] and the scheduler's
//! coroutines: a stack, a control block at its top, resume and suspend.
//!
//! ```text
//!   top of the coroutine's stack
//!   ┌──────────────────────────────┐
//!   │ Start<P> {                   │  written once, at creation:
//!   │   ctl: Control,              │  both sides' saved stack pointers,
//!   │   payload: P,                │  the closure to run, result slots
//!   │ }                            │
//!   ├──────────────────────────────┤
//!   │ first frame (init_frame)     │  "saved registers": entry, &Start<P>
//!   ├──────────────────────────────┤ ◀── ctl.sp before the first resume
//!   │ ...the coroutine's frames... │
//!   ▼                              ▼
//!   guard page
//! ```
//!
//! Nothing is allocated on the heap: the control block and the closure live
//! at the top of the stack they describe, which has a fixed address for the
//! coroutine's whole life.

use std::cell::Cell;
use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::stack::{self, Stack};
use crate::switch::{self, Entry};
use crate::{guard, watermark};

/// Where a coroutine is in its life.
///
/// Only two states, written twice in a coroutine's life (at creation and at
/// its end), never on a switch. Whether a live coroutine is running is
/// [`is_running`]'s business (the thread's `RUNNING` pointer, which the
/// switch keeps anyway). A `Running`/`Suspended` cell that each side of
/// every switch wrote, and the other side read back a few instructions
/// later, cost 0.6 ns of the round trip (4.57 → 3.94 ns on AMD EPYC; see
/// `switch/x86_64.rs`, "What a round trip costs").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Not finished: never resumed yet, suspended, or running.
    Live,
    /// Its entry function has ended; the stack can be reused.
    Finished,
}

/// What both sides of a switch need, at the top of the coroutine's stack.
pub(crate) struct Control {
    /// The coroutine's stack pointer while it is not running.
    sp: Cell<*mut u8>,
    /// The resumer's stack pointer while the coroutine runs.
    caller_sp: Cell<*mut u8>,
    state: Cell<State>,
    /// Set by the owner to make the coroutine unwind (see `Cancelled`).
    pub(crate) cancel: Cell<bool>,
    /// Set when the cancellation unwind has started: from then on blocking
    /// calls fail instead of unwinding again (they may be in destructors).
    pub(crate) unwinding: Cell<bool>,
    /// Process-wide unique id, for diagnostics.
    pub(crate) id: u64,
    /// The usable stack `[bottom, top)` and its guard page, copied here so
    /// that the SIGSEGV handler can read them with no lock.
    pub(crate) bottom: usize,
    pub(crate) top: usize,
    pub(crate) guard_lo: usize,
    pub(crate) guard_hi: usize,
}

/// The block written at the top of a new coroutine's stack. `repr(C)` puts
/// `ctl` at offset 0, so a pointer to one is a pointer to the other.
#[repr(C)]
pub(crate) struct Start<P> {
    pub(crate) ctl: Control,
    pub(crate) payload: P,
}

thread_local! {
    /// The control block of the coroutine whose stack this thread is on
    /// (null: the thread's own stack). Const-initialised and without a
    /// destructor, so reading it is one TLS load, safe in a signal handler.
    static RUNNING: Cell<*const Control> = const { Cell::new(ptr::null()) };
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh coroutine id.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// The id of the coroutine running on this thread, if any.
pub fn current_id() -> Option<u64> {
    let ctl = RUNNING.with(|r| r.get());
    // SAFETY: RUNNING points at the control block of the coroutine we are
    // running on, whose stack is mapped while we are on it.
    (!ctl.is_null()).then(|| unsafe { (*ctl).id })
}

/// What the SIGSEGV handler reports about an overflow.
pub(crate) struct Overflow {
    pub(crate) id: u64,
    /// The guard page, `[lo, hi)`.
    pub(crate) guard: (usize, usize),
    /// The usable stack, `[bottom, top)`.
    pub(crate) stack: (usize, usize),
}

/// For the SIGSEGV handler: if `addr` is in the guard page of the coroutine
/// running on this thread, which coroutine that is.
pub(crate) fn guard_hit(addr: usize) -> Option<Overflow> {
    let ctl = RUNNING.with(|r| r.get());
    if ctl.is_null() {
        return None;
    }
    // SAFETY: as in `current_id`; the control block sits at the top of the
    // stack, far from the guard page that faulted.
    let c = unsafe { &*ctl };
    (c.guard_lo..c.guard_hi)
        .contains(&addr)
        .then_some(Overflow {
            id: c.id,
            guard: (c.guard_lo, c.guard_hi),
            stack: (c.bottom, c.top),
        })
}

/// For the SIGSEGV handler, when the kernel forced the signal because it
/// could not write another signal's frame: if the interrupted stack pointer
/// `sp` is on the running coroutine's stack within `margin` bytes of its
/// guard page (so the frame would have reached into it), which coroutine.
pub(crate) fn frame_overflow(sp: usize, margin: usize) -> Option<Overflow> {
    let ctl = RUNNING.with(|r| r.get());
    if ctl.is_null() {
        return None;
    }
    // SAFETY: as in `guard_hit`.
    let c = unsafe { &*ctl };
    (c.guard_lo..c.bottom.saturating_add(margin).min(c.top))
        .contains(&sp)
        .then_some(Overflow {
            id: c.id,
            guard: (c.guard_lo, c.guard_hi),
            stack: (c.bottom, c.top),
        })
}

/// A coroutine without types: the stack and a pointer to its control block.
/// Its owner must see it to [`State::Finished`] before dropping it (the
/// typed wrappers do so by cancelling); otherwise the stack is leaked rather
/// than unmapped under live frames.
pub(crate) struct RawCoroutine {
    stack: Option<Stack>,
    ctl: NonNull<Control>,
}

impl Control {
    /// Where the coroutine is in its life.
    pub(crate) fn state(&self) -> State {
        self.state.get()
    }
}

impl RawCoroutine {
    /// Writes `payload` and a control block at the top of `stack` and forges
    /// a first frame that calls `entry(&Start<P>)` on the first resume.
    /// Returns the coroutine and where its payload lives.
    ///
    /// # Panics
    /// If `P` takes more than half of the stack.
    pub(crate) fn new<P>(
        mut stack: Stack,
        id: u64,
        payload: P,
        entry: Entry,
        watermarks: bool,
    ) -> (RawCoroutine, NonNull<P>) {
        guard::install();
        if watermarks {
            watermark::fill(&mut stack);
        }
        let top = stack.top() as usize;
        let align = std::mem::align_of::<Start<P>>().max(16);
        let start_addr = (top - std::mem::size_of::<Start<P>>()) & !(align - 1);
        assert!(
            top - start_addr <= stack.size() / 2,
            "the coroutine's closure ({} bytes) does not fit in half of its {}-byte stack: \
             box it, or use a larger stack",
            std::mem::size_of::<P>(),
            stack.size()
        );
        let guard = stack.guard_range();
        let start = start_addr as *mut Start<P>;
        // SAFETY: `start` is inside the stack, suitably aligned, and nothing
        // lives there yet; the first frame goes below it, 16-aligned because
        // `start_addr` is.
        let sp = unsafe {
            start.write(Start {
                ctl: Control {
                    sp: Cell::new(ptr::null_mut()),
                    caller_sp: Cell::new(ptr::null_mut()),
                    state: Cell::new(State::Live),
                    cancel: Cell::new(false),
                    unwinding: Cell::new(false),
                    id,
                    bottom: stack.bottom() as usize,
                    top,
                    guard_lo: guard.start,
                    guard_hi: guard.end,
                },
                payload,
            });
            switch::init_frame(start.cast(), entry, start.cast())
        };
        // SAFETY: just written, valid for the stack's lifetime.
        let (ctl, payload) = unsafe {
            (*start).ctl.sp.set(sp);
            (
                NonNull::from(&(*start).ctl),
                NonNull::from(&mut (*start).payload),
            )
        };
        let raw = RawCoroutine {
            stack: Some(stack),
            ctl,
        };
        (raw, payload)
    }

    /// The control block.
    pub(crate) fn control(&self) -> &Control {
        // SAFETY: valid while the stack is mapped, which `self` guarantees.
        unsafe { self.ctl.as_ref() }
    }

    /// Pointer to the control block (for the scheduler's bookkeeping).
    pub(crate) fn control_ptr(&self) -> NonNull<Control> {
        self.ctl
    }

    /// Where the coroutine is in its life.
    pub(crate) fn state(&self) -> State {
        if self.stack.is_none() {
            return State::Finished;
        }
        self.control().state.get()
    }

    /// Runs the coroutine until it suspends or finishes.
    ///
    /// # Safety
    /// The coroutine must be live (not finished), and not be one of the
    /// contexts currently on this thread's chain of resumers.
    #[inline]
    pub(crate) unsafe fn resume(&mut self) {
        // SAFETY: the caller's contract.
        unsafe { resume_ctl(self.ctl) }
    }

    /// Takes the stack back once the coroutine has finished, measuring its
    /// high-water mark first if `watermarks` is on.
    pub(crate) fn release(&mut self, watermarks: bool) -> Option<usize> {
        assert_eq!(self.state(), State::Finished, "releasing a live coroutine");
        let mut stack = self.stack.take()?;
        let high = if watermarks {
            Some(watermark::measure(&mut stack))
        } else {
            stack.pattern_intact_below = 0;
            None
        };
        stack::give(stack);
        high
    }

    /// The stack's usable size.
    pub(crate) fn stack_size(&self) -> usize {
        self.stack.as_ref().map_or(0, Stack::size)
    }
}

impl Drop for RawCoroutine {
    fn drop(&mut self) {
        if let Some(stack) = self.stack.take() {
            if self.control().state.get() == State::Finished {
                stack::give(stack);
            } else {
                // Frames are still live on it: unmapping would free memory
                // that destructors never ran for. Leak it instead.
                std::mem::forget(stack);
            }
        }
    }
}

impl fmt::Debug for RawCoroutine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawCoroutine")
            .field("id", &self.control().id)
            .field("state", &self.state())
            .finish()
    }
}

/// Switches into the coroutine of `ctl` until it suspends or finishes.
///
/// # Safety
/// As [`RawCoroutine::resume`]; `ctl` must point at a live control block.
#[inline]
pub(crate) unsafe fn resume_ctl(ctl: NonNull<Control>) {
    // SAFETY: the caller's contract: the block is live.
    let c = unsafe { ctl.as_ref() };
    debug_assert!(c.state.get() == State::Live && !is_running(c));
    let prev = RUNNING.with(|r| r.replace(ctl.as_ptr()));
    // SAFETY: `c.sp` was set by init_frame or by the coroutine's last
    // suspend, and the coroutine is not running anywhere (its state said so).
    unsafe { switch::resume(c.caller_sp.as_ptr(), c.sp.get()) };
    RUNNING.with(|r| r.set(prev));
}

/// Whether `ctl` is the coroutine whose stack this thread is on.
#[inline]
pub(crate) fn is_running(ctl: &Control) -> bool {
    ptr::eq(RUNNING.with(|r| r.get()), ctl)
}

/// Called on a coroutine's own stack: switches back to whoever resumed it,
/// and returns when it is resumed again.
///
/// Always inlined: between landing here and its next suspend, a coroutine
/// must not return from a function it did not call since, or the CPU's
/// return-address predictor goes wrong (see `switch/x86_64.rs`).
///
/// # Safety
/// `ctl` must be the control block of the coroutine running on this thread
/// ([`is_running`]), and this code must run on that coroutine's own stack.
/// Suspending from the stack of a coroutine it resumed would save a stack
/// pointer into a stack it does not own: the other coroutine could finish
/// and its stack be reused before this one is resumed there.
#[inline(always)]
pub(crate) unsafe fn suspend(ctl: &Control) {
    debug_assert!(is_running(ctl), "suspend off the coroutine's own stack");
    // SAFETY: `caller_sp` was saved by the resume that is waiting for us.
    unsafe { switch::suspend(ctl.sp.as_ptr(), ctl.caller_sp.get()) };
    // resume_ctl set RUNNING to us before switching here.
}

/// Ends a coroutine: marks it finished and switches away for good. Every
/// value on the coroutine's stack must have been dropped or moved out.
///
/// # Safety
/// As [`suspend`].
pub(crate) unsafe fn finish(ctl: &Control) -> ! {
    ctl.state.set(State::Finished);
    // SAFETY: as in `suspend`; this context is never resumed.
    unsafe { switch::finish(ctl.caller_sp.get()) }
}
