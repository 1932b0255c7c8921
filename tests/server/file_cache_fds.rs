//! The open-file cache under fd pressure: with the fd limit lowered below
//! what the cache could hold, files are still served (the cache closes
//! entries instead of taking the last fds) and new connections are still
//! accepted.

use std::time::Duration;

use crate::harness::{Server, TempDir, runtimes, set_fd_limit, wait_until};

/// The server's fd limit in this test; the cache is allowed 1,000 entries.
const LIMIT: u64 = 128;
/// Distinct files requested: more than the limit.
const FILES: usize = 300;

#[test]
fn the_cache_gives_fds_back_instead_of_starving_accepts() {
    let dir = TempDir::new("cache-fds");
    for i in 0..FILES {
        dir.write(&format!("f{i}.txt"), format!("file {i}\n").as_bytes());
    }
    let root = dir.path().to_str().unwrap();
    for rt in runtimes() {
        let args = ["--root", root, "--file-cache", "1000", "--expose", "stats"];
        let server = Server::start(rt, &args);
        set_fd_limit(server.pid(), LIMIT);
        let mut c = server.connect();
        for i in 0..FILES {
            let r = c.get(&format!("/f{i}.txt"));
            assert_eq!(r.status, 200, "[{rt}] /f{i}.txt: {r:?}");
            assert_eq!(r.body, format!("file {i}\n").as_bytes(), "[{rt}]");
        }
        // This connection's stats: under fork the cache is its child's.
        let stats = c.stats();
        let (entries, shed) = (
            stats.get("file_cache.entries"),
            stats.get("file_cache.shed"),
        );
        assert!(shed > 0, "[{rt}] nothing shed: {}", stats.0);
        assert!(
            entries < LIMIT,
            "[{rt}] {entries} entries under a limit of {LIMIT}"
        );
        // New connections, all open at once, are accepted and answered.
        let mut more: Vec<_> = (0..16).map(|_| server.connect()).collect();
        for m in &mut more {
            let r = m.get("/f0.txt");
            assert_eq!(r.status, 200, "[{rt}] a new connection: {r:?}");
        }
        if crate::harness::is_fork(rt) {
            // Each new connection is a new child with the parent's (empty)
            // cache: a hit needs a second request on the same connection.
            let m = &mut more[0];
            assert_eq!(m.get("/f0.txt").status, 200, "[{rt}]");
            assert!(m.stats().get("file_cache.hits") > 0, "[{rt}] a hit");
            continue;
        }
        assert!(
            wait_until(Duration::from_secs(2), Duration::from_millis(50), || {
                server.stats().get("file_cache.hits") > 0
            }),
            "[{rt}] the cache serves hits again"
        );
    }
}
