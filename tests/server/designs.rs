//! What only the `threadpool` and `fork` designs promise (the rest of the
//! suite runs on them like on every design): the thread pool's event mode
//! (idle, slow and fragmented clients hold no thread; timeouts and
//! shutdown in its front), its connection mode (the bounded queue and its
//! 503, a keep-alive connection holding a pool thread), the fork parent's
//! single thread, the children without the listener, `--max-connections`
//! over children, stats across processes, a crashing child, the access
//! log's reopening under `fork`, the flags `fork` refuses, and its jobs
//! process (`fork_jobs`).

use std::time::Duration;

use crate::harness::{Client, Server, TempDir, get_close, get_req, run_binary, wait_until};

mod fork_jobs;
mod threadpool_event;

/// Every child process of `pid`, oldest first.
fn all_children(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    let mut kids: Vec<u32> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    kids.sort_unstable();
    kids
}

/// Whether process `pid` is a fork parent's jobs process (by its name).
fn is_jobs_process(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "httplite-jobs")
}

/// The connections' child processes of fork parent `pid` (not its jobs
/// process), oldest first.
fn children(pid: u32) -> Vec<u32> {
    let mut kids = all_children(pid);
    kids.retain(|&kid| !is_jobs_process(kid));
    kids
}

/// `readlink` of every fd of `pid` (`socket:[123]`, `/dev/null`, ...).
fn fd_links(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .map(|l| l.display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The `Threads:` line of `/proc/PID/status`.
fn thread_count(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A keep-alive connection that has had one answer (so it is being served).
fn served(server: &Server) -> Client {
    let mut c = server.connect();
    c.send(&get_req("/_httplite/plaintext"));
    assert_eq!(c.read_response().status, 200);
    c
}

#[test]
fn fork_refuses_incompatible_flags_in_one_line() {
    let cases: &[&[&str]] = &[
        &["--workers", "2"],
        &["--dispatch", "reuseport"],
        &["--threadpool-size", "2"],
    ];
    for extra in cases {
        let mut args = vec!["--runtime", "fork", "--bind", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let out = run_binary(&args, Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr.lines().count(),
            1,
            "{args:?}: one line, got {stderr}"
        );
        assert!(
            stderr.contains("--runtime fork does not take") && stderr.contains(extra[0]),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn fork_children_ignore_sighup_and_sigusr2() {
    // Their default action ends a process, and a signal sent to the whole
    // process group (a terminal's hang-up, `kill -HUP -PGID`) reaches every
    // connection's child, not only the parent that acts on it.
    let server = Server::start("fork", &[]);
    let mut open = served(&server);
    let kids = children(server.pid());
    assert_eq!(kids.len(), 1, "{kids:?}");
    for signal in [libc::SIGHUP, libc::SIGUSR2] {
        // SAFETY: kill(2) touches no memory; the pid is the server's child,
        // alive while its connection (`open`) is.
        unsafe { libc::kill(kids[0] as libc::pid_t, signal) };
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(open.get("/_httplite/plaintext").status, 200);
    assert_eq!(children(server.pid()), kids);
}

#[test]
fn fork_sighup_reopens_the_log_for_new_children_and_running_ones_keep_theirs() {
    let dir = TempDir::new("fork-reopen");
    let log = dir.path().join("access.log");
    let rotated = dir.path().join("access.log.1");
    let mut server = Server::start("fork", &["--access-log", log.to_str().unwrap()]);
    let mut before = served(&server);
    std::fs::rename(&log, &rotated).unwrap();
    server.signal(libc::SIGHUP);
    let reopened = wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
        server.stderr().contains("access log: reopened")
    });
    assert!(reopened, "{}", server.stderr());
    // The child forked before the SIGHUP still holds the renamed file; a
    // child forked after it writes to the new one.
    assert_eq!(before.get("/_httplite/plaintext?old").status, 200);
    assert_eq!(served(&server).get("/_httplite/plaintext?new").status, 200);
    assert!(server.terminate().success(), "{}", server.stderr());
    let old = std::fs::read_to_string(&rotated).unwrap();
    let new = std::fs::read_to_string(&log).unwrap();
    assert_eq!(old.lines().count(), 2, "{old}");
    assert!(old.contains("?old ") && !old.contains("?new "), "{old}");
    assert_eq!(new.lines().count(), 2, "{new}");
    assert!(new.contains("?new ") && !new.contains("?old "), "{new}");
}

#[test]
fn fork_parent_has_one_thread_and_children_close_the_listener() {
    let server = Server::start("fork", &[]);
    let _a = served(&server);
    let _b = served(&server);
    let kids = children(server.pid());
    assert_eq!(kids.len(), 2, "one child per open connection: {kids:?}");
    assert_eq!(
        thread_count(server.pid()),
        1,
        "the parent runs no other thread"
    );
    // The parent's sockets: the listener and the jobs process's door (its
    // copies of the connections are closed right after each fork; the
    // child may answer before the parent has run again, so that close is
    // waited for).
    let sockets = |pid: u32| -> Vec<String> {
        (fd_links(pid).into_iter())
            .filter(|l| l.starts_with("socket:"))
            .collect()
    };
    wait_until(Duration::from_secs(2), Duration::from_millis(10), || {
        sockets(server.pid()).len() == 2
    });
    let parent_sockets = sockets(server.pid());
    assert_eq!(parent_sockets.len(), 2, "{parent_sockets:?}");
    let jobs = all_children(server.pid());
    let jobs: Vec<u32> = jobs.into_iter().filter(|&p| is_jobs_process(p)).collect();
    assert_eq!(jobs.len(), 1, "one jobs process");
    let jobs_sockets = sockets(jobs[0]);
    assert_eq!(
        jobs_sockets.len(),
        1,
        "its door's end only: {jobs_sockets:?}"
    );
    assert!(
        !parent_sockets.contains(&jobs_sockets[0]),
        "the jobs process kept none of the parent's sockets"
    );
    for kid in kids {
        assert_eq!(thread_count(kid), 1, "a child runs no other thread");
        let links = fd_links(kid);
        let sockets: Vec<&String> = links.iter().filter(|l| l.starts_with("socket:")).collect();
        assert_eq!(
            sockets.len(),
            2,
            "child {kid}: its connection and the door: {links:?}"
        );
        // Of the parent's two, the door (every child's) and not the listener.
        let inherited = sockets.iter().filter(|s| parent_sockets.contains(s));
        assert_eq!(
            inherited.count(),
            1,
            "child {kid} kept the listening socket: {links:?}"
        );
    }
}

#[test]
fn fork_stats_count_every_process() {
    let server = Server::start("fork", &[]);
    for _ in 0..5 {
        let mut c = server.connect();
        c.send(&crate::harness::get_close("/_httplite/plaintext"));
        assert_eq!(c.read_response().status, 200);
        c.expect_closed(Duration::from_secs(5));
    }
    // The children are reaped asynchronously: wait for the closes.
    assert!(wait_until(
        Duration::from_secs(5),
        Duration::from_millis(20),
        || server.stats().get("connections.open") == 1
    ));
    let stats = server.stats();
    assert!(stats.get("requests") >= 6, "{}", stats.0);
    assert!(stats.get("responses.2xx") >= 5, "{}", stats.0);
    assert!(stats.get("connections.total") >= 6, "{}", stats.0);
    assert_eq!(stats.sum("children_crashed"), 0, "{}", stats.0);
}

/// User plus system CPU time of `pid`, in clock ticks (`/proc/PID/stat`).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which may hold spaces: state is
    // the first, utime the 12th and stime the 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Connects again whenever a connection is closed unanswered, until one
/// `GET` is answered; how many were closed unanswered.
fn get_until_answered(addr: std::net::SocketAddr) -> u64 {
    let mut dropped = 0;
    for _ in 0..100_000 {
        let Ok(mut c) = Client::try_connect(addr) else {
            continue;
        };
        let sent = c.try_send(&get_close("/_httplite/plaintext"));
        match sent.and_then(|_| c.try_read_response(false)) {
            Ok(r) => {
                assert_eq!(r.status, 200);
                return dropped;
            }
            Err(_) => dropped += 1,
        }
    }
    panic!("never answered");
}

#[test]
fn fork_parent_backs_off_after_a_failed_fork_and_recovers() {
    // Every fork fails for 300 ms from the first, as at a process limit.
    let server = Server::start_with("fork", &[], |mut cmd| {
        cmd.env("HTTPLITE_TEST_FORK_FAIL_MS", "300");
        cmd
    });
    let cpu_before = cpu_ticks(server.pid());
    // Three clients that reconnect at once when dropped: without a pause
    // after a failed fork, the parent accepts and drops as fast as they
    // come; with one, each failure holds the next connections in the
    // kernel's queue.
    let addr = server.addr();
    let dropped: u64 = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..3)
            .map(|_| scope.spawn(|| get_until_answered(addr)))
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).sum()
    });
    let cpu = cpu_ticks(server.pid()) - cpu_before;
    let stats = server.stats();
    let failed = stats.sum("fork_failed");
    assert!(failed >= 1, "{}", stats.0);
    assert_eq!(dropped, failed, "each failed fork drops its connection");
    // A pause of 20 ms after each failure: at most one attempt per pause
    // in 300 ms of failures, and the first.
    assert!(
        failed <= 300 / 20 + 1,
        "{failed} forks tried in 300 ms of failures"
    );
    assert!(
        cpu <= 10,
        "the parent used {cpu} ticks of CPU while forks failed"
    );
    assert_eq!(server.get("/_httplite/plaintext").status, 200);
}

#[test]
fn fork_open_connections_count_down_as_children_end() {
    // Started with SIGCHLD ignored (a supervisor, or a shell's
    // `trap '' CHLD`, can leave it so; exec keeps an ignored signal
    // ignored), and with forks failing for the first 100 ms.
    let server = Server::start_with("fork", &[], |mut cmd| {
        use std::os::unix::process::CommandExt as _;
        cmd.env("HTTPLITE_TEST_FORK_FAIL_MS", "100");
        // SAFETY: the closure runs between fork and exec and only calls
        // signal(2), which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGCHLD, libc::SIG_IGN);
                Ok(())
            })
        };
        cmd
    });
    let dropped = get_until_answered(server.addr());
    assert!(dropped >= 1, "the first fork failed");
    for _ in 0..5 {
        assert_eq!(server.get("/_httplite/plaintext").status, 200);
    }
    let before = children(server.pid());
    let mut held = vec![served(&server)];
    let crashed = children(server.pid())
        .into_iter()
        .find(|kid| !before.contains(kid))
        .expect("the held connection's child");
    held.push(served(&server));
    // SAFETY: `crashed` is the server's child, alive (its connection is open).
    unsafe { libc::kill(crashed as libc::pid_t, libc::SIGABRT) };
    held[0].expect_closed(Duration::from_secs(5));
    held.remove(0);
    // Open: the connection still held and the one asking.
    let open_is = |n: u64| {
        let mut last = String::new();
        let ok = wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
            let stats = server.stats();
            let ok = stats.get("connections.open") == n && stats.sum("children_alive") == n;
            last = stats.0;
            ok
        });
        assert!(ok, "expected {n} open: {last}");
    };
    open_is(2);
    drop(held);
    open_is(1);
}

