//! The smallest program on the executor: block on a few concurrent sleeps and
//! watch them finish in deadline order, not spawn order.
//!
//! Run: `cargo run -p executor --example sleep`

use std::time::{Duration, Instant};

fn main() {
    let start = Instant::now();
    executor::block_on(async move {
        let mut handles = Vec::new();
        for ms in [30u64, 10, 20] {
            handles.push(executor::spawn(async move {
                executor::sleep(Duration::from_millis(ms)).await;
                println!("{:>6.1?}  task sleeping {ms} ms woke up", start.elapsed());
                ms
            }));
        }
        let total: u64 = {
            let mut t = 0;
            for h in handles {
                t += h.await.expect("task failed");
            }
            t
        };
        println!(
            "{:>6.1?}  all done: {total} ms of sleeping took ~30 ms of wall time",
            start.elapsed()
        );
    });
}
