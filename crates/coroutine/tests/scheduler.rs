//! The scheduler: ordering, yielding, sleeping, panics, cancellation, the
//! stack pool, watermarks and cross-thread wakes.

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use common::{Watchdog, channel};
use coroutine::{Builder, JoinError, Runtime, spawn, yield_now};

struct DropCount(Rc<Cell<u32>>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn two_coroutines_play_ping_pong() {
    let _w = Watchdog::new(Duration::from_secs(30), "two_coroutines_play_ping_pong");
    const ROUNDS: u32 = 10_000;
    let rt = Runtime::new().unwrap();
    let total = rt.block_on(|| {
        let (to_pong, pong_rx) = channel::<u32>();
        let (to_ping, ping_rx) = channel::<u32>();
        let pong = spawn(move || {
            let mut seen = 0;
            while let Some(n) = pong_rx.recv() {
                assert_eq!(n, seen * 2);
                seen += 1;
                to_ping.send(n + 1);
            }
            seen
        });
        let mut ball = 0;
        for _ in 0..ROUNDS {
            to_pong.send(ball);
            ball = ping_rx.recv().expect("pong hung up") + 1;
        }
        drop(to_pong);
        pong.join().unwrap() + ball
    });
    assert_eq!(total, ROUNDS + 2 * ROUNDS);
    assert!(rt.stats().resumes >= u64::from(2 * ROUNDS));
}

#[test]
fn ten_thousand_coroutines_yield_in_fifo_order() {
    let _w = Watchdog::new(Duration::from_secs(60), "ten_thousand_coroutines_yield");
    const N: usize = 10_000;
    const YIELDS: usize = 10;
    let rt = Runtime::new().unwrap();
    let log = Rc::new(RefCell::new(Vec::with_capacity(N * YIELDS)));
    let l = log.clone();
    rt.block_on(move || {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let l = l.clone();
                spawn(move || {
                    for round in 0..YIELDS {
                        l.borrow_mut().push((round, i));
                        yield_now();
                    }
                    i
                })
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), i);
        }
    });
    let log = log.borrow();
    assert_eq!(log.len(), N * YIELDS);
    // FIFO: every coroutine takes its turn in each round before anyone
    // takes the next one.
    let mut sorted = log.clone();
    sorted.sort();
    assert_eq!(*log, sorted, "yield_now goes to the back of the queue");
    let stats = rt.stats();
    assert_eq!(stats.completed, N as u64 + 1);
    assert_eq!(stats.alive, 0);
}

