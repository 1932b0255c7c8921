//! Accept storms: the server's fd table is full (`RLIMIT_NOFILE` lowered on
//! the running process) while clients keep connecting. It must not spin on
//! `EMFILE` (its CPU time stays far below a core), must shed what it cannot
//! hold (those clients see a close, not a hang), keep serving the
//! connections it has, and serve new ones once the storm is over.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::harness::{
    Client, IO_TIMEOUT, Server, Stats, assert_fork_refuses, get_close, heavy_lock, is_fork,
    runtimes, set_fd_limit, wait_until,
};

/// The server's fd limit during the storm. At rest it holds about 20 fds
/// (listener, epolls, pipes, eventfds, the reserve, stdio).
const FD_LIMIT: u64 = 64;
/// Connections opened at once: far more than the limit.
const HELD: usize = 300;
/// How long clients keep connecting while the CPU time is measured.
const STORM: Duration = Duration::from_secs(3);
/// One new connection every this long during the storm (~500/s).
const STORM_EVERY: Duration = Duration::from_millis(2);
/// Most of one core the server may use during the storm. Shedding a
/// connection costs four syscalls, so at ~500 connections a second it
/// needs a few percent; a spin on `EMFILE` takes a whole core.
const MAX_CPU_SHARE: f64 = 0.25;

/// User plus system CPU time of process `pid` (all threads), in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // Fields after the command name, which is in parentheses and may
    // contain spaces: the 3rd field is the first one here.
    let rest = &stat[stat.rfind(')').expect("stat has a command name") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks as f64 / hz as f64
}

/// Whether the server has closed this connection (end of stream or
/// reset), looking without waiting.
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).expect("set_nonblocking");
    let mut b = [0u8; 64];
    let closed = match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != io::ErrorKind::WouldBlock,
    };
    s.set_nonblocking(false).expect("set_nonblocking");
    closed
}

/// One `Connection: close` plaintext request; the response or the error.
fn try_plaintext(addr: SocketAddr) -> io::Result<u16> {
    let mut c = Client::try_connect(addr)?;
    c.try_send(&get_close("/_httplite/plaintext"))?;
    Ok(c.try_read_response(false)?.status)
}

/// Connections the server has accepted (and kept) or shed so far, from
/// its stats, read over `client`'s connection: a new one might not be
/// accepted while the fd table is full.
fn dealt_with(client: &mut Client) -> u64 {
    let r = client.get("/_httplite/stats");
    assert_eq!(r.status, 200, "stats: {r:?}");
    let stats = Stats(r.text());
    stats.get("accept.accepted") + stats.get("accept.shed")
}

/// Waits until the server has dealt with `count` connections in all; if it
/// does not within 10 s, fails with what it holds: its stats and the
/// targets of its fds (an fd other than a socket taking the slot the
/// shedding frees would show here).
fn await_dealt_with(server: &Server, client: &mut Client, count: u64, what: &str) {
    let done = wait_until(Duration::from_secs(10), Duration::from_millis(20), || {
        dealt_with(client) >= count
    });
    if done {
        return;
    }
    let stats = client.get("/_httplite/stats").text();
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", server.pid()))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    let target = std::fs::read_link(e.path()).unwrap_or_default();
                    format!("{}->{}", e.file_name().to_string_lossy(), target.display())
                })
                .collect()
        })
        .unwrap_or_default();
    fds.sort();
    panic!(
        "[{what}] the server dealt with {} of {count} connections in 10 s \
         (accepted or shed); its fds: {fds:?}; its stats: {stats}",
        dealt_with(client)
    );
}

