//! Step 4: one future, one hand-written waker.
//!
//! Run: `cargo run -p learn --example step04_future_waker`. A thread sends
//! a value after 100 ms; `block_on` polls, parks, is woken, polls again.

use std::thread;
use std::time::{Duration, Instant};

use learn::step04_future_waker::{block_on, channel};

fn main() {
    let (tx, rx) = channel();
    let start = Instant::now();
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        tx.send("a value from another thread");
    });
    let (value, polls) = block_on(rx);
    println!(
        "got {value:?} after {:?}, in {polls} polls",
        start.elapsed()
    );
}
