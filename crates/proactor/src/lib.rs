//! proactor (doc written below)
#![deny(missing_docs)]
pub mod abi;
mod bufring;
mod driver;
mod net;
mod notify;
pub mod op;
mod ops;
pub mod ring;
mod runtime;
mod stats;
pub mod sys;
pub mod time;
pub mod trace;

pub use bufring::BufRing;
pub use driver::{Builder, EnterGuard, Proactor};
pub use net::{RecvBuf, TcpListener, TcpStream};
pub use notify::Notifier;
pub use ops::{Completion, Kind, OpKey};
pub use runtime::{JoinHandle, Runtime, spawn, yield_now};
pub use stats::ProactorStats;
