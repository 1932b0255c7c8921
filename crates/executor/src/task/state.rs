//! A task's state word: lifecycle flags in the low bits, a reference count
//! above them, all in one `AtomicUsize` so that a wake is a single
//! compare-and-swap.
//!
//! ```text
//!  bit:  63 ........ 6   5   4        3       2         1        0
//!       [ refcount    ] [ ] [HANDLE] [CLOSED] [COMPLETE] [RUNNING] [SCHEDULED]
//! ```
//!
//! Who changes what:
//! - any thread: `SCHEDULED` (a wake) and the reference count (waker clones);
//! - only the owner thread: `RUNNING`, `COMPLETE`, `CLOSED`, `HANDLE`.
//!
//! That split is why the future and its output need no lock: they are only
//! ever touched on the owner thread.

/// The task is in a run queue, or will be put back in one when the current
/// poll returns (a wake that arrived while `RUNNING`).
pub(crate) const SCHEDULED: usize = 1 << 0;
/// The future is being polled right now.
pub(crate) const RUNNING: usize = 1 << 1;
/// The future finished (or was cancelled, or panicked); the result is stored
/// and the future is gone. It is never polled again, and wakes are no-ops.
pub(crate) const COMPLETE: usize = 1 << 2;
/// Cancellation was requested (`abort`, or the runtime shutting down).
pub(crate) const CLOSED: usize = 1 << 3;
/// A `JoinHandle` exists and will take the output.
pub(crate) const HANDLE: usize = 1 << 4;

/// One reference, in the count's units.
pub(crate) const REF_ONE: usize = 1 << 6;
/// Mask of the reference count.
pub(crate) const REF_MASK: usize = !(REF_ONE - 1);

/// Number of references in a state word.
pub(crate) fn refs(state: usize) -> usize {
    (state & REF_MASK) / REF_ONE
}

/// Renders a state word for debugging: `SCHEDULED|HANDLE refs=3`.
pub(crate) fn describe(state: usize) -> String {
    let names = [
        (SCHEDULED, "SCHEDULED"),
        (RUNNING, "RUNNING"),
        (COMPLETE, "COMPLETE"),
        (CLOSED, "CLOSED"),
        (HANDLE, "HANDLE"),
    ];
    let flags: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| state & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    format!("{} refs={}", flags.join("|"), refs(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_refcount_do_not_overlap() {
        let all = SCHEDULED | RUNNING | COMPLETE | CLOSED | HANDLE;
        assert_eq!(all & REF_MASK, 0);
        assert_eq!(refs((3 * REF_ONE) | all), 3);
        assert_eq!(
            describe((2 * REF_ONE) | SCHEDULED | HANDLE),
            "SCHEDULED|HANDLE refs=2"
        );
    }
}
