//! [`Coroutine`]: a stackful coroutine you resume by hand (a generator).
//!
//! This is the layer under the scheduler, usable on its own: `resume()`
//! runs the body on its own stack until it calls [`Yielder::suspend`] (the
//! value comes out of `resume` as [`CoroutineResult::Yield`]) or returns
//! ([`CoroutineResult::Return`]). Nothing is allocated: the body and the
//! result slots live at the top of the coroutine's stack, which comes from
//! the thread's pool.
//!
//! ## Panics and cancellation
//!
//! A panic in the body is caught at the coroutine's entry (it must never
//! unwind into the hand-written switch, which has no unwind information to
//! go through) and re-raised by `resume` on the resumer's stack.
//!
//! Dropping a coroutine that is suspended **cancels** it: it is resumed one
//! last time with a flag set, its pending `suspend` unwinds with a
//! [`Cancelled`] payload, destructors run all the way up, the entry catches
//! the payload, and the stack goes back to the pool. Nothing on the stack
//! is leaked. See [`Cancelled`] for the fine print.

use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::NonNull;

use crate::raw::{self, Control, RawCoroutine, Start, State};
use crate::stack::{self, DEFAULT_STACK_SIZE};

/// The unwinding payload (and error) of a cancelled coroutine.
///
/// **The cancellation rule.** A coroutine is cancelled when its owner gives
/// it up while it is suspended: a [`Coroutine`] dropped before it finished,
/// a scheduled coroutine whose [`crate::JoinHandle::abort`] was called, or
/// any coroutine still alive when its [`crate::Runtime`] is dropped. It is
/// resumed, and the call it was suspended in (`suspend`, a blocking read,
/// `sleep`, `yield_now`...) starts an unwind with `Cancelled` as payload
/// (`std::panic::resume_unwind`: no panic message is printed). Destructors
/// run on the way up; the coroutine's entry catches the payload; the stack
/// is recycled.
///
/// A second unwind must never start inside a destructor that runs during
/// an unwind (the process would abort). So once the cancellation unwind has
/// begun, every later suspending call of the coroutine (a destructor that
/// writes a goodbye, say) returns at once instead: I/O fails with an error
/// whose source is `Cancelled` (see [`is_cancelled`]), `sleep` and
/// `yield_now` return early. The same happens if the coroutine was already
/// unwinding from a panic of its own when it suspended (the thread's panic
/// flag was up), since the runtime cannot tell that apart. Catching the
/// `Cancelled` payload is allowed, but the coroutine stays cancelled: its
/// blocking calls keep failing, and it should return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("coroutine cancelled")
    }
}

impl std::error::Error for Cancelled {}

impl From<Cancelled> for io::Error {
    fn from(c: Cancelled) -> io::Error {
        io::Error::other(c)
    }
}

/// Whether an I/O error says the calling coroutine has been cancelled.
pub fn is_cancelled(err: &io::Error) -> bool {
    err.get_ref().is_some_and(|e| e.is::<Cancelled>())
}

/// What a suspending call of a cancelled coroutine does: start the unwind,
/// or fail the call when unwinding might abort the process.
///
/// `maybe_unwinding` is `std::thread::panicking()` as it was when the
/// coroutine suspended (or now, if it has not): if it was false, the
/// coroutine was not in the middle of an unwind, whatever other contexts of
/// the thread are doing now, so a new unwind is safe.
#[cold]
#[inline(never)]
pub(crate) fn cancel_exit(ctl: &Control, maybe_unwinding: bool) -> Result<(), Cancelled> {
    if maybe_unwinding || ctl.unwinding.get() {
        return Err(Cancelled);
    }
    ctl.unwinding.set(true);
    panic::resume_unwind(Box::new(Cancelled))
}

/// What [`Coroutine::resume`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoroutineResult<Y, R> {
    /// The body called [`Yielder::suspend`] with this value.
    Yield(Y),
    /// The body returned this value; the coroutine is finished.
    Return(R),
}

struct Slots<Y, R> {
    yielded: Cell<Option<Y>>,
    returned: Cell<Option<std::thread::Result<R>>>,
}

#[repr(C)]
struct Payload<F, Y, R> {
    slots: Slots<Y, R>,
    body: ManuallyDrop<F>,
}

