//! A connection's one timer, whose deadline may move later for free.
//!
//! A connection waits under a different deadline for each thing it waits for
//! (the next request, the rest of a head, a write), and the idle deadline
//! moves later with every request. Moving a timer in the reactor's heap on
//! every request would cost a heap operation each time. Instead the heap
//! keeps the *armed* deadline, which is only ever moved earlier; when it
//! fires before the deadline that counts, the timer is re-armed then, once.
//! Both event-loop runtimes (the stackless connection and the stackful one)
//! wait this way.

use std::task::{Context, Poll};
use std::time::Instant;

use reactor::{Reactor, Tick, TimerKey};

/// A key into the reactor's timer heap and the deadline it is armed for.
/// Remove it with [`LazyTimer::remove`] when the connection ends.
#[derive(Debug)]
pub struct LazyTimer {
    key: TimerKey,
    /// The deadline the heap holds for `key` (it fires then, or has fired).
    armed: Instant,
    /// The same on the reactor's clock, for [`LazyTimer::is_unfired`]'s
    /// per-wait check (a compare of two words, no conversion).
    armed_tick: Tick,
}

impl LazyTimer {
    /// A timer armed for `at`.
    pub fn new(reactor: &Reactor, at: Instant) -> LazyTimer {
        LazyTimer {
            key: reactor.insert_timer(at),
            armed: at,
            armed_tick: reactor.tick_of(at),
        }
    }

    /// Makes sure the timer fires no later than `at`: the heap is touched
    /// only if `at` is earlier than what it holds.
    #[inline]
    pub fn arm(&mut self, reactor: &Reactor, at: Instant) {
        if at < self.armed {
            reactor.reset_timer(self.key, at);
            self.armed = at;
            self.armed_tick = reactor.tick_of(at);
        }
    }

    /// [`LazyTimer::arm`] for a deadline on the reactor's clock: the
    /// compare is of two words, and the deadline becomes an `Instant` only
    /// if the heap is touched.
    #[inline]
    pub fn arm_tick(&mut self, reactor: &Reactor, at: Tick) {
        if at < self.armed_tick {
            let instant = reactor.instant_at(at);
            reactor.reset_timer(self.key, instant);
            self.armed = instant;
            self.armed_tick = at;
        }
    }

    /// True once `deadline` (at or after the armed one) has passed: the
    /// timer fired for it, or fired late enough that the reactor's clock is
    /// past it. Otherwise `cx` is woken when the timer fires; a fire that
    /// came before `deadline` re-arms the timer for it.
    #[inline]
    pub fn poll_expired(
        &mut self,
        reactor: &Reactor,
        cx: &mut Context<'_>,
        deadline: Instant,
    ) -> bool {
        loop {
            if reactor.poll_timer(self.key, cx) == Poll::Pending {
                return false;
            }
            if self.armed >= deadline || reactor.now() >= deadline {
                return true;
            }
            reactor.reset_timer(self.key, deadline);
            self.armed = deadline;
            self.armed_tick = reactor.tick_of(deadline);
        }
    }

    /// The key into the reactor's heap.
    #[inline]
    pub fn key(&self) -> TimerKey {
        self.key
    }

    /// True while the timer cannot have fired: the reactor's clock, which
    /// timers fire by, has not reached the armed deadline. A waker stored
    /// by an earlier [`LazyTimer::poll_expired`] is then still in place.
    #[inline]
    pub fn is_unfired(&self, reactor: &Reactor) -> bool {
        reactor.tick() < self.armed_tick
    }

    /// Takes the timer out of the reactor's heap.
    pub fn remove(&self, reactor: &Reactor) {
        reactor.remove_timer(self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Turns the reactor until `t` has fired or one second passes.
    fn turn_until_fired(reactor: &Reactor, t: &mut LazyTimer, deadline: Instant) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let give_up = Instant::now() + Duration::from_secs(1);
        while Instant::now() < give_up {
            if t.poll_expired(reactor, &mut cx, deadline) {
                return true;
            }
            reactor.turn(Some(Duration::from_millis(5))).unwrap();
        }
        false
    }

    /// A later deadline is picked up when the timer fires early: it does not
    /// expire at the armed deadline, only at the one that counts.
    #[test]
    fn a_later_deadline_is_honoured_after_an_early_fire() {
        let reactor = Reactor::new().unwrap();
        let start = reactor.now();
        let mut t = LazyTimer::new(&reactor, start + Duration::from_millis(20));
        let later = start + Duration::from_millis(80);
        t.arm(&reactor, later); // later than armed: the heap is not touched
        assert_eq!(t.armed, start + Duration::from_millis(20));
        assert!(turn_until_fired(&reactor, &mut t, later));
        assert!(
            reactor.now() >= later,
            "expired before the deadline that counts"
        );
        t.remove(&reactor);
    }

    /// The same through `arm_tick`: a later tick leaves the heap alone, an
    /// earlier one moves the timer, and it fires then.
    #[test]
    fn an_earlier_tick_moves_the_timer_and_a_later_one_does_not() {
        let reactor = Reactor::new().unwrap();
        let start = reactor.now();
        let mut t = LazyTimer::new(&reactor, start + Duration::from_secs(60));
        t.arm_tick(&reactor, reactor.tick() + Duration::from_secs(120));
        assert_eq!(t.armed, start + Duration::from_secs(60));
        let sooner = reactor.tick() + Duration::from_millis(20);
        t.arm_tick(&reactor, sooner);
        assert_eq!(t.armed_tick, sooner);
        assert_eq!(t.armed, reactor.instant_at(sooner));
        assert!(t.is_unfired(&reactor));
        assert!(
            turn_until_fired(&reactor, &mut t, reactor.instant_at(sooner)),
            "did not fire within a second"
        );
        assert!(!t.is_unfired(&reactor));
        t.remove(&reactor);
    }

    /// An earlier deadline moves the timer in the heap at once.
    #[test]
    fn an_earlier_deadline_moves_the_timer() {
        let reactor = Reactor::new().unwrap();
        let start = reactor.now();
        let mut t = LazyTimer::new(&reactor, start + Duration::from_secs(60));
        let sooner = start + Duration::from_millis(20);
        t.arm(&reactor, sooner);
        assert_eq!(t.armed, sooner);
        assert!(
            turn_until_fired(&reactor, &mut t, sooner),
            "did not fire within a second"
        );
        t.remove(&reactor);
    }
}
