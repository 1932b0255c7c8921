//! # learn: async from zero, in nine steps
//!
//! A path for readers who use `async`/`.await` and want to know what is
//! underneath: each step is a short program that builds on the one before,
//! until the last ones are an HTTP/1.1 server on a runtime the reader has
//! written: raw `epoll`, hand-made wakers, a FIFO executor, a reactor and
//! timers. The book chapters (`docs/learn/`) walk through the same code;
//! every step has its runnable example (`cargo run -p learn --example
//! step02_level_epoll`), its tests, and exercises whose solutions are in
//! [`solutions`] and checked by `cargo test -p learn`.
//!
//! ```text
//!  step  module                      what it adds                        uses
//!  1     step01_blocking_echo        blocking accept/read/write, threads std::net
//!  2     step02_level_epoll          non-blocking sockets, epoll (LT)    1's echo idea
//!  3     step03_edge_epoll           edge-triggered epoll, drain to EAGAIN 2's Epoll
//!  4     step04_future_waker         a Future and a Waker by hand        std::task
//!  5     step05_executor             FIFO of tasks, spawn, JoinHandle    4's waker idea
//!  6     step06_reactor              fd → Waker; async accept/read/write 3 + 5
//!  7     step07_timers               sleep; nearest deadline = timeout   6
//!  8     step08_http                 HTTP/1.1: GET, keep-alive, bodies   5 + 6 + 7
//!  9     step09_coroutine            8's server on stackful coroutines   8 + coroutine
//! ```
//!
//! Steps 1 to 8 depend on nothing but `libc`; step 9 borrows the
//! workspace's `coroutine` crate, whose insides the book's chapter on
//! stackless and stackful designs describes.
//!
//! The steps stay small by leaving things out, and each chapter ends with
//! where httplite's real crates (`crates/reactor`, `crates/executor`, ...)
//! do the same thing and what they add. The steps are single-threaded
//! where the real runtime is too, Linux-only (epoll), and serve a given
//! number of connections and then return, so that every test and example
//! stops by itself.

#![deny(missing_docs)]

pub mod step01_blocking_echo;
pub mod step02_level_epoll;
pub mod step03_edge_epoll;
pub mod step04_future_waker;
pub mod step05_executor;
pub mod step06_reactor;
pub mod step07_timers;
pub mod step08_http;
pub mod step09_coroutine;

pub mod solutions;

/// Helpers the tests share: a server on `127.0.0.1:0` in a thread, and
/// clients whose every read and write gives up after a few seconds.
#[cfg(test)]
pub(crate) mod testutil {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    /// How long a test waits for anything before it fails.
    pub const LIMIT: Duration = Duration::from_secs(5);

    /// The result of a server thread, waited for with a time limit.
    pub struct Done<T>(mpsc::Receiver<T>);

    impl<T> Done<T> {
        /// The server's return value; panics if it takes longer than [`LIMIT`].
        pub fn wait(self) -> T {
            self.0
                .recv_timeout(LIMIT)
                .expect("the server did not return in time")
        }
    }

    /// Runs `serve` on a listener bound to an ephemeral loopback port, in a
    /// thread of its own. A server that hangs is left behind (the test
    /// fails at `Done::wait` or at a client's timeout, never hangs).
    pub fn start<T: Send + 'static>(
        serve: impl FnOnce(TcpListener) -> T + Send + 'static,
    ) -> (SocketAddr, Done<T>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(serve(listener));
        });
        (addr, Done(rx))
    }

    /// A blocking client with read and write timeouts.
    pub fn client(addr: SocketAddr) -> TcpStream {
        let c = TcpStream::connect_timeout(&addr, LIMIT).unwrap();
        c.set_read_timeout(Some(LIMIT)).unwrap();
        c.set_write_timeout(Some(LIMIT)).unwrap();
        c
    }

    /// Sends `msg` and reads back as many bytes.
    pub fn roundtrip(c: &mut TcpStream, msg: &[u8]) -> Vec<u8> {
        c.write_all(msg).unwrap();
        let mut back = vec![0u8; msg.len()];
        c.read_exact(&mut back).unwrap();
        back
    }
}
