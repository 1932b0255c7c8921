//! The read and write buffers of the blocking connection loop, kept per
//! thread while connections wait between requests.

use std::cell::RefCell;
use std::rc::Rc;

use bytes::BytesMut;

use super::BUF_SIZE;

/// Buffer pairs (read, write) of connections waiting between requests,
/// per thread: with coroutines, the thousands of idle connections of a
/// worker then hold none (as the stackless server's do); with a thread per
/// connection it simply keeps the thread's own pair warm. Pairs, because
/// they always come and go together. Each connection holds the pool of its
/// thread, so that the two trips per request cost no thread-local lookup.
pub(super) struct BufferPool(RefCell<Vec<(BytesMut, BytesMut)>>);

thread_local! {
    // Unreserved until a pair is first put back: a thread of a connection's
    // own puts one back only as it ends (see `Conn::idle_wait`), and 10,000
    // such threads would otherwise hold 2 KiB of room each for nothing.
    static POOL: Rc<BufferPool> = Rc::new(BufferPool(RefCell::new(Vec::new())));
}

/// Buffer pairs kept per thread; more are freed.
const POOL_MAX: usize = 32;

impl BufferPool {
    /// This thread's pool.
    pub(super) fn current() -> Rc<BufferPool> {
        POOL.with(Rc::clone)
    }

    /// Fills `r` and `w` (empty, unallocated) with a pair from the pool, or
    /// new. Inlined, as is [`BufferPool::put`]: both run once per request
    /// and are mostly moves that a call would double.
    #[inline(always)]
    pub(super) fn get(&self, r: &mut BytesMut, w: &mut BytesMut) {
        let mut p = self.0.borrow_mut();
        let n = p.len();
        if n == 0 {
            drop(p);
            (*r, *w) = new_buffers();
            return;
        }
        // Moved straight into place (`pop` copies the pair through
        // temporaries). `r` and `w` are unallocated (see `put`), so they are
        // overwritten without the drop that would find nothing to free.
        debug_assert!(r.capacity() == 0 && w.capacity() == 0);
        // SAFETY: element `n - 1` is initialised; after `set_len` the vector
        // no longer owns it, so it is read (moved out) exactly once.
        unsafe {
            p.set_len(n - 1);
            let pair = p.as_ptr().add(n - 1);
            std::ptr::write(r, std::ptr::read(&raw const (*pair).0));
            std::ptr::write(w, std::ptr::read(&raw const (*pair).1));
        }
    }

    /// Moves the pair into the pool for reuse (emptied; or frees it),
    /// leaving `r` and `w` unallocated. Their room is restored lazily, by
    /// the `reserve` before the next read.
    #[inline(always)]
    pub(super) fn put(&self, r: &mut BytesMut, w: &mut BytesMut) {
        let mut p = self.0.borrow_mut();
        let keep = |b: &BytesMut| (1..=64 * BUF_SIZE).contains(&b.capacity());
        let n = p.len();
        // Room for POOL_MAX pairs is reserved with the first pair, so the
        // pair is written in place: `push` was an out-of-line call (with its
        // growth check) of ~25 instructions per request on the stackful
        // runtime.
        if n == 0 && p.capacity() == 0 {
            reserve(&mut p);
        }
        if n < POOL_MAX && n < p.capacity() && keep(r) && keep(w) {
            r.clear();
            w.clear();
            // SAFETY: `n < capacity`, so slot `n` is allocated and unused;
            // it is written once, then counted by `set_len`.
            unsafe {
                p.as_mut_ptr()
                    .add(n)
                    .write((std::mem::take(r), std::mem::take(w)));
                p.set_len(n + 1);
            }
        } else {
            drop(p);
            (*r, *w) = (BytesMut::new(), BytesMut::new()); // freed
        }
    }
}

#[cold]
fn reserve(p: &mut Vec<(BytesMut, BytesMut)>) {
    p.reserve_exact(POOL_MAX);
}

#[cold]
fn new_buffers() -> (BytesMut, BytesMut) {
    (
        BytesMut::with_capacity(BUF_SIZE),
        BytesMut::with_capacity(BUF_SIZE),
    )
}
