//! The `Date` header's clock for event-loop workers.

use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reactor::Tick;

/// Keeps `http1`'s cached `Date` current from the reactor's cached clock:
/// one comparison per reactor turn, and a wall-clock read only when the
/// second changes.
#[derive(Debug, Default)]
pub struct DateClock {
    /// When the wall clock reaches its next whole second.
    /// On the reactor's clock: the per-turn check compares integers, with
    /// no conversion to `Instant` (see `Reactor::tick`).
    next: Cell<Option<Tick>>,
}

impl DateClock {
    /// Call after every reactor turn with the time it woke up.
    #[inline]
    pub fn tick(&self, now: Tick) {
        if self.next.get().is_none_or(|next| now >= next) {
            self.refresh();
        }
    }

    /// Once a second: out of line, so the per-turn check stays a compare.
    #[cold]
    #[inline(never)]
    fn refresh(&self) {
        http1::refresh_date();
        let subsec = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let to_next_second = Duration::from_nanos(1_000_000_000 - u64::from(subsec));
        self.next.set(Some(Tick::read() + to_next_second));
    }
}
