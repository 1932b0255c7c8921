//! Does deciding a static file answer stall the event loop, and would the
//! blocking pool help? Measures, on this machine's filesystem with a warm
//! page cache:
//!
//! - what `StaticRoot::serve` costs on the loop per request (resolve the
//!   path beneath the root with `openat2`, `fstat`, build the head; for a
//!   directory, list it), for a small file, a deep path, a 404, and
//!   directory listings of 1,000 and 10,000 entries;
//! - what handing work to the blocking pool costs: an empty closure's round
//!   trip from an executor task (queue, wake a pool thread, cross-thread
//!   `Waker::wake` back through the executor's inbox and eventfd), and how
//!   much of it is CPU time of the loop's own thread.
//!
//! Offloading pays when the work costs more than the round trip *and* the
//! loop has other connections to serve meanwhile. Run with
//! `cargo run --release -p httplite --example static_open_cost`.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use http1::{Decoder, Message, Request};
use httplite::static_files::{StaticReply, StaticRoot};

fn request(path: &str) -> Request {
    let mut buf = BytesMut::from(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
    match Decoder::new(http1::Limits::default()).decode(&mut buf) {
        Ok(Some(Message::Head(req))) => req,
        other => panic!("bad request {path}: {other:?}"),
    }
}

/// p50, p99 and max of `samples`.
fn summary(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99), *samples.last().expect("samples"))
}

fn row(name: &str, samples: Vec<Duration>) {
    let n = samples.len();
    let (p50, p99, max) = summary(samples);
    println!("{name:<34} {n:>6} {p50:>12.1?} {p99:>12.1?} {max:>12.1?}");
}

/// Times deciding the answer to `path` as the loop would without a pool:
/// `serve`, plus building the listing when the answer is one.
fn time_serve(root: &StaticRoot, path: &str, n: usize) -> Vec<Duration> {
    let req = request(path);
    let answer = || match root.serve(&req) {
        StaticReply::ListDir {
            dir,
            url_path,
            view,
        } => StaticReply::list(&dir, &url_path, &view),
        other => other,
    };
    // One untimed call: the first touch of a path pays for the dentry cache.
    drop(answer());
    (0..n)
        .map(|_| {
            let t = Instant::now();
            let reply = answer();
            let d = t.elapsed();
            drop(reply);
            d
        })
        .collect()
}

/// CPU time the calling thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn make_tree(dir: &Path) -> std::io::Result<()> {
    std::fs::write(dir.join("small.txt"), vec![b'x'; 1024])?;
    let deep = dir.join("a/b/c/d/e/f");
    std::fs::create_dir_all(&deep)?;
    std::fs::write(deep.join("file.txt"), b"deep")?;
    for (name, entries) in [("dir1k", 1_000), ("dir10k", 10_000)] {
        let d = dir.join(name);
        std::fs::create_dir_all(&d)?;
        for i in 0..entries {
            std::fs::write(d.join(format!("entry-{i:05}.txt")), b"")?;
        }
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let dir = std::env::temp_dir().join(format!("httplite-open-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    make_tree(&dir)?;
    let root = StaticRoot::new(&dir, true)?;

    println!(
        "{:<34} {:>6} {:>12} {:>12} {:>12}",
        "on the event loop", "n", "p50", "p99", "max"
    );
    row(
        "serve /small.txt (1 KiB file)",
        time_serve(&root, "/small.txt", 20_000),
    );
    row(
        "serve /a/b/c/d/e/f/file.txt",
        time_serve(&root, "/a/b/c/d/e/f/file.txt", 20_000),
    );
    row(
        "serve /missing.txt (404)",
        time_serve(&root, "/missing.txt", 20_000),
    );
    row(
        "serve /dir1k/ (listing, 1k)",
        time_serve(&root, "/dir1k/", 500),
    );
    row(
        "serve /dir10k/ (listing, 10k)",
        time_serve(&root, "/dir10k/", 50),
    );

    let pool = pool::Pool::builder().max_threads(1).build();
    let (round_trips, loop_cpu) = executor::block_on(async {
        // Warm: the pool thread exists and is idle before timing starts.
        pool.spawn_blocking(|| ())
            .expect("room")
            .await
            .expect("ran");
        let mut v = Vec::with_capacity(20_000);
        let cpu0 = thread_cpu();
        for _ in 0..20_000 {
            let t = Instant::now();
            pool.spawn_blocking(|| ())
                .expect("room")
                .await
                .expect("ran");
            v.push(t.elapsed());
        }
        (v, (thread_cpu() - cpu0) / 20_000)
    });
    println!("{:<34}", "through the blocking pool");
    row("empty closure, round trip", round_trips);
    // What the loop's own thread spends per offload (submit, wake-up,
    // eventfd, inbox), whatever it does while the pool works.
    println!(
        "{:<34} {:>6} {:>12.1?}",
        "  the loop thread's CPU (mean)", 20_000, loop_cpu
    );

    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
