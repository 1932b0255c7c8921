//! Binary upgrade on SIGUSR2: under a bounded load of new connections and
//! keep-alive requests, no connection is refused and no request fails
//! across the hand-over; and an upgrade whose new process fails leaves the
//! old one serving.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::harness::*;

/// Most requests one load thread sends (the loop is bounded even if the
/// stop flag never comes).
const MAX_PER_THREAD: u64 = 50_000;
/// Threads opening a new connection per request.
const CONNECTORS: usize = 3;

#[derive(Debug, Default)]
struct Counts {
    ok: AtomicU64,
    refused: AtomicU64,
    connect_errors: AtomicU64,
    failed: AtomicU64,
    /// Keep-alive requests that found their connection closed before any
    /// answer (the server closed it idle) and were sent again on a new
    /// one, as HTTP clients do for idempotent requests.
    retried: AtomicU64,
    /// What the first failures were.
    why: std::sync::Mutex<Vec<String>>,
}

impl Counts {
    fn fail(&self, why: String) {
        self.failed.fetch_add(1, Relaxed);
        let mut w = self.why.lock().unwrap();
        if w.len() < 5 {
            w.push(why);
        }
    }
}

/// One `GET /_httplite/plaintext` on a new connection, with `Connection:
/// close`; checks the whole answer.
fn one_request(addr: SocketAddr, c: &Counts) {
    let mut s = match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        Ok(s) => s,
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            c.refused.fetch_add(1, Relaxed);
            return;
        }
        Err(_) => {
            c.connect_errors.fetch_add(1, Relaxed);
            return;
        }
    };
    let _ = s.set_read_timeout(Some(IO_TIMEOUT));
    let _ = s.set_write_timeout(Some(IO_TIMEOUT));
    let mut answer = Vec::new();
    let sent = s.write_all(&get_close("/_httplite/plaintext"));
    let read = sent.and_then(|_| s.read_to_end(&mut answer));
    let text = String::from_utf8_lossy(&answer);
    if read.is_ok() && text.starts_with("HTTP/1.1 200 OK") && text.ends_with("Hello, World!") {
        c.ok.fetch_add(1, Relaxed);
    } else {
        c.fail(format!("new connection: {read:?} {text:?}"));
    }
}

/// Keep-alive requests on one connection, reconnecting when the server
/// closes it.
fn keepalive_loop(addr: SocketAddr, c: &Counts, stop: &AtomicBool) {
    let mut client: Option<Client> = None;
    for _ in 0..MAX_PER_THREAD {
        if stop.load(Relaxed) {
            return;
        }
        let mut retried = false;
        loop {
            let conn = match client.as_mut() {
                Some(conn) => conn,
                None => match Client::try_connect(addr) {
                    Ok(conn) => client.insert(conn),
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                        c.refused.fetch_add(1, Relaxed);
                        break;
                    }
                    Err(_) => {
                        c.connect_errors.fetch_add(1, Relaxed);
                        break;
                    }
                },
            };
            let sent = conn.try_send(&get_req("/_httplite/plaintext"));
            match sent.and_then(|_| conn.try_read_response(false)) {
                Ok(r) if r.status == 200 => {
                    c.ok.fetch_add(1, Relaxed);
                    if r.says_close() {
                        client = None;
                    }
                    break;
                }
                Ok(r) => {
                    c.fail(format!("keep-alive: status {}", r.status));
                    client = None;
                    break;
                }
                // Closed before any answer: the request was not taken.
                Err(_) if !retried && conn.buffered().is_empty() => {
                    c.retried.fetch_add(1, Relaxed);
                    retried = true;
                    client = None;
                }
                Err(e) => {
                    c.fail(format!("keep-alive: {e} after {:?}", conn.buffered()));
                    client = None;
                    break;
                }
            }
        }
    }
}

/// The PID in `upgrade: new process PID is ready`.
fn new_pid(stderr: &str) -> Option<i32> {
    let rest = stderr.split("upgrade: new process ").nth(1)?;
    rest.split(' ').next()?.parse().ok()
}

/// Stops a process that is not our child (the old server started it):
/// SIGTERM, then waits until it is gone (or a zombie).
fn stop_pid(pid: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions; `pid` was
    // reported by the server we started, as the process it started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let gone = wait_until(Duration::from_secs(10), Duration::from_millis(20), || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_or(true, |s| s.contains("State:\tZ"))
    });
    if !gone {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("the upgraded process {pid} did not stop on SIGTERM");
    }
}

