//! What the server is asked to do: address, worker count, mode, limits.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// How connections reach the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// One acceptor thread owns the listener and hands each connection to a
    /// worker through that worker's pipe, round-robin. The default: the spread
    /// is even whatever the clients do, and `max_connections` is exact.
    #[default]
    Acceptor,
    /// Every worker binds its own `SO_REUSEPORT` listener on the same address
    /// and the kernel picks one per connection by hashing its 4-tuple. No
    /// handoff at all, but the spread is only as even as the hash.
    ReusePort,
}

/// Server configuration. Build it with [`Config::new`] and struct update
/// syntax: `Config { workers: 4, ..Config::new(addr) }`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on; port 0 picks a free port (see
    /// [`Server::local_addr`](crate::Server::local_addr)).
    pub addr: SocketAddr,
    /// Number of worker threads; `0` means one per available CPU.
    pub workers: usize,
    /// Acceptor thread or `SO_REUSEPORT`.
    pub mode: Mode,
    /// Upper bound on open connections. When it is reached nothing more is
    /// accepted (clients wait in the kernel backlog) until workers report
    /// closes. In [`Mode::ReusePort`] each worker enforces its share,
    /// `ceil(max / workers)`, since there is no one to count globally.
    pub max_connections: Option<usize>,
    /// Pin worker `i` to the `i`-th CPU this process may run on.
    pub pin_workers: bool,
    /// Listen backlog (capped by `net.core.somaxconn`).
    pub backlog: i32,
    /// Install SIGINT/SIGTERM handlers that start a graceful shutdown. Off by
    /// default: a library must not take over a process's signals unasked.
    pub handle_signals: bool,
    /// How long in-flight requests may run after a signal asked for shutdown.
    pub signal_grace: Duration,
    /// Capacity of each handoff pipe in bytes (`F_SETPIPE_SZ`, rounded up to
    /// a power of two pages). `None` keeps the kernel default (64 KiB, 16,384
    /// fds). Tests shrink it to provoke a full pipe.
    pub pipe_size: Option<usize>,
}

impl Config {
    /// Defaults: one worker per CPU, acceptor mode, no connection limit, no
    /// pinning, backlog 1024, no signal handling, 10 s signal grace.
    pub fn new(addr: SocketAddr) -> Config {
        Config {
            addr,
            workers: default_workers(),
            mode: Mode::Acceptor,
            max_connections: None,
            pin_workers: false,
            backlog: 1024,
            handle_signals: false,
            signal_grace: Duration::from_secs(10),
            pipe_size: None,
        }
    }

    /// The worker count after resolving `0`.
    pub(crate) fn worker_count(&self) -> usize {
        if self.workers == 0 {
            default_workers()
        } else {
            self.workers
        }
    }

    /// Rejects settings that cannot work, before any thread starts.
    pub(crate) fn validate(&self) -> io::Result<()> {
        let invalid = |msg| Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        if self.max_connections == Some(0) {
            return invalid("max_connections must be at least 1");
        }
        if self.backlog < 1 {
            return invalid("backlog must be at least 1");
        }
        Ok(())
    }

    /// The open-connection limit one accepting party enforces: the whole limit
    /// for the acceptor, a per-worker share in reuseport mode.
    pub(crate) fn limit_per_acceptor(&self) -> Option<u64> {
        let max = self.max_connections? as u64;
        Some(match self.mode {
            Mode::Acceptor => max,
            Mode::ReusePort => max.div_ceil(self.worker_count() as u64),
        })
    }
}

/// One worker per CPU the process may use (`available_parallelism`), or 1.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config::new("127.0.0.1:0".parse().unwrap())
    }

    #[test]
    fn zero_workers_means_one_per_cpu() {
        let c = Config {
            workers: 0,
            ..cfg()
        };
        assert_eq!(c.worker_count(), default_workers());
        assert!(c.worker_count() >= 1);
    }

    #[test]
    fn invalid_settings_are_rejected() {
        let c = Config {
            max_connections: Some(0),
            ..cfg()
        };
        assert_eq!(
            c.validate().unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        let c = Config {
            backlog: 0,
            ..cfg()
        };
        assert!(c.validate().is_err());
        assert!(cfg().validate().is_ok());
    }

    #[test]
    fn reuseport_splits_the_limit() {
        let c = Config {
            workers: 4,
            max_connections: Some(10),
            mode: Mode::ReusePort,
            ..cfg()
        };
        assert_eq!(c.limit_per_acceptor(), Some(3));
        let c = Config {
            mode: Mode::Acceptor,
            ..c
        };
        assert_eq!(c.limit_per_acceptor(), Some(10));
        assert_eq!(cfg().limit_per_acceptor(), None);
    }
}