#[test]
fn emfile_storm_sheds_without_spinning_and_the_server_recovers() {
    let _heavy = heavy_lock();
    let cases = runtimes()
        .iter()
        .map(|rt| (*rt, "acceptor"))
        .chain([("stackless", "reuseport"), ("uring", "reuseport")])
        .filter(|(rt, _)| runtimes().contains(rt));
    for (rt, dispatch) in cases {
        if is_fork(rt) {
            // Not under fork: its parent keeps no connection's fd (the
            // child has it), so it never reaches EMFILE this way; what
            // bounds it is --max-connections over live children
            // (designs::fork_max_connections_bounds_live_children). It
            // has no dispatcher to choose.
            assert_fork_refuses(&["--dispatch", dispatch], "--dispatch");
            continue;
        }
        let what = format!("{rt}, --dispatch {dispatch}");
        let args = [
            "--dispatch",
            dispatch,
            "--header-timeout",
            "60s",
            "--idle-timeout",
            "60s",
        ];
        let mut server = Server::start(rt, &args);
        let addr = server.addr();
        // A keep-alive client served before the storm must be served during it.
        let mut veteran = server.connect();
        assert_eq!(veteran.get("/_httplite/plaintext").status, 200, "[{what}]");
        let at_rest = server.fd_count() as u64;
        assert!(
            at_rest + 10 < FD_LIMIT,
            "[{what}] {at_rest} fds at rest: FD_LIMIT {FD_LIMIT} leaves no room"
        );
        let before = dealt_with(&mut veteran);
        set_fd_limit(server.pid(), FD_LIMIT);

        // Far more connections than fds; the server sheds the excess.
        let mut held: Vec<TcpStream> = (0..HELD)
            .map(|i| {
                TcpStream::connect_timeout(&addr, IO_TIMEOUT)
                    .unwrap_or_else(|e| panic!("[{what}] connect {i}: {e}"))
            })
            .collect();
        // The server has reached EMFILE and emptied its queue: every held
        // connection accepted (and kept) or shed.
        await_dealt_with(&server, &mut veteran, before + HELD as u64, &what);

        // The storm: new clients keep arriving while CPU time is measured.
        let cpu_before = cpu_seconds(server.pid());
        let started = Instant::now();
        let mut storm = Vec::new();
        let mut refused = 0usize;
        while started.elapsed() < STORM {
            match TcpStream::connect_timeout(&addr, IO_TIMEOUT) {
                Ok(s) => storm.push(s),
                // A full backlog may refuse or time out; that is the
                // kernel's answer, not the server's.
                Err(_) => refused += 1,
            }
            std::thread::sleep(STORM_EVERY);
        }
        let wall = started.elapsed().as_secs_f64();
        let storm_count = storm.len();
        let cpu = cpu_seconds(server.pid()) - cpu_before;
        let share = cpu / wall;

        assert!(
            server.wait_exit(Duration::ZERO).is_none(),
            "[{what}] the server died in the storm: {}",
            server.stderr()
        );
        // An established connection is still served at the limit.
        assert_eq!(
            veteran.get("/_httplite/plaintext").status,
            200,
            "[{what}] a connection held since before the storm was not served"
        );
        // Those the server could not hold were closed, not left hanging
        // in the accept queue (the storm's too).
        await_dealt_with(
            &server,
            &mut veteran,
            before + (HELD + storm_count) as u64,
            &what,
        );
        let shed = held.iter_mut().map(closed_by_server).filter(|&c| c).count();
        let kept = HELD - shed;
        assert!(
            kept as u64 <= FD_LIMIT,
            "[{what}] {kept} of {HELD} connections still open with only {FD_LIMIT} fds: \
             the excess hangs in the accept queue instead of being shed"
        );
        assert!(
            shed > 0,
            "[{what}] no connection was shed: the fd limit was never reached"
        );
        assert!(
            share < MAX_CPU_SHARE,
            "[{what}] the server used {cpu:.2} s of CPU in {wall:.2} s of EMFILE storm \
             ({:.0}% of a core; {storm_count} storm connections, {refused} refused): a spin",
            share * 100.0
        );

        // The storm is over: every client leaves, new requests succeed.
        drop(held);
        drop(storm);
        drop(veteran);
        let recovered = wait_until(Duration::from_secs(10), Duration::from_millis(50), || {
            matches!(try_plaintext(addr), Ok(200))
        });
        assert!(recovered, "[{what}] no request served after the storm");
        // Not just one: a burst of concurrent connections fits again.
        let mut burst: Vec<Client> = (0..20).map(|_| server.connect()).collect();
        for (i, c) in burst.iter_mut().enumerate() {
            let r = c.get("/_httplite/plaintext");
            assert_eq!(r.status, 200, "[{what}] connection {i} after the storm");
            assert_eq!(r.body, b"Hello, World!", "[{what}]");
        }
        drop(burst);
        let status = server.terminate();
        assert_eq!(
            status.code(),
            Some(0),
            "[{what}] exit after the storm: {}",
            server.stderr()
        );
        eprintln!(
            "[{what}] storm: {shed} of {HELD} shed, {storm_count} more connected in {wall:.1} s, \
             server CPU {cpu:.3} s ({:.1}% of a core)",
            share * 100.0
        );
    }
}
