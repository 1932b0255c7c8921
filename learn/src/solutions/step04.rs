//! Step 4's exercises: a waker from a raw vtable, and a future that yields.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::thread::Thread;

// ANCHOR: raw_waker
/// Exercise 4.1: a waker that unparks `thread`, built from a `RawWaker`.
///
/// The data pointer is a `Box<Thread>`; the vtable says how to clone,
/// wake (consuming), wake by reference, and drop it. This is what
/// `impl Wake` plus `Waker::from(Arc)` writes for you, with an `Arc`.
pub fn raw_thread_waker(thread: Thread) -> Waker {
    let data = Box::into_raw(Box::new(thread)) as *const ();
    // SAFETY: `data` is a leaked `Box<Thread>`, and every VTABLE function
    // treats it as one: shared by reference in clone/wake_by_ref,
    // reclaimed exactly once in wake or drop.
    unsafe { Waker::from_raw(RawWaker::new(data, &VTABLE)) }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

/// # Safety
/// `data` is a live `Box<Thread>` from [`raw_thread_waker`] or `clone`.
unsafe fn clone(data: *const ()) -> RawWaker {
    // SAFETY: the caller guarantees `data` points to a live `Thread`.
    let thread = unsafe { &*(data as *const Thread) };
    RawWaker::new(
        Box::into_raw(Box::new(thread.clone())) as *const (),
        &VTABLE,
    )
}

/// # Safety
/// `data` is a live `Box<Thread>`, not used again after this call.
unsafe fn wake(data: *const ()) {
    // SAFETY: the caller hands over ownership of the box.
    let thread = unsafe { Box::from_raw(data as *mut Thread) };
    thread.unpark();
}

/// # Safety
/// `data` is a live `Box<Thread>`.
unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: the caller guarantees `data` points to a live `Thread`.
    unsafe { &*(data as *const Thread) }.unpark();
}

/// # Safety
/// `data` is a live `Box<Thread>`, not used again after this call.
unsafe fn drop_waker(data: *const ()) {
    // SAFETY: the caller hands over ownership of the box.
    drop(unsafe { Box::from_raw(data as *mut Thread) });
}
// ANCHOR_END: raw_waker

// ANCHOR: yield_times
/// Exercise 4.2: `Pending` `self.0` times, then `Ready`. It wakes its own
/// waker before each `Pending`: without that, nobody would poll it again.
#[derive(Debug)]
pub struct YieldTimes(pub usize);

impl Future for YieldTimes {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
// ANCHOR_END: yield_times

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step04_future_waker::{block_on, block_on_with, channel};
    use std::thread;
    use std::time::Duration;

    #[test]
    fn the_raw_waker_unparks_block_on() {
        let (tx, rx) = channel();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            tx.send(7);
        });
        let waker = raw_thread_waker(thread::current());
        let extra = waker.clone(); // clone and drop go through the vtable too
        drop(extra);
        assert_eq!(block_on_with(rx, waker).0, 7);
    }

    #[test]
    fn yielding_n_times_takes_n_plus_one_polls() {
        assert_eq!(block_on(YieldTimes(5)), ((), 6));
    }
}
