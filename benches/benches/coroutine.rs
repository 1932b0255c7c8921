//! Stackful coroutines vs a stackless task vs corosensei vs threads, in one
//! run.
//!
//! `cargo bench -p httplite-benches --bench coroutine`
//! (`--features coroutine/fp-state` for the switch that keeps the
//! floating-point control state: see the coroutine crate's `switch` module)
//!
//! - switch: one round trip (resume + yield back):
//!   - `coroutine`: our hand-resumed `Coroutine` (two hand-written switches);
//!   - `corosensei`: the same with corosensei's `Coroutine`;
//!   - `coroutine_scheduled`: `yield_now` in a spawned coroutine (switch to
//!     the scheduler, run-queue push/pop, switch back);
//!   - `executor_task`: `executor::yield_now().await` in a spawned task (wake,
//!     run-queue push/pop, poll).
//! - create: spawn a no-op and wait for it to complete:
//!   - `coroutine`, `executor_task`, `std_thread`;
//!   - `coroutine_spawn_only`: only the `spawn` calls, stacks from the pool
//!     (the goal: under 50 ns).

use std::time::{Duration, Instant};

use coroutine::{Coroutine, CoroutineResult};
use criterion::{Criterion, criterion_group, criterion_main};

fn bench_switch(c: &mut Criterion) {
    let mut g = c.benchmark_group("switch");
    let mut ours = Coroutine::<(), ()>::new(|y| {
        loop {
            y.suspend(());
        }
    });
    g.bench_function("coroutine", |b| {
        b.iter(|| {
            let r = ours.resume();
            debug_assert_eq!(r, CoroutineResult::Yield(()));
        })
    });
    let mut theirs = corosensei::Coroutine::<(), (), ()>::new(|y, ()| {
        loop {
            y.suspend(());
        }
    });
    g.bench_function("corosensei", |b| {
        b.iter(|| {
            let r = theirs.resume(());
            debug_assert!(matches!(r, corosensei::CoroutineResult::Yield(())));
        })
    });
    let rt = coroutine::Runtime::new().unwrap();
    g.bench_function("coroutine_scheduled", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                coroutine::spawn(move || {
                    let start = Instant::now();
                    for _ in 0..iters {
                        coroutine::yield_now();
                    }
                    start.elapsed()
                })
                .join()
                .unwrap()
            })
        })
    });
    let ex = executor::Runtime::new().unwrap();
    g.bench_function("executor_task", |b| {
        b.iter_custom(|iters| {
            ex.block_on(async move {
                executor::spawn(async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        executor::yield_now().await;
                    }
                    start.elapsed()
                })
                .await
                .unwrap()
            })
        })
    });
    g.finish();
}

fn bench_create(c: &mut Criterion) {
    let mut g = c.benchmark_group("create");
    let rt = coroutine::Runtime::new().unwrap();
    g.bench_function("coroutine", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let start = Instant::now();
                for _ in 0..iters {
                    coroutine::spawn(|| {}).join().unwrap();
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("coroutine_spawn_only", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                const BATCH: u64 = 128;
                let mut spent = Duration::ZERO;
                let mut handles = Vec::with_capacity(BATCH as usize);
                let mut left = iters;
                while left > 0 {
                    let n = left.min(BATCH);
                    let start = Instant::now();
                    for _ in 0..n {
                        handles.push(coroutine::spawn(|| {}));
                    }
                    spent += start.elapsed();
                    for h in handles.drain(..) {
                        h.join().unwrap();
                    }
                    left -= n;
                }
                spent
            })
        })
    });
    let ex = executor::Runtime::new().unwrap();
    g.bench_function("executor_task", |b| {
        b.iter_custom(|iters| {
            ex.block_on(async move {
                let start = Instant::now();
                for _ in 0..iters {
                    executor::spawn(async {}).await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("std_thread", |b| {
        b.iter(|| std::thread::spawn(|| {}).join().unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench_switch, bench_create);
criterion_main!(benches);
