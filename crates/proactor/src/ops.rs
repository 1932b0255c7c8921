//! The table of operations in flight: what a `user_data` means.
//!
//! Every SQE we submit carries `user_data = generation << 32 | slot`. The
//! slot holds what the completion needs: the waker of the future that asked,
//! the CQEs that arrived and were not read yet (a multishot operation posts
//! many), and, once the future is gone, the resources the kernel may still
//! touch (*parked*, kept beside the table by slot). Freeing a slot bumps its generation, so a late CQE for a
//! freed slot (or for its next owner) is recognised as stale and ignored.
//!
//! A slot is freed only when both sides are done with it: the kernel has
//! posted the operation's last CQE (no `IORING_CQE_F_MORE`) *and* its future
//! has read it or been dropped. Dropping first makes the slot an *orphan*
//! (see [`crate::Proactor`]'s cancellation rule).
//!
//! The table also knows which operations in flight the kernel looks their
//! fds up for *late*, in one of its worker threads after the submission
//! (`SHUTDOWN`, `SPLICE`): closing such an fd through the proactor waits
//! for their last CQEs ([`Ops::defer_close`]), so that the number cannot be
//! reused under them.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::Waker;

/// What kind of operation a slot tracks: it decides what happens to the
/// results that arrive for an orphan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Multishot accept: a late CQE carries a new fd, which is closed.
    Accept,
    /// Multishot recv on the buffer ring: a late CQE carries a buffer, which
    /// is returned to the ring; its bytes are counted as discarded.
    Recv,
    /// A one-shot read into an owned buffer: late bytes are counted as
    /// discarded, and the buffer is freed with the slot.
    Read,
    /// Anything else (send, close, shutdown, timeout): nothing to undo.
    Other,
    /// A detached send ([`crate::TcpStream::send_detached`]): its buffer
    /// waits beside the table, and a CQE that reports every byte sent
    /// frees the slot and the buffer at once, waking its owner only if it
    /// `awaits` that end (not just a failure).
    Send {
        /// Whether the owner waits for the send to end, not only to fail.
        awaits: bool,
    },
}

/// One CQE's result and flags, as a future receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// `cqe.res`: a count, an fd, or a negated errno.
    pub res: i32,
    /// `cqe.flags` (`IORING_CQE_F_*`, buffer id in the upper 16 bits).
    pub flags: u32,
}

/// The key of an operation in flight (its `user_data`, split).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpKey {
    pub(crate) idx: u32,
    pub(crate) generation: u32,
}

impl OpKey {
    /// The `user_data` that names this operation.
    pub fn user_data(self) -> u64 {
        (self.generation as u64) << 32 | self.idx as u64
    }
}

/// A slot. Every connection's armed recv holds one for the connection's
/// life, so it is kept small (48 bytes): the CQEs not read yet are one
/// inline and the rest boxed, and what an orphan parks lives beside the
/// table ([`Ops`]), not in every slot.
#[derive(Debug)]
pub(crate) struct Slot {
    pub generation: u32,
    pub live: bool,
    pub kind: Kind,
    /// The last CQE (no `F_MORE`) has arrived.
    pub done: bool,
    /// The future was dropped before `done`.
    pub orphan: bool,
    pub waker: Option<Waker>,
    pub cqes: Cqes,
}

/// The CQEs of one operation not read yet, in order. Nearly always none or
/// one: the first is stored inline, and a queue is allocated only while
/// more than one waits (a multishot recv whose task is busy).
#[derive(Debug, Default)]
pub(crate) struct Cqes {
    first: Option<Completion>,
    #[expect(
        clippy::box_collection,
        reason = "one pointer in every slot; an empty VecDeque is four words"
    )]
    rest: Option<Box<VecDeque<Completion>>>,
}

impl Cqes {
    /// Appends a CQE.
    pub fn push_back(&mut self, c: Completion) {
        if self.first.is_none() {
            debug_assert!(self.rest.is_none());
            self.first = Some(c);
        } else {
            self.rest.get_or_insert_default().push_back(c);
        }
    }

    /// The oldest CQE.
    pub fn pop_front(&mut self) -> Option<Completion> {
        let c = self.first.take()?;
        if let Some(rest) = &mut self.rest {
            self.first = rest.pop_front();
            if rest.is_empty() {
                // Freed once drained: an idle connection keeps no queue.
                self.rest = None;
            }
        }
        Some(c)
    }

    /// No CQE waits.
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Forgets every CQE.
    pub fn clear(&mut self) {
        self.first = None;
        self.rest = None;
    }

    /// Takes every CQE, oldest first.
    pub fn drain(&mut self, _: std::ops::RangeFull) -> impl Iterator<Item = Completion> {
        let first = self.first.take();
        let rest = self.rest.take().map(|b| *b).unwrap_or_default();
        first.into_iter().chain(rest)
    }
}

