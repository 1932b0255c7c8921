//! Step 7: sleeps, woken by the reactor's wait with the nearest deadline.
//!
//! Run: `cargo run -p learn --example step07_timers`.

use std::time::{Duration, Instant};

use learn::step05_executor::Executor;
use learn::step07_timers::{block_on, sleep};

fn main() {
    let executor = Executor::new();
    let start = Instant::now();
    for ms in [300u64, 100, 200] {
        executor.spawn(async move {
            sleep(Duration::from_millis(ms)).await;
            println!(
                "{:>4} ms: the {ms} ms sleep ended",
                start.elapsed().as_millis()
            );
        });
    }
    // The main task outlasts the three; one thread, no busy waiting.
    block_on(&executor, sleep(Duration::from_millis(350)));
}