#[test]
fn upgrade_under_load_refuses_no_connection() {
    let _heavy = heavy_lock();
    for rt in runtimes() {
        // A fork parent accepts itself: it has no dispatch modes.
        let modes: &[&str] = if is_fork(rt) {
            &["fork"]
        } else {
            &["acceptor", "reuseport"]
        };
        for &mode in modes {
            let dispatch = ["--dispatch", mode];
            let args: &[&str] = if is_fork(rt) { &[] } else { &dispatch };
            let mut server = Server::start(rt, args);
            let addr = server.addr();
            let counts = Arc::new(Counts::default());
            let stop = Arc::new(AtomicBool::new(false));
            let mut threads = Vec::new();
            for _ in 0..CONNECTORS {
                let (c, stop) = (counts.clone(), stop.clone());
                threads.push(std::thread::spawn(move || {
                    for _ in 0..MAX_PER_THREAD {
                        if stop.load(Relaxed) {
                            break;
                        }
                        one_request(addr, &c);
                    }
                }));
            }
            let (c, s) = (counts.clone(), stop.clone());
            threads.push(std::thread::spawn(move || keepalive_loop(addr, &c, &s)));

            // Load under way before the upgrade.
            let loaded = wait_until(Duration::from_secs(10), Duration::from_millis(10), || {
                counts.ok.load(Relaxed) >= 100
            });
            assert!(loaded, "[{rt} {mode}] no load before the upgrade");
            let before = counts.ok.load(Relaxed);
            server.signal(libc::SIGUSR2);
            let ready = wait_until(Duration::from_secs(20), Duration::from_millis(10), || {
                new_pid(&server.stderr()).is_some() || server.stderr().contains("upgrade failed")
            });
            let pid = new_pid(&server.stderr());
            assert!(ready && pid.is_some(), "[{rt} {mode}] {}", server.stderr());
            let pid = pid.unwrap();
            let old_gone = wait_until(Duration::from_secs(15), Duration::from_millis(10), || {
                server.has_exited().is_some()
            });
            assert!(old_gone, "[{rt} {mode}] the old process did not exit");
            let at_exit = counts.ok.load(Relaxed);
            // The new process alone now, serving the load.
            let served = wait_until(Duration::from_secs(10), Duration::from_millis(10), || {
                counts.ok.load(Relaxed) >= at_exit + 100
            });
            stop.store(true, Relaxed);
            for t in threads {
                t.join().unwrap();
            }
            let after = counts.ok.load(Relaxed) - at_exit;
            stop_pid(pid);
            let status = server.wait_exit(Duration::from_secs(5)).unwrap();
            let c = &*counts;
            eprintln!(
                "[{rt} {mode}] upgrade under load: {} ok ({before} before SIGUSR2, {after} after \
                 the old process exited), {} refused, {} other connect errors, {} failed, {} \
                 keep-alive retries",
                c.ok.load(Relaxed),
                c.refused.load(Relaxed),
                c.connect_errors.load(Relaxed),
                c.failed.load(Relaxed),
                c.retried.load(Relaxed)
            );
            assert_eq!(status.code(), Some(0), "[{rt} {mode}] {}", server.stderr());
            assert_eq!(
                c.refused.load(Relaxed),
                0,
                "[{rt} {mode}] refused connections"
            );
            assert_eq!(c.connect_errors.load(Relaxed), 0, "[{rt} {mode}]");
            assert_eq!(
                c.failed.load(Relaxed),
                0,
                "[{rt} {mode}] failed requests: {:?}",
                c.why.lock().unwrap()
            );
            assert!(served, "[{rt} {mode}] the new process served no load alone");
            assert!(before > 0 && after > 0, "[{rt} {mode}] no load on one side");
        }
    }
}