#[test]
fn sleepers_wake_in_deadline_order() {
    let _w = Watchdog::new(Duration::from_secs(30), "sleepers_wake_in_deadline_order");
    let order = Rc::new(RefCell::new(Vec::new()));
    let o = order.clone();
    let start = Instant::now();
    coroutine::run(move || {
        // Deadlines from one base: a preempted start cannot reorder them.
        let hs: Vec<_> = [40u64, 10, 30, 0, 20]
            .into_iter()
            .map(|ms| {
                let o = o.clone();
                spawn(move || {
                    coroutine::sleep_until(start + Duration::from_millis(ms));
                    o.borrow_mut().push(ms);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    assert_eq!(*order.borrow(), vec![0, 10, 20, 30, 40]);
    assert!(start.elapsed() >= Duration::from_millis(40));
}

#[test]
fn a_panicking_coroutine_fails_alone() {
    let _w = Watchdog::new(Duration::from_secs(30), "a_panicking_coroutine_fails_alone");
    let rt = Runtime::new().unwrap();
    let (bad, good) = rt.block_on(|| {
        let bad = spawn(|| -> u32 {
            coroutine::sleep(Duration::from_millis(1));
            panic!("handler bug");
        });
        let good: Vec<_> = (0..10)
            .map(|i| {
                spawn(move || {
                    yield_now();
                    coroutine::sleep(Duration::from_millis(2));
                    i
                })
            })
            .collect();
        let good: u32 = good.into_iter().map(|h| h.join().unwrap()).sum();
        (bad.join(), good)
    });
    let err = bad.expect_err("the panic is reported through the handle");
    assert!(err.is_panic());
    assert!(err.to_string().contains("handler bug"), "{err}");
    assert_eq!(good, 45);
    assert_eq!(rt.stats().panicked, 1);
    // The runtime is still fine.
    assert_eq!(rt.block_on(|| spawn(|| 7).join().unwrap()), 7);
}

#[test]
fn a_panic_in_main_is_raised_by_block_on() {
    let rt = Runtime::new().unwrap();
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(|| panic!("main failed"))
    }))
    .unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"main failed"));
}

#[test]
fn dropping_the_runtime_unwinds_suspended_coroutines() {
    let _w = Watchdog::new(Duration::from_secs(30), "dropping_the_runtime_unwinds");
    let drops = Rc::new(Cell::new(0));
    let finished = Rc::new(Cell::new(0));
    let rt = Runtime::new().unwrap();
    let (d, f) = (drops.clone(), finished.clone());
    let keep = rt.block_on(move || {
        let (_tx, rx) = channel::<()>();
        let rx = Rc::new(rx);
        let mut handles = Vec::new();
        for i in 0..100 {
            let (d, f, rx) = (d.clone(), f.clone(), rx.clone());
            handles.push(spawn(move || {
                let _a = DropCount(d.clone());
                let _b = Box::new([DropCount(d.clone()), DropCount(d)]);
                // Parked in three different ways.
                match i % 3 {
                    0 => coroutine::sleep(Duration::from_secs(3600)),
                    1 => drop(rx.recv()),
                    _ => loop {
                        yield_now()
                    },
                }
                f.set(f.get() + 1);
            }));
        }
        yield_now(); // every coroutine above runs and parks
        // Never started: its closure must be dropped too.
        let late = DropCount(d.clone());
        handles.push(spawn(move || drop(late)));
        (handles, _tx)
    });
    assert_eq!(drops.get(), 0);
    assert_eq!(rt.stats().alive, 101);
    drop(rt);
    assert_eq!(drops.get(), 301, "every value on every stack was dropped");
    assert_eq!(finished.get(), 0, "no body ran past its blocking call");
    for h in keep.0 {
        assert!(matches!(h.join(), Err(JoinError::Cancelled)));
    }
}

/// A coroutine spawned with no handle runs like any other, and a panic or
/// the runtime's drop ends it alone: its stack is unwound and reused.
#[test]
fn detached_coroutines_run_fail_alone_and_unwind_on_drop() {
    let _w = Watchdog::new(Duration::from_secs(30), "detached_coroutines");
    let drops = Rc::new(Cell::new(0));
    let ran = Rc::new(Cell::new(0));
    let rt = Runtime::new().unwrap();
    let (d, r) = (drops.clone(), ran.clone());
    rt.block_on(move || {
        for i in 0..10 {
            let (d, r) = (d.clone(), r.clone());
            coroutine::try_spawn_detached(move || {
                let _a = DropCount(d);
                yield_now();
                r.set(r.get() + 1);
                match i {
                    0 => panic!("detached handler bug"),
                    1 => coroutine::sleep(Duration::from_secs(3600)),
                    _ => {}
                }
            })
            .unwrap();
        }
        for _ in 0..3 {
            yield_now();
        }
    });
    assert_eq!(ran.get(), 10);
    assert_eq!(drops.get(), 9, "all but the sleeper have ended");
    assert_eq!(rt.stats().panicked, 1);
    assert_eq!(rt.stats().alive, 1);
    drop(rt);
    assert_eq!(drops.get(), 10, "the sleeper was unwound");
}

#[test]
fn abort_unwinds_a_parked_coroutine() {
    let _w = Watchdog::new(Duration::from_secs(30), "abort_unwinds_a_parked_coroutine");
    let drops = Rc::new(Cell::new(0));
    let d = drops.clone();
    coroutine::run(move || {
        let h = spawn(move || {
            let _g = DropCount(d);
            coroutine::sleep(Duration::from_secs(3600));
        });
        yield_now();
        h.abort();
        assert!(h.join().unwrap_err().is_cancelled());
    });
    assert_eq!(drops.get(), 1);
}

#[test]
fn stacks_are_reused_without_mmap_in_steady_state() {
    let _w = Watchdog::new(Duration::from_secs(30), "stacks_are_reused");
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        // Warm up: the pool now holds stacks for 64 concurrent coroutines.
        let hs: Vec<_> = (0..64).map(|i| spawn(move || i)).collect();
        hs.into_iter().for_each(|h| drop(h.join()));
        let before = coroutine::pool_stats();
        for _ in 0..100 {
            let hs: Vec<_> = (0..64)
                .map(|i| {
                    spawn(move || {
                        yield_now();
                        i
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| drop(h.join()));
        }
        let after = coroutine::pool_stats();
        assert_eq!(after.mmaps, before.mmaps, "no mmap per spawn: {after:?}");
        assert_eq!(after.munmaps, before.munmaps);
        assert_eq!(after.reuses - before.reuses, 6400);
    });
}

#[inline(never)]
fn use_stack(bytes: usize) -> u8 {
    let mut buf = [0u8; 32 * 1024];
    let n = bytes.min(buf.len());
    for (i, b) in buf[..n].iter_mut().enumerate() {
        *b = i as u8;
    }
    std::hint::black_box(&mut buf);
    buf[n / 2]
}

#[test]
fn high_water_marks_are_measured() {
    let _w = Watchdog::new(Duration::from_secs(30), "high_water_marks_are_measured");
    let rt = Builder::new()
        .stack_size(64 * 1024)
        .stack_watermarks(true)
        .build()
        .unwrap();
    let (small, big) = rt.block_on(|| {
        let small = spawn(|| 1);
        let big = spawn(|| use_stack(30 * 1024));
        while !(small.is_finished() && big.is_finished()) {
            yield_now();
        }
        let marks = (small.stack_high_water(), big.stack_high_water());
        assert!(small.join().is_ok() && big.join().is_ok());
        marks
    });
    let (small, big) = (small.expect("measured"), big.expect("measured"));
    assert!(
        small > 0 && small < 16 * 1024,
        "small coroutine used {small} bytes"
    );
    assert!(
        (32 * 1024..64 * 1024).contains(&big),
        "a 32 KiB frame used {big} bytes"
    );
    assert!(rt.stats().stack_high_water >= big as u64);
    // A recycled stack is measured afresh, not polluted by the last user.
    let again = rt.block_on(|| {
        let h = spawn(|| 2);
        while !h.is_finished() {
            yield_now();
        }
        h.stack_high_water().unwrap()
    });
    assert!(again < 16 * 1024, "reused stack measured {again} bytes");
}

#[test]
fn cross_thread_wake_resumes_the_coroutine() {
    let _w = Watchdog::new(Duration::from_secs(30), "cross_thread_wake");
    struct Shared {
        done: bool,
        waker: Option<Waker>,
    }
    // The condvar tells the remote thread that the coroutine has parked
    // (stored its waker): it wakes it then, not after a guessed delay.
    let shared = Arc::new((
        Mutex::new(Shared {
            done: false,
            waker: None,
        }),
        Condvar::new(),
    ));
    let rt = Runtime::new().unwrap();
    let s = shared.clone();
    let polls = rt.block_on(move || {
        let remote = s.clone();
        let t = std::thread::spawn(move || {
            let (lock, parked) = &*remote;
            let (mut g, timeout) = parked
                .wait_timeout_while(lock.lock().unwrap(), Duration::from_secs(10), |g| {
                    g.waker.is_none()
                })
                .unwrap();
            assert!(!timeout.timed_out(), "the coroutine never parked");
            g.done = true;
            let w = g.waker.take().unwrap();
            drop(g);
            w.wake();
        });
        let mut polls = 0;
        coroutine::wait(|cx| {
            polls += 1;
            let (lock, parked) = &*s;
            let mut g = lock.lock().unwrap();
            if g.done {
                Poll::Ready(())
            } else {
                g.waker = Some(cx.waker().clone());
                parked.notify_one();
                Poll::Pending
            }
        })
        .unwrap();
        t.join().unwrap();
        polls
    });
    // Parked once, resumed by the remote wake, ready on the second poll.
    assert_eq!(polls, 2);
    assert!(rt.stats().remote_wakes >= 1);
}

#[test]
fn block_on_main_may_borrow_from_the_caller() {
    let mut local = vec![1, 2, 3];
    let sum = coroutine::run(|| {
        local.push(4);
        yield_now();
        local.iter().sum::<i32>()
    });
    assert_eq!(sum, 10);
    assert_eq!(local.len(), 4);
}

#[test]
fn nested_block_on_is_refused() {
    let rt = Runtime::new().unwrap();
    let inner = Runtime::new().unwrap();
    let r = rt.block_on(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.block_on(|| 1)))
    });
    assert!(r.is_err());
}