/// A stackful coroutine resumed by hand: `resume()` runs the body on its
/// own stack until it calls [`Yielder::suspend`] (the value comes out as
/// [`CoroutineResult::Yield`]) or returns ([`CoroutineResult::Return`]).
/// The body and the result slots live at the top of its stack, which comes
/// from the thread's pool: creating one allocates nothing.
///
/// ```
/// use coroutine::{Coroutine, CoroutineResult};
///
/// let mut counter = Coroutine::new(|y| {
///     for i in 0..3 {
///         y.suspend(i);
///     }
///     "done"
/// });
/// assert_eq!(counter.resume(), CoroutineResult::Yield(0));
/// assert_eq!(counter.resume(), CoroutineResult::Yield(1));
/// assert_eq!(counter.resume(), CoroutineResult::Yield(2));
/// assert_eq!(counter.resume(), CoroutineResult::Return("done"));
/// ```
///
/// A coroutine never leaves its thread; the compiler enforces it:
///
/// ```compile_fail
/// let co = coroutine::Coroutine::<u32, ()>::new(|y| y.suspend(1));
/// std::thread::spawn(move || drop(co)); // error: `*mut ()` cannot be sent between threads
/// ```
///
///
/// The body is a context of its own: resumed from a scheduled coroutine,
/// it does not run as part of it (blocking calls in it panic as outside a
/// coroutine; it may run a [`crate::Runtime`] of its own), and only the
/// body itself may [`suspend`](Yielder::suspend) it.
///
/// A panic in the body is re-raised by `resume`. Dropping a suspended
/// coroutine cancels it: its pending `suspend` unwinds, running every
/// destructor on its stack (see [`Cancelled`]).
///
/// `!Send` and `!Sync`: its stack belongs to the thread's pool, and values
/// on it may be `!Send` themselves.
pub struct Coroutine<Y, R> {
    raw: RawCoroutine,
    slots: NonNull<Slots<Y, R>>,
    _not_send: PhantomData<*mut ()>,
}

/// The body's handle for suspending itself.
pub struct Yielder<Y> {
    ctl: NonNull<Control>,
    slot: NonNull<Cell<Option<Y>>>,
    _not_send: PhantomData<*mut ()>,
}

impl<Y: 'static, R: 'static> Coroutine<Y, R> {
    /// A coroutine that will run `body` on a [`DEFAULT_STACK_SIZE`] stack.
    /// Nothing runs until the first [`resume`](Coroutine::resume).
    ///
    /// # Panics
    /// If no stack can be mapped (see [`Coroutine::try_with_stack_size`]).
    pub fn new<F>(body: F) -> Coroutine<Y, R>
    where
        F: FnOnce(&Yielder<Y>) -> R + 'static,
    {
        Self::with_stack_size(DEFAULT_STACK_SIZE, body)
    }

    /// Like [`Coroutine::new`] with a stack of `size` usable bytes.
    ///
    /// # Panics
    /// If no stack can be mapped.
    pub fn with_stack_size<F>(size: usize, body: F) -> Coroutine<Y, R>
    where
        F: FnOnce(&Yielder<Y>) -> R + 'static,
    {
        Self::try_with_stack_size(size, body).expect("failed to map a coroutine stack")
    }

    /// Like [`Coroutine::with_stack_size`], returning the `mmap` error.
    pub fn try_with_stack_size<F>(size: usize, body: F) -> io::Result<Coroutine<Y, R>>
    where
        F: FnOnce(&Yielder<Y>) -> R + 'static,
    {
        let stack = stack::take(size)?;
        let payload = Payload {
            slots: Slots {
                yielded: Cell::new(None),
                returned: Cell::new(None),
            },
            body: ManuallyDrop::new(body),
        };
        let (raw, payload) =
            RawCoroutine::new(stack, raw::next_id(), payload, entry::<F, Y, R>, false);
        raw.list_as_generator();
        // SAFETY: the payload lives at the top of the stack `raw` owns.
        let slots = unsafe { NonNull::from(&payload.as_ref().slots) };
        Ok(Coroutine {
            raw,
            slots,
            _not_send: PhantomData,
        })
    }

    /// Runs the body until it suspends or returns.
    ///
    /// # Panics
    /// If the coroutine has already returned, and with the body's own panic
    /// if it panicked (the coroutine is then finished).
    pub fn resume(&mut self) -> CoroutineResult<Y, R> {
        assert!(!self.is_finished(), "resume called on a finished coroutine");
        // SAFETY: live and not running (checked above), and it cannot be on
        // this thread's chain of resumers: resuming needs `&mut self`, which
        // the body never has.
        unsafe { resume_isolated(&mut self.raw) };
        // SAFETY: the slots live on the stack, still mapped until `release`.
        let slots = unsafe { self.slots.as_ref() };
        if !self.raw.is_finished() {
            let y = if size_of::<Y>() == 0 {
                // A zero-sized value has no bytes to pass: `suspend` forgot
                // it, and this read moves it out of nothing, which saves the
                // slot's store and load on both sides of the switch.
                // SAFETY: reading a ZST from a dangling, aligned pointer is
                // valid; the suspended value was forgotten, not dropped, so
                // this is a move of it, not a copy.
                unsafe { std::ptr::read(NonNull::<Y>::dangling().as_ptr()) }
            } else {
                slots.yielded.take().expect("suspended without a value")
            };
            return CoroutineResult::Yield(y);
        }
        let out = slots.returned.take().expect("finished without a result");
        self.raw.release(false);
        match out {
            Ok(r) => CoroutineResult::Return(r),
            Err(payload) => panic::resume_unwind(payload),
        }
    }