#[test]
fn fork_crashing_child_takes_down_only_its_connection() {
    let server = Server::start("fork", &[]);
    let mut a = served(&server);
    let first = children(server.pid());
    let mut b = served(&server);
    let victim = first[0];
    assert!(children(server.pid()).contains(&victim));
    // SIGABRT, as an abort() would raise. (Not a SIGSEGV sent with kill:
    // Rust's stack-overflow handler catches SIGSEGV, finds no guard-page
    // fault, restores the default action and returns, so a SIGSEGV that
    // no faulting instruction raised does not end the process.)
    // SAFETY: `victim` is the server's child, alive (its connection is open).
    unsafe { libc::kill(victim as libc::pid_t, libc::SIGABRT) };
    a.expect_closed(Duration::from_secs(5));
    b.send(&get_req("/_httplite/plaintext"));
    assert_eq!(
        b.read_response().status,
        200,
        "the other connection lives on"
    );
    assert!(wait_until(
        Duration::from_secs(5),
        Duration::from_millis(20),
        || server.stats().sum("children_crashed") == 1
    ));
    assert_eq!(server.get("/_httplite/plaintext").status, 200);
}

#[test]
fn fork_max_connections_bounds_live_children() {
    let server = Server::start("fork", &["--max-connections", "2"]);
    let a = served(&server);
    let _b = served(&server);
    // The third connects (the kernel's queue) but waits for a child.
    let mut c = server.connect();
    c.send(&get_req("/_httplite/plaintext"));
    c.expect_open(Duration::from_millis(500));
    assert_eq!(children(server.pid()).len(), 2);
    drop(a);
    assert_eq!(c.read_response().status, 200, "served once a child ended");
}

