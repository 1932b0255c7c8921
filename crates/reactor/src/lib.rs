//! # reactor: the bottom layer, where the kernel meets the runtime
//!
//! A reactor turns kernel readiness notifications into `Waker::wake` calls.
//! It owns one thread's `epoll` instance and knows, for each file descriptor,
//! which task is waiting to read it and which to write it.
//!
//! ```text
//!   task: stream.read(buf).await                      kernel
//!     │ read(2) → EAGAIN                                │
//!     │ clear READABLE, store waker in slot 7 ─────┐    │ bytes arrive on fd
//!     ▼ Pending                                    │    ▼
//!   executor runs other tasks, then              ┌─┴──────────────┐
//!   Reactor::turn ── epoll_wait ────────────────▶│ registry (slab) │
//!     ◀── event {token = gen<<32 | 7, EPOLLIN} ──│ slot 7: bits,   │
//!     set READABLE, reader.wake_by_ref() ───────▶│  reader, writer │
//!   executor polls the task again: read(2) → n   └─────────────────┘
//! ```
//!
//! ## The edge-triggered contract
//!
//! Every fd is registered **once**, for `EPOLLIN | EPOLLOUT | EPOLLRDHUP |
//! EPOLLET`. In edge-triggered mode the kernel reports a *change* (an edge),
//! not a level: after it said "readable" once, it says nothing more until the
//! socket has been drained and new data arrives. So the reactor keeps the
//! readiness itself, in the fd's slot, and the rule is:
//!
//! > readiness is set by an event and cleared **only** when an operation
//! > returned `EAGAIN`.
//!
//! A reader that stops before `EAGAIN` (it read 100 of 4096 bytes) keeps its
//! readiness, so its next `poll_ready` is `Ready` at once and it gets the rest
//! without any new edge. Clearing earlier would lose the data until the peer
//! happened to send more: the classic edge-triggered hang.
//! [`Registration::poll_io`] packages the rule.
//!
//! Hang-up and error events (`EPOLLRDHUP`, `EPOLLHUP`, `EPOLLERR`) wake both
//! the reader and the writer: either may be the one that must see EOF or the
//! error. Those bits are sticky, since operations then never return `EAGAIN`.
//!
//! ## Tokens and generations
//!
//! The registry is a slab; an fd's `epoll_data.u64` is `generation << 32 |
//! slot`. Freeing a slot bumps its generation, so an event already queued for
//! a closed connection (or for a new one that reused the fd number) does not
//! match and is ignored. Dropping a [`Registration`] calls `EPOLL_CTL_DEL`
//! before its owner closes the fd.
//!
//! A woken waker stays in its slot: the task nearly always waits on the same
//! fd again, and then finds it in place instead of storing a fresh clone.
//!
//! ## Timers
//!
//! Timers live in an indexed binary heap (O(log n) insert, reset and cancel;
//! a dropped [`time::Sleep`] frees its entry at once). The nearest deadline
//! becomes `epoll_wait`'s timeout, rounded *up* to a whole millisecond so that
//! a timer due in 300 µs neither spins through 0 ms waits nor fires early.
//! Inside, deadlines and the clock are plain `u64` nanoseconds of
//! `CLOCK_MONOTONIC` (one compare or subtraction per turn, where `Instant`
//! would call out of line); `Instant` is only the API's type.
//!
//! ## Waking from other threads
//!
//! An eventfd sits in the epoll set. [`Notifier::notify`] (any thread) writes
//! to it, ending the wait; an "already notified" flag coalesces bursts into
//! one write. The executor layered on top uses it to deliver cross-thread
//! wakes.
//!
//! ## Watching it work
//!
//! Build with the `trace` feature and call [`trace::enable`] (the server's
//! `--trace`): every layer then prints one line per step: `epoll` (events,
//! fds and flags, how long the thread slept), `wake`, `poll`, `spawn`,
//! `timer`, `handoff`, `switch` (coroutines) and `http`. Without the feature
//! the trace sites compile to nothing. [`trace::enable_chrome`] writes the
//! same steps as a timeline for Perfetto instead ([`trace::chrome`]).
//! `examples/trace.rs` in the executor
//! crate is the smallest demonstration. The counters behind the server's
//! stats page ([`ReactorStats`], readable from other threads through a
//! [`StatsHandle`]) are always on: each is a [`Counter`], a single-writer
//! atomic that costs what a plain integer would.
//!
//! ## Layers in this crate
//!
//! - [`sys`]: the only place with raw syscalls (`syscall!`), fds as `OwnedFd`,
//!   everything `CLOEXEC` and non-blocking.
//! - [`epoll`]: a safe `epoll_create1` / `epoll_ctl` / `epoll_wait` wrapper,
//!   usable alone (see `examples/raw_epoll.rs`).
//! - [`Reactor`], [`Registration`], [`Notifier`]: the registry, timers and
//!   notifier above; [`time`]: `sleep`, `timeout`, `interval` futures.
//!
//! A reactor is `!Send`: it belongs to the thread that created it and is found
//! through a thread-local ([`Reactor::current`]) once [`Reactor::enter`]ed.
#![deny(missing_docs)]

mod clock;
mod driver_impl;
pub mod epoll;
mod interest;
mod notify;
#[allow(clippy::module_inception)]
mod reactor;
mod registry;
mod stream;
pub mod sys;
pub mod time;
mod timer;
pub mod trace;

pub use clock::Tick;
pub use driver::Counter;
pub use interest::{Interest, Readiness};
pub use notify::Notifier;
pub use reactor::{EnterGuard, Reactor, ReactorStats, Registration, StatsHandle};
pub use timer::TimerKey;
