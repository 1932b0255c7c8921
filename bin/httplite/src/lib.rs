//! httplite as a library: everything the server binary is made of, so that
//! fuzz targets, benchmarks and tests can drive the same connection code the
//! binary runs (for example a connection over an in-memory transport through
//! [`blocking::BlockingIo`]).
//!
//! The binary (`src/main.rs`) only parses flags and wires these together.

pub mod access_log;
pub mod blocking;
pub mod cli;
pub mod config;
pub mod console;
pub mod date_clock;
pub mod httpdate;
pub mod jobs;
pub mod lazy_timer;
pub mod mime;
pub mod respond;
pub mod routes;
pub mod stackless;
pub mod static_files;
pub mod stats;

/// The README's Rust code blocks, compiled and run by `cargo test` as
/// doctests of this crate (shell and text blocks are marked `sh`/`text` and
/// skipped), so that the samples there cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
