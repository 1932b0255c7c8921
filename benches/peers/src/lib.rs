//! What the three peer servers share, so that they take the same flags and
//! treat the same paths alike: a comparison is only fair if every server
//! is asked the same thing.

use std::net::SocketAddr;

/// `[--bind 127.0.0.1:8080] [--workers 1]`, as the benchmark scripts pass
/// them (and httplite takes them); anything else panics with its name.
pub fn args() -> (SocketAddr, usize) {
    let mut bind: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let mut workers = 1;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bind" => bind = it.next().expect("--bind ADDR").parse().expect("address"),
            "--workers" => workers = it.next().expect("--workers N").parse().expect("number"),
            other => panic!("unknown argument {other}"),
        }
    }
    (bind, workers)
}

/// Runs `worker(addr)` on one thread per `--workers` (each worker binds its
/// own SO_REUSEPORT listener), as httplite's reuseport mode does, and waits
/// for them.
pub fn run_workers(worker: fn(SocketAddr)) {
    let (addr, workers) = args();
    let handles: Vec<_> = (0..workers)
        .map(|_| std::thread::spawn(move || worker(addr)))
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

/// The `N` of a request target `/sleep?ms=N` or `/_httplite/sleep?ms=N`
/// (other query parameters allowed), or `None`: how long the sleep
/// workload asks the server to wait before answering.
pub fn sleep_ms(target: &str) -> Option<u64> {
    let (path, query) = target.split_once('?')?;
    if path != "/sleep" && path != "/_httplite/sleep" {
        return None;
    }
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("ms="))
        .and_then(|v| v.parse().ok())
}
