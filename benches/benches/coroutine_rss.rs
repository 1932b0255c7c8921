//! Memory per suspended coroutine vs per pending executor task: spawns
//! 100,000 of each (each parked on a long sleep), then prints the growth of
//! the process's resident set size (`VmRSS` in `/proc/self/status`).
//!
//! `cargo bench -p httplite-benches --bench coroutine_rss`
//!
//! A suspended coroutine costs the stack pages it has touched (its top page
//! or two: the control block, the closure and the frames down to the
//! blocking call), plus one small heap cell. A pending task costs its
//! future's state machine and its header, on the heap.

use std::time::Duration;

const N: usize = 100_000;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn report(what: &str, before: u64, after: u64) {
    let grew = after.saturating_sub(before);
    println!(
        "{what:>32}: RSS +{:>8.1} MiB per {N} ({:>6.0} bytes each)",
        grew as f64 / 1024.0,
        grew as f64 * 1024.0 / N as f64
    );
}

fn main() {
    // Each measurement runs in a fresh process, so that neither sees the
    // heap the other freed. (Criterion-style arguments are ignored.)
    match std::env::var("COROUTINE_RSS_CASE").as_deref() {
        Ok("coroutines") => coroutines(),
        Ok("tasks") => tasks(),
        _ => {
            for case in ["coroutines", "tasks"] {
                let status = std::process::Command::new(std::env::current_exe().unwrap())
                    .env("COROUTINE_RSS_CASE", case)
                    .status()
                    .unwrap();
                assert!(status.success());
            }
        }
    }
}

fn coroutines() {
    let ours = coroutine::Runtime::new().unwrap();
    let before = rss_kib();
    ours.block_on(|| {
        for _ in 0..N {
            coroutine::spawn(|| coroutine::sleep(Duration::from_secs(3600)));
        }
        coroutine::yield_now(); // every coroutine runs once and parks
        let after = rss_kib();
        report("suspended coroutines (64 KiB)", before, after);
        println!(
            "{:>32}  guard pages: {:?}; stacks mapped: {}",
            "",
            coroutine::guard_kind(),
            coroutine::pool_stats().mmaps
        );
    });
}

fn tasks() {
    let ex = executor::Runtime::new().unwrap();
    let before = rss_kib();
    ex.block_on(async {
        for _ in 0..N {
            executor::spawn(executor::sleep(Duration::from_secs(3600)));
        }
        executor::yield_now().await; // every task is polled once
        let after = rss_kib();
        report("pending executor tasks", before, after);
    });
}
