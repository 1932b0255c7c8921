//! Timers through the executor: ordering, no early firing, cancellation, and
//! the timer count returning to zero.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use executor::{Runtime, spawn};

#[test]
fn ten_thousand_sleeps_fire_in_deadline_order_never_early() {
    let rt = Runtime::new().unwrap();
    let fired = Rc::new(RefCell::new(Vec::with_capacity(10_000)));
    rt.block_on({
        let fired = fired.clone();
        async move {
            let start = Instant::now();
            let mut rng = common::Lcg(1234);
            let mut handles = Vec::new();
            for i in 0..10_000usize {
                // The first deadline is far enough out that every task is
                // parked on its timer before any fires: the order of firing,
                // not of first polls, is what is measured.
                let deadline = start
                    + Duration::from_millis(1000)
                    + Duration::from_micros(rng.next() % 200_000);
                let fired = fired.clone();
                // Armed here, before any of them can fire: a timer armed after
                // an earlier one fired cannot fire before it.
                let sleep = executor::sleep_until(deadline);
                handles.push(spawn(async move {
                    sleep.await;
                    let now = Instant::now();
                    assert!(now >= deadline, "timer {i} fired early");
                    fired.borrow_mut().push((deadline, i));
                }));
            }
            // However long the loop above took (a loaded machine, valgrind),
            // no timer has fired yet: this task has not yielded since the
            // first was armed, so the reactor has not turned. How fast
            // 10,000 spawns are is a benchmark's business, not this test's.
            for h in handles {
                h.await.unwrap();
            }
        }
    });
    let fired = fired.borrow();
    assert_eq!(fired.len(), 10_000);
    for w in fired.windows(2) {
        assert!(
            w[0].0 <= w[1].0,
            "out of deadline order: {:?} then {:?}",
            w[0],
            w[1]
        );
    }
    assert_eq!(rt.reactor().stats().timers, 0);
}

#[test]
fn timeout_cancels_its_future_and_frees_timers() {
    let rt = Runtime::new().unwrap();
    let dropped = Rc::new(RefCell::new(0));
    rt.block_on({
        let dropped = dropped.clone();
        async move {
            struct Guard(Rc<RefCell<i32>>);
            impl Drop for Guard {
                fn drop(&mut self) {
                    *self.0.borrow_mut() += 1;
                }
            }
            let g = Guard(dropped.clone());
            let slow = async move {
                let _g = g;
                executor::sleep(Duration::from_secs(3600)).await;
            };
            let res = executor::timeout(Duration::from_millis(10), slow).await;
            assert!(res.is_err());
            // Many sleeps created and dropped without firing.
            let sleeps: Vec<_> = (0..1000)
                .map(|i| executor::sleep(Duration::from_secs(100 + i)))
                .collect();
            assert_eq!(executor::current_stats().unwrap().alive, 0);
            drop(sleeps);
        }
    });
    assert_eq!(*dropped.borrow(), 1, "the timed-out future was dropped");
    let stats = rt.reactor().stats();
    assert_eq!(stats.timers, 0);
    assert_eq!(stats.timers_pending, 0);
}

#[test]
fn interval_ticks_at_its_period() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let mut iv = executor::interval(Duration::from_millis(5));
        let first = iv.tick().await;
        let mut last = first;
        for _ in 0..5 {
            let t = iv.tick().await;
            assert!(t - last >= Duration::from_millis(5));
            assert!(Instant::now() >= t);
            last = t;
        }
        assert!(last - first >= Duration::from_millis(25));
    });
}
