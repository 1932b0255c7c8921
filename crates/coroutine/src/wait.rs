//! Blocking, the stackful way: poll, and if not ready, park the coroutine.
//!
//! Every blocking call of this crate is the same loop. It polls something
//! with a [`Context`] whose waker is the running coroutine's; if the answer
//! is `Pending`, the waker has been stored wherever the event will come from
//! (the reactor's slot for an fd, a timer, a join handle), and the coroutine
//! *parks*: it switches back to the scheduler, which runs others. When the
//! event fires, the waker puts the coroutine back in the run queue; the
//! scheduler resumes it; the loop polls again.
//!
//! ```text
//!   coroutine                          scheduler            reactor
//!   read() ─ poll_io: EAGAIN ─────────▶ (waker stored in the fd's slot)
//!   park(): switch ───────────────────▶ runs others, epoll_wait
//!                                        ◀── EPOLLIN: wake() → run queue
//!   ◀──────────────────────── switch ── resume
//!   poll_io: read(2) → n bytes
//! ```
//!
//! The futures world is one call away: [`await_future`] drives any `Future`
//! this way, so `reactor::time` and other waker-based code work unchanged.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::ptr;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use reactor::{Reactor, TimerKey};

use crate::coroutine::{Cancelled, cancel_exit};
use crate::raw;
use crate::task::TaskFrame;

thread_local! {
    /// The scheduled coroutine running on this thread (null: none).
    static CURRENT: Cell<*const TaskFrame> = const { Cell::new(ptr::null()) };
}

/// Makes `frame` the current coroutine until the returned value is restored
/// with [`restore_current`]. Used by the scheduler around each resume.
pub(crate) fn set_current(frame: *const TaskFrame) -> *const TaskFrame {
    CURRENT.with(|c| c.replace(frame))
}

/// The scheduled coroutine running on this thread (null: none).
#[inline]
pub(crate) fn current_frame() -> *const TaskFrame {
    CURRENT.with(|c| c.get())
}

/// Undoes [`set_current`].
pub(crate) fn restore_current(prev: *const TaskFrame) {
    CURRENT.with(|c| c.set(prev));
}

/// The running coroutine's frame, if a scheduled coroutine is running.
fn try_current() -> Option<&'static TaskFrame> {
    let f = CURRENT.with(|c| c.get());
    // SAFETY: CURRENT is non-null only while the coroutine whose stack holds
    // the frame is running (the scheduler clears it when it switches back),
    // and we are that coroutine. 'static is a white lie kept local: callers
    // use the reference only before they return.
    (!f.is_null()).then(|| unsafe { &*f })
}

fn current() -> &'static TaskFrame {
    try_current().expect(
        "blocking call outside a coroutine: call it inside coroutine::run, \
         Runtime::block_on or a coroutine::spawn'ed closure",
    )
}

/// Whether the caller runs inside a coroutine of a [`crate::Runtime`].
pub fn in_coroutine() -> bool {
    try_current().is_some()
}

/// Switches to the scheduler until the coroutine is woken.
///
/// A cancelled coroutine unwinds here, or gets `Err(Cancelled)` when an
/// unwind is unsafe (see [`Cancelled`]). Inlined: the caller has saved its
/// registers already, and the switch itself is a dozen instructions.
#[inline(always)]
fn park(frame: &TaskFrame) -> Result<(), Cancelled> {
    // SAFETY: the slab keeps the header alive while the coroutine lives.
    let header = unsafe { &*frame.header };
    // SAFETY: `ctl` is this coroutine's control block, on its own stack.
    let ctl = unsafe { &*frame.ctl.get() };
    if header.cancel.load(Ordering::Relaxed) {
        return cancel_exit(ctl, std::thread::panicking());
    }
    let was_panicking = std::thread::panicking();
    // SAFETY: CURRENT named this coroutine, so we run on its own stack: the
    // scheduler sets CURRENT only around resuming it, and a generator it
    // resumes runs with CURRENT cleared (`coroutine::resume_isolated`).
    unsafe { raw::suspend(ctl) };
    if header.cancel.load(Ordering::Relaxed) {
        return cancel_exit(ctl, was_panicking);
    }
    Ok(())
}

