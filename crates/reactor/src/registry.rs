//! The waker registry: a slab of per-fd entries, addressed by epoll tokens.
//!
//! Each registered fd owns one slot holding its readiness bits, the waker of
//! the task waiting to read and the waker of the task waiting to write (kept
//! after a wake, for the next wait: see [`Registry::dispatch`]). The
//! token handed to epoll packs `generation << 32 | slot`. Freeing a slot bumps
//! its generation, so an event that was already queued for the old fd (or for
//! a new fd that reused the number) no longer matches and is dropped.

use std::os::fd::RawFd;
use std::task::{Context, Poll, Waker};

use crate::interest::{Interest, Readiness};

/// Token reserved for the reactor's own eventfd; no slot can produce it
/// because slot indices stay below `u32::MAX`.
pub(crate) const NOTIFY_TOKEN: u64 = u64::MAX;

/// Identifies a live slot: index plus the generation it was issued with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotKey {
    pub index: u32,
    pub generation: u32,
}

impl SlotKey {
    /// The `epoll_data.u64` for this slot.
    pub fn token(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.index)
    }

    /// Splits a token back into index and generation.
    pub fn from_token(token: u64) -> SlotKey {
        SlotKey {
            index: token as u32,
            generation: (token >> 32) as u32,
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    /// The registered fd, for trace lines.
    fd: RawFd,
    in_use: bool,
    /// The owner closes the fd right after freeing the slot, and nothing
    /// else holds its file: the close takes it out of epoll (see
    /// `Registration::deregister_by_close`).
    closed_by_owner: bool,
    /// The fd is in epoll. A slot made by [`Registry::insert_unwatched`]
    /// is not until its first wait (see `Reactor::register_accepted`).
    watched: bool,
    readiness: Readiness,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

impl Slot {
    /// Whether `key` names this slot's current occupant.
    fn is_live(&self, key: SlotKey) -> bool {
        self.in_use && self.generation == key.generation
    }
}

/// The wakers a freed slot still held (reader, writer), to be dropped once
/// the registry is no longer borrowed.
pub(crate) type Released = [Option<Waker>; 2];

/// The slab. Not thread-safe: it lives inside one thread's reactor.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

impl Registry {
    /// Takes a free slot (reusing the most recently freed one, which is warm in
    /// cache) for an fd the caller adds to epoll, and returns its key.
    pub(crate) fn insert(&mut self, fd: RawFd) -> SlotKey {
        self.insert_with(fd, true)
    }

    /// A slot for an fd that is not in epoll yet: it knows no readiness,
    /// and its first wait says that the fd must be added now
    /// ([`Registry::poll_wait`]).
    pub(crate) fn insert_unwatched(&mut self, fd: RawFd) -> SlotKey {
        self.insert_with(fd, false)
    }

    fn insert_with(&mut self, fd: RawFd, watched: bool) -> SlotKey {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.slots.len()).expect("registry exceeds u32 slots");
                assert!(i != u32::MAX, "registry full");
                self.slots.push(Slot::default());
                i
            }
        };
        let slot = &mut self.slots[index as usize];
        debug_assert!(!slot.in_use);
        slot.in_use = true;
        slot.closed_by_owner = false;
        slot.watched = watched;
        slot.fd = fd;
        slot.readiness = Readiness::EMPTY;
        self.live += 1;
        SlotKey {
            index,
            generation: slot.generation,
        }
    }

    /// Frees a slot; its generation moves on so stale tokens stop matching.
    /// Returns the wakers still stored, for the caller to drop outside any
    /// borrow.
    pub fn remove(&mut self, key: SlotKey) -> Released {
        let Some(slot) = self.slot_mut(key) else {
            return [None, None];
        };
        slot.in_use = false;
        slot.generation = slot.generation.wrapping_add(1);
        slot.readiness = Readiness::EMPTY;
        let released = [slot.reader.take(), slot.writer.take()];
        self.free.push(key.index);
        self.live -= 1;
        released
    }

    /// Notes that `key`'s fd will be closed as its registration goes (see
    /// `Registration::deregister_by_close`).
    pub(crate) fn set_closed_by_owner(&mut self, key: SlotKey) {
        if let Some(slot) = self.slot_mut(key) {
            slot.closed_by_owner = true;
        }
    }

    /// Whether freeing `key` must take its fd out of epoll with
    /// `EPOLL_CTL_DEL`: it is in epoll, and its owner's close will not
    /// take it out (see [`Registry::set_closed_by_owner`]).
    pub(crate) fn needs_delete(&self, key: SlotKey) -> bool {
        let slot = self.slots.get(key.index as usize);
        slot.is_some_and(|s| s.is_live(key) && s.watched && !s.closed_by_owner)
    }

    /// The fd registered under `token`, if the token is live.
    pub fn fd_of(&self, token: u64) -> Option<RawFd> {
        let key = SlotKey::from_token(token);
        let slot = self.slots.get(key.index as usize)?;
        slot.is_live(key).then_some(slot.fd)
    }

    /// Records an epoll event and wakes the waiters of the directions it made
    /// ready (both on hang-up or error). Returns `None` for a stale token,
    /// otherwise how many wakers it woke.
    ///
    /// The wakers are woken by reference and stay stored: a task waits on its
    /// socket again after nearly every wake, and then finds its waker already
    /// in place (`will_wake`) instead of cloning it anew. A task that has
    /// stopped waiting may get a spurious wake from a later edge, which
    /// futures tolerate by design. Waking happens while the registry is
    /// borrowed, so a waker must only queue its task (as those of the
    /// executor and the coroutine scheduler do), never poll a future or
    /// touch this reactor's registrations on the spot: that would panic on
    /// the borrow.
    #[inline]
    pub fn dispatch(&mut self, token: u64, flags: u32) -> Option<usize> {
        let slot = self.slot_mut(SlotKey::from_token(token))?;
        let ready = Readiness::from_epoll(flags);
        slot.readiness.insert(ready);
        let mut woken = 0;
        if ready.is_ready_for(Interest::Readable)
            && let Some(w) = &slot.reader
        {
            w.wake_by_ref();
            woken += 1;
        }
        if ready.is_ready_for(Interest::Writable)
            && let Some(w) = &slot.writer
        {
            w.wake_by_ref();
            woken += 1;
        }
        Some(woken)
    }

    /// Ready at once if readiness for `interest` is set; otherwise stores the
    /// task's waker (replacing an older one) and returns `Pending`.
    #[cfg(test)]
    pub fn poll_ready(
        &mut self,
        key: SlotKey,
        cx: &mut Context<'_>,
        interest: Interest,
    ) -> Poll<Readiness> {
        self.poll_wait(key, cx, interest).0
    }

    /// [`Registry::poll_ready`], and whether the fd must be added to epoll
    /// now: `true` once, on the first `Pending` of a slot made by
    /// [`Registry::insert_unwatched`] (the slot counts as watched from
    /// then on).
    #[inline(always)]
    pub fn poll_wait(
        &mut self,
        key: SlotKey,
        cx: &mut Context<'_>,
        interest: Interest,
    ) -> (Poll<Readiness>, bool) {
        let slot = self
            .slot_mut(key)
            .expect("poll_ready on a freed registration");
        if slot.readiness.is_ready_for(interest) {
            return (Poll::Ready(slot.readiness), false);
        }
        let waiter = match interest {
            Interest::Readable => &mut slot.reader,
            Interest::Writable => &mut slot.writer,
        };
        match waiter {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *waiter = Some(cx.waker().clone()),
        }
        let watch = !slot.watched;
        slot.watched = true;
        (Poll::Pending, watch)
    }

    /// Forgets readiness in one direction: call only after the operation
    /// returned `EAGAIN`, which proves the kernel will send a new edge.
    pub fn clear(&mut self, key: SlotKey, interest: Interest) {
        if let Some(slot) = self.slot_mut(key) {
            slot.readiness.remove(Readiness::clear_bit(interest));
        }
    }

    /// Current readiness bits of a slot.
    pub fn readiness(&self, key: SlotKey) -> Readiness {
        match self.slots.get(key.index as usize) {
            Some(s) if s.in_use && s.generation == key.generation => s.readiness,
            _ => Readiness::EMPTY,
        }
    }

    /// Number of registered fds.
    pub fn len(&self) -> usize {
        self.live
    }

    fn slot_mut(&mut self, key: SlotKey) -> Option<&mut Slot> {
        match self.slots.get_mut(key.index as usize) {
            Some(s) if s.is_live(key) => Some(s),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct CountWake(AtomicUsize);
    impl Wake for CountWake {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<CountWake>, Waker) {
        let c = Arc::new(CountWake(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    const IN: u32 = libc::EPOLLIN as u32;
    const OUT: u32 = libc::EPOLLOUT as u32;
    const HUP: u32 = libc::EPOLLHUP as u32;

    #[test]
    fn ready_at_once_when_readiness_is_set() {
        let mut reg = Registry::default();
        let key = reg.insert(3);
        let (c, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        assert!(
            reg.poll_ready(key, &mut cx, Interest::Readable)
                .is_pending()
        );
        assert_eq!(reg.dispatch(key.token(), IN), Some(1));
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert!(reg.poll_ready(key, &mut cx, Interest::Readable).is_ready());
        // Still ready: only EAGAIN clears it.
        assert!(reg.poll_ready(key, &mut cx, Interest::Readable).is_ready());
        reg.clear(key, Interest::Readable);
        assert!(
            reg.poll_ready(key, &mut cx, Interest::Readable)
                .is_pending()
        );
    }

    #[test]
    fn stale_generation_is_ignored() {
        let mut reg = Registry::default();
        let old = reg.insert(3);
        let (c, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        assert!(
            reg.poll_ready(old, &mut cx, Interest::Readable)
                .is_pending()
        );
        drop(reg.remove(old));
        let new = reg.insert(3);
        assert_eq!(new.index, old.index, "slot is reused");
        assert_ne!(new.generation, old.generation);
        assert!(
            reg.dispatch(old.token(), IN).is_none(),
            "stale token dropped"
        );
        assert!(reg.readiness(new).is_empty(), "new fd untouched");
        assert_eq!(c.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn hangup_wakes_both_sides() {
        let mut reg = Registry::default();
        let key = reg.insert(3);
        let (cr, wr) = counter();
        let (cw, ww) = counter();
        assert!(
            reg.poll_ready(key, &mut Context::from_waker(&wr), Interest::Readable)
                .is_pending()
        );
        assert!(
            reg.poll_ready(key, &mut Context::from_waker(&ww), Interest::Writable)
                .is_pending()
        );
        assert_eq!(reg.dispatch(key.token(), HUP), Some(2));
        assert_eq!(cr.0.load(Ordering::SeqCst), 1);
        assert_eq!(cw.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn writable_event_leaves_reader_waiting() {
        let mut reg = Registry::default();
        let key = reg.insert(3);
        let (c, w) = counter();
        let mut cx = Context::from_waker(&w);
        assert!(
            reg.poll_ready(key, &mut cx, Interest::Readable)
                .is_pending()
        );
        assert_eq!(reg.dispatch(key.token(), OUT), Some(0));
        assert_eq!(c.0.load(Ordering::SeqCst), 0);
        assert_eq!(reg.dispatch(key.token(), IN), Some(1));
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
    }

    /// A waker stays stored after its wake: waiting again with the same
    /// waker stores nothing new, and the next edge wakes it again.
    #[test]
    fn the_waker_stays_for_the_next_wait() {
        let mut reg = Registry::default();
        let key = reg.insert(3);
        let (c, w) = counter();
        let mut cx = Context::from_waker(&w);
        for round in 1..=3 {
            assert!(
                reg.poll_ready(key, &mut cx, Interest::Readable)
                    .is_pending()
            );
            assert_eq!(reg.dispatch(key.token(), IN), Some(1));
            assert_eq!(c.0.load(Ordering::SeqCst), round);
            assert!(reg.poll_ready(key, &mut cx, Interest::Readable).is_ready());
            reg.clear(key, Interest::Readable);
        }
        // The registry holds one extra reference to the waker, no more.
        assert_eq!(Arc::strong_count(&c), 3); // `c`, `w`, the slot
        drop(reg.remove(key));
        assert_eq!(Arc::strong_count(&c), 2);
    }

    #[test]
    fn remove_returns_stored_wakers_and_counts() {
        let mut reg = Registry::default();
        let a = reg.insert(3);
        let b = reg.insert(3);
        assert_eq!(reg.len(), 2);
        let (_c, w) = counter();
        assert!(
            reg.poll_ready(a, &mut Context::from_waker(&w), Interest::Writable)
                .is_pending()
        );
        let [reader, writer] = reg.remove(a);
        assert!(reader.is_none() && writer.is_some());
        assert_eq!(reg.len(), 1);
        drop(reg.remove(b));
        assert_eq!(reg.len(), 0);
    }

    #[test]
    fn token_round_trip() {
        let key = SlotKey {
            index: 12345,
            generation: 7,
        };
        assert_eq!(SlotKey::from_token(key.token()), key);
        assert_ne!(key.token(), NOTIFY_TOKEN);
    }
}
