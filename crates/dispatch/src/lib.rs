//! # dispatch: spreading connections over worker threads
//!
//! A server with N worker threads, each running its own event loop, must
//! decide which worker serves each new connection. This crate makes that
//! decision, moves the connection there, and carries shutdown, without any
//! state that workers share on their hot path. It knows nothing about the
//! runtime the workers run (stackless executor, stackful coroutines, a plain
//! epoll loop): a worker gets one fd to watch and one call to drain.
//!
//! ## The thundering herd
//!
//! The obvious design lets every worker wait on the one listening socket.
//! When a connection arrives, the kernel wakes *all* the waiters (epoll on a
//! shared listener has no "wake one" by default); one wins the `accept`, the
//! others get `EAGAIN` and go back to sleep having burnt a wake-up, a context
//! switch and a syscall each. With 16 workers that is 15 wasted wake-ups per
//! connection, and the winner is whoever the scheduler ran first, not the
//! least busy worker. (Threads blocked in `accept` itself are woken one at a
//! time, but such a thread runs no event loop; `EPOLLEXCLUSIVE` wakes fewer,
//! but still not exactly one, and the spread stays accidental.)
//!
//! ## Acceptor mode: one thread accepts, pipes hand off
//!
//! ```text
//!              kernel accept queue
//!                      │ one edge
//!              ┌───────▼────────┐  accept4 until EAGAIN
//!              │ acceptor thread│  deal round-robin
//!              └─┬──────┬─────┬─┘  one write per ≤32 fds per worker
//!       pipe 0   │      │     │   pipe N-1   (fd numbers, 4 bytes each)
//!        ┌───────▼┐ ┌───▼────┐ ┌▼───────┐
//!        │worker 0│ │worker 1│ │worker …│  one read per ≤32 fds,
//!        │ epoll  │ │ epoll  │ │ epoll  │  then serve them in its own loop
//!        └────────┘ └────────┘ └────────┘
//! ```
//!
//! Only the acceptor watches the listener, so each connection wakes exactly
//! one thread to accept it and one worker to serve it: no herd. The spread is
//! exact round-robin whatever the clients do. The fd number travels through
//! the worker's pipe (the same process, so the number means the same file on
//! both sides), which also gives ordering for free: when the acceptor closes
//! the pipe at shutdown, the worker reads every fd still in it before
//! end-of-file.
//!
//! **Batching.** Handing off one connection naively costs a `write` on the
//! acceptor and an epoll wake-up plus a `read` on the worker, and a second
//! `read` to see `EAGAIN`. Under load the acceptor drains the accept queue
//! first and writes up to 32 fds per `write`; the worker reads up to 32 per
//! `read`, and a short read tells it the pipe is empty, so it skips the
//! `EAGAIN` read. A burst of 320 connections over 2 workers costs about 10
//! writes and 10 reads instead of 320 and 640. Writes of at most `PIPE_BUF`
//! bytes are atomic, so a batch never tears.
//!
//! **Back-pressure.** A stalled worker's pipe fills up (64 KiB holds 16,384
//! fds). The acceptor never blocks on it: the fds go to the next worker, and
//! if every pipe is full they are held and accepting stops (clients wait in
//! the kernel backlog) until a pipe's `EPOLLOUT` edge says there is room.
//! `max_connections` works the same way: at the limit the acceptor stops
//! calling `accept`, and the worker whose close makes room rings the
//! acceptor's eventfd (only then: the handshake is one atomic flag).
//!
//! ## Reuseport mode: the kernel picks
//!
//! With `SO_REUSEPORT` every worker binds its own listener on the same port
//! and the kernel chooses one per connection by hashing the 4-tuple (source
//! and destination address and port). No acceptor hop, no pipe: the cheapest
//! path, and no herd either. But the hash knows nothing about load:
//! - a few long-lived connections can hash onto the same worker while others
//!   idle (balance is only statistical, over many connections);
//! - a busy or stalled worker still gets its share of new connections, which
//!   wait in *its* queue while other workers are free;
//! - closing one listener (a worker exiting) resets the connections queued on
//!   it, where the acceptor would simply hand them to someone else.
//!
//! `cargo run --release -p dispatch --example conn_rate` measures both on
//! your machine: connections per second and the spread across workers.
//!
//! ## Out of file descriptors
//!
//! When the process hits `RLIMIT_NOFILE`, `accept` fails with `EMFILE` and
//! the connection stays queued: the listener stays readable and a naive loop
//! spins at 100% CPU. Dispatch keeps one fd in reserve (`/dev/null`): on
//! `EMFILE` it closes the reserve, accepts into the freed slot, closes that
//! connection at once (the client gets an answer instead of a hang) and
//! reopens the reserve, until the queue is empty; then epoll sleeps until the
//! next client. If the reserve cannot be had, it backs off with a timer
//! (5 ms doubling to 200 ms). Either way CPU stays bounded and serving resumes
//! as soon as connections close. Better still, set `max_connections` below
//! the fd limit (and raise the limit with [`sys::raise_nofile_limit`]).
//!
//! ## The worker side
//!
//! A worker sees one fd and one call, whatever the mode: register
//! [`WorkerPort::fd`] edge-triggered, and on each edge call
//! [`WorkerPort::poll_batch`] until [`Batch::WouldBlock`]. In acceptor mode
//! the fd is the pipe's read end itself. In reuseport mode it is a small epoll
//! of the port's own holding the listener, a doorbell and a timer: an epoll fd
//! is pollable, so nesting keeps the API at one fd, and the port can close its
//! listener at shutdown without the runtime ever having registered it. Report
//! each closed connection with [`WorkerPort::connection_closed`] (or a
//! [`Closer`]); shutdown arrives as [`Batch::Shutdown`] with a deadline.
//!
//! ```
//! use std::os::fd::AsFd;
//! use std::time::Duration;
//! use dispatch::{Batch, Config, Server, WorkerPort};
//! use reactor::epoll::{Epoll, Events, ALL_EDGE};
//!
//! fn worker(mut port: WorkerPort) {
//!     let ep = Epoll::new().unwrap();
//!     ep.add(port.as_fd(), ALL_EDGE, 0).unwrap();
//!     let mut events = Events::with_capacity(64);
//!     let mut conns = Vec::new();
//!     loop {
//!         // Drain the port after each edge, until WouldBlock.
//!         loop {
//!             match port.poll_batch(&mut conns).unwrap() {
//!                 Batch::Fds(_) => {
//!                     // Register and serve them; here, just close them.
//!                     for _ in conns.drain(..) {
//!                         port.connection_closed();
//!                     }
//!                 }
//!                 Batch::WouldBlock => break,
//!                 Batch::Shutdown { deadline: _ } => {
//!                     ep.delete(port.as_fd()).unwrap();
//!                     return; // after finishing in-flight work
//!                 }
//!             }
//!         }
//!         ep.wait(&mut events, None).unwrap();
//!     }
//! }
//!
//! let config = Config { workers: 2, ..Config::new("127.0.0.1:0".parse().unwrap()) };
//! let server = Server::start(config, worker).unwrap();
//! let _client = std::net::TcpStream::connect(server.local_addr()).unwrap();
//! server.shutdown_handle().shutdown(Duration::from_secs(1));
//! server.join().unwrap();
//! ```
//!
//! ## Map of the crate
//!
//! | file | job |
//! |---|---|
//! | `config.rs` | [`Config`], [`Mode`] |
//! | `server.rs` | [`Server`]: start the threads, join them |
//! | `acceptor.rs` | the acceptor loop: accept, deal, hold, pause |
//! | `handoff.rs` | the pipe protocol: fds as 4-byte records, batches of 32 |
//! | `worker.rs` | [`WorkerPort`], [`Batch`], [`Closer`] |
//! | `listen.rs` | [`Listener`]: TCP (v4, v6), Unix, inherited sockets |
//! | `reuseport.rs` | `SO_REUSEPORT` listeners and their port |
//! | `accept.rs` | one `accept4`, the reserve-fd trick, back-off |
//! | `wake.rs` | the doorbell that wakes a paused acceptor |
//! | `shutdown.rs` | [`ShutdownHandle`], the deadline |
//! | `signals.rs` | opt-in SIGINT/SIGTERM through a self-pipe |
//! | `stats.rs` | [`Stats`]: lock-free counters |
//! | `sys.rs` | the few syscalls `reactor::sys` lacks |

#![deny(missing_docs)]

mod accept;
mod acceptor;
mod config;
mod handoff;
mod listen;
mod reuseport;
mod server;
mod shared;
mod shutdown;
mod signals;
mod stats;
pub mod sys;
mod wake;
mod worker;

pub use config::{Config, Mode, default_workers};
pub use listen::{Endpoint, ListenAddr, Listener, listen_addr, set_cloexec};
pub use server::Server;
pub use shutdown::ShutdownHandle;
pub use stats::{
    AcceptSummary, AcceptorSnapshot, AcceptorStats, Stats, WorkerSnapshot, WorkerStats,
};
pub use worker::{Batch, Closer, WorkerPort};

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_cross_threads() {
        send_sync::<Server>();
        send_sync::<WorkerPort>();
        send_sync::<ShutdownHandle>();
        send_sync::<Closer>();
        send_sync::<Stats>();
    }
}
