//! Lost-wakeup stress: 10,000 tasks ping-ponging through pipes and
//! in-process channels for 1,000,000 wake-ups in total, and 4 threads waking
//! tasks of one executor 100,000 times.

mod common;

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use executor::io::Async;
use executor::{Runtime, spawn};

const PIPE_PAIRS: usize = 1_000;
const CHANNEL_PAIRS: usize = 4_000;
const ROUNDS: usize = 100; // each round trip is two wake-ups

fn async_pipe() -> (Async<File>, Async<File>) {
    let (r, w) = reactor::sys::pipe().unwrap();
    (
        Async::new(File::from(r)).unwrap(),
        Async::new(File::from(w)).unwrap(),
    )
}

#[test]
fn ten_thousand_tasks_one_million_wakeups() {
    common::raise_fd_limit();
    let rt = Runtime::new().unwrap();
    let received = rt.block_on(async {
        let mut handles = Vec::new();
        for _ in 0..PIPE_PAIRS {
            let (mut a_r, mut a_w) = async_pipe();
            let (mut b_r, mut b_w) = async_pipe();
            handles.push(spawn(async move {
                let mut b = [0u8; 1];
                for i in 0..ROUNDS {
                    a_w.write_all(&[i as u8]).await.unwrap();
                    b_r.read_exact(&mut b).await.unwrap();
                    assert_eq!(b[0], i as u8);
                }
                ROUNDS
            }));
            handles.push(spawn(async move {
                let mut b = [0u8; 1];
                for _ in 0..ROUNDS {
                    a_r.read_exact(&mut b).await.unwrap();
                    b_w.write_all(&b).await.unwrap();
                }
                ROUNDS
            }));
        }
        for _ in 0..CHANNEL_PAIRS {
            let (ping_tx, ping_rx) = common::channel::<usize>();
            let (pong_tx, pong_rx) = common::channel::<usize>();
            handles.push(spawn(async move {
                for i in 0..ROUNDS {
                    ping_tx.send(i);
                    assert_eq!(pong_rx.recv().await, Some(i));
                }
                ROUNDS
            }));
            handles.push(spawn(async move {
                let mut n = 0;
                while let Some(i) = ping_rx.recv().await {
                    pong_tx.send(i);
                    n += 1;
                }
                n
            }));
        }
        assert_eq!(handles.len(), 10_000);
        let mut counts = Vec::with_capacity(handles.len());
        for h in handles {
            counts.push(h.await.unwrap());
        }
        counts
    });
    // Every task, not just the total, received ROUNDS messages, each
    // delivered by a wake-up: a task short of some and another with extra
    // cannot cancel out. (The pipe tasks' counts are fixed; they fail
    // through their asserts on the bytes echoed, or by hanging.)
    for (i, &n) in received.iter().enumerate() {
        assert_eq!(n, ROUNDS, "task {i} received {n} of {ROUNDS}");
    }
    assert_eq!(received.iter().sum::<usize>(), 1_000_000);
    assert_eq!(rt.stats().alive, 0);
}

/// A cross-thread mailbox: other threads push and wake; one task drains.
#[derive(Default)]
struct Mailbox {
    items: Mutex<(Vec<u64>, Option<Waker>)>,
}

#[test]
fn four_threads_wake_one_executor_100_000_times() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 25_000;
    let rt = Runtime::new().unwrap();
    let boxes: Vec<Arc<Mailbox>> = (0..THREADS).map(|_| Arc::default()).collect();
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());

    let producers: Vec<_> = (0..THREADS as usize)
        .map(|t| {
            let mb = boxes[t].clone();
            let acked = acked.clone();
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(60);
                for i in 1..=PER_THREAD {
                    let waker = {
                        let mut g = mb.items.lock().unwrap();
                        g.0.push(i);
                        g.1.take()
                    };
                    if let Some(w) = waker {
                        w.wake();
                    }
                    // Wait for the ack now and then, so that the executor
                    // goes idle in epoll_wait and must be woken via eventfd.
                    if i % 8 == 0 {
                        while acked[t].load(Ordering::Acquire) < i {
                            assert!(Instant::now() < deadline, "wake {i} of thread {t} lost");
                            std::thread::yield_now();
                        }
                    }
                }
            })
        })
        .collect();

    let sums = rt.block_on(async {
        let consumers: Vec<_> = (0..THREADS as usize)
            .map(|t| {
                let mb = boxes[t].clone();
                let acked = acked.clone();
                spawn(async move {
                    let mut seen = 0u64;
                    let mut sum = 0u64;
                    while seen < PER_THREAD {
                        let batch = std::future::poll_fn(|cx| {
                            let mut g = mb.items.lock().unwrap();
                            if g.0.is_empty() {
                                g.1 = Some(cx.waker().clone());
                                Poll::Pending
                            } else {
                                Poll::Ready(std::mem::take(&mut g.0))
                            }
                        })
                        .await;
                        for v in batch {
                            seen += 1;
                            assert_eq!(v, seen, "in order, none lost");
                            sum += v;
                        }
                        acked[t].store(seen, Ordering::Release);
                    }
                    sum
                })
            })
            .collect();
        let mut sums = Vec::new();
        for c in consumers {
            sums.push(
                executor::timeout(Duration::from_secs(60), c)
                    .await
                    .expect("consumer stuck: a wake was lost")
                    .unwrap(),
            );
        }
        sums
    });
    for p in producers {
        p.join().unwrap();
    }
    let expected = PER_THREAD * (PER_THREAD + 1) / 2;
    assert!(sums.iter().all(|&s| s == expected));
    let stats = rt.stats();
    assert!(stats.remote_wakes > 0, "wakes went through the inbox");
    println!("cross-thread: {stats:?}");
}