/// Polls `poll` with the running coroutine's waker until it is ready,
/// parking the coroutine in between: how to block on anything that has a
/// waker-based API.
///
/// Errors only as described in [`Cancelled`].
///
/// # Panics
/// Outside a coroutine.
pub fn wait<R>(mut poll: impl FnMut(&mut Context<'_>) -> Poll<R>) -> Result<R, Cancelled> {
    let frame = current();
    let mut cx = Context::from_waker(&frame.waker);
    loop {
        if let Poll::Ready(r) = poll(&mut cx) {
            return Ok(r);
        }
        park(frame)?;
    }
}

/// Like [`wait`], but outside a coroutine polls once (with a no-op waker)
/// and panics only if that is not enough.
pub(crate) fn wait_or_now<R>(
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<R>,
) -> Result<R, Cancelled> {
    if try_current().is_some() {
        return wait(poll);
    }
    match poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(r) => Ok(r),
        Poll::Pending => panic!("JoinHandle::join outside a coroutine on an unfinished coroutine"),
    }
}

/// Runs a future to completion on the running coroutine, parking it while
/// the future is pending.
///
/// Errors only as described in [`Cancelled`] (the future is dropped).
///
/// # Panics
/// Outside a coroutine.
pub fn await_future<F: Future>(future: F) -> Result<F::Output, Cancelled> {
    let mut future = pin!(future);
    wait(|cx| future.as_mut().poll(cx))
}

/// Why [`wait_until`] gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitError {
    TimedOut,
    Cancelled,
}

impl From<WaitError> for std::io::Error {
    fn from(e: WaitError) -> std::io::Error {
        match e {
            WaitError::TimedOut => {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "deadline elapsed")
            }
            WaitError::Cancelled => Cancelled.into(),
        }
    }
}

/// Removes a timer when dropped (also on unwind).
struct TimerGuard<'a> {
    reactor: &'a Reactor,
    key: TimerKey,
}

impl Drop for TimerGuard<'_> {
    fn drop(&mut self) {
        self.reactor.remove_timer(self.key);
    }
}

/// [`wait`] with an optional deadline. The timer is armed only if the first
/// poll is pending: the common, ready case costs no timer and no clock read.
/// A ready result wins over an expired deadline.
pub(crate) fn wait_until<R>(
    reactor: &Reactor,
    deadline: Option<Instant>,
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<R>,
) -> Result<R, WaitError> {
    let frame = current();
    let mut cx = Context::from_waker(&frame.waker);
    if let Poll::Ready(r) = poll(&mut cx) {
        return Ok(r);
    }
    let Some(deadline) = deadline else {
        loop {
            park(frame).map_err(|_| WaitError::Cancelled)?;
            if let Poll::Ready(r) = poll(&mut cx) {
                return Ok(r);
            }
        }
    };
    if deadline <= Instant::now() {
        return Err(WaitError::TimedOut);
    }
    let timer = TimerGuard {
        reactor,
        key: reactor.insert_timer(deadline),
    };
    loop {
        if reactor.poll_timer(timer.key, &mut cx).is_ready() {
            return Err(WaitError::TimedOut);
        }
        park(frame).map_err(|_| WaitError::Cancelled)?;
        if let Poll::Ready(r) = poll(&mut cx) {
            return Ok(r);
        }
    }
}

/// Lets the other ready coroutines run: this one goes to the back of the
/// run queue. Returns at once outside a coroutine.
pub fn yield_now() {
    let Some(frame) = try_current() else {
        return;
    };
    // SAFETY: the slab keeps the header alive while the coroutine lives.
    let header = unsafe { &*frame.header };
    // The scheduler cleared `queued` when it resumed us, so this queues us.
    header.schedule();
    let _ = park(frame);
}

/// Blocks the running coroutine for `duration`.
///
/// # Panics
/// Outside a coroutine.
pub fn sleep(duration: Duration) {
    sleep_until(Instant::now() + duration);
}

/// Blocks the running coroutine until `deadline` (at least until the next
/// reactor turn, like [`reactor::time::sleep_until`]). Returns early only if
/// the coroutine is cancelled while its thread is unwinding.
///
/// # Panics
/// Outside a coroutine.
pub fn sleep_until(deadline: Instant) {
    let reactor = Reactor::current();
    let timer = TimerGuard {
        reactor: &reactor,
        key: reactor.insert_timer(deadline),
    };
    let _ = wait(|cx| reactor.poll_timer(timer.key, cx));
}
