//! The timer heap: pending deadlines in an indexed binary min-heap.
//!
//! Why indexed: a server arms a timeout for nearly every request and cancels
//! nearly all of them. A plain `BinaryHeap` with lazy deletion would keep every
//! cancelled entry until its deadline passed (millions, for a 60 s idle
//! timeout under load). Here every slot remembers its position in the heap, so
//! cancel and reset are true O(log n) removals and the heap holds exactly the
//! pending timers.
//!
//! Equal deadlines fire in insertion order (a sequence number breaks ties), so
//! timers behave FIFO like the run queue.

use std::task::{Context, Poll, Waker};

use crate::clock::Nanos;

const NOT_IN_HEAP: u32 = u32::MAX;

/// Identifies a timer: slot index plus generation (stale keys are inert).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerKey {
    index: u32,
    generation: u32,
}

/// 24 bytes: an idle connection's timer holds one. A free slot needs no
/// flag: its generation was bumped when it was freed, and no key carries the
/// new one until the slot is taken again.
#[derive(Debug)]
struct Slot {
    generation: u32,
    /// Position in `heap`, or `NOT_IN_HEAP` once fired.
    heap_pos: u32,
    waker: Option<Waker>,
}

/// 16 bytes: an idle connection's timer costs that much of the heap's
/// memory (and the heap's sift moves that much per level).
#[derive(Debug, Clone, Copy)]
struct HeapEntry {
    deadline: Nanos,
    /// Insertion order among equal deadlines. It wraps: two entries are
    /// ordered by their distance, which is right while they were inserted
    /// fewer than 2^31 insertions apart (entries with the very same
    /// nanosecond deadline are).
    seq: u32,
    slot: u32,
}

impl HeapEntry {
    #[inline]
    fn before(&self, other: &HeapEntry) -> bool {
        self.deadline < other.deadline
            || (self.deadline == other.deadline && (self.seq.wrapping_sub(other.seq) as i32) < 0)
    }
}

/// All timers of one reactor.
#[derive(Debug, Default)]
pub(crate) struct TimerHeap {
    slots: Vec<Slot>,
    free: Vec<u32>,
    heap: Vec<HeapEntry>,
    next_seq: u32,
    live: usize,
}

