//! The open-file cache (`--file-cache`): a file changed on disk while a
//! client keeps requesting it is served fresh (at once with
//! `--file-cache-valid 0`, within the validity otherwise), a body is never
//! shorter or longer than its Content-Length, and the stats count hits and
//! invalidations. Every case on every runtime, over one keep-alive
//! connection.

use std::time::Duration;

use crate::harness::{Client, Server, TempDir, runtimes, wait_until};

/// GET `path` on `c`: status and body, checking Content-Length against the
/// bytes that came.
fn get(c: &mut Client, path: &str) -> (u16, String) {
    let r = c.get(path);
    if let Some(len) = r.header("content-length") {
        assert_eq!(len.parse::<usize>().unwrap(), r.body.len(), "{path}: {r:?}");
    }
    (r.status, r.text())
}

#[test]
fn changes_on_disk_are_served_at_once_with_validity_zero() {
    for rt in runtimes() {
        let dir = TempDir::new("fcache");
        let root = dir.path().to_str().unwrap().to_owned();
        dir.write("a.txt", b"version one");
        // Stats on the connection itself (fork: each child's own cache).
        let server = Server::start(
            rt,
            &[
                "--root",
                &root,
                "--file-cache-valid",
                "0",
                "--expose",
                "stats",
            ],
        );
        let mut c = server.connect();
        assert_eq!(get(&mut c, "/a.txt"), (200, "version one".into()), "[{rt}]");
        assert_eq!(
            get(&mut c, "/a.txt"),
            (200, "version one".into()),
            "[{rt}] a hit"
        );

        // Replaced by rename, the usual deploy: another inode.
        dir.write("a.txt.new", b"version two, by rename");
        std::fs::rename(dir.path().join("a.txt.new"), dir.path().join("a.txt")).unwrap();
        let fresh = (200, "version two, by rename".to_string());
        assert_eq!(get(&mut c, "/a.txt"), fresh, "[{rt}] renamed");

        // Rewritten in place (same inode), shorter, then longer.
        std::fs::write(dir.path().join("a.txt"), b"short").unwrap();
        assert_eq!(
            get(&mut c, "/a.txt"),
            (200, "short".into()),
            "[{rt}] shorter"
        );
        let long = "a longer body, written in place over the short one";
        std::fs::write(dir.path().join("a.txt"), long).unwrap();
        assert_eq!(get(&mut c, "/a.txt"), (200, long.into()), "[{rt}] longer");

        // Deleted, then created again (a cached 404 must not stick).
        std::fs::remove_file(dir.path().join("a.txt")).unwrap();
        assert_eq!(get(&mut c, "/a.txt").0, 404, "[{rt}] deleted");
        assert_eq!(get(&mut c, "/a.txt").0, 404, "[{rt}] still deleted");
        dir.write("a.txt", b"back again");
        assert_eq!(
            get(&mut c, "/a.txt"),
            (200, "back again".into()),
            "[{rt}] recreated"
        );

        // A directory swapped in for the file.
        std::fs::remove_file(dir.path().join("a.txt")).unwrap();
        std::fs::create_dir(dir.path().join("a.txt")).unwrap();
        let r = c.get("/a.txt");
        assert_eq!(r.status, 301, "[{rt}] now a directory: {r:?}");
        assert_eq!(r.header("location"), Some("/a.txt/"), "[{rt}]");

        // A permission change is a change too (ctime): the entry goes.
        dir.write("b.txt", b"bee");
        assert_eq!(get(&mut c, "/b.txt"), (200, "bee".into()), "[{rt}]");
        // This connection's stats: under fork the cache is its child's.
        let before = c.stats().get("file_cache.invalidations");
        let perms = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(dir.path().join("b.txt"), perms).unwrap();
        assert_eq!(get(&mut c, "/b.txt"), (200, "bee".into()), "[{rt}]");
        let stats = c.stats();
        assert!(
            stats.get("file_cache.invalidations") > before,
            "[{rt}] {}",
            stats.0
        );
        assert!(stats.get("file_cache.hits") >= 1, "[{rt}] {}", stats.0);
        assert!(stats.get("file_cache.entries") >= 1, "[{rt}] {}", stats.0);
        assert!(
            stats.get("file_cache.revalidations") >= 1,
            "[{rt}] {}",
            stats.0
        );
    }
}

#[test]
fn a_change_is_served_within_the_validity_and_cache_can_be_off() {
    for rt in runtimes() {
        let dir = TempDir::new("fcache-valid");
        let root = dir.path().to_str().unwrap().to_owned();
        dir.write("a.txt", b"old");
        let server = Server::start(rt, &["--root", &root, "--file-cache-valid", "300ms"]);
        let mut c = server.connect();
        assert_eq!(get(&mut c, "/a.txt"), (200, "old".into()), "[{rt}]");
        dir.write("a.txt.new", b"new content");
        std::fs::rename(dir.path().join("a.txt.new"), dir.path().join("a.txt")).unwrap();
        // Old or new while the entry is trusted, but always whole; new once
        // the validity has passed.
        let fresh = wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
            let (status, body) = get(&mut c, "/a.txt");
            assert_eq!(status, 200, "[{rt}]");
            assert!(body == "old" || body == "new content", "[{rt}] {body:?}");
            body == "new content"
        });
        assert!(fresh, "[{rt}] never served the new file");

        // `--file-cache 0`: no cache, no stats for it, files still served.
        let off = Server::start(rt, &["--root", &root, "--file-cache", "0"]);
        let mut c = off.connect();
        assert_eq!(get(&mut c, "/a.txt"), (200, "new content".into()), "[{rt}]");
        assert!(!off.stats().has("file_cache"), "[{rt}]");
    }
}
