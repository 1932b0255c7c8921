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
use std::sync::atomic::{AtomicU64, Ordering, compiler_fence};

use crate::stack::{self, Stack};
use crate::switch::{self, Entry};
use crate::{guard, watermark};

/// Where a coroutine is in its life.
///
/// Only two states, written twice in a coroutine's life (at creation and at
/// its end), never on a switch. Whether a live coroutine is running is
/// [`is_running`]'s business (is the stack pointer on its stack?). A
/// `Running`/`Suspended` cell that each side of every switch wrote, and the
/// other side read back a few instructions later, cost 0.6 ns of the round
/// trip (4.57 → 3.94 ns on AMD EPYC; see `switch/x86_64.rs`, "What a round
/// trip costs").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Not finished: never resumed yet, suspended, or running.
    Live,
    /// Its entry function has ended; the stack can be reused.
    Finished,
}

/// What both sides of a switch need, at the top of the coroutine's stack.
pub(crate) struct Control {
    /// A scheduled coroutine's stack pointer while it is not running (what
    /// [`resume_ctl`] resumes). A generator keeps its own in its
    /// [`RawCoroutine`] instead, where the compiler can hold it in a
    /// register across a loop of resumes; this field then only holds the
    /// first one.
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
    /// `top - bottom`, so that [`Control::holds_sp`] is one comparison.
    len: usize,
    /// The thread's list of live generators (see [`GENERATORS`]): the next
    /// older and newer entries, and whether this one is listed.
    older: Cell<*const Control>,
    newer: Cell<*const Control>,
    listed: Cell<bool>,
}

/// The block written at the top of a new coroutine's stack. `repr(C)` puts
/// `ctl` at offset 0, so a pointer to one is a pointer to the other.
#[repr(C)]
pub(crate) struct Start<P> {
    pub(crate) ctl: Control,
    pub(crate) payload: P,
}

thread_local! {
    /// The control block of the *scheduled* coroutine this thread's
    /// scheduler is running (null: none), set by [`resume_ctl`] around each
    /// resume. A generator resumed inside it runs with this unchanged: the
    /// readers below check that the stack pointer is on the coroutine's
    /// stack before they trust it. Const-initialised and without a
    /// destructor, so reading it is one TLS load, safe in a signal handler.
    static RUNNING: Cell<*const Control> = const { Cell::new(ptr::null()) };

    /// The newest live generator of this thread, whose control block links
    /// to the older ones (`Control::older`). Generators do not set
    /// `RUNNING`: a thread-local saved, written and restored around every
    /// resume, with the saved value held in a register across the switch,
    /// cost 0.6 ns of a 3.6 ns round trip (3.63 → 3.01 ns, AMD EPYC). So
    /// the SIGSEGV handler and [`current_id`] find them here instead, by
    /// stack address. Changed only when a generator is created or released, by
    /// stores ordered so that a signal handler walking it from here always
    /// sees a well-formed chain.
    static GENERATORS: Cell<*const Control> = const { Cell::new(ptr::null()) };
}

/// Generators listed at most: a bound on the signal handler's walk, in case
/// the list is ever corrupt.
const MAX_WALK: usize = 1 << 20;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh coroutine id.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

impl Control {
    /// Where the coroutine is in its life.
    pub(crate) fn state(&self) -> State {
        self.state.get()
    }

    /// Whether `sp` is on this coroutine's usable stack.
    #[inline(always)]
    pub(crate) fn holds_sp(&self, sp: usize) -> bool {
        sp.wrapping_sub(self.bottom) < self.len
    }

    fn overflow(&self) -> Overflow {
        Overflow {
            id: self.id,
            guard: (self.guard_lo, self.guard_hi),
            stack: (self.bottom, self.top),
        }
    }
}

/// The control block of the coroutine whose stack holds `sp`, among the
/// scheduled one running and this thread's generators, chosen by `pick`
/// (given each candidate). Reads only const thread-locals and the control
/// blocks, so it is safe in a signal handler.
fn find(pick: impl Fn(&Control) -> bool) -> Option<&'static Control> {
    let mut ctl = GENERATORS.with(|g| g.get());
    let mut steps = 0;
    while !ctl.is_null() && steps < MAX_WALK {
        // SAFETY: listed control blocks are live (a generator is unlisted
        // before its stack is released), and ours: only this thread's
        // generators are on this thread's list.
        let c = unsafe { &*ctl };
        if pick(c) {
            return Some(c);
        }
        ctl = c.older.get();
        steps += 1;
    }
    let ctl = RUNNING.with(|r| r.get());
    // SAFETY: RUNNING points at the control block of the scheduled
    // coroutine being resumed, whose stack is mapped while it is set.
    (!ctl.is_null())
        .then(|| unsafe { &*ctl })
        .filter(|c| pick(c))
}

