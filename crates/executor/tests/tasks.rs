//! Task lifecycle: spawn, join, abort, detach, panics, fairness, shutdown.

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use executor::{Builder, JoinError, Runtime, block_on, spawn, wake_all, yield_now};

#[test]
fn spawn_and_join_many() {
    let total = block_on(async {
        let handles: Vec<_> = (0..1000u64).map(|i| spawn(async move { i * 2 })).collect();
        let mut sum = 0;
        for h in handles {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(total, (0..1000u64).map(|i| i * 2).sum());
}

/// `wake_all` polls every parked task once, without any of them having
/// registered for it: how a server tells idle connections to shut down.
#[test]
fn wake_all_polls_every_parked_task_once() {
    let flag = Rc::new(Cell::new(false));
    let polls = Rc::new(Cell::new(0u32));
    block_on({
        let (flag, polls) = (flag.clone(), polls.clone());
        async move {
            let hs: Vec<_> = (0..100)
                .map(|_| {
                    let (flag, polls) = (flag.clone(), polls.clone());
                    // Parks without storing the waker: only a broadcast can
                    // wake it.
                    spawn(std::future::poll_fn(move |_| {
                        polls.set(polls.get() + 1);
                        if flag.get() {
                            Poll::Ready(())
                        } else {
                            Poll::Pending
                        }
                    }))
                })
                .collect();
            yield_now().await;
            assert_eq!(polls.get(), 100, "each task polled once, then parked");
            flag.set(true);
            wake_all();
            for h in hs {
                h.await.unwrap();
            }
        }
    });
    assert_eq!(polls.get(), 200, "one more poll each, no more");
}

#[test]
fn not_send_futures_are_accepted() {
    let rc = Rc::new(Cell::new(0));
    let rc2 = rc.clone();
    block_on(async move {
        spawn(async move { rc2.set(5) }).await.unwrap();
    });
    assert_eq!(rc.get(), 5);
}

#[test]
fn run_queue_is_fifo_and_yield_goes_to_the_back() {
    let log = Rc::new(RefCell::new(Vec::new()));
    block_on({
        let log = log.clone();
        async move {
            let mut hs = Vec::new();
            for id in 0..3 {
                let log = log.clone();
                hs.push(spawn(async move {
                    for round in 0..3 {
                        log.borrow_mut().push((round, id));
                        yield_now().await;
                    }
                }));
            }
            for h in hs {
                h.await.unwrap();
            }
        }
    });
    let expected: Vec<_> = (0..3).flat_map(|r| (0..3).map(move |id| (r, id))).collect();
    assert_eq!(*log.borrow(), expected);
}

#[test]
fn panic_is_isolated_and_reported_through_the_handle() {
    let rt = Runtime::new().unwrap();
    let (bad, good) = rt.block_on(async {
        let bad = spawn(async { panic!("boom in a task") });
        let goods: Vec<_> = (0..10).map(|i| spawn(async move { i })).collect();
        let bad = bad.await;
        let mut sum = 0;
        for g in goods {
            sum += g.await.unwrap();
        }
        (bad, sum)
    });
    let err = bad.unwrap_err();
    assert!(err.is_panic());
    assert_eq!(err.to_string(), "task panicked: boom in a task");
    assert_eq!(good, 45);
    assert_eq!(rt.stats().panicked, 1);
    // The thread and the runtime still work.
    assert_eq!(rt.block_on(async { spawn(async { 1 }).await.unwrap() }), 1);
}

struct DropFlag(Rc<Cell<bool>>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

#[test]
fn abort_cancels_and_drops_the_future() {
    let dropped = Rc::new(Cell::new(false));
    let res = block_on({
        let dropped = dropped.clone();
        async move {
            let flag = DropFlag(dropped);
            let h = spawn(async move {
                let _flag = flag;
                std::future::pending::<()>().await;
            });
            yield_now().await; // let it start and park
            h.abort();
            h.await
        }
    });
    assert!(matches!(res, Err(JoinError::Cancelled)));
    assert!(dropped.get());
}

#[test]
fn abort_after_completion_keeps_the_output() {
    let v = block_on(async {
        let h = spawn(async { 7 });
        yield_now().await;
        yield_now().await;
        assert!(h.is_finished());
        h.abort();
        h.await
    });
    assert_eq!(v.unwrap(), 7);
}

#[test]
fn dropping_the_handle_detaches() {
    let done = Rc::new(Cell::new(false));
    block_on({
        let done = done.clone();
        async move {
            drop(spawn(async move {
                executor::sleep(Duration::from_millis(5)).await;
                done.set(true);
            }));
            executor::sleep(Duration::from_millis(30)).await;
        }
    });
    assert!(done.get(), "detached task ran to completion");
}

#[test]
fn wake_while_running_polls_once_more() {
    let polls = Rc::new(Cell::new(0));
    block_on({
        let polls = polls.clone();
        async move {
            spawn(std::future::poll_fn(move |cx| {
                polls.set(polls.get() + 1);
                if polls.get() == 1 {
                    // Woken twice during its own poll: still one extra poll.
                    cx.waker().wake_by_ref();
                    // A by-value wake of a clone: exercises the other path.
                    let clone = cx.waker().clone();
                    clone.wake();
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            }))
            .await
            .unwrap();
        }
    });
    assert_eq!(polls.get(), 2);
}

#[test]
fn a_self_waking_task_cannot_starve_others_or_io() {
    let rt = Builder::new().budget(16).build().unwrap();
    let spins = Rc::new(Cell::new(0u64));
    rt.block_on({
        let spins = spins.clone();
        async move {
            let spinner = spawn({
                let spins = spins.clone();
                async move {
                    loop {
                        spins.set(spins.get() + 1);
                        yield_now().await;
                    }
                }
            });
            // Timers (reactor work) and a plain task all complete although
            // the spinner is always ready. Sleep until it has had its turns:
            // a count, not a speed (scripts/valgrind.sh runs this ~50x
            // slower). Bounded, so a starved timer fails the count below.
            for _ in 0..5000 {
                if spins.get() > 100 {
                    break;
                }
                executor::sleep(Duration::from_millis(1)).await;
            }
            spawn(async {}).await.unwrap();
            spinner.abort();
            assert!(spinner.await.unwrap_err().is_cancelled());
        }
    });
    assert!(
        spins.get() > 100,
        "the spinner ran too ({} polls)",
        spins.get()
    );
    assert!(rt.stats().ticks > 0);
}

#[test]
fn dropping_the_runtime_drops_pending_futures() {
    let dropped = Rc::new(Cell::new(0));
    {
        let rt = Runtime::new().unwrap();
        rt.block_on({
            let dropped = dropped.clone();
            async move {
                for _ in 0..100 {
                    let flag = DropFlag2(dropped.clone());
                    spawn(async move {
                        let _f = flag;
                        std::future::pending::<()>().await
                    });
                }
                yield_now().await;
            }
        });
        assert_eq!(rt.stats().alive, 100);
        assert_eq!(dropped.get(), 0);
    }
    assert_eq!(dropped.get(), 100);
}

struct DropFlag2(Rc<Cell<u32>>);
impl Drop for DropFlag2 {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn join_handle_outliving_the_runtime_reports_cancelled() {
    let rt = Runtime::new().unwrap();
    let h = rt.spawn(std::future::pending::<u32>());
    drop(rt);
    assert!(h.is_finished());
    let res = Runtime::new().unwrap().block_on(h);
    assert!(res.unwrap_err().is_cancelled());
}

#[test]
#[should_panic(expected = "inside")]
fn nested_block_on_panics() {
    block_on(async { block_on(async {}) });
}

#[test]
fn stats_handle_reads_the_counters_from_another_thread() {
    let rt = Runtime::new().unwrap();
    let handle = rt.stats_handle();
    let reactor_handle = rt.reactor().stats_handle();
    rt.block_on(async {
        let handles: Vec<_> = (0..10u32).map(|i| spawn(async move { i })).collect();
        let parked = spawn(std::future::pending::<()>());
        for h in handles {
            h.await.unwrap();
        }
        executor::sleep(Duration::from_millis(5)).await;
        drop(parked); // detached: still alive
    });
    let (tasks, reactor) = std::thread::spawn({
        let handle = handle.clone();
        move || (handle.snapshot(), reactor_handle.snapshot())
    })
    .join()
    .unwrap();
    assert_eq!(tasks, rt.stats());
    assert_eq!(tasks.spawned, 11);
    assert_eq!(tasks.completed, 10);
    assert_eq!(tasks.alive, 1);
    assert!(tasks.polls >= 11, "{tasks:?}");
    assert!(
        reactor.waits >= 1 && reactor.timers_fired == 1,
        "{reactor:?}"
    );
    // Dropping the runtime cancels the parked task; the handle outlives it.
    drop(rt);
    assert_eq!(handle.snapshot().alive, 0);
}
