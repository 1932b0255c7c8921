//! The hand-resumed `Coroutine`: yields, returns, panics, cancellation.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use common::Watchdog;
use coroutine::{Coroutine, CoroutineResult};

/// Counts drops: the proof that a cancelled coroutine ran its destructors.
struct DropCount(Rc<Cell<u32>>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn two_generators_play_ping_pong() {
    let _w = Watchdog::new(Duration::from_secs(30), "two_generators_play_ping_pong");
    // Each generator turns the ball it is given (through a shared cell)
    // into the next one; the main stack hands it back and forth.
    let ball = Rc::new(Cell::new(0u64));
    let mk = |ball: Rc<Cell<u64>>, parity: u64| {
        Coroutine::<u64, &'static str>::new(move |y| {
            loop {
                let b = ball.get();
                if b >= 100_000 {
                    return "done";
                }
                assert_eq!(b % 2, parity, "played out of turn");
                ball.set(b + 1);
                y.suspend(b);
            }
        })
    };
    let mut ping = mk(ball.clone(), 0);
    let mut pong = mk(ball.clone(), 1);
    let mut expected = 0;
    while let CoroutineResult::Yield(b) = ping.resume() {
        assert_eq!(b, expected);
        expected += 1;
        match pong.resume() {
            CoroutineResult::Yield(b) => assert_eq!(b, expected),
            CoroutineResult::Return(_) => break,
        }
        expected += 1;
    }
    assert_eq!(ball.get(), 100_000);
    assert!(ping.is_finished() || pong.is_finished());
}

#[test]
fn dropping_a_suspended_generator_runs_its_destructors() {
    let _w = Watchdog::new(Duration::from_secs(30), "dropping_a_suspended_generator");
    let drops = Rc::new(Cell::new(0));
    let reached_end = Rc::new(Cell::new(false));
    let (d, end) = (drops.clone(), reached_end.clone());
    let mut co = Coroutine::<(), ()>::new(move |y| {
        let _a = DropCount(d.clone());
        let _b = Box::new(DropCount(d.clone()));
        let v: Vec<_> = (0..3).map(|_| DropCount(d.clone())).collect();
        y.suspend(());
        drop(v);
        end.set(true);
    });
    assert_eq!(co.resume(), CoroutineResult::Yield(()));
    assert_eq!(drops.get(), 0);
    let id = co.id();
    drop(co);
    assert_eq!(
        drops.get(),
        5,
        "every value on coroutine {id}'s stack was dropped"
    );
    assert!(
        !reached_end.get(),
        "the body did not run past its suspension"
    );
}

#[test]
fn dropping_an_unstarted_generator_drops_its_closure() {
    let drops = Rc::new(Cell::new(0));
    let guard = DropCount(drops.clone());
    let co = Coroutine::<(), ()>::new(move |_| {
        let _keep = guard;
        unreachable!("never resumed");
    });
    drop(co);
    assert_eq!(drops.get(), 1);
}

#[test]
fn a_destructor_that_suspends_during_cancellation_does_not_abort() {
    struct SuspendsOnDrop<'a>(&'a coroutine::Yielder<u32>, Rc<Cell<u32>>);
    impl Drop for SuspendsOnDrop<'_> {
        fn drop(&mut self) {
            // During the forced unwind this returns at once.
            self.0.suspend(99);
            self.1.set(self.1.get() + 1);
        }
    }
    let drops = Rc::new(Cell::new(0));
    let d = drops.clone();
    let mut co = Coroutine::<u32, ()>::new(move |y| {
        let _g = SuspendsOnDrop(y, d);
        y.suspend(1);
    });
    assert_eq!(co.resume(), CoroutineResult::Yield(1));
    drop(co);
    assert_eq!(drops.get(), 1);
}

#[test]
fn a_panic_in_the_body_reaches_the_resumer_and_frees_the_stack() {
    let before = coroutine::pool_stats();
    let mut co = Coroutine::<(), ()>::new(|y| {
        y.suspend(());
        panic!("boom in the coroutine");
    });
    assert_eq!(co.resume(), CoroutineResult::Yield(()));
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| co.resume()))
        .expect_err("the panic comes out of resume");
    assert_eq!(err.downcast_ref::<&str>(), Some(&"boom in the coroutine"));
    assert!(co.is_finished());
    let after = coroutine::pool_stats();
    assert!(after.cached > before.cached || after.reuses > before.reuses || after.cached >= 1);
}

#[test]
fn generators_nest() {
    let mut outer = Coroutine::<u32, u32>::new(|y| {
        let mut inner = Coroutine::<u32, u32>::new(|y2| {
            y2.suspend(1);
            y2.suspend(2);
            3
        });
        let mut sum = 0;
        loop {
            match inner.resume() {
                CoroutineResult::Yield(v) => {
                    sum += v;
                    y.suspend(v * 10);
                }
                CoroutineResult::Return(v) => return sum + v,
            }
        }
    });
    assert_eq!(outer.resume(), CoroutineResult::Yield(10));
    assert_eq!(outer.resume(), CoroutineResult::Yield(20));
    assert_eq!(outer.resume(), CoroutineResult::Return(6));
}

