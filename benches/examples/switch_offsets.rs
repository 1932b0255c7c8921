//! One resume + yield round trip, ours and corosensei's, timed with the
//! resumer's stack pointer moved down 16 bytes at a time: the figure for
//! the page-offset effect described in the coroutine crate's
//! `switch/x86_64.rs` ("What a round trip costs").
//!
//! Both coroutines are created once, on `main`'s stack; each row resumes
//! them from `d` extra 16-byte frames deeper (`pad`), so the resumer's
//! stores (the pushes and the return address of the switch) move through
//! every offset within a 4 KiB page relative to the coroutine's stack,
//! which stays put. Run it without address-space randomisation, so that a
//! row means the same offsets on every run:
//!
//! `setarch -R taskset -c 0 target/release/examples/switch_offsets [ROWS [N]]`
//!
//! (256 rows cover a page; N round trips per cell, default 10 million).
//! Prints `d ours_ns corosensei_ns` per row, then the median and the slow
//! rows of each (over 1.2× its median).

use std::hint::black_box;
use std::time::Instant;

#[inline(never)]
fn ours(co: &mut coroutine::Coroutine<(), ()>, n: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        black_box(co.resume());
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

#[inline(never)]
fn theirs(co: &mut corosensei::Coroutine<(), (), ()>, n: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        black_box(co.resume(()));
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// Runs `f` from `d` frames of 16 bytes (a return address and one pushed
/// register) below the caller.
#[inline(never)]
fn pad(d: usize, f: &mut dyn FnMut() -> f64) -> f64 {
    if d == 0 {
        return f();
    }
    let x = black_box([0u8; 1]);
    let r = pad(d - 1, f);
    black_box(x);
    r
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rows: usize = args
        .next()
        .map_or(256, |s| s.parse().expect("ROWS: a number"));
    let n: u64 = args
        .next()
        .map_or(10_000_000, |s| s.parse().expect("N: a number"));
    let mut a = coroutine::Coroutine::<(), ()>::new(|y| {
        loop {
            y.suspend(());
        }
    });
    let mut b = corosensei::Coroutine::<(), (), ()>::new(|y, ()| {
        loop {
            y.suspend(());
        }
    });
    let mut table = Vec::with_capacity(rows);
    for d in 0..rows {
        let x = pad(d, &mut || ours(&mut a, n));
        let y = pad(d, &mut || theirs(&mut b, n));
        println!("{d} {x:.2} {y:.2}");
        table.push((d, x, y));
    }
    let mut xs: Vec<f64> = table.iter().map(|r| r.1).collect();
    let mut ys: Vec<f64> = table.iter().map(|r| r.2).collect();
    let (mx, my) = (median(&mut xs), median(&mut ys));
    let slow = |pick: fn(&(usize, f64, f64)) -> f64, m: f64| -> Vec<usize> {
        table
            .iter()
            .filter(|r| pick(r) > 1.2 * m)
            .map(|r| r.0)
            .collect()
    };
    println!("ours: median {mx:.2} ns, slow rows {:?}", slow(|r| r.1, mx));
    println!(
        "corosensei: median {my:.2} ns, slow rows {:?}",
        slow(|r| r.2, my)
    );
    println!("ratio of medians: {:.3}", mx / my);
}
