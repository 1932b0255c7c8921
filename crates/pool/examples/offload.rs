//! Offloading CPU-heavy work from an event loop, and seeing the bound.
//!
//! One executor thread keeps a ticker task running every millisecond while
//! four CPU-heavy computations run on a 2-thread pool with a queue of 2: the
//! ticker keeps ticking (the loop never runs the heavy work itself), the
//! fifth submission is refused with `Full`, and the results come back
//! through cross-thread wakes.
//!
//! Run with `cargo run -p pool --example offload`.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// About 30 ms of arithmetic on one core, different for each seed.
fn heavy(seed: u64) -> u64 {
    let mut x = seed;
    let end = Instant::now() + Duration::from_millis(30);
    while Instant::now() < end {
        for _ in 0..1000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
    }
    x
}

fn main() {
    let pool = pool::Pool::builder()
        .max_threads(2)
        .queue_bound(2)
        .name("offload")
        .build();
    executor::block_on(async {
        let ticks = Rc::new(Cell::new(0u32));
        let ticker = {
            let ticks = ticks.clone();
            executor::spawn(async move {
                loop {
                    executor::sleep(Duration::from_millis(1)).await;
                    ticks.set(ticks.get() + 1);
                }
            })
        };
        let handles: Vec<_> = (1..=4)
            .map(|seed| pool.spawn_blocking(move || heavy(seed)).expect("room"))
            .collect();
        match pool.spawn_blocking(|| heavy(5)) {
            Ok(_) => println!("fifth task accepted (a thread was already free)"),
            Err(e) => println!("fifth task refused: {e}"),
        }
        println!("pool while busy: {:?}", pool.stats());
        let started = Instant::now();
        for h in handles {
            let v = h.await.expect("no panic");
            println!("result {v:#018x} after {:?}", started.elapsed());
        }
        println!(
            "the event loop ticked {} times meanwhile (about one per ms)",
            ticks.get()
        );
        ticker.abort();
    });
    println!("pool at the end: {:?}", pool.stats());
}
