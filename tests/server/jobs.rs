//! Background jobs over HTTP: `POST /_httplite/jobs?type=T`, `GET` and
//! `DELETE /_httplite/jobs/{id}`, on every runtime (under `fork`, the
//! registry and the pool are the jobs process's, which every child asks:
//! designs.rs has what only it promises).

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::harness::{Client, Response, Server, TempDir, heavy_lock, runtimes, wait_until};

/// The expected result of a sha256 job. The server hashes with `sha2` too;
/// these tests check the plumbing, and the site's unit tests check the
/// digests against FIPS 180-4's vectors.
fn hex_digest(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `POST /_httplite/jobs?type=T` with `body`.
fn submit_req(kind: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST /_httplite/jobs?type={kind} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn submit(client: &mut Client, kind: &str, body: &[u8]) -> Response {
    client.send(&submit_req(kind, body));
    client.read_response()
}

/// The id of an accepted submission, checking the 202's shape.
fn accepted_id(resp: &Response) -> u64 {
    assert_eq!(resp.status, 202, "{}", resp.text());
    let location = resp.header("location").expect("Location on a 202");
    let id: u64 = location
        .strip_prefix("/_httplite/jobs/")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad Location {location:?}"));
    assert!(
        resp.text().contains(&format!("\"id\":{id}")),
        "{}",
        resp.text()
    );
    id
}

fn get_job(client: &mut Client, id: u64) -> Response {
    client.get(&format!("/_httplite/jobs/{id}"))
}

fn delete_job(client: &mut Client, id: u64) -> Response {
    client.send(format!("DELETE /_httplite/jobs/{id} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
    client.read_response()
}

/// Polls job `id` until it has left `queued`/`running` (bounded).
fn finished(client: &mut Client, id: u64) -> String {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let r = get_job(client, id);
        assert_eq!(r.status, 200, "{}", r.text());
        let body = r.text();
        let busy = body.contains("\"state\":\"queued\"") || body.contains("\"state\":\"running\"");
        if !busy || Instant::now() > end {
            return body;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls until `id` is running (bounded).
fn wait_running(client: &mut Client, id: u64) {
    let end = Instant::now() + Duration::from_secs(10);
    while !get_job(client, id).text().contains("\"state\":\"running\"") {
        assert!(Instant::now() < end, "job {id} never started");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The job type and JSON `result` expected for input number `n`.
fn expected(n: usize) -> (&'static str, String, String) {
    let input = format!("job number {n} says hello\tto the pool");
    let (kind, result) = match n % 5 {
        0 => ("echo", format!("\"{input}\"").replace('\t', "\\t")),
        1 => ("wordcount", "8".to_string()),
        2 => ("charcount", input.chars().count().to_string()),
        3 => (
            "capitalize",
            format!("\"Job Number {n} Says Hello\\tTo The Pool\""),
        ),
        _ => ("sha256", format!("\"{}\"", hex_digest(input.as_bytes()))),
    };
    (kind, input, result)
}

#[test]
fn ten_thousand_concurrent_jobs_complete_with_correct_results() {
    const THREADS: usize = 20;
    const PER_THREAD: usize = 500;
    const BATCH: usize = 100;
    let _heavy = heavy_lock();
    for rt in runtimes() {
        let server = Server::start(rt, &["--pool-queue", "10000", "--jobs-retain", "10000"]);
        let addr = server.addr();
        let started = Instant::now();
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut client = Client::connect(addr);
                    let mut ids = Vec::with_capacity(PER_THREAD);
                    // Pipelined batches: every connection keeps the server busy.
                    for batch in 0..PER_THREAD / BATCH {
                        let mut wire = Vec::new();
                        for i in 0..BATCH {
                            let (kind, input, _) = expected(t * PER_THREAD + batch * BATCH + i);
                            wire.extend(submit_req(kind, input.as_bytes()));
                        }
                        client.send(&wire);
                        for i in 0..BATCH {
                            let n = t * PER_THREAD + batch * BATCH + i;
                            ids.push((n, accepted_id(&client.read_response())));
                        }
                    }
                    let mut wrong = Vec::new();
                    for (n, id) in ids {
                        let body = finished(&mut client, id);
                        let (kind, _, result) = expected(n);
                        let want = format!(
                            "\"type\":\"{kind}\",\"state\":\"done\",\"attempts\":1,\"result\":{result}}}"
                        );
                        if !body.ends_with(&want) {
                            wrong.push(format!("job {id} (input {n}): {body}, want …{want}"));
                        }
                    }
                    wrong
                })
            })
            .collect();
        let wrong: Vec<String> = threads
            .into_iter()
            .flat_map(|t| t.join().expect("client thread panicked"))
            .collect();
        assert!(
            wrong.is_empty(),
            "{rt}: {} wrong, e.g. {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(3)]
        );
        let stats = server.stats();
        let total = (THREADS * PER_THREAD) as u64;
        assert_eq!(stats.get("jobs.submitted"), total, "{rt}");
        assert_eq!(stats.get("jobs.done"), total, "{rt}");
        assert_eq!(stats.get("jobs.rejected"), 0, "{rt}");
        eprintln!(
            "{rt}: {total} jobs submitted and checked in {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn a_panicking_job_is_retried_then_failed_and_the_server_carries_on() {
    for rt in runtimes() {
        let server = Server::start(rt, &[]);
        let mut client = server.connect();
        let id = accepted_id(&submit(&mut client, "panic", b""));
        let body = finished(&mut client, id);
        assert!(body.contains("\"state\":\"failed\""), "{rt}: {body}");
        assert!(
            body.contains("\"attempts\":4"),
            "{rt}: 1 run + 3 retries: {body}"
        );
        assert!(
            body.contains("\"error\":\"panicked on all 4 attempts: test job panicked on purpose\""),
            "{rt}: {body}"
        );
        assert!(!body.contains("\"result\""), "{rt}: {body}");
        // Same connection, same pool: all is well.
        assert_eq!(client.get("/_httplite/plaintext").text(), "Hello, World!");
        let ok = accepted_id(&submit(&mut client, "wordcount", b"still fine"));
        assert!(finished(&mut client, ok).ends_with("\"result\":2}"), "{rt}");
        let stats = server.stats();
        assert_eq!(stats.get("jobs.retries"), 3, "{rt}");
        assert_eq!(stats.get("jobs.failed"), 1, "{rt}");
        assert_eq!(
            stats.get("errors.handler_panic"),
            0,
            "{rt}: no request failed"
        );
    }
}

#[test]
fn delete_cancels_a_queued_job_only() {
    for rt in runtimes() {
        let server = Server::start(rt, &["--pool-threads", "1"]);
        let mut client = server.connect();
        let sleeper = accepted_id(&submit(&mut client, "sleep", b"2000"));
        wait_running(&mut client, sleeper);
        let queued = accepted_id(&submit(&mut client, "echo", b"never runs"));
        let r = delete_job(&mut client, queued);
        assert_eq!(r.status, 200, "{rt}: {}", r.text());
        assert!(
            r.text().contains("\"state\":\"cancelled\""),
            "{rt}: {}",
            r.text()
        );
        let again = delete_job(&mut client, queued);
        assert_eq!(again.status, 409, "{rt}: cancelling twice");
        let running = delete_job(&mut client, sleeper);
        assert_eq!(
            running.status, 409,
            "{rt}: a running job cannot be cancelled"
        );
        assert!(running.text().contains("\"state\":\"running\""), "{rt}");
        assert_eq!(delete_job(&mut client, 999_999).status, 404, "{rt}");
        assert!(finished(&mut client, sleeper).contains("\"state\":\"done\""));
        // The pool thread skipped the cancelled job.
        let body = get_job(&mut client, queued).text();
        assert!(
            body.contains("\"state\":\"cancelled\",\"attempts\":0"),
            "{rt}: {body}"
        );
        assert_eq!(server.stats().get("jobs.cancelled"), 1, "{rt}");
    }
}

#[test]
fn unknown_types_and_bad_paths_are_refused_at_once() {
    for rt in runtimes() {
        let server = Server::start_without_test_endpoints(rt, &[]);
        let mut client = server.connect();
        for kind in ["bogus", "panic", "sleep", "spin", "SHA256", ""] {
            let r = submit(&mut client, kind, b"some input");
            assert_eq!(r.status, 400, "{rt}: type={kind:?}");
            assert!(
                r.text()
                    .contains("echo, wordcount, charcount, capitalize, sha256"),
                "{rt}"
            );
        }
        client.send(b"POST /_httplite/jobs HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx");
        assert_eq!(client.read_response().status, 400, "{rt}: no ?type=");
        let r = client.get("/_httplite/jobs");
        assert_eq!(
            (r.status, r.header("allow")),
            (405, Some("POST, OPTIONS")),
            "{rt}"
        );
        assert_eq!(client.get("/_httplite/jobs/abc").status, 404, "{rt}");
        assert_eq!(client.get("/_httplite/jobs/12").status, 404, "{rt}");
        assert_eq!(client.get("/_httplite/jobsx").status, 404, "{rt}");
        let stats = server.stats();
        assert_eq!(stats.get("jobs.submitted"), 0, "{rt}: nothing was queued");
    }
}

#[test]
fn a_full_queue_answers_503_with_retry_after() {
    for rt in runtimes() {
        let server = Server::start(rt, &["--pool-threads", "1", "--pool-queue", "2"]);
        let mut client = server.connect();
        let sleeper = accepted_id(&submit(&mut client, "sleep", b"2000"));
        wait_running(&mut client, sleeper);
        let queued: Vec<u64> = (0..2)
            .map(|_| accepted_id(&submit(&mut client, "echo", b"waits")))
            .collect();
        let r = submit(&mut client, "echo", b"no room");
        assert_eq!(r.status, 503, "{rt}: {}", r.text());
        assert_eq!(r.header("retry-after"), Some("1"), "{rt}");
        assert!(!r.says_close(), "{rt}: a 503 keeps the connection");
        let stats = server.stats();
        assert_eq!(stats.get("pool.rejected"), 1, "{rt}");
        assert_eq!(stats.get("jobs.rejected"), 1, "{rt}");
        // The queue drains, and there is room again.
        for id in queued {
            assert!(
                finished(&mut client, id).contains("\"result\":\"waits\""),
                "{rt}"
            );
        }
        let later = accepted_id(&submit(&mut client, "echo", b"room again"));
        assert!(
            finished(&mut client, later).contains("\"state\":\"done\""),
            "{rt}"
        );
    }
}

/// With no queue, only an idle pool thread takes work: waits (bounded) until
/// every pool thread has got back from its last task.
fn wait_pool_idle(server: &Server, rt: &str) {
    let idle = wait_until(Duration::from_secs(10), Duration::from_millis(5), || {
        server.stats().get("pool.threads_busy") == 0
    });
    assert!(idle, "{rt}: the pool thread never went idle");
}

#[test]
fn directory_listings_use_the_pool_and_get_503_when_it_is_full() {
    let site = TempDir::new("listing-pool");
    for i in 0..50 {
        site.write(&format!("big/file-{i:02}.txt"), b"x");
    }
    let root = site.path().to_str().expect("utf-8 temp path").to_string();
    for rt in runtimes() {
        let server = Server::start(
            rt,
            &[
                "--root",
                &root,
                "--expose",
                "jobs",
                "--list-dirs",
                "--pool-threads",
                "1",
                "--pool-queue",
                "0",
            ],
        );
        let mut client = server.connect();
        // A thread per connection, a pool thread serving one connection at
        // a time, or a fork child (see
        // designs::fork_child_lists_directories_itself) lists on its own
        // thread.
        let on_pool = !matches!(*rt, "threads" | "threadpool" | "fork");
        let r = client.get("/big/");
        assert_eq!(r.status, 200, "{rt}");
        assert!(r.text().contains("file-49.txt"), "{rt}: {}", r.text());
        let ran = server.stats().get("pool.completed");
        assert_eq!(ran, u64::from(on_pool), "{rt}: the listing ran on the pool");
        wait_pool_idle(&server, rt);
        // Hold the only pool thread; with no queue, a listing cannot be had.
        let sleeper = accepted_id(&submit(&mut client, "sleep", b"2000"));
        wait_running(&mut client, sleeper);
        let r = client.get("/big/");
        if on_pool {
            assert_eq!(r.status, 503, "{rt}: {}", r.text());
            assert_eq!(r.header("retry-after"), Some("1"), "{rt}");
            assert!(!r.says_close(), "{rt}");
        } else {
            assert_eq!(r.status, 200, "{rt}");
        }
        assert!(
            finished(&mut client, sleeper).contains("\"state\":\"done\""),
            "{rt}"
        );
        // A job is marked done on its pool thread, just before that thread
        // is idle again.
        wait_pool_idle(&server, rt);
        assert_eq!(client.get("/big/").status, 200, "{rt}: room again");
    }
}
