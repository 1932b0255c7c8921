//! Throughput of the `sha256` job: hashes 64 MiB through the same call a
//! pool thread makes ([`JobKind::run`]) and prints the median of 5 runs.
//!
//! ```sh
//! cargo run --release -p site --example sha256_throughput
//! ```

use std::hint::black_box;
use std::time::Instant;

use site::jobs::{JobKind, JobValue};

const LEN: usize = 64 << 20;
const RUNS: usize = 5;

fn main() {
    // Not all zeros, so nothing can shortcut a constant input.
    let input: Vec<u8> = (0..LEN).map(|i| (i * 31 + 7) as u8).collect();
    let mut mb_per_s: Vec<f64> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            let out = JobKind::Sha256.run(black_box(&input));
            let secs = start.elapsed().as_secs_f64();
            assert!(matches!(out, Ok(JobValue::Text(ref hex)) if hex.len() == 64));
            LEN as f64 / secs / 1e6
        })
        .collect();
    mb_per_s.sort_by(f64::total_cmp);
    #[cfg(target_arch = "x86_64")]
    let sha_ni = std::is_x86_feature_detected!("sha");
    #[cfg(not(target_arch = "x86_64"))]
    let sha_ni = false;
    println!(
        "sha256 job, 64 MiB: median {:.0} MB/s of {RUNS} runs (min {:.0}, max {:.0}; CPU has SHA-NI: {sha_ni})",
        mb_per_s[RUNS / 2],
        mb_per_s[0],
        mb_per_s[RUNS - 1],
    );
}
