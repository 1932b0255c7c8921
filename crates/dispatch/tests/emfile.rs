//! Out of file descriptors: accepting must not spin, and serving must resume
//! once fds are freed.
//!
//! The server runs in a child process (this test binary, re-executed with an
//! environment variable) so that it can lower its own `RLIMIT_NOFILE`
//! without starving the other tests; the parent is the client and asks the
//! child for its CPU time over stdin/stdout.

mod common;

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Behavior, ask, localhost, serve};
use dispatch::{Config, Mode, Server};

const CHILD_ENV: &str = "DISPATCH_EMFILE_CHILD";
/// Connections the child can hold once its limit is lowered.
const HEADROOM: u64 = 16;

/// The server side, run only by the parent (`--ignored --exact
/// emfile_child` with the mode in the environment): ignored in a normal run,
/// so that it never counts as a passing test.
#[test]
#[ignore = "the child process of the tests below"]
fn emfile_child() {
    let mode = std::env::var(CHILD_ENV).expect("run by the tests of this file, with the mode set");
    // "reuseport4": four ports shedding at once (see the storm test below).
    let (mode, workers) = match mode.as_str() {
        "acceptor" => (Mode::Acceptor, 1),
        "reuseport4" => (Mode::ReusePort, 4),
        _ => (Mode::ReusePort, 1),
    };
    let behavior = Behavior::new(workers);
    let b = behavior.clone();
    let config = Config {
        workers,
        mode,
        ..Config::new(localhost())
    };
    let server = Server::start(config, move |port| serve(port, &b)).unwrap();
    // The server's threads open their fds (a reactor each) after `start`
    // returns, and may hold one for a moment meanwhile: read the fd table
    // once it has stopped changing (the same three times, 20 ms apart),
    // or the headroom below would come out one more or one less.
    let fds = || -> Vec<u64> {
        let mut v: Vec<u64> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
            .collect();
        v.sort_unstable();
        v
    };
    let (mut last, mut same) = (fds(), 0);
    let settle = Instant::now() + Duration::from_secs(2);
    while same < 2 && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(20));
        let now = fds();
        same = if now == last { same + 1 } else { 0 };
        last = now;
    }
    let top = *last.last().unwrap();
    // Plug the holes below the highest fd (an inherited jobserver pipe can
    // sit far up), so that exactly HEADROOM slots stay free under the limit.
    let mut plugs = Vec::new();
    loop {
        let plug = std::fs::File::open("/dev/null").unwrap();
        if plug.as_raw_fd() as u64 > top {
            break;
        }
        plugs.push(plug);
    }
    dispatch::sys::set_nofile_limit(top + 1 + HEADROOM).unwrap();

    let mut out = std::io::stdout().lock();
    writeln!(out, "ADDR {}", server.local_addr()).unwrap();
    out.flush().unwrap();
    let stats = server.stats().clone();
    for line in std::io::stdin().lines() {
        match line.unwrap().as_str() {
            "STATS" => {
                let cpu = dispatch::sys::process_cpu_time().unwrap();
                let emfile =
                    stats.acceptor().snapshot().emfile_events + stats.total().emfile_events;
                writeln!(
                    out,
                    "STATS {} {} {}",
                    cpu.as_micros(),
                    emfile,
                    stats.total().open
                )
                .unwrap();
                out.flush().unwrap();
            }
            _ => break,
        }
    }
    server.shutdown(Duration::from_secs(1));
    server.join().unwrap();
}

struct ChildServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    addr: SocketAddr,
}

struct ChildStats {
    cpu: Duration,
    emfile: u64,
    open: u64,
}

impl ChildServer {
    fn spawn(mode: &str) -> ChildServer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "emfile_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut server = ChildServer {
            child,
            stdin,
            stdout,
            addr: localhost(),
        };
        let addr = server.read_tagged("ADDR ");
        server.addr = addr.parse().unwrap();
        server
    }

    /// Reads lines until one holds `tag` (the test harness prints its own
    /// lines too) and returns what follows it.
    fn read_tagged(&mut self, tag: &str) -> String {
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "child exited before saying {tag:?}");
            // The harness's "test emfile_child ... " may share the line.
            if let Some(at) = line.find(tag) {
                return line[at + tag.len()..].trim_end().to_string();
            }
        }
    }

    fn stats(&mut self) -> ChildStats {
        writeln!(self.stdin, "STATS").unwrap();
        let line = self.read_tagged("STATS ");
        let f: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
        ChildStats {
            cpu: Duration::from_micros(f[0]),
            emfile: f[1],
            open: f[2],
        }
    }

    /// Asks for stats until `cond` holds or 2 s pass; returns the last.
    fn stats_when(&mut self, cond: impl Fn(&ChildStats) -> bool) -> ChildStats {
        let end = Instant::now() + Duration::from_secs(2);
        loop {
            let s = self.stats();
            if cond(&s) || Instant::now() >= end {
                return s;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn quit(mut self) {
        writeln!(self.stdin, "QUIT").unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "child failed: {status}");
                return;
            }
            assert!(Instant::now() < end, "child did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        // Only reached with the child still running if the test failed.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Connects and asks once; `None` if the server turned the connection away.
fn try_serve(addr: SocketAddr) -> Option<TcpStream> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    match ask(&mut s, "hi") {
        Ok(_) => Some(s),
        Err(e) => {
            // Turned away at once by the reserved-fd trick, not left hanging.
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe
                ),
                "rejected connection should be closed, got {e}"
            );
            None
        }
    }
}

