//! The reactor's clock: `CLOCK_MONOTONIC` as whole nanoseconds in a `u64`.
//!
//! Timers compare and subtract deadlines on every turn. With `std::time::Instant`
//! each subtraction is an out-of-line call that normalises seconds and
//! nanoseconds; with one `u64` it is a single instruction. `Instant` stays the
//! type of the public API: deadlines are converted once, when a timer is armed,
//! and the turn's wake-up time once per turn.

use std::time::{Duration, Instant};

/// Nanoseconds on the monotonic clock (the same clock `Instant` reads on Linux).
pub(crate) type Nanos = u64;

/// A reading of the reactor's cached clock ([`crate::Reactor::tick`]): whole
/// nanoseconds of `CLOCK_MONOTONIC`. Where `Instant` costs a conversion
/// per loop turn (seconds and nanoseconds, normalised, with an overflow
/// check), a `Tick` is the reactor's own `u64`: for code that only keeps
/// "when" and compares it (an idle deadline counted from the last request,
/// the `Date` header's next second), and converts it to an `Instant`
/// ([`crate::Reactor::instant_at`]) only on the rare path that needs one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Tick(pub(crate) Nanos);

impl Tick {
    /// Reads the clock now (not the reactor's cached reading).
    #[inline]
    pub fn read() -> Tick {
        Tick(read())
    }
}

impl std::ops::Add<Duration> for Tick {
    type Output = Tick;

    /// Saturating: a `Tick` is far from its end (`u64` nanoseconds is 584
    /// years of uptime), and a deadline "never" needs no panic path.
    #[inline]
    fn add(self, d: Duration) -> Tick {
        Tick(self.0.saturating_add(saturating_nanos(d)))
    }
}

/// Converts between [`Nanos`] and `Instant` around one pair of readings taken
/// together.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    base: Instant,
    base_ns: Nanos,
}

impl Clock {
    pub fn new() -> Clock {
        let base = Instant::now();
        Clock {
            base,
            base_ns: read(),
        }
    }

    /// The `Instant` of a reading. `base_ns` was read just after `base`, so
    /// this lags the true time by that gap (nanoseconds): a clock that lags
    /// can make a deadline computed from it early, never a timer fire early.
    #[inline]
    pub fn instant(&self, ns: Nanos) -> Instant {
        self.base + Duration::from_nanos(ns.saturating_sub(self.base_ns))
    }

    /// A deadline in nanoseconds (saturating at both ends).
    pub fn nanos(&self, at: Instant) -> Nanos {
        match at.checked_duration_since(self.base) {
            Some(d) => self.base_ns.saturating_add(saturating_nanos(d)),
            None => self
                .base_ns
                .saturating_sub(saturating_nanos(self.base.duration_since(at))),
        }
    }
}

fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Reads `CLOCK_MONOTONIC`.
#[inline]
pub(crate) fn read() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Whole milliseconds from `now` until `deadline`, rounded up (a timer due
/// in 0.3 ms must not become a 0 ms busy loop), as epoll's `i32` timeout.
#[inline]
pub(crate) fn ms_until(deadline: Nanos, now: Nanos) -> i32 {
    let ms = deadline.saturating_sub(now).div_ceil(1_000_000);
    ms.min(i32::MAX as u64) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        let clock = Clock::new();
        let now = read();
        let at = clock.instant(now);
        assert_eq!(clock.nanos(at), now);
        let later = at + Duration::from_millis(1500);
        assert_eq!(clock.nanos(later), now + 1_500_000_000);
        assert_eq!(clock.instant(now + 1_500_000_000), later);
    }

    #[test]
    fn instants_before_the_base_convert_too() {
        let clock = Clock::new();
        let before = clock.base - Duration::from_secs(2);
        assert_eq!(clock.nanos(before), clock.base_ns - 2_000_000_000);
    }

    #[test]
    fn the_clock_agrees_with_instant() {
        let clock = Clock::new();
        let a = Instant::now();
        let ns = read();
        let b = Instant::now();
        let at = clock.instant(ns);
        // Within the gap between the two base readings (well under 1 ms).
        assert!(at + Duration::from_millis(1) >= a && at <= b);
    }

    #[test]
    fn ticks_add_durations_and_saturate() {
        let t = Tick(5);
        assert_eq!(t + Duration::from_nanos(7), Tick(12));
        assert!(t + Duration::from_secs(1) > t);
        assert_eq!(Tick(u64::MAX - 1) + Duration::from_secs(1), Tick(u64::MAX));
        assert_eq!(Tick(1) + Duration::MAX, Tick(u64::MAX));
    }

    #[test]
    fn milliseconds_round_up() {
        assert_eq!(ms_until(10, 10), 0);
        assert_eq!(ms_until(5, 10), 0);
        assert_eq!(ms_until(300_000, 0), 1);
        assert_eq!(ms_until(5_000_000, 0), 5);
        assert_eq!(ms_until(u64::MAX, 0), i32::MAX);
    }
}
