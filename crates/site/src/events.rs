//! `/_httplite/events`: the stats document as Server-Sent Events, one
//! `data:` event about once a second, for the dashboard page.
//!
//! A long-lived streaming response with no request behind each write: the
//! plan encodes an event, then asks the driver for a
//! [`Step::Tick`](crate::plan::Step::Tick) (write it out under the write
//! timeout, wait the interval, watching the socket and shutdown), and so on
//! until the client leaves or the server drains. What a viewer costs is
//! the design's: a parked task and a timer on the stackless runtime, a
//! parked coroutine on stackful, a whole thread (or a pool thread) on
//! threads and threadpool, a process on fork. Hence the bound
//! ([`EventsConfig::max_viewers`], 503 beyond it), counted server-wide.
//!
//! ```text
//!   HTTP/1.1 200 OK
//!   Content-Type: text/event-stream
//!   Transfer-Encoding: chunked
//!
//!   retry: 3000                     (the browser's reconnect delay)
//!   data: {"state":"serving",...}   (at once, then every interval)
//!
//!   data: {...}
//! ```

use std::time::Duration;

use bytes::BytesMut;
use http1::{BodyEncoder, Framing, ReplyTo, Status};

use crate::respond::Outcome;
use crate::routes::App;
use crate::stats::{ErrorKind, ViewerGuard, WorkerStats};

/// How the event streams run (fixed at start-up).
#[derive(Debug, Clone, Copy)]
pub struct EventsConfig {
    /// Streams open at once, server-wide; one more is answered 503.
    pub max_viewers: u64,
    /// Time between two events.
    pub interval: Duration,
}

impl Default for EventsConfig {
    fn default() -> EventsConfig {
        EventsConfig {
            max_viewers: 16,
            interval: Duration::from_secs(1),
        }
    }
}

/// What the browser waits before reconnecting a stream that ended, in ms.
const RETRY_MS: u32 = 3000;

/// One open stream: its body encoder and its place in the viewer gauge.
#[derive(Debug)]
pub(crate) struct Stream {
    encoder: BodyEncoder,
    /// Body bytes sent (for the access log).
    sent: u64,
    _viewer: ViewerGuard,
}

/// What opening a stream came to.
pub(crate) enum Opened {
    /// The head and the first event are encoded: tick.
    Streaming(Stream),
    /// Answered at once (a `HEAD`, or 503 when full); counted.
    Answered(Outcome),
    /// The head could not be encoded: close.
    Failed,
}

/// Headers of the stream (and of its `HEAD`).
const HEADERS: [(&str, &[u8]); 3] = [
    ("Content-Type", b"text/event-stream"),
    ("Cache-Control", b"no-store"),
    // Asks a buffering reverse proxy (nginx) to pass events on at once.
    ("X-Accel-Buffering", b"no"),
];

/// Opens a stream for the request answered through `to`: 503 with
/// `Retry-After` when [`EventsConfig::max_viewers`] are open already.
pub(crate) fn open(app: &App, stats: &WorkerStats, wbuf: &mut BytesMut, to: ReplyTo) -> Opened {
    // The stream ends only by closing: nothing may follow it.
    let to = ReplyTo {
        keep_alive: false,
        ..to
    };
    if to.head_only {
        // The head alone: no stream, no viewer.
        let head = http1::encode_head(wbuf, to, Status::OK, &HEADERS, Framing::Chunked);
        return match head.and_then(|encoder| encoder.finish(wbuf)) {
            Ok(()) => Opened::Answered(Outcome {
                status: Status::OK,
                bytes: 0,
                keep_alive: false,
            }),
            Err(_) => Opened::Failed,
        };
    }
    let Some(viewer) = app.stats.event_viewer(stats, app.events.max_viewers) else {
        stats.error(ErrorKind::Overloaded);
        let retry = crate::jobs::http::RETRY_AFTER_SECS.to_string();
        let body = b"503 Service Unavailable: too many event viewers, poll /_httplite/stats\n";
        let keep = crate::respond::respond_with(
            wbuf,
            stats,
            to,
            Status::SERVICE_UNAVAILABLE,
            &[
                ("Content-Type", crate::action::TEXT.as_bytes()),
                ("Retry-After", retry.as_bytes()),
            ],
            body,
        );
        return match keep {
            Some(keep_alive) => Opened::Answered(Outcome {
                status: Status::SERVICE_UNAVAILABLE,
                bytes: body.len() as u64,
                keep_alive,
            }),
            None => Opened::Failed,
        };
    };
    let Ok(encoder) = http1::encode_head(wbuf, to, Status::OK, &HEADERS, Framing::Chunked) else {
        return Opened::Failed;
    };
    let mut stream = Stream {
        encoder,
        sent: 0,
        _viewer: viewer,
    };
    let first = format!("retry: {RETRY_MS}\n\n");
    if stream.write(wbuf, first.as_bytes()).is_err() || stream.push(app, wbuf).is_err() {
        return Opened::Failed;
    }
    Opened::Streaming(stream)
}

