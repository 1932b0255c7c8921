//! `--runtime uring` on a timeline (`--trace-format chrome`): the ring's
//! steps and the worker's task polls on the worker's track, as the epoll
//! runtimes draw theirs.
//!
//! The proactor writes no timeline of its own (it knows no trace format):
//! [`install`] gives it a [`proactor::trace::Timeline`] that forwards its
//! `io_uring_enter` slices and SQE/CQE instants to the reactor crate's
//! chrome writer. The proactor's executor does not trace its polls, so the
//! worker wraps each task it spawns in `Traced`: a `poll task=N` slice
//! around every poll, and a waker that records each wake (inside the
//! enter that reaped its CQE, or on the thread that woke it) with an arrow
//! to the poll it causes.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::ThreadId;

use reactor::trace::chrome;

/// Forwards the proactor's trace events to the chrome writer.
struct ProactorTimeline;

impl proactor::trace::Timeline for ProactorTimeline {
    fn begin(&self, name: &str, args: fmt::Arguments<'_>) {
        if chrome::on() {
            chrome::begin(name, args);
        }
    }

    fn end(&self, args: fmt::Arguments<'_>) {
        if chrome::on() {
            chrome::end(args);
        }
    }

    fn instant(&self, name: &str, args: fmt::Arguments<'_>) {
        if chrome::on() {
            chrome::instant(name, args);
        }
    }
}

/// Puts the ring's work on the timeline. Call it once the chrome trace is
/// on, before the workers start.
pub fn install() {
    static TIMELINE: ProactorTimeline = ProactorTimeline;
    proactor::trace::enable_timeline(&TIMELINE);
}

thread_local! {
    /// The next task number on this worker.
    static NEXT_KEY: Cell<u64> = const { Cell::new(0) };
    /// Its address tells this worker's runtime apart in remote wakes.
    static RUNTIME: u8 = const { 0 };
}

fn runtime_tag() -> usize {
    RUNTIME.with(|r| std::ptr::from_ref(r).addr())
}

/// A task with its polls and wakes on the timeline (see the module docs).
/// Only spawned while the chrome trace is on.
pub(super) struct Traced<F> {
    inner: Pin<Box<F>>,
    key: u64,
    /// The connection whose handoff arrow the first poll ends.
    fd: Option<RawFd>,
    /// The runtime's waker and ours around it, kept while it stays the same.
    waker: Option<(Waker, Waker)>,
}

impl<F: Future> Traced<F> {
    /// Wraps `inner`; `fd`: a connection, whose handoff's arrow ends in
    /// the first poll.
    pub(super) fn new(inner: F, fd: Option<RawFd>) -> Traced<F> {
        let key = NEXT_KEY.with(|k| k.replace(k.get() + 1));
        Traced {
            inner: Box::pin(inner),
            key,
            fd,
            waker: None,
        }
    }
}

impl<F: Future> Future for Traced<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let key = this.key;
        if !chrome::on() {
            return this.inner.as_mut().poll(cx);
        }
        chrome::begin(&format!("poll task={key}"), format_args!("\"task\":{key}"));
        chrome::woken_poll(runtime_tag(), key);
        if let Some(fd) = this.fd.take() {
            crate::driver::trace_arrival(fd);
        }
        let ours = match &this.waker {
            Some((theirs, ours)) if theirs.will_wake(cx.waker()) => ours.clone(),
            _ => {
                let ours = Waker::from(Arc::new(TracedWaker {
                    inner: cx.waker().clone(),
                    key,
                    thread: std::thread::current().id(),
                    runtime: runtime_tag(),
                }));
                this.waker = Some((cx.waker().clone(), ours.clone()));
                ours
            }
        };
        let out = this.inner.as_mut().poll(&mut Context::from_waker(&ours));
        let result = if out.is_ready() { "Ready" } else { "Pending" };
        chrome::end(format_args!("\"result\":\"{result}\""));
        out
    }
}

/// A task's waker that records the wake before passing it on.
struct TracedWaker {
    inner: Waker,
    key: u64,
    thread: ThreadId,
    runtime: usize,
}

impl Wake for TracedWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if chrome::on() {
            let key = self.key;
            if std::thread::current().id() == self.thread {
                chrome::wake(key, format_args!("\"task\":{key},\"from\":\"local\""));
            } else {
                let args = format_args!("\"task\":{key},\"from\":\"remote\"");
                chrome::remote_wake(self.runtime, key, args);
            }
        }
        self.inner.wake_by_ref();
    }
}