/// A generator's `Yielder` captured by the
/// main coroutine of a runtime that the generator's body runs. Suspending
/// the generator from that coroutine's stack would leave the generator
/// "suspended" on a stack it does not own and the runtime's thread-locals
/// pointing into a scheduler frozen on the generator's stack; resuming it
/// from elsewhere and yielding from outside then returns into reused frames.
/// The first `suspend` must panic instead, and nothing after it may run.
#[test]
#[should_panic(expected = "Yielder::suspend called outside its own coroutine")]
fn a_yielder_used_from_another_coroutines_stack_panics() {
    let _w = Watchdog::new(
        Duration::from_secs(30),
        "a_yielder_used_from_another_coroutines_stack_panics",
    );
    let mut g = Coroutine::<(), ()>::new(|y| coroutine::run(|| y.suspend(())));
    let _ = g.resume();
    // Without the check, the resume above returns and this runs.
    coroutine::run(move || {
        coroutine::spawn(move || {
            let _ = g.resume();
        })
        .join()
        .ok();
    });
    coroutine::yield_now();
    unreachable!("the generator's suspend from a foreign stack did not panic");
}

/// A generator's body is its own context: while it runs, the resumer's
/// scheduler is not visible (blocking calls would otherwise park the
/// resumer's coroutine from the generator's stack), so the body may run a
/// runtime of its own even when a scheduled coroutine resumed it; and the
/// resumer's scheduler is back when `resume` returns.
#[test]
fn a_generator_body_does_not_see_its_resumers_scheduler() {
    let _w = Watchdog::new(
        Duration::from_secs(30),
        "a_generator_body_does_not_see_its_resumers_scheduler",
    );
    coroutine::run(|| {
        assert!(coroutine::in_coroutine());
        let mut g = Coroutine::<bool, u32>::new(|y| {
            y.suspend(coroutine::in_coroutine());
            // A runtime of the generator's own, on the generator's stack.
            coroutine::run(|| {
                coroutine::yield_now();
                7
            })
        });
        assert_eq!(g.resume(), CoroutineResult::Yield(false));
        assert!(coroutine::in_coroutine(), "the resumer's coroutine is back");
        coroutine::yield_now();
        assert_eq!(g.resume(), CoroutineResult::Return(7));
        assert!(coroutine::in_coroutine());
    });
}

/// A cancelled body that catches the unwind and suspends again: each later
/// `suspend` returns at once, and dropping the generator still runs the
/// body to its end (the drop resumes it until it finishes).
#[test]
fn a_cancelled_body_that_catches_the_unwind_still_ends() {
    let reached = Rc::new(Cell::new(0));
    let r = reached.clone();
    let mut co = Coroutine::<u32, ()>::new(move |y| {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| y.suspend(1)));
        let payload = caught.expect_err("the pending suspend unwinds on cancellation");
        assert!(payload.is::<coroutine::Cancelled>());
        r.set(1);
        y.suspend(2); // cancelled: returns at once
        r.set(2);
        y.suspend(3);
        r.set(3);
    });
    assert_eq!(co.resume(), CoroutineResult::Yield(1));
    drop(co);
    assert_eq!(reached.get(), 3, "the body ran to its end");
}

/// `current_id` names the coroutine whose stack the caller is on: the
/// generator inside its body (resumed from the thread's stack or from a
/// scheduled coroutine), the scheduled coroutine again once the generator
/// has suspended, nothing on the thread's own stack.
#[test]
fn current_id_names_the_generator_inside_its_body() {
    assert_eq!(coroutine::current_id(), None);
    let mut g = Coroutine::<Option<u64>, ()>::new(|y| {
        loop {
            y.suspend(coroutine::current_id());
        }
    });
    let id = g.id();
    assert_eq!(g.resume(), CoroutineResult::Yield(Some(id)));
    assert_eq!(coroutine::current_id(), None);
    coroutine::run(move || {
        let h = coroutine::spawn(move || {
            let me = coroutine::current_id().expect("a scheduled coroutine has an id");
            assert_ne!(me, id);
            assert_eq!(g.resume(), CoroutineResult::Yield(Some(id)));
            assert_eq!(coroutine::current_id(), Some(me));
        });
        assert_eq!(h.join().ok(), Some(()));
    });
}

/// Queues the running coroutine without parking it: the state a coroutine is
/// in when its own waker (an I/O edge, a timer, a remote wake) fired while it
/// ran.
fn wake_self() {
    coroutine::wait(|cx| {
        cx.waker().wake_by_ref();
        std::task::Poll::Ready(())
    })
    .expect("not cancelled");
}

/// A generator's body runs with its resumer's runtime hidden, but may still
/// hold that runtime. Running it from there would resume the queued,
/// running resumer from a stale stack pointer: it must panic instead.
#[test]
#[should_panic(expected = "already running on this thread")]
fn a_generator_body_cannot_block_on_its_resumers_runtime() {
    let _w = Watchdog::new(
        Duration::from_secs(30),
        "a_generator_body_cannot_block_on_its_resumers_runtime",
    );
    let rt = Rc::new(coroutine::Runtime::new().unwrap());
    let inner = rt.clone();
    rt.block_on(move || {
        wake_self();
        let mut g = Coroutine::<(), ()>::new(move |_| inner.block_on(|| ()));
        let _ = g.resume();
    });
}

/// The same through a spawned coroutine and two generators, one resumed
/// from the other's body.
#[test]
#[should_panic(expected = "already running on this thread")]
fn a_nested_generator_body_cannot_block_on_the_outer_runtime() {
    let _w = Watchdog::new(
        Duration::from_secs(30),
        "a_nested_generator_body_cannot_block_on_the_outer_runtime",
    );
    let rt = Rc::new(coroutine::Runtime::new().unwrap());
    let inner = rt.clone();
    rt.block_on(move || {
        let h = coroutine::spawn(move || {
            wake_self();
            let mut outer = Coroutine::<(), ()>::new(move |_| {
                let mut g = Coroutine::<(), ()>::new(move |_| inner.block_on(|| ()));
                let _ = g.resume();
            });
            let _ = outer.resume();
        });
        if let Err(coroutine::JoinError::Panicked(p)) = h.join() {
            std::panic::resume_unwind(p);
        }
    });
}