#[test]
fn futures_can_be_awaited_from_a_coroutine() {
    let v = coroutine::run(|| {
        let slept = coroutine::await_future(async {
            reactor::time::sleep(Duration::from_millis(2)).await;
            5
        });
        slept.unwrap()
    });
    assert_eq!(v, 5);
}

#[test]
fn dropping_the_runtime_during_a_panic_still_unwinds_parked_coroutines() {
    let _w = Watchdog::new(
        Duration::from_secs(30),
        "dropping_the_runtime_during_a_panic",
    );
    let drops = Rc::new(Cell::new(0));
    let d = drops.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let rt = Runtime::new().unwrap();
        rt.block_on(move || {
            let d2 = d.clone();
            spawn(move || {
                let _g = DropCount(d2);
                loop {
                    yield_now();
                }
            });
            spawn(move || {
                let _g = DropCount(d);
                coroutine::sleep(Duration::from_secs(3600));
            });
            yield_now();
        });
        // `rt` is dropped while this panic unwinds the test's own stack.
        std::panic::resume_unwind(Box::new("the test body failed"));
    }));
    assert!(r.is_err());
    assert_eq!(drops.get(), 2);
}

#[test]
fn stats_handle_counts_stacks_in_use_from_another_thread() {
    let _w = Watchdog::new(Duration::from_secs(30), "stats_handle");
    let rt = Runtime::new().unwrap();
    let handle = rt.stats_handle();
    rt.block_on(|| {
        let done: Vec<_> = (0..10u32).map(|i| spawn(move || i)).collect();
        for h in done {
            h.join().unwrap();
        }
        // Five coroutines parked forever: five stacks in use afterwards.
        for _ in 0..5 {
            spawn(|| coroutine::sleep(Duration::from_secs(3600)));
        }
        yield_now();
    });
    let s = std::thread::spawn({
        let handle = handle.clone();
        move || handle.snapshot()
    })
    .join()
    .unwrap();
    assert_eq!(s, rt.stats());
    assert_eq!(s.alive, 5, "{s:?}");
    // The main coroutine, 10 finished ones and the 5 parked ones.
    assert_eq!(s.spawned, 16, "{s:?}");
    assert!(s.alive_high_water >= 6, "{s:?}");
    drop(rt);
    assert_eq!(handle.snapshot().alive, 0);
}