#[test]
fn fork_sigterm_closes_idle_children_and_exits() {
    let mut server = Server::start("fork", &[]);
    let mut idle = served(&server);
    server.signal(libc::SIGTERM);
    idle.expect_closed(Duration::from_secs(5));
    let status = server.wait_exit(Duration::from_secs(5));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

#[test]
fn fork_child_lists_directories_itself() {
    let dir = TempDir::new("fork-list");
    dir.write("sub/a.txt", b"a");
    let root = dir.path().to_str().unwrap();
    let server = Server::start("fork", &["--root", root, "--list-dirs"]);
    let r = server.get("/sub/");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("a.txt"), "{}", r.text());
    assert_eq!(
        server.stats().get("pool.threads_started"),
        0,
        "no pool thread"
    );
}

#[test]
fn threadpool_full_queue_answers_503_without_reading() {
    let server = Server::start(
        "threadpool",
        &[
            "--threadpool-mode",
            "connection",
            "--threadpool-size",
            "1",
            "--threadpool-queue",
            "1",
        ],
    );
    let a = served(&server); // holds the one thread
    let mut queued = server.connect(); // waits in the queue
    queued.send(&get_req("/_httplite/plaintext"));
    queued.expect_open(Duration::from_millis(300));
    // The next one finds the queue full: 503 at once, before it sends a byte.
    let mut refused = server.connect();
    let r = refused.read_response();
    assert_eq!(r.status, 503);
    assert!(r.says_close());
    assert_eq!(r.header("Retry-After"), Some("1"));
    refused.expect_closed(Duration::from_secs(5));
    drop(a);
    assert_eq!(queued.read_response().status, 200);
    drop(queued);
    let stats = server.stats();
    assert_eq!(stats.get("errors.overloaded"), 1, "{}", stats.0);
    assert_eq!(
        stats.sum("rejected_503"),
        2,
        "one pool, listed per worker: {}",
        stats.0
    );
}

