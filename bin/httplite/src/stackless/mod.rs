//! The server on the stackless runtime: futures on a per-thread executor.

pub(crate) mod accept;
pub(crate) mod answer;
mod conn;
pub(crate) mod ctx;
mod proxied;
pub mod transport;
mod worker;

pub use worker::run;
