//! The slab of live coroutines: slots by key, with a generation per slot
//! so that a wake for a finished coroutine finds nothing.

use std::ptr::NonNull;

use super::Entry;

struct Slot {
    generation: u32,
    /// Valid while set: the stack it points into belongs to the entry's
    /// own `raw`, which only [`Slab::remove`] (or the slab's drop) moves
    /// out, before the stack can be released.
    entry: Option<NonNull<Entry>>,
}

/// Live coroutines by key (`generation << 32 | index`). A finished
/// coroutine's slot gets a new generation, so a stale wake is ignored.
#[derive(Default)]
pub(crate) struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

impl Slab {
    pub(super) fn next_key(&self) -> u64 {
        let index = self.free.last().copied().unwrap_or(self.slots.len() as u32);
        let generation = self.slots.get(index as usize).map_or(0, |s| s.generation);
        (u64::from(generation) << 32) | u64::from(index)
    }

    /// Takes ownership of the initialised entry at `entry`.
    ///
    /// # Safety
    /// `entry` is initialised, lies on the stack its own `raw` owns, and
    /// nothing else reads, moves or drops it.
    pub(super) unsafe fn insert(&mut self, entry: NonNull<Entry>) -> u64 {
        let key = self.next_key();
        let index = key as u32;
        if self.free.pop().is_none() {
            self.slots.push(Slot {
                generation: 0,
                entry: None,
            });
        }
        self.slots[index as usize].entry = Some(entry);
        self.live += 1;
        key
    }

    pub(super) fn get(&self, key: u64) -> Option<&Entry> {
        let slot = self.slots.get(key as u32 as usize)?;
        let entry = (slot.generation == (key >> 32) as u32).then_some(slot.entry)??;
        // SAFETY: a set slot owns a live entry (see `insert`); the stack it
        // lies on stays mapped while the entry is in the slab.
        Some(unsafe { entry.as_ref() })
    }

    pub(super) fn remove(&mut self, key: u64) -> Option<Entry> {
        let slot = self.slots.get_mut(key as u32 as usize)?;
        if slot.generation != (key >> 32) as u32 {
            return None;
        }
        let entry = slot.entry.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(key as u32);
        self.live -= 1;
        // SAFETY: the slot owned the entry and no longer points at it: it is
        // moved off the stack once, before its `raw` can release that stack.
        Some(unsafe { entry.read() })
    }

    pub(crate) fn keys(&self) -> Vec<u64> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.entry.is_some())
            .map(|(i, s)| (u64::from(s.generation) << 32) | i as u64)
            .collect()
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        // The runtime's drop empties the slab; what is left (a runtime that
        // could not cancel everything) is dropped as the entries would have
        // been in place: an unfinished coroutine's stack is leaked.
        for slot in &mut self.slots {
            if let Some(entry) = slot.entry.take() {
                // SAFETY: as in `remove`.
                drop(unsafe { entry.read() });
            }
        }
    }
}