/// The id of the coroutine running on this thread, if any: the one whose
/// stack the caller is on.
pub fn current_id() -> Option<u64> {
    let sp = switch::current_sp();
    find(|c| c.holds_sp(sp)).map(|c| c.id)
}

/// What the SIGSEGV handler reports about an overflow.
pub(crate) struct Overflow {
    pub(crate) id: u64,
    /// The guard page, `[lo, hi)`.
    pub(crate) guard: (usize, usize),
    /// The usable stack, `[bottom, top)`.
    pub(crate) stack: (usize, usize),
}

/// For the SIGSEGV handler: if `addr` is in the guard page of one of this
/// thread's coroutines, which coroutine that is.
pub(crate) fn guard_hit(addr: usize) -> Option<Overflow> {
    find(|c| (c.guard_lo..c.guard_hi).contains(&addr)).map(Control::overflow)
}

/// For the SIGSEGV handler, when the kernel forced the signal because it
/// could not write another signal's frame: if the interrupted stack pointer
/// `sp` is on one of this thread's coroutine stacks within `margin` bytes
/// of its guard page (so the frame would have reached into it), which
/// coroutine.
pub(crate) fn frame_overflow(sp: usize, margin: usize) -> Option<Overflow> {
    find(|c| (c.guard_lo..c.bottom.saturating_add(margin).min(c.top)).contains(&sp))
        .map(Control::overflow)
}

/// A coroutine without types: the stack and a pointer to its control block.
/// Its owner must see it to [`State::Finished`] before dropping it (the
/// typed wrappers do so by cancelling); otherwise the stack is leaked rather
/// than unmapped under live frames.
pub(crate) struct RawCoroutine {
    stack: Option<Stack>,
    ctl: NonNull<Control>,
    /// A generator's saved stack pointer, null once it has finished (see
    /// [`RawCoroutine::resume`]). Unused for a scheduled coroutine, whose
    /// saved stack pointer is in its control block.
    sp: *mut u8,
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
                    len: top - stack.bottom() as usize,
                    older: Cell::new(ptr::null()),
                    newer: Cell::new(ptr::null()),
                    listed: Cell::new(false),
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
            sp,
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

    /// Lists this coroutine as one of the thread's generators, for the
    /// SIGSEGV handler and [`current_id`] (see [`GENERATORS`]); unlisted by
    /// [`RawCoroutine::release`] or on drop.
    pub(crate) fn list_as_generator(&self) {
        let c = self.control();
        debug_assert!(!c.listed.get());
        GENERATORS.with(|head| {
            let old = head.get();
            c.older.set(old);
            c.newer.set(ptr::null());
            if !old.is_null() {
                // SAFETY: listed blocks are live (see `find`).
                unsafe { &*old }.newer.set(c);
            }
            // The entry is complete before it is reachable: a signal handler
            // on this thread sees the old list or the new one.
            compiler_fence(Ordering::SeqCst);
            head.set(c);
        });
        c.listed.set(true);
    }

    fn unlist(ctl: NonNull<Control>) {
        // SAFETY: the caller still holds the stack the block lives on.
        let c = unsafe { ctl.as_ref() };
        if !c.listed.replace(false) {
            return;
        }
        let (older, newer) = (c.older.get(), c.newer.get());
        // Unlinked from the newer side first: the chain a handler walks
        // from the head skips `c` from this store on.
        if newer.is_null() {
            GENERATORS.with(|head| head.set(older));
        } else {
            // SAFETY: listed blocks are live (see `find`).
            unsafe { &*newer }.older.set(older);
        }
        compiler_fence(Ordering::SeqCst);
        if !older.is_null() {
            // SAFETY: as above.
            unsafe { &*older }.newer.set(newer);
        }
    }

    /// Runs a generator until it suspends or finishes, keeping its saved
    /// stack pointer here rather than in the control block: the switch hands
    /// it back in a register, so in a loop of resumes the compiler can carry
    /// it from one resume to the next without a store and reload on the
    /// switch's critical path (see `switch/x86_64.rs`).
    ///
    /// # Safety
    /// The coroutine must be live (not finished), and not be one of the
    /// contexts currently on this thread's chain of resumers.
    #[inline(always)]
    pub(crate) unsafe fn resume(&mut self) {
        // SAFETY: the caller's contract.
        self.sp = unsafe { resume_at(self.ctl.as_ref(), self.sp) };
    }

    /// The control block and a generator's saved stack pointer, for a
    /// resume done elsewhere; [`RawCoroutine::set_sp`] takes the result.
    #[inline(always)]
    pub(crate) fn parts(&self) -> (NonNull<Control>, *mut u8) {
        (self.ctl, self.sp)
    }

