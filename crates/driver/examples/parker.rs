//! A third driver in forty lines: no I/O at all, only a condition variable.
//! The executor runs on it unchanged, which is the point of the trait: the
//! run loop needs a turn that blocks or peeks, and a notifier that ends a
//! block from another thread. Nothing about epoll or io_uring.
//!
//! Run: `cargo run -p driver --example parker`

use std::cell::Cell;
use std::sync::{Arc, Condvar, Mutex};
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

use driver::{Driver, Notify, Wait};

/// The driver: a turn that blocks waits on the condvar until rung.
#[derive(Default)]
struct Parker {
    bell: Bell,
    blocks: Cell<u32>,
}

/// Its notifier: sets a flag and signals the condvar (any thread).
#[derive(Clone, Default)]
struct Bell(Arc<(Mutex<bool>, Condvar)>);

impl Notify for Bell {
    fn notify(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_one();
    }
}

impl Driver for Parker {
    type Notifier = Bell;
    type Entered = ();

    fn enter(&self) {}

    fn notifier(&self) -> Bell {
        self.bell.clone()
    }

    fn turn(&self, wait: Wait) -> std::io::Result<usize> {
        let mut rung = self.bell.0.0.lock().unwrap();
        if wait == Wait::Block {
            self.blocks.set(self.blocks.get() + 1);
            while !*rung {
                rung = self.bell.0.1.wait(rung).unwrap();
            }
        }
        *rung = false;
        Ok(0)
    }
}

/// Pending until a thread it starts wakes it after `ms` milliseconds.
async fn woken_by_a_thread(ms: u64) {
    let done = Arc::new(Mutex::new(false));
    let mut started = false;
    std::future::poll_fn(|cx| {
        if *done.lock().unwrap() {
            return Poll::Ready(());
        }
        if !started {
            started = true;
            let (done, waker) = (done.clone(), cx.waker().clone());
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(ms));
                *done.lock().unwrap() = true;
                waker.wake(); // another thread: the executor's inbox + our Bell
            });
        }
        Poll::Pending
    })
    .await
}

fn main() -> std::io::Result<()> {
    let rt = executor::Runtime::with_driver(Parker::default())?;
    let start = Instant::now();
    let sum = rt.block_on(async {
        let tasks: Vec<_> = (1..=3u64)
            .map(|i| {
                executor::spawn(async move {
                    woken_by_a_thread(10 * i).await;
                    i
                })
            })
            .collect();
        let mut sum = 0;
        for t in tasks {
            sum += t.await.expect("task");
        }
        sum
    });
    println!(
        "3 tasks on a condvar driver: sum {sum} after {:?}, {} blocking turns, {} remote wakes",
        start.elapsed(),
        rt.driver().blocks.get(),
        rt.stats().remote_wakes
    );
    assert_eq!(sum, 6);
    Ok(())
}
