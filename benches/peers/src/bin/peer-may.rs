//! may_minihttp peer (stackful coroutines) for scripts/bench.sh. Answers
//! `Hello, World!` on every path; `/sleep?ms=N` (or `/_httplite/sleep?ms=N`)
//! sleeps N ms in the coroutine first.
//!
//! Usage: peer-may [--bind 127.0.0.1:8080] [--workers 1]
use std::io;
use std::time::Duration;

use httplite_peers::{args, sleep_ms};
use may_minihttp::{HttpService, HttpServiceFactory, Request, Response};

#[derive(Clone)]
struct Hello;

impl HttpService for Hello {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        if let Some(ms) = sleep_ms(req.path()) {
            may::coroutine::sleep(Duration::from_millis(ms));
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
    let (bind, workers) = args();
    may::config().set_workers(workers).set_stack_size(0x4000);
    let server = Factory.start(bind).expect("bind");
    server.join().unwrap();
}
