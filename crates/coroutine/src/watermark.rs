//! Stack high-water marks: how deep did a coroutine's stack really go?
//!
//! Before the coroutine starts, its stack is filled with a known 8-byte
//! pattern. When it finishes, we scan upwards from the bottom for the first
//! word that is no longer the pattern: everything from there to the top was
//! written at some point, so `top - that address` is the most stack the
//! coroutine ever used.
//!
//! ```text
//!   bottom                                                     top
//!   │ C0DE57AC C0DE57AC C0DE57AC ... │ 7f3a... 0000 ... frames │
//!   └──────── never touched ─────────┴──── high-water mark ────┘
//! ```
//!
//! It is a debugging aid, not free: filling costs a write of every page
//! (which also makes every page resident), so it is off unless asked for
//! with [`crate::Builder::stack_watermarks`] or the `COROUTINE_WATERMARKS`
//! environment variable (which also prints a line per finished coroutine).
//! On a recycled stack only the part the previous coroutine dirtied is
//! filled again.
//!
//! A function that reserves a large frame and never writes part of it is
//! under-counted by that part; stack probes touch each page of a big frame,
//! so the error is below a page. It is a measurement to choose a stack size
//! with headroom, not a guarantee.

use std::sync::OnceLock;

use crate::stack::Stack;

/// The fill pattern. Any value works if real stack contents rarely equal
/// it; this one is not a plausible pointer, length or small integer.
const PATTERN: u64 = 0xC0DE_57AC_C0DE_57AC;

/// Fills the stack with the pattern, except what is known to still hold it.
pub(crate) fn fill(stack: &mut Stack) {
    let bottom = stack.bottom() as usize;
    let top = stack.top() as usize;
    let from = match stack.pattern_intact_below {
        0 => bottom,
        intact => intact.clamp(bottom, top),
    };
    let words = (top - from) / 8;
    crate::valgrind::make_mem_defined(from as *const u8, top - from);
    // SAFETY: [from, top) is inside the stack's usable range, 8-aligned
    // (both ends are page- or word-aligned), and nothing runs on the stack:
    // it is filled before its coroutine is created.
    unsafe {
        std::slice::from_raw_parts_mut(from as *mut u64, words).fill(PATTERN);
    }
    stack.pattern_intact_below = top;
}

/// Measures how many bytes of the stack were used since [`fill`], and
/// remembers where the pattern is still intact.
pub(crate) fn measure(stack: &mut Stack) -> usize {
    let bottom = stack.bottom() as usize;
    let top = stack.top() as usize;
    let words = (top - bottom) / 8;
    crate::valgrind::make_mem_defined(bottom as *const u8, top - bottom);
    // SAFETY: the usable range of a stack whose coroutine has finished; all
    // of it was written by `fill` or by the coroutine.
    let slice = unsafe { std::slice::from_raw_parts(bottom as *const u64, words) };
    let untouched = slice.iter().take_while(|&&w| w == PATTERN).count();
    let lowest_used = bottom + untouched * 8;
    stack.pattern_intact_below = lowest_used;
    top - lowest_used
}

/// Whether `COROUTINE_WATERMARKS` is set (to anything but `0`): measure and
/// print a line for every coroutine that finishes.
pub(crate) fn from_env() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("COROUTINE_WATERMARKS").is_some_and(|v| v != "0"))
}

/// The line printed for one finished coroutine when `COROUTINE_WATERMARKS`
/// is set.
pub(crate) fn report(id: u64, used: usize, size: usize) {
    eprintln!(
        "coroutine {id}: stack high-water mark {used} of {size} bytes ({:.1}%)",
        used as f64 * 100.0 / size as f64
    );
}
