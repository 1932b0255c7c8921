//! `--access-log-format combined|json`: the referer, the user agent, the
//! request time in microseconds and the worker id, on every runtime.

use std::time::Duration;

use super::harness::*;

const REQUEST: &[u8] = b"GET /_httplite/plaintext?q=1 HTTP/1.1\r\nHost: x\r\n\
    Referer: http://ref.example/\r\nUser-Agent: tester/1 \"quoted\"\r\n\r\n";

/// The log's lines once the server has exited (every line written).
fn lines_after(format: &str, rt: &str) -> Vec<String> {
    let dir = TempDir::new("log-format");
    let log = dir.path().join("access.log");
    let mut server = Server::start(
        rt,
        &[
            "--access-log",
            log.to_str().unwrap(),
            "--access-log-format",
            format,
        ],
    );
    let mut c = server.connect();
    for _ in 0..2 {
        c.send(REQUEST);
        assert_eq!(c.read_response().status, 200, "[{rt}]");
    }
    // A slow answer (the general path) is timed too.
    assert_eq!(c.get("/_httplite/sleep?ms=30").status, 200, "[{rt}]");
    assert!(server.terminate().success(), "[{rt}]");
    let mut text = String::new();
    wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines().count() >= 3
    });
    text.lines().map(str::to_string).collect()
}

#[test]
fn json_lines_carry_every_field() {
    for rt in runtimes() {
        let lines = lines_after("json", rt);
        assert_eq!(lines.len(), 3, "[{rt}] {lines:?}");
        let first = &lines[0];
        assert!(first.starts_with("{\"time\":\""), "[{rt}] {first}");
        assert!(first.contains("\"remote\":\"127.0.0.1\""), "[{rt}] {first}");
        assert!(
            first.contains("\"target\":\"/_httplite/plaintext?q=1\""),
            "[{rt}] {first}"
        );
        assert!(
            first.contains("\"status\":200,\"bytes\":13"),
            "[{rt}] {first}"
        );
        assert!(
            first.contains("\"referer\":\"http://ref.example/\""),
            "[{rt}] {first}"
        );
        assert!(
            first.contains("\"user_agent\":\"tester/1 \\\"quoted\\\"\""),
            "[{rt}] {first}"
        );
        assert!(first.contains("\"worker\":"), "[{rt}] {first}");
        // The sleep took 30 ms or more, measured in microseconds.
        let slow = &lines[2];
        let us: u64 = slow
            .split("\"time_us\":")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("[{rt}] no time_us in {slow}"));
        assert!(
            (30_000..10_000_000).contains(&us),
            "[{rt}] time_us {us} in {slow}"
        );
    }
}

#[test]
fn combined_adds_referer_agent_time_worker_and_listener() {
    for rt in runtimes() {
        let lines = lines_after("combined", rt);
        assert_eq!(lines.len(), 3, "[{rt}] {lines:?}");
        let first = &lines[0];
        assert!(first.starts_with("127.0.0.1 - - ["), "[{rt}] {first}");
        let tail = first
            .split("\"GET /_httplite/plaintext?q=1 HTTP/1.1\" 200 13 ")
            .nth(1)
            .unwrap_or_else(|| panic!("[{rt}] {first}"));
        let (quoted, rest) = tail.rsplit_once("\" ").unwrap();
        assert_eq!(
            quoted, "\"http://ref.example/\" \"tester/1 ?quoted?",
            "[{rt}]"
        );
        let fields: Vec<&str> = rest.split(' ').collect();
        assert_eq!(fields.len(), 3, "[{rt}] {first}");
        assert!(fields[0].parse::<u64>().is_ok(), "[{rt}] time {first}");
        assert!(matches!(fields[1], "0" | "1"), "[{rt}] worker {first}");
        assert_eq!(fields[2], "public", "[{rt}] listener {first}");
    }
}
