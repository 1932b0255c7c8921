//! may_minihttp peer (stackful coroutines) for scripts/bench.sh. Answers
//! `Hello, World!` on every path; `/sleep?ms=N` (or `/_httplite/sleep?ms=N`)
//! sleeps N ms in the coroutine first.
//!
//! Usage: peer-may [--bind 127.0.0.1:8080] [--workers 1]
use std::io;
use std::time::Duration;

use may_minihttp::{HttpService, HttpServiceFactory, Request, Response};

#[derive(Clone)]
struct Hello;

impl HttpService for Hello {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        let path = req.path();
        if path.starts_with("/sleep?") || path.starts_with("/_httplite/sleep?") {
            if let Some(ms) = path
                .split(['?', '&'])
                .find_map(|kv| kv.strip_prefix("ms="))
                .and_then(|v| v.parse::<u64>().ok())
            {
                may::coroutine::sleep(Duration::from_millis(ms));
            }
        }
        rsp.header("Content-Type: text/plain");
        rsp.body("Hello, World!");
        Ok(())
    }
}

struct Factory;

impl HttpServiceFactory for Factory {
    type Service = Hello;
    fn new_service(&self, _id: usize) -> Hello {
        Hello
    }
}

fn main() {
    let mut bind = "127.0.0.1:8080".to_string();
    let mut workers = 1usize;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bind" => bind = it.next().expect("--bind ADDR"),
            "--workers" => workers = it.next().expect("--workers N").parse().expect("number"),
            other => panic!("unknown argument {other}"),
        }
    }
    may::config().set_workers(workers).set_stack_size(0x4000);
    let server = Factory.start(bind.as_str()).expect("bind");
    server.join().unwrap();
}
