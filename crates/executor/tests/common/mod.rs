//! Helpers shared by the executor's integration tests.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::{Poll, Waker};

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

/// A deterministic pseudo-random sequence (tests must be reproducible).
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// A single-threaded unbounded channel: the smallest thing that parks a task
/// on a waker other than the reactor's.
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
    pub async fn recv(&self) -> Option<T> {
        std::future::poll_fn(|cx| {
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
        .await
    }
}
