//! Listening: `--bind` repeated over IPv4, IPv6 and a Unix socket, in both
//! dispatch modes (fork's parent accepts on them all itself), with the access log naming each peer; the stale socket
//! file; socket activation (`LISTEN_FDS`), and its mismatch with `--bind`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::harness::*;

/// The dispatch modes `rt` has (`none` for fork, whose parent accepts).
fn dispatch_modes(rt: &str) -> &'static [&'static str] {
    match rt {
        "fork" => &["none"],
        _ => &["acceptor", "reuseport"],
    }
}

/// `--dispatch MODE`, or nothing for `none`.
fn dispatch_args(mode: &str) -> Vec<&str> {
    match mode {
        "none" => Vec::new(),
        _ => vec!["--dispatch", mode],
    }
}

/// The addresses of the start-up line: `http://A, http://[B]:P, unix:/p`.
pub fn listen_urls(server: &Server) -> Vec<String> {
    let out = server.stdout();
    let line = out.lines().next().unwrap_or_default().to_string();
    let rest = line
        .strip_prefix("httplite listening on ")
        .unwrap_or_default();
    let list = rest.split(" (").next().unwrap_or_default();
    let list = list.split(" [").next().unwrap_or_default();
    list.split(", ").map(str::to_string).collect()
}

/// The TCP address among the start-up line's URLs that `pick` accepts.
pub fn tcp_addr(server: &Server, pick: impl Fn(&SocketAddr) -> bool) -> SocketAddr {
    listen_urls(server)
        .iter()
        .filter_map(|u| u.split("://").nth(1)?.parse().ok())
        .find(|a| pick(a))
        .unwrap_or_else(|| panic!("no such address in {:?}", listen_urls(server)))
}

/// One request over a Unix socket; the whole answer.
pub fn unix_get(path: &Path, target: &str) -> String {
    let mut s = UnixStream::connect(path).expect("connect to the unix socket");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read the answer");
    String::from_utf8_lossy(&out).into_owned()
}

fn wait_for_lines(log: &Path, n: usize) -> String {
    let mut text = String::new();
    wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
        text = std::fs::read_to_string(log).unwrap_or_default();
        text.lines().count() >= n
    });
    text
}

#[test]
fn ipv4_ipv6_and_unix_in_both_dispatch_modes() {
    for rt in runtimes() {
        for mode in dispatch_modes(rt) {
            let dir = TempDir::new("listen");
            let sock = dir.path().join("s.sock");
            let log = dir.path().join("access.log");
            let sock_arg = format!("unix:{}", sock.display());
            let mut args = dispatch_args(mode);
            args.extend([
                "--bind",
                "[::1]:0",
                "--bind",
                &sock_arg,
                "--socket-mode",
                "600",
                "--access-log",
                log.to_str().unwrap(),
            ]);
            let mut server = Server::start(rt, &args);
            let urls = listen_urls(&server);
            assert_eq!(urls.len(), 3, "[{rt} {mode}] {urls:?}");
            assert_eq!(urls[2], sock_arg, "[{rt} {mode}]");
            assert_eq!(server.get("/_httplite/plaintext").status, 200);
            let v6 = tcp_addr(&server, SocketAddr::is_ipv6);
            assert_eq!(Client::connect(v6).get("/_httplite/plaintext").status, 200);
            let mode_bits = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode_bits, 0o600, "[{rt} {mode}] --socket-mode");
            let mut expected = 2;
            if !server.is_https() {
                let answer = unix_get(&sock, "/_httplite/plaintext");
                assert!(
                    answer.starts_with("HTTP/1.1 200 OK"),
                    "[{rt} {mode}] {answer}"
                );
                assert!(answer.ends_with("Hello, World!"), "[{rt} {mode}] {answer}");
                expected = 3;
            }
            assert!(server.terminate().success(), "[{rt} {mode}]");
            let text = wait_for_lines(&log, expected);
            let peers: Vec<&str> = text.lines().filter_map(|l| l.split(' ').next()).collect();
            assert!(peers.contains(&"127.0.0.1"), "[{rt} {mode}] {text}");
            assert!(peers.contains(&"::1"), "[{rt} {mode}] {text}");
            if expected == 3 {
                // A Unix socket's client has no address: CLF's "-".
                assert!(peers.contains(&"-"), "[{rt} {mode}] {text}");
            }
        }
    }
}

