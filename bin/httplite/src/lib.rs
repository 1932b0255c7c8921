//! httplite as a library: the drivers (one per concurrency design) and the
//! binary's plumbing, so that fuzz targets, benchmarks and tests can drive
//! the same connection code the binary runs (for example a connection over
//! an in-memory transport through [`blocking::BlockingIo`]).
//!
//! What a request gets is the `site` crate's business; the modules here
//! only wait: [`stackless`] (futures on epoll), [`uring`] (futures on
//! io_uring), [`blocking`] (stackful coroutines
//! and OS threads, over one connection loop), plus what both kinds share
//! ([`driver`], [`probes`]). The binary (`src/main.rs`) parses flags and
//! wires a site to the chosen driver.

pub mod blocking;
pub mod cli;
pub mod config;
pub mod console;
pub mod date_clock;
pub mod driver;
pub mod fork;
pub mod forwarded;
pub mod lazy_timer;
pub mod lifecycle;
pub mod listen;
pub mod pool_timeline;
pub mod probes;
pub mod proxy;
pub mod proxy_protocol;
pub mod signals;
pub mod stackless;
pub mod surface;
pub mod tls;
pub mod upgrade;
pub mod upstream;
pub mod uring;

/// The site's modules under their old paths, for the fuzz targets and
/// examples written against them (re-exports only: nothing here imports
/// them).
pub use site::{access_log, exposure, jobs, routes, static_files, stats};

/// The Rust code blocks of `docs/runtime.md` (the runtime in one page),
/// compiled and run by `cargo test` as doctests of this crate (shell and
/// text blocks are marked `sh`/`text` and skipped), so that the samples
/// there cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/runtime.md")]
pub struct RuntimeDoctests;
