//! Step 4: a `Future` and a `Waker`, by hand, for one task.
//!
//! A future is a value with a `poll` method: "are you done? if not, here
//! is how to tell me when to ask again" (the [`Waker`] inside the
//! [`Context`]). Nothing runs a future but someone calling `poll`; a
//! future that returns `Pending` must have arranged for the waker to be
//! called, or nobody will poll it again.
//!
//! Here a [`Receiver`] waits for a value another thread sends, and
//! [`block_on`] runs one future on the current thread: poll, and if it is
//! pending, park the thread until the waker unparks it.
//!
//! Exercises (solutions in [`crate::solutions::step04`]):
//!
//! 1. `raw_thread_waker(thread)`: build the same waker without the
//!    [`Wake`] trait, from a `RawWaker` and its vtable of four functions.
//! 2. `YieldTimes(n)`: a future that returns `Pending` `n` times, waking
//!    itself each time, then `Ready`. How many polls does `block_on` make?

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

// ANCHOR: channel
/// What the sender and the receiver share.
#[derive(Debug, Default)]
struct Slot<T> {
    value: Option<T>,
    /// The waker of the last poll that found no value.
    waker: Option<Waker>,
}

/// The sending half of a one-value channel.
#[derive(Debug)]
pub struct Sender<T>(Arc<Mutex<Slot<T>>>);

/// The receiving half: a future that resolves to the sent value.
#[derive(Debug)]
pub struct Receiver<T>(Arc<Mutex<Slot<T>>>);

/// A channel for one value, from any thread to a future.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Mutex::new(Slot {
        value: None,
        waker: None,
    }));
    (Sender(slot.clone()), Receiver(slot))
}

impl<T> Sender<T> {
    /// Stores the value and wakes the receiver's task, if it waits.
    pub fn send(self, value: T) {
        let waker = {
            let mut slot = self.0.lock().unwrap();
            slot.value = Some(value);
            slot.waker.take()
        };
        // Wake outside the lock: the woken task may poll at once.
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = self.0.lock().unwrap();
        match slot.value.take() {
            Some(value) => Poll::Ready(value),
            None => {
                // Under the same lock as `send`: the value cannot arrive
                // between the check and storing the waker.
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
// ANCHOR_END: channel

// ANCHOR: block_on
/// A waker that unparks the thread blocked in [`block_on`].
#[derive(Debug)]
pub struct ThreadWaker(pub Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on this thread; returns its output and
/// how many times it was polled.
pub fn block_on<F: Future>(future: F) -> (F::Output, usize) {
    block_on_with(
        future,
        Waker::from(Arc::new(ThreadWaker(thread::current()))),
    )
}

/// [`block_on`] with the given waker, which must unpark this thread.
pub fn block_on_with<F: Future>(future: F, waker: Waker) -> (F::Output, usize) {
    // Pinned on the stack: a future may hold references into itself.
    let mut future = pin!(future);
    let mut cx = Context::from_waker(&waker);
    let mut polls = 0;
    loop {
        polls += 1;
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return (output, polls);
        }
        // If wake() ran already, park returns at once (the thread keeps an
        // unpark token), so a wake between poll and park is not lost. Park
        // may also return for no reason: polling again is harmless.
        thread::park();
    }
}
// ANCHOR_END: block_on

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_value_from_another_thread() {
        let (tx, rx) = channel();
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            tx.send(42);
        });
        let (value, polls) = block_on(rx);
        assert_eq!(value, 42);
        assert!(
            polls >= 2,
            "pending first, ready after the wake; was {polls}"
        );
        sender.join().unwrap();
    }

    #[test]
    fn a_value_sent_before_the_first_poll() {
        let (tx, rx) = channel();
        tx.send("early");
        assert_eq!(block_on(rx), ("early", 1));
    }

    #[test]
    fn async_blocks_are_futures_too() {
        let (tx, rx) = channel();
        let (out, _) = block_on(async move {
            thread::spawn(move || tx.send(20));
            rx.await + 1
        });
        assert_eq!(out, 21);
    }
}