#[test]
fn threadpool_refused_client_that_sent_its_request_reads_the_whole_503() {
    let server = Server::start(
        "threadpool",
        &[
            "--threadpool-mode",
            "connection",
            "--threadpool-size",
            "1",
            "--threadpool-queue",
            "1",
        ],
    );
    let held = served(&server); // holds the one thread
    // A stopped server accepts nothing, but the kernel completes each
    // handshake and queues what the client sends: every request below is
    // whole in the server's socket before that connection is queued or
    // refused.
    server.signal(libc::SIGSTOP);
    let clients: Vec<Client> = (0..3)
        .map(|_| {
            let mut c = server.connect();
            c.send(&get_close("/_httplite/sleep?ms=1"));
            c
        })
        .collect();
    server.signal(libc::SIGCONT);
    // One of them waits in the queue, the other two are refused: each reads
    // its answer on a thread of its own, the queued one until `held` leaves.
    let (tx, rx) = std::sync::mpsc::channel();
    let readers: Vec<_> = clients
        .into_iter()
        .map(|mut c| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let r = c.try_read_response(false);
                // The refused end of stream, or the error that ended it.
                let end = match &r {
                    Ok(r) if r.status == 503 => Some(
                        std::io::Read::read_to_end(&mut c.stream(), &mut Vec::new()).map(|_| ()),
                    ),
                    _ => None,
                };
                let status = r.as_ref().map(|r| r.status).map_err(|e| e.to_string());
                let _ = tx.send(status.clone());
                (c, status, end)
            })
        })
        .collect();
    for _ in 0..2 {
        let status = rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(status, Ok(Ok(503)), "a refused client's answer");
    }
    drop(held);
    let answered: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    let ok = answered.iter().filter(|(_, s, _)| *s == Ok(200)).count();
    assert_eq!(ok, 1, "the queued one is served once the thread is free");
    let stats = server.stats();
    assert_eq!(stats.get("errors.overloaded"), 2, "{}", stats.0);
    for (c, status, end) in answered {
        if status == Ok(200) {
            continue;
        }
        assert_eq!(status, Ok(503));
        let end = end.expect("a refused client read to the end");
        assert!(end.is_ok(), "the refused connection ended in {end:?}");
        // By now the server has long closed it: a reset (unread request
        // bytes at close) would have reached the client's socket.
        let error = c.stream().take_error().unwrap();
        assert!(
            error.is_none(),
            "the refused connection was reset: {error:?}"
        );
    }
}

#[test]
fn threadpool_keepalive_connection_holds_its_thread() {
    // The documented head-of-line effect: an idle keep-alive client keeps
    // its pool thread, so a new client waits until it leaves (or its idle
    // timeout passes), however idle the server is.
    let server = Server::start(
        "threadpool",
        &["--threadpool-mode", "connection", "--threadpool-size", "1"],
    );
    let mut idle = served(&server);
    let mut next = server.connect();
    next.send(&get_req("/_httplite/plaintext"));
    next.expect_open(Duration::from_millis(500));
    idle.send(&crate::harness::get_close("/_httplite/plaintext"));
    assert_eq!(idle.read_response().status, 200);
    assert_eq!(next.read_response().status, 200);
}