#[test]
fn a_failed_upgrade_keeps_the_old_process_serving() {
    for rt in runtimes() {
        let dir = TempDir::new("upgrade-fails");
        let exe = dir.path().join("httplite");
        std::fs::copy(env!("CARGO_BIN_EXE_httplite"), &exe).unwrap();
        let mut server =
            Server::start_with(rt, &[], |cmd| rebuild_command(&cmd, exe.as_os_str(), &[]));
        // The "new build" is broken.
        let broken = dir.write(
            "broken",
            b"#!/bin/sh\necho 'httplite: error: a broken build' >&2\nexit 3\n",
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&broken, &exe).unwrap();

        server.signal(libc::SIGUSR2);
        let failed = wait_until(Duration::from_secs(20), Duration::from_millis(20), || {
            server.stderr().contains("upgrade failed")
        });
        let err = server.stderr();
        assert!(failed, "[{rt}] {err}");
        assert!(
            err.contains("a broken build"),
            "[{rt}] the new process's own words: {err}"
        );
        assert!(err.contains("exit status: 3"), "[{rt}] {err}");
        assert!(err.contains("still serving"), "[{rt}] {err}");
        // Still serving, on the same sockets, new connections included.
        for _ in 0..3 {
            assert_eq!(server.get("/_httplite/health").status, 200, "[{rt}]");
        }
        // And a later SIGTERM still stops it cleanly (nothing left held).
        let t = Instant::now();
        assert!(server.terminate().success(), "[{rt}]");
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}

/// Whether process `pid` is gone (or a zombie).
fn gone(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).map_or(true, |s| s.contains("State:\tZ"))
}

#[test]
fn a_stop_during_an_upgrade_stops_both_processes() {
    for rt in runtimes() {
        for drain in ["0s", "1s"] {
            let dir = TempDir::new("upgrade-stop");
            let exe = dir.path().join("httplite");
            std::fs::copy(env!("CARGO_BIN_EXE_httplite"), &exe).unwrap();
            let mut server = Server::start_with(rt, &["--drain-delay", drain], |cmd| {
                rebuild_command(&cmd, exe.as_os_str(), &[])
            });
            let addr = server.addr();
            // The "new build" takes 1.5 s to start: the SIGTERM comes after
            // it is spawned and before it reports ready.
            let real = dir.path().join("httplite.real");
            std::fs::copy(env!("CARGO_BIN_EXE_httplite"), &real).unwrap();
            let slow = dir.write(
                "slow",
                format!("#!/bin/sh\nsleep 1.5\nexec '{}' \"$@\"\n", real.display()).as_bytes(),
            );
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::rename(&slow, &exe).unwrap();

            server.signal(libc::SIGUSR2);
            // The new build (its wrapper, asleep) has been spawned.
            let spawned = wait_until(Duration::from_secs(5), Duration::from_millis(5), || {
                has_children(server.pid())
            });
            assert!(spawned, "[{rt} {drain}] SIGUSR2 spawned nothing");
            server.signal(libc::SIGTERM);
            let status = server.wait_exit(Duration::from_secs(20));
            let err = server.stderr();
            assert_eq!(
                status.and_then(|s| s.code()),
                Some(0),
                "[{rt} {drain}] {err}"
            );
            assert!(
                err.contains("upgrade abandoned: this process is stopping"),
                "[{rt} {drain}] {err}"
            );
            assert!(
                !err.contains("stops accepting and drains"),
                "[{rt} {drain}] {err}"
            );
            let pid: i32 = err
                .split("new process ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("[{rt} {drain}] no pid in {err}"));
            assert!(gone(pid), "[{rt} {drain}] the new process {pid} still runs");
            // Nobody serves on the address any more. (The wrapper's `sleep`,
            // orphaned when its shell got the SIGTERM, holds the passed
            // sockets until it ends, 1.5 s after the spawn: wait for that.)
            let refused = wait_until(Duration::from_secs(5), Duration::from_millis(50), || {
                TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err()
            });
            assert!(refused, "[{rt} {drain}] still accepting");
        }
    }
}

/// An upgrade hands the admin listener over as an admin listener: an
/// `--admin` with port 0 takes its own socket back, not the public one on
/// the same address.
#[test]
fn an_upgrade_keeps_each_listener_in_its_role() {
    for rt in runtimes() {
        let site = TempDir::new("upgrade-admin");
        site.write("a.txt", b"a file\n");
        let root = site.path().display().to_string();
        let mut server = Server::start(rt, &["--root", &root, "--admin", "127.0.0.1:0"]);
        let admin = server.admin_addr().expect("an admin listener");
        server.signal(libc::SIGUSR2);
        let ready = wait_until(Duration::from_secs(20), Duration::from_millis(10), || {
            new_pid(&server.stderr()).is_some() || server.stderr().contains("upgrade failed")
        });
        let pid = new_pid(&server.stderr());
        assert!(ready && pid.is_some(), "[{rt}] {}", server.stderr());
        let old_gone = wait_until(Duration::from_secs(15), Duration::from_millis(10), || {
            server.has_exited().is_some()
        });
        assert!(old_gone, "[{rt}] the old process did not exit");
        // The new process alone: the file on the public port, the
        // endpoints on the admin port, and not the other way round.
        assert_eq!(server.get("/a.txt").text(), "a file\n", "[{rt}]");
        assert_eq!(server.get("/_httplite/stats").status, 404, "[{rt}]");
        let mut c = Client::try_connect_plain(admin).expect("the admin listener");
        let r = c.get("/_httplite/stats");
        assert_eq!(r.status, 200, "[{rt}] {r:?}");
        assert!(r.text().contains("\"state\":\"serving\""), "[{rt}]");
        assert_eq!(c.get("/a.txt").status, 404, "[{rt}]");
        stop_pid(pid.unwrap());
    }
}

/// The targets of the request slices (`GET PATH`, the target in
/// `args.path`) of a closed timeline file, which must be strict JSON.
#[cfg(feature = "trace")]
fn request_slices(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let events: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_else(|e| {
        let tail = &text[text.len().saturating_sub(300)..];
        panic!("{}: not valid JSON ({e}): ...{tail:?}", path.display())
    });
    events
        .iter()
        .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("GET ")))
        .filter_map(|e| e["args"]["path"].as_str())
        .map(str::to_string)
        .collect()
}