fn out_of_fds(mode: &str) {
    let mut child = ChildServer::spawn(mode);
    let addr = child.addr;

    // Fill the child's fd table.
    let mut held = Vec::new();
    while let Some(s) = try_serve(addr) {
        held.push(s);
        assert!(held.len() <= HEADROOM as usize, "limit never hit");
    }
    assert!(
        held.len() >= HEADROOM as usize / 2,
        "only {} served",
        held.len()
    );
    // Counters are bumped just after the action the client sees: poll.
    let served = held.len() as u64;
    let at_limit = child.stats_when(|s| s.emfile > 0 && s.open == served);
    assert!(at_limit.emfile > 0, "EMFILE not counted");
    assert_eq!(at_limit.open, served);

    // Keep knocking while at the limit: CPU must stay bounded.
    let before = child.stats();
    let start = Instant::now();
    let mut knocks = 0;
    while start.elapsed() < Duration::from_secs(1) {
        assert!(try_serve(addr).is_none(), "served beyond the limit");
        knocks += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = child.stats();
    let cpu = after.cpu - before.cpu;
    eprintln!("{mode}: {knocks} rejected connections in 1 s cost {cpu:?} of CPU");
    assert!(
        cpu < Duration::from_millis(300),
        "{mode}: busy loop? {cpu:?}"
    );
    let counted = child.stats_when(|s| s.emfile >= before.emfile + knocks);
    assert!(counted.emfile >= before.emfile + knocks);

    // Free some fds: serving resumes.
    held.truncate(held.len() - 4);
    let end = Instant::now() + Duration::from_secs(5);
    let recovered = loop {
        if let Some(s) = try_serve(addr) {
            break s;
        }
        assert!(Instant::now() < end, "{mode}: serving did not resume");
        std::thread::sleep(Duration::from_millis(20));
    };
    drop((recovered, held));
    child.quit();
}

#[test]
fn emfile_keeps_cpu_bounded_and_serving_recovers_acceptor_mode() {
    out_of_fds("acceptor");
}

#[test]
fn emfile_keeps_cpu_bounded_and_serving_recovers_reuseport_mode() {
    out_of_fds("reuseport");
}

/// Several reuseport ports at the limit, a burst of clients from many
/// threads: each port sheds its own queue with its own reserve fd. If one
/// port's `accept4` could take the slot another port had just freed by
/// closing its reserve, it would keep that connection, the other port could
/// not reopen its reserve, and its queue would hang for as long as the fd
/// table stays full. Every client must be turned away at once, none left
/// hanging, round after round.
#[test]
fn emfile_storm_on_many_reuseport_ports_leaves_no_client_hanging() {
    const CLIENTS: usize = 8;
    const EACH: usize = 60;
    const ROUNDS: usize = 3;
    let child = ChildServer::spawn("reuseport4");
    let addr = child.addr;
    let mut held = Vec::new();
    while let Some(s) = try_serve(addr) {
        held.push(s);
        assert!(held.len() <= HEADROOM as usize, "limit never hit");
    }
    for round in 0..ROUNDS {
        let hanging: usize = std::thread::scope(|scope| {
            let clients: Vec<_> = (0..CLIENTS)
                .map(|_| {
                    scope.spawn(move || {
                        let mut hanging = 0;
                        for _ in 0..EACH {
                            let Ok(mut s) =
                                TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                            else {
                                continue; // a full backlog: the kernel's answer
                            };
                            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                            s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
                            match ask(&mut s, "hi") {
                                Ok(_) => panic!("served beyond the limit"),
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        ErrorKind::WouldBlock | ErrorKind::TimedOut
                                    ) =>
                                {
                                    hanging += 1
                                }
                                Err(_) => {} // closed or reset: turned away
                            }
                        }
                        hanging
                    })
                })
                .collect();
            clients.into_iter().map(|c| c.join().unwrap()).sum()
        });
        assert_eq!(
            hanging,
            0,
            "round {round}: {hanging} of {} clients left hanging at the fd limit",
            CLIENTS * EACH
        );
    }
    drop(held);
    child.quit();
}
