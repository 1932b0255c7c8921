//! Helpers shared by the coroutine crate's integration tests.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::mpsc;
use std::task::{Poll, Waker};
use std::time::Duration;

/// Aborts the whole test process if the test holding it runs longer than
/// its limit: a hung coroutine must fail CI, not stall it.
pub struct Watchdog {
    done: Option<mpsc::Sender<()>>,
}

impl Watchdog {
    pub fn new(limit: Duration, what: &'static str) -> Watchdog {
        let (tx, rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                eprintln!("watchdog: test `{what}` exceeded {limit:?}; aborting");
                std::process::abort();
            }
        });
        Watchdog { done: Some(tx) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.done.take());
    }
}

/// Raises the soft fd limit to the hard limit (tests open thousands of fds).
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit to fill.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: `lim` is a valid rlimit.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
}

/// A single-threaded unbounded channel whose `recv` blocks the calling
/// coroutine: the smallest thing that parks a coroutine on a waker other
/// than the reactor's.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let inner = Rc::new(RefCell::new(Chan {
        items: VecDeque::new(),
        waker: None,
        closed: false,
    }));
    (Sender(inner.clone()), Receiver(inner))
}

struct Chan<T> {
    items: VecDeque<T>,
    waker: Option<Waker>,
    closed: bool,
}

pub struct Sender<T>(Rc<RefCell<Chan<T>>>);
pub struct Receiver<T>(Rc<RefCell<Chan<T>>>);

impl<T> Sender<T> {
    pub fn send(&self, v: T) {
        let waker = {
            let mut c = self.0.borrow_mut();
            c.items.push_back(v);
            c.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut c = self.0.borrow_mut();
            c.closed = true;
            c.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Receiver<T> {
    pub fn recv(&self) -> Option<T> {
        coroutine::wait(|cx| {
            let mut c = self.0.borrow_mut();
            if let Some(v) = c.items.pop_front() {
                return Poll::Ready(Some(v));
            }
            if c.closed {
                return Poll::Ready(None);
            }
            c.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .unwrap_or(None)
    }
}
