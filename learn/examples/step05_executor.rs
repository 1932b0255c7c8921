//! Step 5: many tasks on a FIFO executor, joined by their handles.
//!
//! Run: `cargo run -p learn --example step05_executor`.

use std::thread;
use std::time::Duration;

use learn::step04_future_waker::channel;
use learn::step05_executor::Executor;

fn main() {
    let executor = Executor::new();
    let mut handles = Vec::new();
    for i in 0..5u64 {
        let (tx, rx) = channel();
        // Each task waits for a value another thread sends later.
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20 * (5 - i)));
            tx.send(i * 10);
        });
        handles.push(executor.spawn(async move {
            let v = rx.await;
            println!("task {i} got {v}");
            v
        }));
    }
    let total = executor.block_on(async move {
        let mut total = 0;
        for handle in handles {
            total += handle.await;
        }
        total
    });
    println!("joined all five tasks: total {total}");
}
