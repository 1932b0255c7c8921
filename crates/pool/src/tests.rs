use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;

/// Polls `cond` every few milliseconds for up to 10 s.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

#[test]
fn result_reaches_an_executor_task() {
    let pool = Pool::builder().max_threads(2).build();
    let caller = std::thread::current().id();
    let (v, ran_on) = executor::block_on(async {
        pool.spawn_blocking(move || (6 * 7, std::thread::current().id()))
            .unwrap()
            .await
            .unwrap()
    });
    assert_eq!(v, 42);
    assert_ne!(ran_on, caller, "the closure must run on a pool thread");
    assert_eq!(pool.stats().completed, 1);
}

#[test]
fn join_blocks_a_plain_thread_until_done() {
    let pool = Pool::builder().build();
    let h = pool
        .spawn_blocking(|| {
            std::thread::sleep(Duration::from_millis(20));
            "done"
        })
        .unwrap();
    assert_eq!(h.join().unwrap(), "done");
}

#[test]
fn queue_bound_is_enforced_and_rejections_counted() {
    let pool = Pool::builder().max_threads(1).queue_bound(2).build();
    let (release, gate) = mpsc::channel::<()>();
    let first = pool
        .spawn_blocking(move || gate.recv().is_ok())
        .expect("a thread starts for the first task");
    let queued: Vec<_> = (0..2)
        .map(|i| pool.spawn_blocking(move || i).expect("room in the queue"))
        .collect();
    assert_eq!(pool.spawn_blocking(|| 99).unwrap_err(), Full);
    assert_eq!(pool.spawn_blocking(|| 99).unwrap_err(), Full);
    let s = pool.stats();
    assert_eq!((s.queued, s.alive, s.rejected), (2, 1, 2), "{s:?}");
    release.send(()).unwrap();
    assert!(first.join().unwrap());
    let got: Vec<i32> = queued.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(got, [0, 1]);
    // Room again once the queue drained.
    assert_eq!(pool.spawn_blocking(|| 7).unwrap().join().unwrap(), 7);
    assert_eq!(pool.stats().completed, 4);
}

#[test]
fn zero_queue_bound_accepts_only_what_a_thread_can_take() {
    let pool = Pool::builder().max_threads(1).queue_bound(0).build();
    let (release, gate) = mpsc::channel::<()>();
    let busy = pool.spawn_blocking(move || gate.recv()).unwrap();
    assert!(pool.spawn_blocking(|| ()).is_err());
    release.send(()).unwrap();
    busy.join().unwrap().unwrap();
    // The thread is idle now: the next task goes straight to it.
    assert!(eventually(|| pool.stats().busy == 0));
    assert_eq!(pool.spawn_blocking(|| 5).unwrap().join().unwrap(), 5);
}

#[test]
fn threads_start_lazily_up_to_the_max_and_retire_when_idle() {
    let pool = Pool::builder()
        .max_threads(3)
        .idle_timeout(Duration::from_millis(50))
        .build();
    assert_eq!(pool.stats().alive, 0, "no thread before the first task");
    let (release, gate) = mpsc::channel::<()>();
    let gate = std::sync::Arc::new(std::sync::Mutex::new(gate));
    let handles: Vec<_> = (0..5)
        .map(|_| {
            let gate = gate.clone();
            pool.spawn_blocking(move || gate.lock().unwrap().recv().unwrap())
                .unwrap()
        })
        .collect();
    let s = pool.stats();
    assert_eq!((s.alive, s.queued), (3, 2), "{s:?}");
    for _ in 0..5 {
        release.send(()).unwrap();
    }
    for h in handles {
        h.join().unwrap();
    }
    assert!(
        eventually(|| pool.stats().alive == 0),
        "idle threads must retire: {:?}",
        pool.stats()
    );
    assert_eq!(pool.stats().threads_started, 3);
    // And come back on demand.
    assert_eq!(pool.spawn_blocking(|| 1).unwrap().join().unwrap(), 1);
    assert_eq!(pool.stats().threads_started, 4);
}

#[test]
fn a_panic_becomes_a_join_error_and_the_thread_carries_on() {
    let pool = Pool::builder().max_threads(1).build();
    let err = executor::block_on(async {
        pool.spawn_blocking(|| -> u32 { panic!("boom {}", 7) })
            .unwrap()
            .await
            .unwrap_err()
    });
    assert!(err.is_panic());
    assert_eq!(err.panic_message(), Some("boom 7"));
    assert_eq!(err.to_string(), "task panicked: boom 7");
    // Same single thread, still serving.
    assert_eq!(pool.spawn_blocking(|| 3).unwrap().join().unwrap(), 3);
    let s = pool.stats();
    assert_eq!((s.panicked, s.completed, s.threads_started), (1, 2, 1));
}

#[test]
fn a_queued_task_can_be_cancelled_a_running_one_cannot() {
    let pool = Pool::builder().max_threads(1).build();
    let (release, gate) = mpsc::channel::<()>();
    let (started_tx, started) = mpsc::channel::<()>();
    let running = pool
        .spawn_blocking(move || {
            started_tx.send(()).unwrap();
            gate.recv().unwrap()
        })
        .unwrap();
    started.recv().unwrap();
    let queued = pool.spawn_blocking(|| panic!("must never run")).unwrap();
    assert!(!running.cancel());
    assert!(queued.cancel());
    assert!(queued.is_finished());
    assert!(queued.join().unwrap_err().is_cancelled());
    release.send(()).unwrap();
    running.join().unwrap();
    assert!(eventually(|| pool.stats().queued == 0));
    assert_eq!(pool.stats().panicked, 0);
}

