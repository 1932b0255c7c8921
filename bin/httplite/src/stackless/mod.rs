//! The server on the stackless runtime: futures on a per-thread executor.

pub(crate) mod accept;
pub(crate) mod answer;
mod conn;
pub(crate) mod ctx;
mod proxied;
pub(crate) mod proxy;
pub mod transport;
mod tunnel;
pub(crate) mod upstream;
mod worker;

pub use worker::run;