    /// Whether the body has returned (or panicked).
    pub fn is_finished(&self) -> bool {
        self.raw.is_finished()
    }

    /// The coroutine's process-wide unique id (as printed on overflow).
    pub fn id(&self) -> u64 {
        self.raw.control().id
    }
}

impl<Y, R> Drop for Coroutine<Y, R> {
    fn drop(&mut self) {
        if self.raw.is_finished() {
            return;
        }
        // Not running: that would take the body holding `&mut self`.
        debug_assert!(!raw::is_running(self.raw.control()));
        self.raw.control().cancel.set(true);
        // A cancelled body unwinds from its pending `suspend`; if it catches
        // the unwind and suspends again, that `suspend` comes straight back
        // here (see `Yielder::suspend`), and is resumed until the body ends.
        while !self.raw.is_finished() {
            // SAFETY: live, not on the resumer chain (we hold it).
            unsafe { resume_isolated(&mut self.raw) };
        }
        debug_assert_eq!(self.raw.state(), State::Finished);
        // SAFETY: as in `resume`.
        let out = unsafe { self.slots.as_ref() }.returned.take();
        self.raw.release(false);
        // A real panic during the forced unwind is passed on, unless that
        // would be a panic in a destructor during another unwind.
        if let Some(Err(p)) = out
            && !p.is::<Cancelled>()
            && !std::thread::panicking()
        {
            panic::resume_unwind(p);
        }
    }
}

impl<Y, R> fmt::Debug for Coroutine<Y, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coroutine")
            .field("id", &self.raw.control().id)
            .field("state", &self.raw.state())
            .field("stack_size", &self.raw.stack_size())
            .finish()
    }
}

impl<Y> Yielder<Y> {
    /// Suspends the coroutine: `resume` returns `Yield(value)`, and this call
    /// returns when the coroutine is resumed again.
    ///
    /// If the coroutine is dropped while suspended here, this call unwinds
    /// with [`Cancelled`] instead of returning (see its docs).
    ///
    /// # Panics
    /// If called anywhere but on the coroutine's own stack: from a
    /// coroutine that the body started (the main coroutine of a
    /// [`crate::Runtime::block_on`] that borrows the yielder, say).
    #[inline(always)] // keeps the return-address predictor right (see raw::suspend)
    pub fn suspend(&self, value: Y) {
        // SAFETY: the yielder lives in the entry frame of the coroutine it
        // belongs to; the control block and slot outlive it.
        let ctl = unsafe { self.ctl.as_ref() };
        // Only the coroutine itself may suspend itself. A `Yielder` can
        // reach another stack through a non-'static closure (a runtime's
        // `block_on` inside the body): suspending from there would park this
        // coroutine on a stack it does not own, and resuming it later would
        // run on that stack's reused frames. One comparison of the stack
        // pointer with the coroutine's stack bounds.
        if !raw::is_running(ctl) {
            suspend_misplaced(ctl.id);
        }
        if size_of::<Y>() == 0 {
            std::mem::forget(value); // moved out by `resume` (see there)
        } else {
            // SAFETY: as above.
            unsafe { self.slot.as_ref() }.set(Some(value));
        }
        // Read before the switch: whether *this* context was unwinding when
        // it suspended is what a cancellation needs to know (see
        // `cancel_exit`).
        let was_panicking = std::thread::panicking();
        // SAFETY: we run on this coroutine's own stack (checked above).
        unsafe { raw::suspend(ctl) };
        // Cancelled while suspended: unwind, or return at once when an
        // unwind is unsafe. A cancelled body that catches the unwind and
        // suspends again lands here again straight away, as the owner's
        // drop keeps resuming it until it ends.
        if ctl.cancel.get() {
            let _ = cancel_exit(ctl, was_panicking);
        }
    }
}

