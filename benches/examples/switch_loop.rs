//! N resume + yield round trips of one coroutine, ours or corosensei's, in
//! a plain loop: for counting instructions per round trip with callgrind
//! (`valgrind --tool=callgrind`, two values of N, the difference divided by
//! the difference of N), or timing it outside criterion.
//!
//! `cargo run --release -p httplite-benches --example switch_loop -- ours 1000000`
//! (`ours` or `corosensei`; prints the nanoseconds per round trip).

use std::hint::black_box;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "ours".into());
    let n: u64 = args
        .next()
        .map(|s| s.parse().expect("N: a number of round trips"))
        .unwrap_or(10_000_000);
    let start = Instant::now();
    match which.as_str() {
        "ours" => {
            let mut co = coroutine::Coroutine::<(), ()>::new(|y| {
                loop {
                    y.suspend(());
                }
            });
            for _ in 0..n {
                black_box(co.resume());
            }
        }
        "corosensei" => {
            let mut co = corosensei::Coroutine::<(), (), ()>::new(|y, ()| {
                loop {
                    y.suspend(());
                }
            });
            for _ in 0..n {
                black_box(co.resume(()));
            }
        }
        other => {
            eprintln!("switch_loop: unknown {other:?} (ours or corosensei)");
            std::process::exit(2);
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    println!("{which}: {ns:.2} ns per round trip ({n} round trips)");
}