/// The slab of slots.
#[derive(Debug, Default)]
pub(crate) struct Ops {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
    orphans: usize,
    /// What orphans park (by slot index), freed with their slot.
    parked: HashMap<u32, Box<dyn Any>>,
    /// Operations whose fds the kernel looks up late (by slot index), and
    /// the closes waiting for them; dropped with their slot.
    late: HashMap<u32, Late>,
    /// Detached sends (by slot index): the length that means "all sent",
    /// and the buffer, freed with the slot.
    detached: HashMap<u32, (u32, Box<dyn Any>), BuildHasherDefault<IdxHasher>>,
}

/// Hashes a slot index with one multiply: the detached-send map is
/// touched twice per send, and its keys are small integers no one
/// chooses from outside.
#[derive(Default)]
pub(crate) struct IdxHasher(u64);

impl Hasher for IdxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// An operation in flight whose fds the kernel looks up only when one of
/// its worker threads starts on it.
#[derive(Debug)]
struct Late {
    /// The fds it names (`-1`: none).
    fds: [RawFd; 2],
    /// Fds closed through the proactor meanwhile: each is shared by every
    /// late operation naming it, and closed with the last one's slot.
    closes: Vec<Rc<OwnedFd>>,
}

impl Ops {
    /// A fresh slot for an operation of `kind`.
    pub fn insert(&mut self, kind: Kind) -> OpKey {
        self.live += 1;
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    live: false,
                    kind,
                    done: false,
                    orphan: false,
                    waker: None,
                    cqes: Cqes::default(),
                });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[idx as usize];
        s.live = true;
        s.kind = kind;
        s.done = false;
        s.orphan = false;
        OpKey {
            idx,
            generation: s.generation,
        }
    }

    /// The live slot a `user_data` names, or `None` if stale.
    pub fn get(&mut self, ud: u64) -> Option<&mut Slot> {
        let idx = (ud & 0xffff_ffff) as usize;
        let generation = (ud >> 32) as u32;
        match self.slots.get_mut(idx) {
            Some(s) if s.live && s.generation == generation => Some(s),
            _ => None,
        }
    }

    /// The live slot of `key` (which its owner still holds, so it exists).
    pub fn slot(&mut self, key: OpKey) -> &mut Slot {
        let s = &mut self.slots[key.idx as usize];
        debug_assert!(s.live && s.generation == key.generation);
        s
    }

    /// The live slot at `idx`.
    pub(crate) fn slot_at(&mut self, idx: u32) -> &mut Slot {
        &mut self.slots[idx as usize]
    }

    /// Marks a slot orphaned (its future is gone, the kernel is not done).
    pub fn orphan(&mut self, key: OpKey, parked: Option<Box<dyn Any>>) {
        let s = self.slot(key);
        s.orphan = true;
        s.waker = None;
        if let Some(p) = parked {
            self.parked.insert(key.idx, p);
        }
        self.orphans += 1;
    }

    /// Keeps a detached send's buffer, and the result that means it sent
    /// all of it, until its slot is freed.
    pub(crate) fn insert_detached(&mut self, key: OpKey, len: u32, buf: Box<dyn Any>) {
        self.detached.insert(key.idx, (len, buf));
    }

    /// The length a detached send must report to have sent everything.
    pub(crate) fn detached_len(&self, idx: u32) -> Option<u32> {
        self.detached.get(&idx).map(|d| d.0)
    }

    /// Records that the kernel looks up the fds of `key`'s operation late
    /// (`-1`: no fd).
    pub(crate) fn insert_late(&mut self, key: OpKey, fds: [RawFd; 2]) {
        let closes = Vec::new();
        self.late.insert(key.idx, Late { fds, closes });
    }

    /// Holds `fd` back while an operation the kernel looks its fds up for
    /// late names it and has not finished: it is closed when the last such
    /// slot is freed (the kernel's last CQE). Gives `fd` back if nothing
    /// names it, for the caller to close now.
    pub fn defer_close(&mut self, fd: OwnedFd) -> Option<OwnedFd> {
        if self.late.is_empty() {
            return Some(fd);
        }
        let raw = fd.as_raw_fd();
        let mut fd = Some(fd);
        // Moved in at the first operation that names it; the slots hold
        // the other references.
        let mut shared: Option<Rc<OwnedFd>> = None;
        for (&idx, late) in self.late.iter_mut() {
            let s = &self.slots[idx as usize];
            if s.live && !s.done && late.fds.contains(&raw) {
                let rc = shared.get_or_insert_with(|| Rc::new(fd.take().expect("moved once")));
                late.closes.push(rc.clone());
            }
        }
        fd
    }

    /// Frees a slot; returns what was parked in it and the closes waiting
    /// for it (dropped by the caller, after the kernel's last CQE, so the
    /// memory and the fds are no longer shared).
    pub fn remove(&mut self, idx: u32) -> Option<Box<dyn Any>> {
        let s = &mut self.slots[idx as usize];
        debug_assert!(s.live);
        s.live = false;
        s.generation = s.generation.wrapping_add(1);
        s.waker = None;
        s.cqes.clear();
        let orphan = std::mem::replace(&mut s.orphan, false);
        self.live -= 1;
        self.free.push(idx);
        let parked = if orphan {
            self.orphans -= 1;
            self.parked.remove(&idx)
        } else {
            None
        };
        // A detached send parks nothing of its own: its buffer is here.
        let parked = match s.kind {
            Kind::Send { .. } => self.detached.remove(&idx).map(|d| d.1).or(parked),
            _ => parked,
        };
        // Nearly always empty: only SHUTDOWN and SPLICE are late.
        if self.late.is_empty() {
            return parked;
        }
        match self.late.remove(&idx) {
            Some(late) if !late.closes.is_empty() => {
                Some(Box::new((parked, late.closes)) as Box<dyn Any>)
            }
            _ => parked,
        }
    }

    /// Closes held back, once per late operation that holds one.
    #[cfg(test)]
    pub fn held_closes(&self) -> usize {
        self.late.values().map(|l| l.closes.len()).sum()
    }

    /// Operations whose slot is in use.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Orphaned operations (futures dropped, kernel not done yet).
    pub fn orphans(&self) -> usize {
        self.orphans
    }

    /// Every live slot's index, for the final drain.
    pub fn live_indices(&self) -> Vec<u32> {
        (0..self.slots.len() as u32)
            .filter(|&i| self.slots[i as usize].live)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_make_late_cqes_stale() {
        let mut ops = Ops::default();
        let a = ops.insert(Kind::Other);
        let ud = a.user_data();
        assert!(ops.get(ud).is_some());
        ops.remove(a.idx);
        assert!(ops.get(ud).is_none(), "freed slot still answers");
        let b = ops.insert(Kind::Other);
        assert_eq!(b.idx, a.idx);
        assert_ne!(b.user_data(), ud);
        assert!(
            ops.get(ud).is_none(),
            "reused slot answers an old user_data"
        );
        assert_eq!(ops.live(), 1);
    }

    #[test]
    fn parked_value_lives_until_removed() {
        let mut ops = Ops::default();
        let k = ops.insert(Kind::Read);
        ops.orphan(k, Some(Box::new(vec![0xAAu8; 16])));
        assert_eq!(ops.orphans(), 1);
        let parked = ops.remove(k.idx).expect("parked buffer");
        assert_eq!(parked.downcast_ref::<Vec<u8>>().unwrap()[0], 0xAA);
        assert_eq!(ops.orphans(), 0);
        assert!(ops.parked.is_empty(), "the parked map kept the buffer");
    }

    /// A close of an fd that late operations name waits for the last of
    /// them; one they do not name, or whose operation is done, goes at once.
    #[test]
    fn a_close_waits_for_every_late_operation_naming_the_fd() {
        use std::io::Read;
        let mut ops = Ops::default();
        let (mut r, w) = std::io::pipe().unwrap();
        let w = OwnedFd::from(w);
        let raw = w.as_raw_fd();
        let a = ops.insert(Kind::Other);
        ops.insert_late(a, [raw, -1]);
        let b = ops.insert(Kind::Other);
        ops.insert_late(b, [-1, raw]);
        let done = ops.insert(Kind::Other);
        ops.insert_late(done, [raw, -1]);
        ops.slot(done).done = true;
        assert!(
            ops.defer_close(w).is_none(),
            "closed under a late operation"
        );
        assert_eq!(ops.held_closes(), 2, "held by the two not done");
        drop(ops.remove(done.idx));
        drop(ops.remove(a.idx));
        // SAFETY: F_GETFD takes no pointer. The fd is still held (by `b`),
        // so its number cannot have been reused.
        let flags = unsafe { libc::fcntl(raw, libc::F_GETFD) };
        assert_ne!(flags, -1, "closed early");
        drop(ops.remove(b.idx));
        assert_eq!(r.read(&mut [0u8; 1]).unwrap(), 0, "the write end is closed");
        assert_eq!(ops.held_closes(), 0);

        let (_r, w) = std::io::pipe().unwrap();
        assert!(
            ops.defer_close(OwnedFd::from(w)).is_some(),
            "nothing names it"
        );
    }

    /// A slot is per armed recv, so per idle connection: it must stay small.
    #[test]
    fn a_slot_stays_small() {
        assert!(
            size_of::<Slot>() <= 48,
            "a slot grew to {} bytes",
            size_of::<Slot>()
        );
    }

    #[test]
    fn cqes_come_out_in_order_and_the_queue_goes_when_drained() {
        let c = |res| Completion { res, flags: 0 };
        let mut q = Cqes::default();
        assert!(q.is_empty());
        q.push_back(c(1));
        assert!(q.rest.is_none(), "one CQE allocated a queue");
        q.push_back(c(2));
        q.push_back(c(3));
        assert_eq!(q.pop_front(), Some(c(1)));
        q.push_back(c(4));
        assert_eq!(q.pop_front(), Some(c(2)));
        assert_eq!(q.pop_front(), Some(c(3)));
        assert!(q.rest.is_none(), "a drained queue was kept");
        assert_eq!(q.pop_front(), Some(c(4)));
        assert_eq!(q.pop_front(), None);
        q.push_back(c(5));
        q.push_back(c(6));
        assert_eq!(q.drain(..).map(|c| c.res).collect::<Vec<_>>(), [5, 6]);
        assert!(q.is_empty());
    }
}
