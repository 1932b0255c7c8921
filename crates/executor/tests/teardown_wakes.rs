//! Cross-thread wakes racing teardown: foreign threads keep waking (and
//! dropping) wakers of tasks while those tasks finish, are aborted, and
//! their runtime is dropped. A waker outlives its task and its runtime: a
//! wake after either is gone must be a harmless no-op, and the last waker
//! dropped (on any thread) frees the task. Under valgrind (scripts/
//! valgrind.sh runs this binary) that also means no invalid access and no
//! leak.

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use executor::{JoinError, Runtime, spawn};

/// Wakers handed to the foreign threads.
#[derive(Default)]
struct Wakers {
    list: Mutex<Vec<Waker>>,
    stop: AtomicBool,
    wakes: AtomicU64,
}

impl Wakers {
    fn push(&self, w: &Waker) {
        self.list.lock().unwrap().push(w.clone());
    }
}

/// A foreign thread: wakes every stored waker over and over, by reference
/// (the waker stays for the next pass) or by value (it is consumed and
/// dropped here, possibly the task's last reference).
fn waker_thread(wakers: Arc<Wakers>, seed: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut rng = seed;
        // Bounded even if the main thread never says stop.
        let end = Instant::now() + Duration::from_secs(120);
        while !wakers.stop.load(Ordering::Acquire) && Instant::now() < end {
            let batch: Vec<Waker> = {
                let mut list = wakers.list.lock().unwrap();
                if list.len() > 64 {
                    // Take some for good: their last wakes happen here.
                    let n = list.len() / 2;
                    list.drain(..n).collect()
                } else {
                    list.clone()
                }
            };
            for w in batch {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if rng >> 63 == 0 {
                    w.wake_by_ref();
                } else {
                    w.wake();
                }
                wakers.wakes.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::yield_now();
        }
    })
}

/// A future that parks `times` times, handing its waker to the foreign
/// threads each time (only they can wake it), then completes.
async fn park_for_foreign_wakes(wakers: Arc<Wakers>, times: u32) {
    let mut left = times;
    poll_fn(move |cx| {
        if left == 0 {
            return Poll::Ready(());
        }
        left -= 1;
        wakers.push(cx.waker());
        Poll::Pending
    })
    .await
}

/// Parks forever, handing out its waker on every poll.
async fn park_forever(wakers: Arc<Wakers>) {
    poll_fn(move |cx| {
        wakers.push(cx.waker());
        Poll::<()>::Pending
    })
    .await
}

#[test]
fn foreign_wakes_race_task_completion_abort_and_runtime_drop() {
    const RUNTIMES: usize = 20;
    const TASKS: u32 = 30;
    let wakers = Arc::new(Wakers::default());
    let threads: Vec<_> = (0..3)
        .map(|t| waker_thread(wakers.clone(), t + 1))
        .collect();

    for round in 0..RUNTIMES {
        let rt = Runtime::new().unwrap();
        let w = wakers.clone();
        let (finished, aborted) = rt.block_on(async move {
            let mut finishing = Vec::new();
            let mut aborting = Vec::new();
            for i in 0..TASKS {
                match i % 3 {
                    // Finishes after three wakes from foreign threads.
                    0 => finishing.push(spawn(park_for_foreign_wakes(w.clone(), 3))),
                    // Parks until aborted below.
                    1 => aborting.push(spawn(park_forever(w.clone()))),
                    // Still parked when the runtime is dropped.
                    _ => drop(spawn(park_forever(w.clone()))),
                }
            }
            let mut finished = 0;
            for h in finishing {
                h.await.unwrap();
                finished += 1;
            }
            let mut aborted = 0;
            for h in aborting {
                h.abort();
                assert!(matches!(h.await, Err(JoinError::Cancelled)));
                aborted += 1;
            }
            (finished, aborted)
        });
        assert_eq!((finished, aborted), (10, 10), "round {round}");
        // The foreign threads are still waking wakers of this runtime's
        // tasks (finished, aborted and parked ones) while it goes.
        drop(rt);
    }

    // Every runtime is gone; let the threads wake the stale wakers a while
    // longer (until they have done a good number of wakes), then stop.
    let target = wakers.wakes.load(Ordering::Relaxed) + 10_000;
    let end = Instant::now() + Duration::from_secs(60);
    while wakers.wakes.load(Ordering::Relaxed) < target && Instant::now() < end {
        std::thread::yield_now();
    }
    wakers.stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        wakers.wakes.load(Ordering::Relaxed) >= target,
        "the foreign threads stalled"
    );
    // The last wakers go here; with them the tasks' memory (valgrind checks
    // nothing is left).
    wakers.list.lock().unwrap().clear();
}
