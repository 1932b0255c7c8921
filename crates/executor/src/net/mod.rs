//! Networking: TCP listener and stream over the thread's reactor.

mod tcp;

pub use tcp::{TcpListener, TcpStream};
