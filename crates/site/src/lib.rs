//! httplite's site: everything that answers a request without waiting.
//!
//! A server is two things that are easy to tangle: *what* it answers
//! (routes, files, jobs, counters, the log line) and *how it waits* for
//! the network (futures on an executor, coroutines, a thread per
//! connection). This crate is the first half and nothing of the second: it
//! depends on [`http1`] (the sans-IO codec) and [`pool`] (the blocking
//! pool jobs run on), and never on the reactor, executor, coroutine or
//! dispatch crates (`scripts/test.sh` checks that with `cargo tree`). The
//! *drivers*, one per concurrency design, live in the binary: they read,
//! write, sleep, send files and time out, and ask this crate what to do.
//!
//! The contract between the two is small and sans-IO:
//!
//! 1. The driver decodes a request head with [`http1::Decoder`] and calls
//!    [`respond::handle`]. Most requests end there: the answer is encoded
//!    into the driver's write buffer (the constant endpoints cost a compare
//!    and a copy) and the driver writes it when it likes.
//! 2. A request whose answer waits comes back as [`respond::Slow`]. The
//!    driver turns it into a [`plan::Plan`] and runs its loop: each
//!    [`plan::Step`] is one wait (read the body, sleep, send a file range,
//!    wait for the pool, stream an echo) and the driver reports each with a
//!    [`plan::Event`], until [`plan::Step::Done`] or [`plan::Step::Close`].
//!
//! Nothing here blocks on the network, so every decision is a unit test on
//! byte strings (and, for files, a temporary directory). A worked example,
//! with no socket at all:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use bytes::BytesMut;
//! use http1::{Decoder, Limits, Message};
//! use site::exposure::{Exposure, Surface};
//! use site::jobs::{Jobs, Retention};
//! use site::plan::{Event, Plan, Step};
//! use site::respond::{Handled, handle};
//! use site::routes::App;
//! use site::stats::Stats;
//!
//! let stats = Arc::new(Stats::new(1));
//! let pool = pool::Pool::builder().max_threads(1).build();
//! let retention = Retention { max_count: 16, max_age: Duration::from_secs(60) };
//! let app = App {
//!     root: None,
//!     stats: stats.clone(),
//!     worker_extra: Box::new(|_, _| {}),
//!     test_endpoints: false,
//!     jobs: Jobs::new(pool, retention, false),
//!     events: Default::default(),
//!     exposure: Exposure::DEMO,
//!     health_path: None,
//!     max_sleeping: 1024,
//!     proxy: Default::default(),
//! };
//! let worker = stats.worker(0);
//! let mut wbuf = BytesMut::new();
//!
//! // The hot path: answered at once.
//! let mut rbuf = BytesMut::from(&b"GET /_httplite/plaintext HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
//! let Ok(Some(Message::Head(req))) = Decoder::new(Limits::default()).decode(&mut rbuf) else {
//!     panic!("a complete head")
//! };
//! assert!(matches!(handle(&app, &worker, &mut wbuf, req, &Surface::Public, false, |_, _| {}), Handled::Done(true)));
//! assert!(wbuf.ends_with(b"Hello, World!"));
//!
//! // A request that waits: the plan says what to wait for.
//! let mut rbuf = BytesMut::from(&b"GET /_httplite/sleep?ms=5 HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
//! let Ok(Some(Message::Head(req))) = Decoder::new(Limits::default()).decode(&mut rbuf) else {
//!     panic!("a complete head")
//! };
//! let Handled::Slow(slow) = handle(&app, &worker, &mut wbuf, req, &Surface::Public, false, |_, _| {}) else {
//!     panic!("the sleep route waits")
//! };
//! let mut plan = Plan::new(slow);
//! let step = plan.next(&app, &worker, &mut wbuf, Event::Start);
//! assert!(matches!(step, Step::Sleep(d) if d == Duration::from_millis(5)));
//! // (A driver sleeps here.)
//! let step = plan.next(&app, &worker, &mut wbuf, Event::Slept { shutting_down: false });
//! assert!(matches!(step, Step::Done(outcome) if outcome.keep_alive));
//! assert!(wbuf.ends_with(b"slept 5 ms\n"));
//! ```
//!
//! The modules: [`routes`] (the [`routes::App`] and what each path gets, an
//! [`action::Action`]), [`respond`] (the first step and the error replies),
//! [`plan`] (the waiting answers), [`static_files`] with [`mime`],
//! [`httpdate`] and [`listing`] (`--root`), [`exposure`] (which listener
//! answers which endpoint), [`jobs`] (background jobs' HTTP side and
//! bookkeeping; the threads are [`pool`]'s), [`dashboard`] (the live page
//! at `/_httplite/`) with [`events`] (its Server-Sent Events), [`stats`] (counters, and the
//! [`stats::RuntimeProbe`] each driver fills in) and [`access_log`].

#![deny(missing_docs)]

pub mod access_log;
pub mod action;
pub mod dashboard;
pub mod encoding;
pub mod events;
pub mod exposure;
pub mod file_cache;
pub mod file_features;
pub mod header_rules;
pub mod httpdate;
pub mod jobs;
pub mod listing;
pub mod mime;
pub mod plan;
pub mod ranges;
pub mod respond;
pub mod reverse_proxy;
pub mod routes;
pub mod static_files;
pub mod stats;
