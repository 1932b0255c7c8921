//! Two ways to pass a ball between two coroutines.
//!
//! 1. By hand: a `Coroutine` is resumed by its owner and suspends itself,
//!    handing a value back. Each `resume` is one switch in, each `suspend`
//!    one switch out.
//! 2. Scheduled: two coroutines on a runtime take turns with `yield_now`,
//!    which puts the caller at the back of the run queue. FIFO order makes
//!    them alternate.
//!
//! Run: `cargo run -p coroutine --example ping_pong`

use coroutine::{Coroutine, CoroutineResult};

fn main() {
    // 1. By hand.
    let mut pinger = Coroutine::new(|y| {
        for i in 0..3 {
            println!(
                "  ping {i} (on coroutine {})",
                coroutine::current_id().unwrap()
            );
            y.suspend(i);
        }
        "pinger done"
    });
    loop {
        match pinger.resume() {
            CoroutineResult::Yield(i) => println!("pong {i} (on the main stack)"),
            CoroutineResult::Return(msg) => {
                println!("{msg}");
                break;
            }
        }
    }

    // 2. Scheduled.
    coroutine::run(|| {
        let players: Vec<_> = ["ping", "pong"]
            .into_iter()
            .map(|name| {
                coroutine::spawn(move || {
                    for i in 0..3 {
                        println!("{name} {i}");
                        coroutine::yield_now();
                    }
                })
            })
            .collect();
        for p in players {
            p.join().unwrap();
        }
    });
}