#[test]
fn many_tasks_from_executor_tasks() {
    const N: u64 = 2000;
    let pool = Pool::builder()
        .max_threads(4)
        .queue_bound(N as usize)
        .build();
    let total = executor::block_on(async {
        let tasks: Vec<_> = (0..N)
            .map(|i| {
                let h = pool.spawn_blocking(move || i * i).unwrap();
                executor::spawn(async move { h.await.unwrap() })
            })
            .collect();
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        total
    });
    assert_eq!(total, (0..N).map(|i| i * i).sum::<u64>());
    let s = pool.stats();
    assert_eq!((s.completed, s.rejected), (N, 0));
    assert!(s.threads_started <= 4, "{s:?}");
}

#[test]
fn join_timeout_gives_the_handle_back() {
    let pool = Pool::builder().build();
    let (release, gate) = mpsc::channel::<()>();
    let h = pool.spawn_blocking(move || gate.recv().is_ok()).unwrap();
    let h = h.join_timeout(Duration::from_millis(10)).unwrap_err();
    release.send(()).unwrap();
    assert!(
        h.join_timeout(Duration::from_secs(10))
            .ok()
            .unwrap()
            .unwrap()
    );
}

#[test]
fn dropping_the_pool_still_runs_queued_tasks() {
    let pool = Pool::builder().max_threads(1).build();
    let handles: Vec<_> = (0..10)
        .map(|i| pool.spawn_blocking(move || i).unwrap())
        .collect();
    drop(pool);
    let got: Vec<i32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
}

#[test]
fn the_default_pool_serves_the_free_function() {
    let h = spawn_blocking(|| 11).unwrap();
    assert_eq!(h.join().unwrap(), 11);
    assert!(default_pool().stats().completed >= 1);
    assert!(
        init_default(Pool::builder().build()).is_err(),
        "already in use"
    );
}

#[test]
fn threads_take_the_builders_affinity_and_nice_not_the_submitters() {
    let pool = Pool::builder().nice(7).build();
    let probe = || {
        // SAFETY: plain integer arguments.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let mut set = std::mem::MaybeUninit::<libc::cpu_set_t>::zeroed();
        // SAFETY: `set` is a writable cpu_set_t of the size passed.
        unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), set.as_mut_ptr()) };
        // SAFETY: filled (and zeroed before).
        (nice, unsafe { libc::CPU_COUNT(&set.assume_init()) })
    };
    let (_, cpus_here) = probe();
    // Submit from a thread pinned to one CPU, as a pinned event loop would.
    let pool2 = pool.clone();
    let (nice, cpus) = std::thread::spawn(move || {
        let mut one = std::mem::MaybeUninit::<libc::cpu_set_t>::zeroed();
        // SAFETY: CPU_SET writes bit 0 of the zeroed set.
        unsafe { libc::CPU_SET(0, &mut *one.as_mut_ptr()) };
        // SAFETY: a valid set of the size passed, for this thread.
        let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), one.as_ptr()) };
        // Unpinned, the submitter's mask would be the process's, and the
        // check below that pool threads do not inherit it would prove nothing.
        assert_eq!(
            rc,
            0,
            "pinning the submitter: {}",
            std::io::Error::last_os_error()
        );
        pool2.spawn_blocking(probe).unwrap().join().unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(nice, 7);
    assert_eq!(
        cpus, cpus_here,
        "the builder's CPUs, not the pinned submitter's one"
    );
}

#[test]
fn an_observer_sees_a_task_submitted_then_started_then_finished() {
    use crate::Observer;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::thread::ThreadId;

    struct Log {
        events: Mutex<Vec<(ThreadId, String)>>,
        next: AtomicU64,
    }
    impl Log {
        fn push(&self, event: String) {
            let me = std::thread::current().id();
            self.events.lock().unwrap().push((me, event));
        }
    }
    impl Observer for Log {
        fn submit(&self, what: &'static str) -> u64 {
            let token = self.next.fetch_add(1, Ordering::Relaxed) + 1;
            self.push(format!("submit {what} {token}"));
            token
        }
        fn start(&self, what: &'static str, token: u64) {
            self.push(format!("start {what} {token}"));
        }
        fn finish(&self) {
            self.push("finish".into());
        }
    }
    static LOG: Log = Log {
        events: Mutex::new(Vec::new()),
        next: AtomicU64::new(0),
    };
    // Other tests of this process may be observed too: follow ours only.
    crate::set_observer(&LOG);
    let pool = Pool::builder().max_threads(1).build();
    let handle = pool.spawn_blocking_as("sha256", || 5).unwrap();
    assert_eq!(handle.join().unwrap(), 5);
    let me = std::thread::current().id();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let events = LOG.events.lock().unwrap().clone();
        let token = events
            .iter()
            .find(|(t, e)| *t == me && e.starts_with("submit sha256 "))
            .map(|(_, e)| e["submit sha256 ".len()..].to_string())
            .expect("the submission is observed on the submitting thread");
        let start = events
            .iter()
            .position(|(t, e)| *t != me && *e == format!("start sha256 {token}"))
            .expect("the start is observed on a pool thread, with the token");
        let pool_thread = events[start].0;
        let next = events[start + 1..].iter().find(|(t, _)| *t == pool_thread);
        match next {
            Some((_, e)) => {
                assert_eq!(e, "finish");
                break;
            }
            None => assert!(Instant::now() < deadline, "no finish: {events:?}"),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