#[cfg(feature = "trace")]
#[test]
fn an_upgrade_keeps_both_processes_timelines() {
    for rt in runtimes() {
        let dir = TempDir::new("upgrade-timeline");
        let file = dir.path().join("timeline.json");
        let file_arg = file.to_str().unwrap();
        let args = [
            "--trace-format",
            "chrome",
            "--trace-file",
            file_arg,
            "--trace-rate",
            "0",
        ];
        let mut server = Server::start(rt, &args);
        assert_eq!(server.get("/_httplite/plaintext?old").status, 200);
        server.signal(libc::SIGUSR2);
        let ready = wait_until(Duration::from_secs(20), Duration::from_millis(10), || {
            new_pid(&server.stderr()).is_some() || server.stderr().contains("upgrade failed")
        });
        let pid = new_pid(&server.stderr());
        assert!(ready && pid.is_some(), "[{rt}] {}", server.stderr());
        let pid = pid.unwrap();
        let old_gone = wait_until(Duration::from_secs(15), Duration::from_millis(10), || {
            server.has_exited().is_some()
        });
        assert!(old_gone, "[{rt}] the old process did not exit");
        // The new process alone answers now.
        assert_eq!(server.get("/_httplite/plaintext?new").status, 200);
        stop_pid(pid);
        let old = request_slices(&file);
        assert!(
            old.iter().any(|s| s == "/_httplite/plaintext?old"),
            "[{rt}] the old process's request: {old:?}"
        );
        assert!(!old.iter().any(|s| s.ends_with("?new")), "[{rt}] {old:?}");
        let new_file = dir.path().join(format!("timeline.json.{pid}"));
        let err = server.stderr();
        assert!(
            err.contains(new_file.to_str().unwrap()),
            "[{rt}] the new process names its file: {err}"
        );
        let new = request_slices(&new_file);
        assert!(
            new.iter().any(|s| s == "/_httplite/plaintext?new"),
            "[{rt}] the new process's request: {new:?}"
        );
        assert!(!new.iter().any(|s| s.ends_with("?old")), "[{rt}] {new:?}");
    }
}

/// Whether process `pid` has a child: some process in `/proc` whose parent
/// it is (`/proc/PID/task/TID/children` needs a kernel option this may lack).
fn has_children(pid: u32) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        let Ok(stat) = std::fs::read_to_string(p.path().join("stat")) else {
            return false;
        };
        // The 4th field, after the command name in parentheses.
        stat.rfind(')')
            .and_then(|end| stat[end + 2..].split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok())
            == Some(pid)
    })
}