#[cold]
#[inline(never)]
fn suspend_misplaced(id: u64) -> ! {
    panic!(
        "Yielder::suspend called outside its own coroutine (coroutine {id} is not the one \
         running on this thread): a generator can only suspend itself from its own body, \
         not from a coroutine it started"
    )
}

impl<Y> fmt::Debug for Yielder<Y> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: as in `suspend`.
        let id = unsafe { self.ctl.as_ref() }.id;
        f.debug_struct("Yielder").field("coroutine", &id).finish()
    }
}

/// Resumes a generator with the scheduler's thread-locals (the runtime
/// driving this thread, the scheduled coroutine running) cleared for the
/// body and put back when it suspends or returns.
///
/// A generator's body is a context of its own, not part of whichever
/// scheduled coroutine resumes it: a blocking call in it would otherwise
/// park that coroutine from the generator's stack, and a runtime run inside
/// it would leave the thread-locals pointing at a scheduler on the
/// generator's stack whenever it is not running. Cleared, the body sees no
/// runtime (blocking calls panic as outside a coroutine, and it may run a
/// runtime of its own, though not one already running on this thread:
/// `block_on` checks the runtime's own flag for that); restored, the
/// resumer finds its own whatever the body did.
///
/// Outside any runtime (the common case) nothing is written, and the test
/// for it is one thread-local load: the scheduled-coroutine pointer is only
/// ever set while a runtime is. The clearing path is a function of its own,
/// out of line, so that the registers it needs across the switch do not
/// cost the common path spills.
///
/// # Safety
/// As [`RawCoroutine::resume`].
#[inline(always)]
unsafe fn resume_isolated(raw: &mut RawCoroutine) {
    if crate::scheduler::CORE.with(|c| c.get()).is_null() {
        debug_assert!(crate::wait::current_frame().is_null());
        // SAFETY: the caller's contract. The body cannot leave a
        // thread-local set behind: a runtime it runs clears both on the way
        // out, and it has no scheduled coroutine to be.
        return unsafe { raw.resume() };
    }
    let (ctl, sp) = raw.parts();
    // SAFETY: the caller's contract.
    let sp = unsafe { resume_cleared(ctl, sp) };
    raw.set_sp(sp);
}

/// [`resume_isolated`] inside a runtime. Given the control block and stack
/// pointer by value, not the `RawCoroutine`: a pointer to it passed to a
/// function that is not inlined would make the compiler keep the whole
/// coroutine in memory on the common path too.
///
/// # Safety
/// As [`raw::resume_at`].
#[cold]
#[inline(never)]
unsafe fn resume_cleared(ctl: NonNull<Control>, sp: *mut u8) -> *mut u8 {
    let core = crate::scheduler::CORE.with(|c| c.replace(std::ptr::null()));
    let current = crate::wait::set_current(std::ptr::null());
    // SAFETY: the caller's contract (the block is live while its
    // `RawCoroutine` is). The switch does not unwind (the body's panics are
    // caught at its entry), so the restore below always runs.
    let sp = unsafe { raw::resume_at(ctl.as_ref(), sp) };
    crate::wait::restore_current(current);
    crate::scheduler::CORE.with(|c| c.set(core));
    sp
}

/// The first function on a new generator's stack (see `switch`).
unsafe extern "C" fn entry<F, Y, R>(arg: *mut u8) -> !
where
    F: FnOnce(&Yielder<Y>) -> R,
{
    let start = arg.cast::<Start<Payload<F, Y, R>>>();
    // SAFETY: `arg` is the Start block RawCoroutine::new wrote for us, alive
    // until the stack is released, which happens only after `finish`.
    let ctl = unsafe { &(*start).ctl };
    {
        // SAFETY: as above.
        let payload = unsafe { &mut (*start).payload };
        // SAFETY: the body is taken exactly once, here; nothing else drops it.
        let body = unsafe { ManuallyDrop::take(&mut payload.body) };
        let outcome = if ctl.cancel.get() {
            // Cancelled before it ever ran: drop the closure, run nothing.
            let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(body)));
            Err(Box::new(Cancelled) as Box<dyn Any + Send>)
        } else {
            let yielder = Yielder {
                ctl: NonNull::from(ctl),
                slot: NonNull::from(&payload.slots.yielded),
                _not_send: PhantomData,
            };
            panic::catch_unwind(AssertUnwindSafe(|| body(&yielder)))
        };
        payload.slots.returned.set(Some(outcome));
    }
    // Everything this frame owned has been dropped or moved out.
    // SAFETY: we are the coroutine of `ctl`, on its own stack.
    unsafe { raw::finish(ctl) }
}
