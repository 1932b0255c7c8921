//! Runtime micro-benchmarks: our executor vs tokio's `current_thread`
//! runtime, the same harness for both, in one run.
//!
//! `cargo bench -p httplite-benches --bench runtime`
//!
//! - spawn: spawn an empty task and await its JoinHandle;
//! - wake_local: two tasks on one thread passing a baton (wake → poll);
//! - wake_remote: another thread wakes a task and waits for it to run;
//! - timer: arm a timer (polled once so tokio registers it too) and cancel it,
//!   with 0 and with 100,000 other timers pending.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn bench_spawn(c: &mut Criterion) {
    let mut g = c.benchmark_group("spawn_complete");
    let ours = executor::Runtime::new().unwrap();
    g.bench_function("httplite", |b| {
        b.iter_custom(|iters| {
            ours.block_on(async move {
                let start = Instant::now();
                for _ in 0..iters {
                    executor::spawn(async {}).await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    let tokio = tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async move {
                let start = Instant::now();
                for _ in 0..iters {
                    tokio::spawn(async {}).await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

/// Two players alternate: each waits for its turn, advances it and wakes the
/// other. One round = one wake and one poll per player.
struct Baton {
    turn: AtomicU64,
    wakers: [Mutex<Option<Waker>>; 2],
}

async fn player(b: Arc<Baton>, me: u64, rounds: u64) {
    for _ in 0..rounds {
        std::future::poll_fn(|cx| {
            if b.turn.load(Ordering::Acquire) % 2 == me {
                return Poll::Ready(());
            }
            let mut slot = b.wakers[me as usize].lock().unwrap();
            if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *slot = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await;
        b.turn.fetch_add(1, Ordering::Release);
        let other = b.wakers[1 - me as usize].lock().unwrap().take();
        if let Some(w) = other {
            w.wake();
        }
    }
}

fn baton() -> Arc<Baton> {
    Arc::new(Baton {
        turn: AtomicU64::new(0),
        wakers: [Mutex::new(None), Mutex::new(None)],
    })
}

fn bench_wake_local(c: &mut Criterion) {
    let mut g = c.benchmark_group("wake_local");
    let ours = executor::Runtime::new().unwrap();
    g.bench_function("httplite", |b| {
        b.iter_custom(|iters| {
            ours.block_on(async move {
                let bt = baton();
                let start = Instant::now();
                let a = executor::spawn(player(bt.clone(), 0, iters));
                let b = executor::spawn(player(bt, 1, iters));
                a.await.unwrap();
                b.await.unwrap();
                start.elapsed() / 2
            })
        })
    });
    let tokio = tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async move {
                let bt = baton();
                let start = Instant::now();
                let a = tokio::spawn(player(bt.clone(), 0, iters));
                let b = tokio::spawn(player(bt, 1, iters));
                a.await.unwrap();
                b.await.unwrap();
                start.elapsed() / 2
            })
        })
    });
    g.finish();
}

/// A task that counts its polls and publishes its waker; a remote thread
/// wakes it and spins until the count moves.
struct Remote {
    polls: AtomicU64,
    waker: Mutex<Option<Waker>>,
    stop: AtomicBool,
}

struct RemoteTask(Arc<Remote>);

impl Future for RemoteTask {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let r = &self.0;
        if r.stop.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        *r.waker.lock().unwrap() = Some(cx.waker().clone());
        r.polls.fetch_add(1, Ordering::Release);
        Poll::Pending
    }
}

fn remote_round_trips(r: &Remote, iters: u64) -> Duration {
    // Wait for the first poll (the waker is published).
    while r.polls.load(Ordering::Acquire) == 0 {
        std::hint::spin_loop();
    }
    let start = Instant::now();
    for _ in 0..iters {
        let seen = r.polls.load(Ordering::Acquire);
        let w = r.waker.lock().unwrap().clone().unwrap();
        w.wake();
        while r.polls.load(Ordering::Acquire) == seen {
            std::hint::spin_loop();
        }
    }
    let elapsed = start.elapsed();
    r.stop.store(true, Ordering::Release);
    let w = r.waker.lock().unwrap().clone().unwrap();
    w.wake();
    elapsed
}

fn bench_wake_remote(c: &mut Criterion) {
    let mut g = c.benchmark_group("wake_remote");
    g.measurement_time(Duration::from_secs(5));
    let new_remote = || {
        Arc::new(Remote {
            polls: AtomicU64::new(0),
            waker: Mutex::new(None),
            stop: AtomicBool::new(false),
        })
    };
    g.bench_function("httplite", |b| {
        b.iter_custom(|iters| {
            let r = new_remote();
            let r2 = r.clone();
            let t = std::thread::spawn(move || {
                executor::Runtime::new().unwrap().block_on(RemoteTask(r2));
            });
            let d = remote_round_trips(&r, iters);
            t.join().unwrap();
            d
        })
    });
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            let r = new_remote();
            let r2 = r.clone();
            let t = std::thread::spawn(move || {
                tokio_rt().block_on(RemoteTask(r2));
            });
            let d = remote_round_trips(&r, iters);
            t.join().unwrap();
            d
        })
    });
    g.finish();
}

/// Polls a future exactly once (tokio registers a Sleep on first poll).
async fn poll_once<F: Future + Unpin>(f: &mut F) {
    let mut done = false;
    std::future::poll_fn(|cx| {
        if !done {
            done = true;
            let _ = Pin::new(&mut *f).poll(cx);
        }
        Poll::Ready(())
    })
    .await
}

fn bench_timer(c: &mut Criterion) {
    let mut g = c.benchmark_group("timer_insert_cancel");
    for pending in [0usize, 100_000] {
        let ours = executor::Runtime::new().unwrap();
        g.bench_with_input(BenchmarkId::new("httplite", pending), &pending, |b, &n| {
            b.iter_custom(|iters| {
                ours.block_on(async move {
                    let background: Vec<_> = (0..n)
                        .map(|i| executor::sleep(Duration::from_secs(3600 + i as u64)))
                        .collect();
                    let start = Instant::now();
                    for i in 0..iters {
                        let mut s =
                            Box::pin(executor::sleep(Duration::from_millis(1000 + i % 977)));
                        poll_once(&mut s).await;
                        drop(s);
                    }
                    let d = start.elapsed();
                    drop(background);
                    d
                })
            })
        });
        let tokio = tokio_rt();
        g.bench_with_input(BenchmarkId::new("tokio", pending), &pending, |b, &n| {
            b.iter_custom(|iters| {
                tokio.block_on(async move {
                    let mut background: Vec<_> = (0..n)
                        .map(|i| Box::pin(tokio::time::sleep(Duration::from_secs(3600 + i as u64))))
                        .collect();
                    for s in &mut background {
                        poll_once(s).await;
                    }
                    let start = Instant::now();
                    for i in 0..iters {
                        let mut s =
                            Box::pin(tokio::time::sleep(Duration::from_millis(1000 + i % 977)));
                        poll_once(&mut s).await;
                        drop(s);
                    }
                    let d = start.elapsed();
                    drop(background);
                    d
                })
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_spawn,
    bench_wake_local,
    bench_wake_remote,
    bench_timer
);
criterion_main!(benches);
