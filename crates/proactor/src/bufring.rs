//! A provided-buffer ring (`IORING_REGISTER_PBUF_RING`, kernel ≥ 5.19).
//!
//! Instead of handing the kernel a buffer with every recv, we hand it a ring
//! of free buffers once. A multishot recv then takes a buffer only when bytes
//! arrive, and says which in its CQE (`IORING_CQE_F_BUFFER`, id in the upper
//! 16 bits of the flags). An idle connection therefore holds no buffer at
//! all: memory scales with the data in flight, not with the connections.
//!
//! The ring is another single-producer single-consumer queue shared with the
//! kernel, in memory *we* allocate (page-aligned) and register:
//!
//! ```text
//!   entries[0..n]: { addr, len, bid, resv }    16 bytes each
//!   entry 0's `resv` is the ring's tail:       we store (Release)
//!   the head lives in the kernel:              the kernel consumes
//! ```
//!
//! We produce (return a buffer: write the entry, then a Release store of the
//! tail, so the kernel never sees a tail ahead of its entry); the kernel
//! consumes when it picks a buffer for a recv. We never read the head: we
//! know a buffer is ours again because a CQE named it, and it goes back only
//! when its owner ([`crate::RecvBuf`]) is dropped.
//!
//! Because we never read the head, we keep our own record of which buffers
//! the kernel has: one bit per buffer, set by [`BufRing::put`] and cleared by
//! [`BufRing::taken`]. `put` is safe, so it refuses a buffer id out of range
//! (the kernel would write past the mapping) and a buffer the kernel already
//! has (a second entry would let it fill the buffer for one recv while the
//! owner of the other still reads it).
//!
//! When every buffer is out (held by the application, or queued in
//! completions not yet read), a multishot recv ends with `-ENOBUFS` and no
//! `F_MORE`. The stream then waits until a buffer comes back (back-pressure)
//! and re-arms; see `net.rs`.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU16, Ordering};

use crate::abi::{Buf, BufReg, IORING_REGISTER_PBUF_RING, IORING_UNREGISTER_PBUF_RING};
use crate::sys::{self, Mmap};

/// A registered ring of `count` buffers of `size` bytes each (group `bgid`).
#[derive(Debug)]
pub struct BufRing {
    entries: Mmap,
    data: Mmap,
    count: u16,
    size: u32,
    bgid: u16,
    /// Our tail (the kernel sees it after `publish`).
    tail: Cell<u16>,
    /// Buffers out of the ring: named by a CQE and not returned yet.
    out: Cell<u32>,
    /// Bit `bid` set: buffer `bid` is in the ring, the kernel's to pick.
    in_ring: Box<[Cell<u64>]>,
}

impl BufRing {
    /// Allocates `count` (a power of two ≤ 32768) buffers of `size` bytes and
    /// registers them with the ring `ring_fd` as group `bgid`, all free.
    ///
    /// # Safety
    /// The kernel writes into these buffers for any recv that selects the
    /// group. The caller must [`unregister`](BufRing::unregister) the group
    /// (after the last CQE of every operation using it) before dropping it.
    pub unsafe fn new(ring_fd: i32, bgid: u16, count: u16, size: u32) -> io::Result<BufRing> {
        assert!(
            count.is_power_of_two() && count <= 32768,
            "buffer count must be a power of two"
        );
        let page = sys::page_size();
        let entries_len = (count as usize * std::mem::size_of::<Buf>()).next_multiple_of(page);
        let entries = Mmap::anonymous(entries_len)?;
        let data = Mmap::anonymous((count as usize * size as usize).next_multiple_of(page))?;
        let reg = BufReg {
            ring_addr: entries.ptr() as u64,
            ring_entries: count as u32,
            bgid,
            ..BufReg::default()
        };
        // SAFETY: `reg` is a valid io_uring_buf_reg; the memory it names
        // (`entries`) is page-aligned, zeroed, and lives in the returned
        // BufRing, which the driver unregisters (see `unregister`) before
        // dropping.
        unsafe {
            sys::io_uring_register(
                ring_fd,
                IORING_REGISTER_PBUF_RING,
                &reg as *const BufReg as *const libc::c_void,
                1,
            )?
        };
        let ring = BufRing {
            entries,
            data,
            count,
            size,
            bgid,
            tail: Cell::new(0),
            out: Cell::new(count as u32),
            in_ring: (0..(count as usize).div_ceil(64))
                .map(|_| Cell::new(0))
                .collect(),
        };
        for bid in 0..count {
            ring.put(bid);
        }
        Ok(ring)
    }