    /// Records what a resume done through [`RawCoroutine::parts`] returned.
    #[inline(always)]
    pub(crate) fn set_sp(&mut self, sp: *mut u8) {
        self.sp = sp;
    }

    /// Whether a generator resumed by [`RawCoroutine::resume`] has finished.
    #[inline(always)]
    pub(crate) fn is_finished(&self) -> bool {
        self.sp.is_null()
    }

    /// Takes the stack back once the coroutine has finished, measuring its
    /// high-water mark first if `watermarks` is on.
    ///
    /// Inlined, handing the out-of-line part the stack by value: a call
    /// that took `&mut self` would let the compiler assume any later
    /// `asm!` (the switch, `black_box`) may change the coroutine, and make
    /// a loop of resumes reload the saved stack pointer from memory each
    /// time instead of keeping it in a register.
    #[inline(always)]
    pub(crate) fn release(&mut self, watermarks: bool) -> Option<usize> {
        assert_eq!(self.state(), State::Finished, "releasing a live coroutine");
        let stack = self.stack.take()?;
        release_stack(self.ctl, stack, watermarks)
    }

    /// The stack's usable size.
    pub(crate) fn stack_size(&self) -> usize {
        self.stack.as_ref().map_or(0, Stack::size)
    }
}

/// [`RawCoroutine::release`]'s out-of-line part.
fn release_stack(ctl: NonNull<Control>, mut stack: Stack, watermarks: bool) -> Option<usize> {
    RawCoroutine::unlist(ctl);
    let high = if watermarks {
        Some(watermark::measure(&mut stack))
    } else {
        stack.pattern_intact_below = 0;
        None
    };
    stack::give(stack);
    high
}

impl Drop for RawCoroutine {
    fn drop(&mut self) {
        if let Some(stack) = self.stack.take() {
            Self::unlist(self.ctl);
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

/// Switches into the coroutine of `ctl`, whose saved stack pointer is
/// `sp`, until it suspends or finishes. Returns its new saved stack
/// pointer, or null if it finished.
///
/// # Safety
/// As [`RawCoroutine::resume`]; `sp` must be the coroutine's saved stack
/// pointer.
#[inline(always)]
pub(crate) unsafe fn resume_at(ctl: &Control, sp: *mut u8) -> *mut u8 {
    debug_assert!(ctl.state.get() == State::Live && !is_running(ctl));
    // SAFETY: the caller's contract: `sp` was made by init_frame or handed
    // back by the coroutine's last suspend, and it is not running anywhere.
    unsafe { switch::resume(ctl.caller_sp.as_ptr(), sp) }
}

/// The scheduler's resume: switches into the coroutine of `ctl` until it
/// suspends or finishes, with its saved stack pointer kept in the control
/// block and [`RUNNING`] naming it meanwhile.
///
/// # Safety
/// As [`RawCoroutine::resume`]; `ctl` must point at a live control block.
#[inline]
pub(crate) unsafe fn resume_ctl(ctl: NonNull<Control>) {
    // SAFETY: the caller's contract: the block is live.
    let c = unsafe { ctl.as_ref() };
    let prev = RUNNING.with(|r| r.replace(ctl.as_ptr()));
    // SAFETY: `c.sp` was set by init_frame or by the last return of this
    // very call; the caller's contract does the rest.
    let sp = unsafe { resume_at(c, c.sp.get()) };
    c.sp.set(sp);
    RUNNING.with(|r| r.set(prev));
}

/// Whether the caller runs on the stack of the coroutine of `ctl` (which is
/// then running on this thread: a stack is only ever run by one thread).
#[inline(always)]
pub(crate) fn is_running(ctl: &Control) -> bool {
    ctl.holds_sp(switch::current_sp())
}

/// Called on a coroutine's own stack: switches back to whoever resumed it,
/// and returns when it is resumed again.
///
/// Always inlined: between landing here and its next suspend, a coroutine
/// must not return from a function it did not call since, or the CPU's
/// return-address predictor goes wrong (see `switch/x86_64.rs`).
///
/// # Safety
/// `ctl` must be the control block of the coroutine running on this thread,
/// and this code must run on that coroutine's own stack ([`is_running`]).
/// Suspending from the stack of a coroutine it resumed would save a stack
/// pointer into a stack it does not own: the other coroutine could finish
/// and its stack be reused before this one is resumed there.
#[inline(always)]
pub(crate) unsafe fn suspend(ctl: &Control) {
    debug_assert!(is_running(ctl), "suspend off the coroutine's own stack");
    // SAFETY: `caller_sp` was saved by the resume that is waiting for us.
    unsafe { switch::suspend(ctl.caller_sp.get()) };
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
