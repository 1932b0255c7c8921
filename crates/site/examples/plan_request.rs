//! Routes a request from raw bytes, with no socket, and prints what the
//! site decided: the bytes a driver would write, and each step of a plan
//! for answers that wait. With `--root DIR`, files are served from DIR.
//!
//! ```sh
//! cargo run -p site --example plan_request
//! cargo run -p site --example plan_request -- 'GET /_httplite/sleep?ms=20 HTTP/1.1\r\nHost: a\r\n\r\n'
//! cargo run -p site --example plan_request -- --root . 'GET /Cargo.toml HTTP/1.1\r\nHost: a\r\nRange: bytes=0-9\r\n\r\n'
//! ```

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use http1::{Decoder, Limits, Message};
use site::exposure::{Endpoint, Exposure, Surface};
use site::jobs::{Jobs, Retention};
use site::plan::{Event, Plan, Step};
use site::respond::{Handled, handle};
use site::routes::App;
use site::static_files::StaticRoot;
use site::stats::Stats;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let root = match args.iter().position(|a| a == "--root") {
        Some(i) => {
            let dir = args.remove(i + 1);
            args.remove(i);
            Some(StaticRoot::new(dir.as_ref(), true).expect("the --root directory"))
        }
        None => None,
    };
    let heads = if args.is_empty() {
        vec![
            "GET /_httplite/plaintext HTTP/1.1\\r\\nHost: a\\r\\n\\r\\n".to_string(),
            "GET /_httplite/sleep?ms=20 HTTP/1.1\\r\\nHost: a\\r\\n\\r\\n".to_string(),
            "POST /_httplite/jobs?type=wordcount HTTP/1.1\\r\\nHost: a\\r\\nContent-Length: 11\\r\\n\\r\\nhello world"
                .to_string(),
        ]
    } else {
        args
    };
    let stats = Arc::new(Stats::new(1));
    let app = App {
        stats: stats.clone(),
        worker_extra: Box::new(|_, _| {}),
        test_endpoints: false,
        jobs: Jobs::new(
            pool::Pool::builder().max_threads(1).build(),
            Retention {
                max_count: 16,
                max_age: Duration::from_secs(60),
            },
            false,
        ),
        events: Default::default(),
        // The example shows every answer, endpoints beside files.
        exposure: match root.is_some() {
            true => Exposure::site(&Endpoint::ALL),
            false => Exposure::DEMO,
        },
        health_path: None,
        max_sleeping: 1024,
        proxy: Default::default(),
        root,
    };
    let worker = stats.worker(0);
    for head in heads {
        let mut rbuf = BytesMut::from(head.replace("\\r\\n", "\r\n").as_bytes());
        let mut decoder = Decoder::new(Limits::default());
        let mut wbuf = BytesMut::new();
        println!("== {head}");
        let req = match decoder.decode(&mut rbuf) {
            Ok(Some(Message::Head(req))) => req,
            Ok(_) => {
                println!("   (an incomplete head)");
                continue;
            }
            Err(e) => {
                site::respond::reject(&mut wbuf, &worker, &e);
                show(&wbuf);
                continue;
            }
        };
        let slow = match handle(
            &app,
            &worker,
            &mut wbuf,
            req,
            &Surface::Public,
            false,
            |_, _| {},
        ) {
            Handled::Done(keep) => {
                println!("   answered at once (keep-alive: {keep})");
                show(&wbuf);
                continue;
            }
            Handled::Slow(slow) => slow,
        };
        // A driver's loop, with every wait pretended.
        let mut plan = Plan::new(slow);
        let mut event = Event::Start;
        loop {
            let step = plan.next(&app, &worker, &mut wbuf, event);
            println!("   step: {step:?}");
            event = match step {
                Step::ReadBody { keep } => {
                    let mut body = Vec::new();
                    while let Ok(Some(Message::Body(b))) = decoder.decode(&mut rbuf) {
                        body.extend_from_slice(&b);
                    }
                    Event::Body(if keep { body } else { Vec::new() })
                }
                Step::Sleep(_) => Event::Slept {
                    shutting_down: false,
                },
                Step::Offload(work) => Event::Offloaded(Ok(Ok(work()))),
                Step::SendFile { .. } => Event::Sent,
                Step::Echo { encoder, .. } => Event::Echoed { encoder, sent: 0 },
                Step::Tick(_) => Event::Ticked { ended: true },
                Step::Done(_) | Step::Close => break,
            };
        }
        show(&wbuf);
    }
}

fn show(wbuf: &BytesMut) {
    for line in String::from_utf8_lossy(wbuf).split("\r\n") {
        println!("   | {line}");
    }
}