impl Stream {
    /// Encodes one event: the stats document as it is now.
    pub(crate) fn push(&mut self, app: &App, wbuf: &mut BytesMut) -> Result<(), http1::Error> {
        // The document is one line of JSON: no newline can end the `data:`
        // field early.
        let event = format!("data: {}\n\n", app.stats_json());
        self.write(wbuf, event.as_bytes())
    }

    fn write(&mut self, wbuf: &mut BytesMut, bytes: &[u8]) -> Result<(), http1::Error> {
        self.encoder.write(wbuf, bytes)?;
        self.sent += bytes.len() as u64;
        Ok(())
    }

    /// Ends the body; the outcome to log (the connection closes), `None`
    /// if the end could not be encoded.
    pub(crate) fn finish(self, stats: &WorkerStats, wbuf: &mut BytesMut) -> Option<Outcome> {
        self.encoder.finish(wbuf).ok()?;
        stats.response(Status::OK.code());
        Some(Outcome {
            status: Status::OK,
            bytes: self.sent,
            keep_alive: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use http1::{Decoder, Limits, Message};

    use crate::plan::{Event, Plan, Step};
    use crate::respond::{Handled, handle};
    use crate::routes::tests::app;

    fn events_plan(app: &crate::routes::App, head: &str) -> Plan {
        let mut rbuf = BytesMut::from(head.as_bytes());
        let Ok(Some(Message::Head(req))) = Decoder::new(Limits::default()).decode(&mut rbuf) else {
            panic!("a complete head")
        };
        let worker = app.stats.worker(0);
        match handle(
            app,
            &worker,
            &mut BytesMut::new(),
            req,
            &crate::exposure::Surface::Public,
            false,
            |_, _| {},
        ) {
            Handled::Slow(slow) => Plan::new(slow),
            Handled::Done(_) => panic!("an event stream waits"),
        }
    }

    fn viewers(app: &crate::routes::App) -> u64 {
        app.stats.total(|w| &w.event_viewers)
    }

    #[test]
    fn a_stream_ticks_with_an_event_each_time_and_ends_with_its_last_chunk() {
        let app = app(None);
        let worker = app.stats.worker(0);
        let mut plan = events_plan(&app, "GET /_httplite/events HTTP/1.1\r\nHost: a\r\n\r\n");
        let mut wbuf = BytesMut::new();
        let step = plan.next(&app, &worker, &mut wbuf, Event::Start);
        assert!(
            matches!(step, Step::Tick(d) if d == app.events.interval),
            "{step:?}"
        );
        let text = String::from_utf8_lossy(&wbuf).into_owned();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(
            text.contains("Content-Type: text/event-stream\r\n"),
            "{text}"
        );
        // Two chunks: the reconnect delay, then the first event.
        assert!(text.contains("\r\nretry: 3000\n\n\r\n"), "{text}");
        assert!(text.contains("\r\ndata: {\"state\":\"serving\""), "{text}");
        assert!(text.ends_with("}\n\n\r\n"), "{text}");
        assert_eq!(viewers(&app), 1);
        wbuf.clear();
        let step = plan.next(&app, &worker, &mut wbuf, Event::Ticked { ended: false });
        assert!(matches!(step, Step::Tick(_)), "{step:?}");
        assert!(String::from_utf8_lossy(&wbuf).contains("data: {\"state\""));
        wbuf.clear();
        match plan.next(&app, &worker, &mut wbuf, Event::Ticked { ended: true }) {
            Step::Done(outcome) => assert!(!outcome.keep_alive && outcome.bytes > 0),
            other => panic!("{other:?}"),
        }
        assert_eq!(&wbuf[..], b"0\r\n\r\n");
        drop(plan);
        assert_eq!(viewers(&app), 0);
        assert_eq!(app.stats.total(|w| &w.event_streams), 1);
    }

    #[test]
    fn a_stream_dropped_mid_way_gives_its_viewer_back() {
        // A driver drops the plan when a write times out or fails.
        let app = app(None);
        let worker = app.stats.worker(0);
        let mut plan = events_plan(&app, "GET /_httplite/events HTTP/1.1\r\nHost: a\r\n\r\n");
        let step = plan.next(&app, &worker, &mut BytesMut::new(), Event::Start);
        assert!(matches!(step, Step::Tick(_)));
        assert_eq!(viewers(&app), 1);
        drop(plan);
        assert_eq!(viewers(&app), 0);
    }

    #[test]
    fn head_gets_the_head_alone_and_holds_no_viewer() {
        let app = app(None);
        let worker = app.stats.worker(0);
        let mut plan = events_plan(&app, "HEAD /_httplite/events HTTP/1.1\r\nHost: a\r\n\r\n");
        let mut wbuf = BytesMut::new();
        let step = plan.next(&app, &worker, &mut wbuf, Event::Start);
        assert!(matches!(step, Step::Done(o) if !o.keep_alive), "{step:?}");
        let text = String::from_utf8_lossy(&wbuf).into_owned();
        assert!(
            text.ends_with("\r\n\r\n") && !text.contains("data:"),
            "{text}"
        );
        assert_eq!(viewers(&app), 0);
    }
}
