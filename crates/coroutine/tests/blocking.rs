//! `coroutine::spawn_blocking`: work on a pool thread, the coroutine parked
//! meanwhile, the result back through a cross-thread wake.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use common::Watchdog;
use coroutine::{Runtime, spawn, spawn_blocking, spawn_blocking_in};

#[test]
fn many_coroutines_wait_on_blocking_work() {
    let _w = Watchdog::new(
        Duration::from_secs(30),
        "many_coroutines_wait_on_blocking_work",
    );
    const N: u64 = 1000;
    let pool = pool::Pool::builder()
        .max_threads(4)
        .queue_bound(N as usize)
        .build();
    let rt = Runtime::new().unwrap();
    let total = rt.block_on(|| {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let pool = pool.clone();
                spawn(move || {
                    let caller = std::thread::current().id();
                    let (v, on) = spawn_blocking_in(&pool, move || {
                        // Long enough that results arrive after their
                        // coroutines parked, even on a loaded machine
                        // (a result already there needs no wake).
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        (i * 3, std::thread::current().id())
                    })
                    .expect("room in the queue")
                    .expect("no panic");
                    assert_ne!(on, caller, "ran on the coroutine's own thread");
                    v
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(total, 3 * N * (N - 1) / 2);
    assert!(
        rt.stats().remote_wakes > 0,
        "results come back by cross-thread wakes"
    );
    assert_eq!(pool.stats().completed, N);
}

#[test]
fn other_coroutines_run_while_one_waits() {
    let _w = Watchdog::new(
        Duration::from_secs(30),
        "other_coroutines_run_while_one_waits",
    );
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let (release, gate) = mpsc::channel::<()>();
        let ticks = Rc::new(Cell::new(0u32));
        let ticker = {
            let ticks = ticks.clone();
            spawn(move || {
                for _ in 0..20 {
                    coroutine::sleep(Duration::from_millis(1));
                    ticks.set(ticks.get() + 1);
                }
                release.send(()).unwrap();
            })
        };
        // Blocks a pool thread until the ticker has ticked 20 times: if the
        // wait held the coroutine's thread, this would never return.
        let got = spawn_blocking(move || gate.recv().is_ok())
            .unwrap()
            .unwrap();
        assert!(got);
        assert_eq!(ticks.get(), 20);
        ticker.join().unwrap();
    });
}

#[test]
fn panics_and_a_full_pool_are_reported() {
    let _w = Watchdog::new(
        Duration::from_secs(30),
        "panics_and_a_full_pool_are_reported",
    );
    let pool = pool::Pool::builder().max_threads(1).queue_bound(0).build();
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let err = spawn_blocking_in(&pool, || -> u8 { panic!("job failed") })
            .unwrap()
            .unwrap_err();
        assert_eq!(err.panic_message(), Some("job failed"));
        // The thread may still be on its way back to idle; with no queue,
        // only an idle thread can take the next task.
        while pool.stats().busy > 0 {
            coroutine::sleep(Duration::from_millis(1));
        }
        let (release, gate) = mpsc::channel::<()>();
        let busy = {
            let pool = pool.clone();
            spawn(move || spawn_blocking_in(&pool, move || gate.recv().is_ok()))
        };
        coroutine::yield_now(); // let `busy` submit first
        while pool.stats().busy == 0 {
            coroutine::sleep(Duration::from_millis(1));
        }
        assert!(
            spawn_blocking_in(&pool, || ()).is_err(),
            "queue bound 0, thread busy"
        );
        release.send(()).unwrap();
        assert!(busy.join().unwrap().unwrap().unwrap());
    });
}
