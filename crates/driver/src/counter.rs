//! Counters written by one thread and read by any.
//!
//! A runtime counts its work (events, polls, wakes, completions) on its own
//! thread, while a stats page may be served by another worker. Both drivers
//! and the executors above them count with this one type. A [`Counter`] is an
//! `AtomicU64` used with a relaxed load and store instead of a locked
//! read-modify-write: with a single writer no increment can be lost, and on
//! x86-64 the update compiles to the same plain `mov`/`add` as a `Cell` would,
//! so counting stays free in the hot path.

use std::sync::atomic::{AtomicU64, Ordering};

/// A single-writer, many-reader counter (or gauge).
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// A counter at zero.
    pub const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }

    /// Adds `n`. Only one thread may ever write a given counter.
    #[inline(always)]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// Adds one (single writer, see [`Counter::add`]).
    #[inline(always)]
    pub fn bump(&self) {
        self.add(1);
    }

    /// Sets the value (a gauge; single writer).
    #[inline(always)]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// Raises the value to `v` if it is lower (a high-water mark; single writer).
    #[inline(always)]
    pub fn raise(&self, v: u64) {
        if v > self.get() {
            self.set(v);
        }
    }

    /// The current value, from any thread.
    #[inline(always)]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn one_writer_loses_nothing_while_others_read() {
        let c = Arc::new(Counter::new());
        let reader = {
            let c = c.clone();
            std::thread::spawn(move || {
                let mut last = 0;
                for _ in 0..100_000 {
                    let v = c.get();
                    assert!(v >= last, "a counter never goes back");
                    last = v;
                }
            })
        };
        for _ in 0..1_000_000 {
            c.bump();
        }
        reader.join().unwrap();
        assert_eq!(c.get(), 1_000_000);
    }

    #[test]
    fn raise_keeps_the_maximum() {
        let c = Counter::new();
        c.raise(5);
        c.raise(3);
        assert_eq!(c.get(), 5);
        c.set(1);
        assert_eq!(c.get(), 1);
    }
}
