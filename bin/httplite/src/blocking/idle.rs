//! Connections waiting between requests, and how shutdown reaches them:
//! a thread of control blocked in a read wakes only for bytes, so the
//! worker shuts down the read side of every idle socket, and each blocked
//! read returns end-of-file, whatever the design.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

/// Connections waiting between requests, and whether shutdown has begun.
///
/// Each connection owns an [`IdleSlot`] for its life. Entering and leaving
/// idleness, once per request, is one atomic store and one load on that
/// slot: no lock. The lock is taken only to hand out and take back slots,
/// and by [`IdleSet::begin_shutdown`].
///
/// Shutdown and a connection entering idleness race without a lock, so
/// `enter` publishes the fd *then* checks `shutting_down`, and
/// `begin_shutdown` sets `shutting_down` *then* scans the slots (both
/// `SeqCst`): at least one side sees the other, so no connection slips into
/// idleness unseen. While `begin_shutdown` uses an fd its slot reads
/// `SHUTTING`, and `leave` (after which the owner may close the fd) waits
/// for it on the lock.
#[derive(Debug, Default)]
pub struct IdleSet {
    inner: Mutex<IdleInner>,
    shutting_down: AtomicBool,
}

/// A slot's value while its connection is busy (or the slot is free).
const BUSY: RawFd = -1;
/// A slot's value while `begin_shutdown` shuts its fd down.
const SHUTTING: RawFd = -2;
/// Slots are allocated this many at a time and never move or shrink, so a
/// connection can keep its slot without the lock.
const CHUNK: usize = 64;

type Chunk = [AtomicI32; CHUNK];

#[derive(Debug, Default)]
struct IdleInner {
    chunks: Vec<Arc<Chunk>>,
    /// Slots handed out so far (all below are in `chunks`).
    used: usize,
    free: Vec<usize>,
}

/// A connection's place in an [`IdleSet`]: its fd while idle, `BUSY`
/// otherwise.
#[derive(Debug)]
pub struct IdleSlot {
    chunk: Arc<Chunk>,
    /// Index in the whole set (`index % CHUNK` in `chunk`).
    index: usize,
}

impl IdleSlot {
    fn cell(&self) -> &AtomicI32 {
        &self.chunk[self.index % CHUNK]
    }
}

impl IdleSet {
    /// A slot for a new connection (give it back with [`IdleSet::release`]).
    pub fn slot(&self) -> IdleSlot {
        let mut g = self.lock();
        let index = match g.free.pop() {
            Some(index) => index,
            None => {
                if g.used == g.chunks.len() * CHUNK {
                    g.chunks
                        .push(Arc::new(std::array::from_fn(|_| AtomicI32::new(BUSY))));
                }
                g.used += 1;
                g.used - 1
            }
        };
        IdleSlot {
            chunk: g.chunks[index / CHUNK].clone(),
            index,
        }
    }

    /// Marks the connection idle; false if shutdown has begun (then close).
    #[inline]
    pub fn enter(&self, slot: &IdleSlot, fd: RawFd) -> bool {
        slot.cell().store(fd, Ordering::SeqCst);
        if self.shutting_down.load(Ordering::SeqCst) {
            self.leave(slot);
            return false;
        }
        true
    }

    /// The connection has a request to serve. Once this returns,
    /// `begin_shutdown` no longer touches its fd.
    #[inline]
    pub fn leave(&self, slot: &IdleSlot) {
        if slot.cell().swap(BUSY, Ordering::AcqRel) == SHUTTING {
            // `begin_shutdown` is using the fd: it holds the lock until done.
            drop(self.lock());
        }
    }

    /// The connection is closing: its slot goes back for reuse.
    pub fn release(&self, slot: IdleSlot) {
        self.leave(&slot);
        self.lock().free.push(slot.index);
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Begins shutdown: idle connections get end-of-file on their blocked
    /// read (the fds stay open; their owners close them).
    pub fn begin_shutdown(&self) {
        let g = self.lock();
        self.shutting_down.store(true, Ordering::SeqCst);
        for cell in g.chunks.iter().flat_map(|c| c.iter()) {
            let fd = cell.load(Ordering::SeqCst);
            if fd >= 0
                && cell
                    .compare_exchange(fd, SHUTTING, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                // SAFETY: the slot held `fd`, so its connection, which owns
                // the fd, was idle and had not closed it; it closes it only
                // after `leave`, which waits for our lock once it finds
                // SHUTTING in the slot.
                unsafe { libc::shutdown(fd, libc::SHUT_RD) };
                cell.store(BUSY, Ordering::Release);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IdleInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{self, Read};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// A socket whose reads do not block, and the peer that keeps it open.
    fn socket() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        (a, b)
    }

    fn read_once(mut s: &UnixStream) -> io::Result<usize> {
        s.read(&mut [0u8; 8])
    }

    #[test]
    fn shutdown_ends_idle_reads_only() {
        let set = IdleSet::default();
        let (idle, _p1) = socket();
        let (busy, _p2) = socket();
        let (left, _p3) = socket();
        let (s_idle, s_busy, s_left) = (set.slot(), set.slot(), set.slot());
        assert!(set.enter(&s_idle, idle.as_raw_fd()));
        assert!(set.enter(&s_left, left.as_raw_fd()));
        set.leave(&s_left);
        set.begin_shutdown();
        assert!(set.is_shutting_down());
        // The idle socket reads end-of-file though its peer is still there.
        assert_eq!(read_once(&idle).unwrap(), 0);
        for s in [&busy, &left] {
            let e = read_once(s).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        }
        // Too late to go idle now: the connection closes instead.
        assert!(!set.enter(&s_busy, busy.as_raw_fd()));
        assert_eq!(
            read_once(&busy).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        set.leave(&s_idle);
        for s in [s_idle, s_busy, s_left] {
            set.release(s);
        }
    }

    #[test]
    fn slots_are_reused_and_grow_past_a_chunk() {
        let set = IdleSet::default();
        let slots: Vec<IdleSlot> = (0..CHUNK + 3).map(|_| set.slot()).collect();
        let mut indices: Vec<usize> = slots.iter().map(|s| s.index).collect();
        indices.dedup();
        assert_eq!(indices, (0..CHUNK + 3).collect::<Vec<_>>());
        let last = slots.last().unwrap().index;
        for s in slots {
            set.release(s);
        }
        assert_eq!(set.slot().index, last, "the most recently freed slot first");
        assert_eq!(set.lock().chunks.len(), 2);
    }
}
