//! # proactor: the completion model, by hand on io_uring
//!
//! The `reactor` crate is the *readiness* model: epoll says "you may read
//! now" and the task makes the `read` itself. This crate is the
//! *completion* model: the task hands the kernel the whole operation ("recv
//! on fd 7 into one of these buffers"), and later the kernel says "done: 78
//! bytes, in buffer 3". The queue of requests and the queue of answers are
//! two rings in memory shared with the kernel, and one `io_uring_enter`
//! per loop turn both submits everything queued and waits for answers.
//!
//! ```text
//!   task: stream.recv().await                         kernel
//!     │ first call: SQE {RECV, fd 7, MULTISHOT,        │
//!     │   BUFFER_SELECT group 0, user_data=g<<32|5} ──▶│ SQ ring (shared memory)
//!     ▼ Pending (waker stored in slot 5)               │
//!   executor runs other tasks, then                    │ bytes arrive: the kernel
//!   Proactor::turn ── io_uring_enter(GETEVENTS, ───────▶ picks buffer 3 from the
//!     nearest timer as EXT_ARG timeout)                │ provided-buffer ring,
//!     ◀── CQE {user_data=g<<32|5, res=78, ─────────────│ copies, posts a CQE
//!          flags=MORE|BUFFER, bid=3}                   │ (CQ ring, shared memory)
//!   slot 5: queue the CQE, wake the task               │
//!   task: Some(RecvBuf{bid 3, 78 bytes}); drop → buffer 3 back to the ring
//! ```
//!
//! ## The rings and their ordering
//!
//! [`ring`] sets up an instance with raw `io_uring_setup` /
//! `io_uring_enter` / `io_uring_register` calls (`sys`, private to the crate), maps the SQ ring,
//! the CQ ring and the SQE array, and spells out the acquire/release pairs
//! on their heads and tails (see [`ring`]'s module docs; it is the
//! counterpart of the reactor's edge-triggered contract). The set-up is the
//! one liburing's maintainers recommend for a one-thread network server:
//! `SINGLE_ISSUER | DEFER_TASKRUN` (completion work runs only inside our
//! `io_uring_enter`, never as an interruption), falling back to
//! `COOP_TASKRUN | TASKRUN_FLAG`; a CQ four times the SQ (multishot
//! operations post many CQEs per SQE); `SUBMIT_ALL`.
//!
//! ## One enter per turn, never a busy peek
//!
//! [`Proactor::turn`] makes exactly one `io_uring_enter(GETEVENTS |
//! EXT_ARG)`: it submits every queued SQE and, when no task is ready, waits
//! for at least one CQE with the nearest timer as the timeout (timers are a
//! user-space map, see [`time`]). When tasks are ready it waits for nothing
//! (min_complete 0) but still submits and collects, so I/O keeps flowing.
//! There is no loop that peeks the CQ while idle.
//!
//! A full SQ is back-pressure, never an error: the SQE that finds it full
//! submits what is queued and tries again, and if the kernel took nothing
//! (it could not allocate a request) waits in a small overflow list that
//! the next turn pushes first, in order ([`ProactorStats::sq_full`]).
//!
//! ## Operations and their `user_data`
//!
//! Every SQE carries `generation << 32 | slot` of a table of operations
//! (`ops.rs`): the slot holds the waiting future's waker and the CQEs not yet
//! read. A freed slot bumps its generation, so late CQEs are recognised as
//! stale. What exists:
//!
//! - **multishot accept** ([`TcpListener`], for the reuseport mode) and
//!   adoption of fds accepted elsewhere ([`TcpStream::from_fd`], the
//!   acceptor/handoff mode);
//! - **multishot recv on a provided-buffer ring** ([`TcpStream::recv`],
//!   [`BufRing`]): an idle connection holds no buffer; each CQE names the
//!   buffer id the kernel filled ([`RecvBuf`], returned to the ring on drop);
//!   a CQE without `IORING_CQE_F_MORE` ends the multishot and the next call
//!   **re-arms** it; `-ENOBUFS` (every buffer out) is **back-pressure**: the
//!   stream waits until some buffer comes back, then re-arms;
//! - **send** with an owned buffer ([`op::send`], [`TcpStream::send_all`]),
//!   always `MSG_NOSIGNAL`; **read** into an owned buffer ([`op::read`]);
//!   **close**, **shutdown**, and the ring's own **timeout**
//!   ([`Proactor::timeout_op`]);
//! - the measured alternatives ([`transfer`]): **`SEND_ZC`** with its
//!   notification CQE, **`SPLICE`** through a pipe, **registered (fixed)
//!   files** (`examples/send_paths.rs` measures each against the plain
//!   form).
//!
//! ## Cancellation and buffer ownership
//!
//! The trap of every completion runtime: a future may be dropped while its
//! operation is in the kernel, and the kernel will still write into the
//! buffer it was given. So **buffers belong to the driver from submission
//! until the operation's last CQE**. An owned-buffer future ([`op::Oneshot`])
//! dropped early moves its buffer into the operation's slot (*parks* it),
//! and the proactor submits `IORING_OP_ASYNC_CANCEL` for that `user_data`.
//! The buffer is freed only when the last CQE arrives, `-ECANCELED` or a
//! result if the operation won the race. Data that such a CQE reports is in
//! a buffer nobody will read: it is **counted as discarded**
//! ([`ProactorStats::discarded_bytes`]) and never delivered; the tests
//! `cancelled_read_parks_its_buffer_until_the_cqe` and
//! `data_for_a_cancelled_read_is_counted_as_discarded` show both cases.
//!
//! A stream's multishot recv is different: dropping one `recv()` future
//! does not cancel it. It stays armed, and bytes that arrive meanwhile are
//! **delivered to the next `recv()`** (test `dropped_recv_future_loses_nothing`).
//! Only dropping the stream cancels it; CQEs that still arrive then have their
//! buffers returned to the ring and their bytes counted as discarded. Fds
//! that a cancelled multishot accept still produces are closed.
//!
//! Dropping the proactor itself cancels everything in flight and waits
//! (bounded) for every last CQE before unmapping any memory; if the kernel
//! never answers, the memory is leaked rather than freed under it.
//!
//! ## The executor
//!
//! This crate has none of its own. [`Proactor`] implements the `driver`
//! crate's `Driver` trait (`driver_impl.rs`: a turn is [`Proactor::turn`],
//! the cross-thread wake is the [`Notifier`], an eventfd with a read always
//! in flight on the ring), so the same executor that runs on the epoll
//! reactor runs here: `executor::Runtime::with_driver(Proactor::new()?)`,
//! then `block_on`, `executor::spawn`, `executor::wake_all` as on epoll.
//! Timers are the driver's: [`time::sleep`] and [`time::timeout`] register
//! with the proactor entered on the thread, and its turn waits at most
//! until the nearest one. The server's `--runtime uring` runs this way
//! (`bin/httplite/src/uring/`). The crate itself knows no executor and no
//! epoll: only its tests and examples bring the executor in.
//!
//! ## Watching it work
//!
//! With the `trace` feature and [`trace::enable`], every SQE (`op`, `fd`,
//! `user_data`), every CQE (`res`, `MORE`, `BUFFER=id`) and every enter
//! (submitted, waited, slept) prints a line in the reactor's columns; with
//! [`trace::enable_lines`] the lines go to a program's writer instead (the
//! server's, with its per-thread rate limit); with [`trace::enable_timeline`]
//! they go to a program's timeline instead (enters as slices, SQEs and CQEs
//! as instants). [`Proactor::stats`] counts
//! SQEs, CQEs, enters, ENOBUFS, cancellations, discarded bytes and re-arms.
//!
//! `examples/echo.rs` is a runnable echo server; `examples/probe.rs` prints
//! what the running kernel accepts. Three runnable pitfalls show the traps
//! of this model next to their fixes: `pitfall_dropped_read` (a buffer
//! reused while the kernel still writes it), `pitfall_no_rearm` (a multishot
//! recv that ended without `F_MORE` and was not re-armed: silence) and
//! `pitfall_buffer_ring_dry` (every ring buffer held: an `ENOBUFS` stall).
#![deny(missing_docs)]

pub mod abi;
mod bufring;
mod driver;
mod driver_impl;
mod net;
mod notify;
pub mod op;
mod ops;
pub mod ring;
mod stats;
pub(crate) mod sys;
mod teardown;
pub mod time;
pub mod trace;
pub mod transfer;

pub use bufring::BufRing;
pub use driver::{Builder, EnterGuard, Proactor};
pub use net::{RecvBuf, TcpListener, TcpStream};
pub use notify::Notifier;
pub use ops::{Completion, Kind, OpKey};
pub use stats::{ProactorStats, StatsHandle};
