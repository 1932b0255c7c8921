//! Idle keep-alive connections to the upstreams, kept for the next request
//! (`--proxy-keepalive` per upstream), as nginx's `keepalive` and
//! HAProxy's `http-reuse`.
//!
//! One pool per process for the blocking designs (each holds fds, which
//! any thread may take). A connection the upstream closed while it sat
//! here is found before it is used: a `recv(MSG_PEEK | MSG_DONTWAIT)` that
//! says end of stream (or brings bytes no request asked for) drops it.
//! The rest of that race, a close that crosses the request on the wire, is
//! the driver's: it retries once on a new connection when nothing of the
//! answer came and the request can be sent again.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::Ordering::Relaxed;

use site::reverse_proxy::Balancer;

/// Which upstream a connection goes to: the balancer (its address) and
/// the upstream's index in it.
type Key = (usize, usize);

/// Idle upstream connections by upstream, newest last.
#[derive(Debug, Default)]
pub struct IdlePool {
    idle: Mutex<HashMap<Key, Vec<OwnedFd>>>,
}

fn key(balancer: &Balancer, upstream: usize) -> Key {
    (balancer as *const Balancer as usize, upstream)
}

impl IdlePool {
    /// A live idle connection to `upstream` of `balancer`, newest first.
    pub fn take(&self, balancer: &Balancer, upstream: usize) -> Option<OwnedFd> {
        let stats = balancer.upstreams()[upstream].stats();
        loop {
            let fd = {
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                idle.get_mut(&key(balancer, upstream))?.pop()?
            };
            stats.pooled.fetch_sub(1, Relaxed);
            if still_open(&fd) {
                return Some(fd);
            }
        }
    }

    /// Keeps `fd` (its last answer read to the end) for the next request,
    /// unless `keepalive` are kept already (then it closes).
    pub fn put(&self, balancer: &Balancer, upstream: usize, fd: OwnedFd, keepalive: usize) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(key(balancer, upstream)).or_default();
        if list.len() < keepalive {
            list.push(fd);
            balancer.upstreams()[upstream]
                .stats()
                .pooled
                .fetch_add(1, Relaxed);
        }
    }
}

/// Whether an idle connection is still open with nothing unasked-for in it.
fn still_open(fd: &OwnedFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: `byte` is one writable byte for the call; the fd is open.
    let n = unsafe {
        libc::recv(
            fd.as_fd().as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
}

/// The process's pool (the blocking designs'; each fork child has its own
/// copy, which ends with its connection).
pub fn shared() -> &'static IdlePool {
    static POOL: std::sync::OnceLock<IdlePool> = std::sync::OnceLock::new();
    POOL.get_or_init(IdlePool::default)
}
