//! The server on the stackless runtime: futures on a per-thread executor.

mod conn;
mod ctx;
mod worker;

pub use worker::run;