impl TimerHeap {
    /// Arms a new timer.
    pub fn insert(&mut self, deadline: Nanos) -> TimerKey {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.slots.len()).expect("too many timers");
                self.slots.push(Slot {
                    generation: 0,
                    heap_pos: NOT_IN_HEAP,
                    waker: None,
                });
                i
            }
        };
        let slot = &self.slots[index as usize];
        let key = TimerKey {
            index,
            generation: slot.generation,
        };
        self.live += 1;
        self.push_heap(index, deadline);
        key
    }

    /// Ready once the timer has fired; otherwise remembers the waker.
    #[inline]
    pub fn poll(&mut self, key: TimerKey, cx: &mut Context<'_>) -> Poll<()> {
        let Some(slot) = self.slot_mut(key) else {
            return Poll::Ready(());
        };
        if slot.heap_pos == NOT_IN_HEAP {
            return Poll::Ready(());
        }
        match &slot.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => slot.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Whether the timer has fired (or the key is stale).
    pub fn has_fired(&self, key: TimerKey) -> bool {
        match self.slots.get(key.index as usize) {
            Some(s) if s.generation == key.generation => s.heap_pos == NOT_IN_HEAP,
            _ => true,
        }
    }

    /// Moves a timer to a new deadline, re-arming it if it had fired.
    pub fn reset(&mut self, key: TimerKey, deadline: Nanos) {
        let Some(slot) = self.slot_mut(key) else {
            return;
        };
        let pos = slot.heap_pos;
        if pos == NOT_IN_HEAP {
            self.push_heap(key.index, deadline);
            return;
        }
        let pos = pos as usize;
        let old = self.heap[pos];
        self.next_seq = self.next_seq.wrapping_add(1);
        self.heap[pos] = HeapEntry {
            deadline,
            seq: self.next_seq,
            slot: key.index,
        };
        if self.heap[pos].before(&old) {
            self.sift_up(pos);
        } else {
            self.sift_down(pos);
        }
    }

    /// Cancels and frees a timer. Returns its waker, if any, so the caller can
    /// drop it outside the heap's borrow.
    pub fn remove(&mut self, key: TimerKey) -> Option<Waker> {
        let slot = self.slot_mut(key)?;
        let pos = slot.heap_pos;
        slot.generation = slot.generation.wrapping_add(1);
        slot.heap_pos = NOT_IN_HEAP;
        let waker = slot.waker.take();
        if pos != NOT_IN_HEAP {
            self.remove_at(pos as usize);
        }
        self.free.push(key.index);
        self.live -= 1;
        waker
    }

    /// The earliest pending deadline.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.heap.first().map(|e| e.deadline)
    }

    /// Fires every timer due at `now`, in deadline order, pushing their wakers
    /// onto `out`. Returns how many fired.
    pub fn fire_expired(&mut self, now: Nanos, out: &mut Vec<Waker>) -> usize {
        let mut fired = 0;
        while let Some(top) = self.heap.first() {
            if top.deadline > now {
                break;
            }
            let slot_index = top.slot as usize;
            self.remove_at(0);
            let slot = &mut self.slots[slot_index];
            slot.heap_pos = NOT_IN_HEAP;
            if let Some(w) = slot.waker.take() {
                out.push(w);
            }
            fired += 1;
        }
        fired
    }

    /// Timers allocated and not yet dropped (pending or fired).
    pub fn len(&self) -> usize {
        self.live
    }

    /// Timers still waiting for their deadline.
    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    fn slot_mut(&mut self, key: TimerKey) -> Option<&mut Slot> {
        match self.slots.get_mut(key.index as usize) {
            Some(s) if s.generation == key.generation => Some(s),
            _ => None,
        }
    }

    fn push_heap(&mut self, slot: u32, deadline: Nanos) {
        self.next_seq = self.next_seq.wrapping_add(1);
        let pos = self.heap.len();
        self.heap.push(HeapEntry {
            deadline,
            seq: self.next_seq,
            slot,
        });
        self.slots[slot as usize].heap_pos = pos as u32;
        self.sift_up(pos);
    }

    /// Removes the entry at `pos` by moving the last entry into its place.
    fn remove_at(&mut self, pos: usize) {
        let last = self.heap.len() - 1;
        if pos != last {
            self.heap.swap(pos, last);
            self.heap.pop();
            let moved = self.heap[pos].slot;
            self.slots[moved as usize].heap_pos = pos as u32;
            // The moved entry may belong either above or below `pos`.
            let pos = self.sift_up(pos);
            self.sift_down(pos);
        } else {
            self.heap.pop();
        }
    }

    fn sift_up(&mut self, mut pos: usize) -> usize {
        let entry = self.heap[pos];
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if !entry.before(&self.heap[parent]) {
                break;
            }
            self.heap[pos] = self.heap[parent];
            self.slots[self.heap[pos].slot as usize].heap_pos = pos as u32;
            pos = parent;
        }
        self.heap[pos] = entry;
        self.slots[entry.slot as usize].heap_pos = pos as u32;
        pos
    }

    fn sift_down(&mut self, mut pos: usize) {
        let len = self.heap.len();
        let entry = self.heap[pos];
        loop {
            let left = 2 * pos + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let child = if right < len && self.heap[right].before(&self.heap[left]) {
                right
            } else {
                left
            };
            if !self.heap[child].before(&entry) {
                break;
            }
            self.heap[pos] = self.heap[child];
            self.slots[self.heap[pos].slot as usize].heap_pos = pos as u32;
            pos = child;
        }
        self.heap[pos] = entry;
        self.slots[entry.slot as usize].heap_pos = pos as u32;
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        for (pos, e) in self.heap.iter().enumerate() {
            assert_eq!(self.slots[e.slot as usize].heap_pos as usize, pos);
            if pos > 0 {
                assert!(!e.before(&self.heap[(pos - 1) / 2]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn an_idle_timer_takes_24_plus_16_bytes() {
        assert_eq!(size_of::<Slot>(), 24);
        assert_eq!(size_of::<HeapEntry>(), 16);
    }

    /// A freed slot's old key stays inert after the slot is taken again.
    #[test]
    fn a_stale_key_does_not_reach_a_reused_slot() {
        let mut h = TimerHeap::default();
        let old = h.insert(10 * S);
        assert!(h.remove(old).is_none());
        let new = h.insert(20 * S);
        assert_eq!(new.index, old.index);
        assert!(h.has_fired(old), "a stale key reads as fired");
        assert!(h.remove(old).is_none());
        assert!(!h.has_fired(new));
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn fires_in_deadline_order_with_fifo_ties() {
        let mut h = TimerHeap::default();
        let t0: Nanos = 1_000 * S;
        let mut seed = 42;
        let mut keys = Vec::new();
        for _ in 0..2000 {
            let d = t0 + (lcg(&mut seed) % 500) * 1_000;
            keys.push((h.insert(d), d));
        }
        h.check_invariants();
        // Cancel a third of them, at random positions.
        for (i, (k, _)) in keys.iter().enumerate() {
            if i % 3 == 0 {
                h.remove(*k);
            }
        }
        h.check_invariants();
        let mut last = t0;
        let mut fired = 0;
        while let Some(top) = h.heap.first().copied() {
            assert!(top.deadline >= last);
            last = top.deadline;
            h.fire_expired(top.deadline, &mut Vec::new());
            fired += 1;
            h.check_invariants();
        }
        assert!(fired > 0);
        assert_eq!(h.pending(), 0);
        assert_eq!(h.len(), 2000 - 667);
    }

    #[test]
    fn equal_deadlines_stay_fifo_across_the_sequence_wrap() {
        let mut h = TimerHeap {
            next_seq: u32::MAX - 4,
            ..TimerHeap::default()
        };
        let d: Nanos = 1_000 * S;
        let keys: Vec<_> = (0..10).map(|_| h.insert(d)).collect();
        h.check_invariants();
        let mut order = Vec::new();
        while let Some(top) = h.heap.first().copied() {
            order.push(top.slot);
            h.remove_at(0);
        }
        let inserted: Vec<u32> = keys.iter().map(|k| k.index).collect();
        assert_eq!(order, inserted, "ties fire in insertion order");
    }

    #[test]
    fn reset_moves_both_ways_and_rearms() {
        let mut h = TimerHeap::default();
        let t0: Nanos = 1_000 * S;
        let a = h.insert(t0 + 5 * S);
        let b = h.insert(t0 + 10 * S);
        h.reset(b, t0 + S);
        assert_eq!(h.next_deadline(), Some(t0 + S));
        h.reset(b, t0 + 20 * S);
        assert_eq!(h.next_deadline(), Some(t0 + 5 * S));
        h.check_invariants();
        h.fire_expired(t0 + 30 * S, &mut Vec::new());
        assert!(h.has_fired(a) && h.has_fired(b));
        h.reset(a, t0 + 40 * S);
        assert!(!h.has_fired(a));
        assert_eq!(h.pending(), 1);
    }

    #[test]
    fn removal_frees_and_stale_keys_are_inert() {
        let mut h = TimerHeap::default();
        let t: Nanos = 1_000 * S;
        let a = h.insert(t);
        h.remove(a);
        assert_eq!(h.len(), 0);
        let b = h.insert(t);
        assert_eq!(b.index, a.index);
        assert!(h.remove(a).is_none(), "stale key does nothing");
        assert_eq!(h.len(), 1);
        h.reset(a, t);
        assert_eq!(h.pending(), 1);
    }

    #[test]
    fn a_hundred_thousand_timers_stay_consistent() {
        let mut h = TimerHeap::default();
        let t0: Nanos = 1_000 * S;
        let mut seed = 7;
        let keys: Vec<_> = (0..100_000)
            .map(|_| h.insert(t0 + (lcg(&mut seed) % 100_000) * MS))
            .collect();
        for k in keys.iter().step_by(2) {
            h.remove(*k);
        }
        h.check_invariants();
        assert_eq!(h.pending(), 50_000);
        let mut out = Vec::new();
        assert_eq!(h.fire_expired(t0 + 1000 * S, &mut out), 50_000);
        for k in keys.iter().skip(1).step_by(2) {
            h.remove(*k);
        }
        assert_eq!(h.len(), 0);
    }
}