#[test]
fn stale_socket_file_is_replaced_but_a_live_one_is_not() {
    let dir = TempDir::new("stale");
    let sock = dir.path().join("s.sock");
    // A socket file whose listener is gone.
    drop(UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let sock_arg = format!("unix:{}", sock.display());
    let server = Server::start("stackless", &["--bind", &sock_arg]);
    if !server.is_https() {
        assert!(unix_get(&sock, "/_httplite/health").starts_with("HTTP/1.1 200"));
    }
    // Now something listens there: a second server must not steal it.
    let out = run_binary(
        &["--bind", "127.0.0.1:0", "--bind", &sock_arg],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("already listens"), "{err}");
    // And a file that is not a socket is never removed.
    let file = dir.write("plain", b"data");
    let out = run_binary(
        &["--bind", &format!("unix:{}", file.display())],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&file).unwrap(), b"data");
}

/// Runs the binary the way systemd does socket activation: `fds` become
/// fds 3, 4, … and `LISTEN_PID` is the server's own PID.
fn activated(cmd: Command, fds: Vec<RawFd>, names: &str) -> Command {
    let script = format!(
        "LISTEN_PID=$$ LISTEN_FDS={} LISTEN_FDNAMES={names} exec \"$0\" \"$@\"",
        fds.len()
    );
    let program = cmd.get_program().to_owned();
    let prefix: [&std::ffi::OsStr; 3] = ["-c".as_ref(), script.as_ref(), &program];
    let mut new = rebuild_command(&cmd, "sh".as_ref(), &prefix);
    // SAFETY: runs between fork and exec and only calls fcntl(2) and
    // dup2(2), which are async-signal-safe, on fds this process holds open
    // for the whole spawn; `fds` is captured, not allocated here.
    unsafe {
        new.pre_exec(move || {
            // Out of the way first, so that placing one cannot clobber
            // another that happens to sit at 3 or 4.
            let mut moved = [0; 8];
            for (i, &fd) in fds.iter().enumerate() {
                moved[i] = libc::fcntl(fd, libc::F_DUPFD, 100);
                if moved[i] == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for (i, &fd) in moved[..fds.len()].iter().enumerate() {
                if libc::dup2(fd, 3 + i as i32) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        })
    };
    new
}

#[test]
fn socket_activation_serves_on_the_inherited_sockets() {
    let cases = [
        ("stackless", "acceptor"),
        ("stackful", "acceptor"),
        ("threads", "acceptor"),
        ("stackless", "reuseport"),
        ("threads", "reuseport"),
        ("threadpool", "acceptor"),
        ("threadpool", "reuseport"),
        ("uring", "acceptor"),
        ("uring", "reuseport"),
        ("fork", "none"),
    ];
    let run = runtimes();
    for (rt, mode) in cases.into_iter().filter(|(rt, _)| run.contains(rt)) {
        let dir = TempDir::new("activation");
        let sock = dir.path().join("a.sock");
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        let unix = UnixListener::bind(&sock).unwrap();
        let fds = vec![tcp.as_raw_fd(), unix.as_raw_fd()];
        let sock_arg = format!("unix:{}", sock.display());
        let mut args = dispatch_args(mode);
        args.extend(["--bind", &sock_arg]);
        let mut server = Server::start_with(rt, &args, |cmd| activated(cmd, fds, "web:local"));
        // Ours are copies: close them, so that only the server holds the
        // sockets.
        drop((tcp, unix));
        assert_eq!(
            server.addr().port(),
            port,
            "[{rt} {mode}] the inherited port"
        );
        assert!(
            server.stdout().contains("[inherited: socket activation]"),
            "[{rt} {mode}] {}",
            server.stdout()
        );
        assert_eq!(
            server.get("/_httplite/plaintext").status,
            200,
            "[{rt} {mode}]"
        );
        if !server.is_https() {
            let answer = unix_get(&sock, "/_httplite/plaintext");
            assert!(answer.starts_with("HTTP/1.1 200"), "[{rt} {mode}] {answer}");
        }
        assert!(server.terminate().success(), "[{rt} {mode}]");
    }
}

#[test]
fn socket_activation_that_does_not_match_bind_is_one_line_and_exit_2() {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_httplite"));
    cmd.args(["--bind", "127.0.0.2:0"]);
    let mut cmd = activated(cmd, vec![tcp.as_raw_fd()], "web");
    assert!(port > 0);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("still running with a mismatched LISTEN_FDS");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "httplite: error: socket activation passed 127.0.0.1:{port} but --bind asks for \
             127.0.0.2:0"
        )
    );
}
