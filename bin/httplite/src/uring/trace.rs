//! `--runtime uring` on a timeline (`--trace-format chrome`): the ring's
//! steps and the worker's task polls on the worker's track, as the epoll
//! runtimes draw theirs.
//!
//! The proactor writes no timeline of its own (it knows no trace format):
//! [`install`] gives it a [`proactor::trace::Timeline`] that forwards its
//! `io_uring_enter` slices and SQE/CQE instants to the reactor crate's
//! chrome writer. The task polls and wakes are the executor's own, as on
//! the epoll runtimes (the same executor runs on either driver): a wake
//! recorded inside the enter that reaped its CQE, or on the thread that
//! woke it, with an arrow to the poll it causes.

use std::fmt;

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
