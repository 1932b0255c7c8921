//! Idle keep-alive connections to the upstreams, kept for the next request
//! (`--proxy-keepalive` per upstream), as nginx's `keepalive` and
//! HAProxy's `http-reuse`.
//!
//! Two homes for them. The blocking designs' (and io_uring's) pool is the
//! process's ([`shared`]): it holds bare fds, which any thread may take.
//! The epoll stackless driver keeps one per worker thread (see
//! `stackless::upstream`), of sockets still registered with that worker's
//! reactor: taking one back costs no `epoll_ctl`, where a process-wide pool
//! of fds would register each socket when taken and deregister it when
//! given back. Each fork child's pool is its own and ends with its
//! connection.
//!
//! A connection the upstream closed while it sat idle is found before it
//! is used: a `recv(MSG_PEEK | MSG_DONTWAIT)` that says end of stream (or
//! brings bytes no request asked for) drops it. The rest of that race, a
//! close that crosses the request on the wire, is the driver's: it retries
//! once on a new connection when nothing of the answer came and the
//! request can be sent again.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::Ordering::Relaxed;

use site::reverse_proxy::Balancer;

/// Which upstream a connection goes to: the balancer (its address, fixed
/// for the process's life) and the upstream's index in it.
type Key = (usize, usize);

fn key(balancer: &Balancer, upstream: usize) -> Key {
    (balancer as *const Balancer as usize, upstream)
}

/// Idle connections by upstream, newest last; `T` is a bare fd or a
/// driver's registered socket.
#[derive(Debug)]
pub struct Idle<T> {
    idle: HashMap<Key, Vec<T>>,
}

impl<T> Default for Idle<T> {
    fn default() -> Idle<T> {
        Idle {
            idle: HashMap::new(),
        }
    }
}

impl<T: AsFd> Idle<T> {
    /// A live idle connection to `upstream` of `balancer`, newest first
    /// (the ones the upstream closed meanwhile are dropped on the way).
    pub fn take(&mut self, balancer: &Balancer, upstream: usize) -> Option<T> {
        let stats = balancer.upstreams()[upstream].stats();
        let list = self.idle.get_mut(&key(balancer, upstream))?;
        while let Some(conn) = list.pop() {
            stats.pooled.fetch_sub(1, Relaxed);
            if still_open(conn.as_fd()) {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps `conn` (its last answer read to the end) for the next
    /// request, unless `keepalive` are kept already: then it comes back,
    /// for the caller to drop (close) outside its lock or borrow.
    #[must_use = "a connection not kept is to be closed"]
    pub fn put(
        &mut self,
        balancer: &Balancer,
        upstream: usize,
        conn: T,
        keepalive: usize,
    ) -> Option<T> {
        let list = self.idle.entry(key(balancer, upstream)).or_default();
        if list.len() >= keepalive {
            return Some(conn);
        }
        list.push(conn);
        let stats = balancer.upstreams()[upstream].stats();
        stats.pooled.fetch_add(1, Relaxed);
        None
    }
}

/// The process's pool of bare fds.
#[derive(Debug, Default)]
pub struct IdlePool {
    idle: Mutex<Idle<OwnedFd>>,
}

impl IdlePool {
    /// See [`Idle::take`].
    pub fn take(&self, balancer: &Balancer, upstream: usize) -> Option<OwnedFd> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.take(balancer, upstream)
    }

    /// See [`Idle::put`].
    pub fn put(&self, balancer: &Balancer, upstream: usize, fd: OwnedFd, keepalive: usize) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let over = idle.put(balancer, upstream, fd, keepalive);
        drop(idle);
        drop(over);
    }
}

/// Whether an idle connection is still open with nothing unasked-for in it.
fn still_open(fd: BorrowedFd<'_>) -> bool {
    let mut byte = 0u8;
    // SAFETY: `byte` is one writable byte for the call; the fd is open
    // (borrowed).
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
}

/// The process's pool (the blocking designs' and io_uring's; each fork
/// child has its own copy, which ends with its connection).
pub fn shared() -> &'static IdlePool {
    static POOL: std::sync::OnceLock<IdlePool> = std::sync::OnceLock::new();
    POOL.get_or_init(IdlePool::default)
}
