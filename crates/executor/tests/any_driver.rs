//! The executor on a driver that is neither epoll nor io_uring: a condition
//! variable, no I/O at all. If the run loop needed anything of a driver
//! beyond the `Driver` trait, this would not compile; if it used the trait
//! wrongly (slept with tasks ready, missed a notify), these would hang or
//! fail.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use executor::{Driver, Notify, Runtime, Wait};

/// The smallest driver: a block waits on a condvar until notified.
struct Parker {
    bell: Bell,
    blocks: Rc<Cell<u32>>,
    peeks: Rc<Cell<u32>>,
}

#[derive(Clone, Default)]
struct Bell(Arc<(Mutex<bool>, Condvar)>);

impl Notify for Bell {
    fn notify(&self) {
        let (rung, cv) = &*self.0;
        *rung.lock().unwrap() = true;
        cv.notify_one();
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
        let (rung, cv) = &*self.bell.0;
        let mut rung = rung.lock().unwrap();
        match wait {
            Wait::Block => {
                self.blocks.set(self.blocks.get() + 1);
                while !*rung {
                    rung = cv.wait(rung).unwrap();
                }
            }
            Wait::Peek => self.peeks.set(self.peeks.get() + 1),
        }
        *rung = false;
        Ok(0)
    }
}

fn parker() -> (Parker, Rc<Cell<u32>>, Rc<Cell<u32>>) {
    let (blocks, peeks) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let p = Parker {
        bell: Bell::default(),
        blocks: blocks.clone(),
        peeks: peeks.clone(),
    };
    (p, blocks, peeks)
}

/// Pending until another thread wakes it after `after`.
struct WokenFromAfar {
    after: Duration,
    started: bool,
    done: Arc<Mutex<bool>>,
}

impl Future for WokenFromAfar {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if *self.done.lock().unwrap() {
            return Poll::Ready(());
        }
        if !self.started {
            self.started = true;
            let (waker, done, after) = (cx.waker().clone(), self.done.clone(), self.after);
            thread::spawn(move || {
                thread::sleep(after);
                *done.lock().unwrap() = true;
                waker.wake();
            });
        }
        Poll::Pending
    }
}

fn woken_from_afar(after: Duration) -> WokenFromAfar {
    WokenFromAfar {
        after,
        started: false,
        done: Arc::new(Mutex::new(false)),
    }
}

#[test]
fn tasks_run_and_remote_wakes_end_a_block() {
    let (p, blocks, _) = parker();
    let rt = Runtime::with_driver(p).unwrap();
    let out = rt.block_on(async {
        let a = executor::spawn(async {
            woken_from_afar(Duration::from_millis(20)).await;
            20
        });
        let b = executor::spawn(async { 22 });
        // The main future too is woken from another thread.
        woken_from_afar(Duration::from_millis(5)).await;
        a.await.unwrap() + b.await.unwrap()
    });
    assert_eq!(out, 42);
    // Nothing was ready while both threads slept: the loop blocked in the
    // driver, and only the notifier (the bell) could have ended it.
    assert!(blocks.get() >= 1, "never blocked");
    assert!(rt.stats().remote_wakes >= 2);
}

#[test]
fn a_busy_loop_peeks_instead_of_blocking() {
    let (p, blocks, peeks) = parker();
    let turns = Rc::new(Cell::new(0u32));
    let counted = turns.clone();
    let rt = executor::Builder::default()
        .budget(4)
        .on_turn(move |_: &Parker| counted.set(counted.get() + 1))
        .build_on(p)
        .unwrap();
    rt.block_on(async {
        // Always ready: 100 polls at a budget of 4 must check the driver
        // without sleeping (Peek), never Block.
        for _ in 0..100 {
            executor::yield_now().await;
        }
    });
    assert_eq!(blocks.get(), 0, "blocked with a task ready");
    assert!(peeks.get() >= 100 / 4 - 1, "peeks: {}", peeks.get());
    assert_eq!(turns.get(), peeks.get(), "on_turn runs after every turn");
}