    /// Gives buffer `bid` back to the kernel.
    ///
    /// # Panics
    /// If `bid` is out of range, or the buffer is already in the ring (put
    /// back twice, or never handed out by a CQE since the last `put`).
    pub fn put(&self, bid: u16) {
        assert!(
            bid < self.count,
            "BufRing::put: buffer id {bid} out of range (the ring has {})",
            self.count
        );
        let (word, bit) = (&self.in_ring[bid as usize / 64], 1u64 << (bid % 64));
        assert!(
            word.get() & bit == 0,
            "BufRing::put: buffer {bid} is already with the kernel (put twice?)"
        );
        word.set(word.get() | bit);
        let tail = self.tail.get();
        let slot = (tail & (self.count - 1)) as usize;
        let entry = Buf {
            // SAFETY: bid < count (checked), so the offset is inside `data`.
            addr: unsafe { self.data.ptr().add(bid as usize * self.size as usize) } as u64,
            len: self.size,
            bid,
            resv: 0,
        };
        let base = self.entries.ptr() as *mut Buf;
        // SAFETY: slot < count entries inside the mapping. Entry 0's last two
        // bytes are the tail word: write the three fields one by one so that
        // writing entry 0 never touches the tail.
        unsafe {
            let e = base.add(slot);
            std::ptr::addr_of_mut!((*e).addr).write(entry.addr);
            std::ptr::addr_of_mut!((*e).len).write(entry.len);
            std::ptr::addr_of_mut!((*e).bid).write(entry.bid);
        }
        let new_tail = tail.wrapping_add(1);
        self.tail.set(new_tail);
        // Release: the entry above is visible before the kernel can see the
        // tail that includes it.
        // SAFETY: offset 14 of the mapping is io_uring_buf_ring.tail, a
        // 2-aligned u16 that the kernel reads with smp_load_acquire.
        unsafe {
            (*(self.entries.ptr().add(14) as *const AtomicU16)).store(new_tail, Ordering::Release)
        };
        self.out.set(self.out.get() - 1);
    }

    /// Records that a CQE handed buffer `bid` to us.
    ///
    /// # Safety
    /// A CQE of an operation that selected this group must have named `bid`,
    /// and each such CQE is reported once. [`put`](BufRing::put)'s checks
    /// rest on this record: a `bid` the kernel still holds, marked taken,
    /// could be put in the ring a second time.
    ///
    /// # Panics
    /// If `bid` is out of range or not in the ring by our record.
    pub unsafe fn taken(&self, bid: u16) {
        assert!(
            bid < self.count,
            "BufRing::taken: buffer id {bid} out of range (the ring has {})",
            self.count
        );
        let (word, bit) = (&self.in_ring[bid as usize / 64], 1u64 << (bid % 64));
        assert!(
            word.get() & bit != 0,
            "BufRing::taken: buffer {bid} is not with the kernel"
        );
        word.set(word.get() & !bit);
        self.out.set(self.out.get() + 1);
    }

    /// The first `len` bytes of buffer `bid`.
    ///
    /// # Safety
    /// A CQE must have handed `bid` to the caller (the kernel is done writing
    /// it) and it must not have been [`put`](BufRing::put) back since.
    pub unsafe fn bytes(&self, bid: u16, len: u32) -> &[u8] {
        assert!(bid < self.count && len <= self.size);
        // SAFETY: inside `data` (checked); by the caller's contract nobody
        // writes the buffer while this borrow lives.
        unsafe {
            std::slice::from_raw_parts(
                self.data.ptr().add(bid as usize * self.size as usize),
                len as usize,
            )
        }
    }

    /// Buffers the kernel can still pick.
    pub fn available(&self) -> u32 {
        self.count as u32 - self.out.get()
    }

    /// The buffer group id to put in `sqe.buf_group`.
    pub fn bgid(&self) -> u16 {
        self.bgid
    }

    /// Bytes per buffer.
    pub fn buf_size(&self) -> u32 {
        self.size
    }

    /// Number of buffers.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// Unregisters the group from the ring `ring` (the one it was
    /// registered with), after which the kernel no longer touches the
    /// memory and it may be freed.
    ///
    /// ```compile_fail,E0308
    /// # fn f(bufs: &proactor::BufRing) {
    /// let _ = bufs.unregister(3);
    /// # }
    /// ```
    pub fn unregister(&self, ring: BorrowedFd<'_>) -> io::Result<()> {
        let reg = BufReg {
            bgid: self.bgid,
            ..BufReg::default()
        };
        // SAFETY: a valid io_uring_buf_reg naming only the group id.
        unsafe {
            sys::io_uring_register(
                ring.as_raw_fd(),
                IORING_UNREGISTER_PBUF_RING,
                &reg as *const BufReg as *const libc::c_void,
                1,
            )?
        };
        Ok(())
    }
}
