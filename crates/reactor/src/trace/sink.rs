//! The chrome trace's file and its writer thread: the event loops never
//! write to the file themselves (a slow disk must not stall them).
//! A process that may run no thread (`--runtime fork`) writes it directly
//! instead ([`start_direct`], `sink/direct.rs`).
//!
//! Threads hand over whole chunks of events ([`push`], one lock per chunk),
//! and the writer collects every track's buffer each [`SWEEP`], so that an
//! idle thread's last events reach the file too. Both happen under the
//! track's lock, then the queue's, so a thread's chunks are queued, and
//! written, in the order they were recorded. If the writer falls behind by
//! more than [`MAX_QUEUED`] bytes, chunks are dropped and counted.

use std::fs::File;
use std::io::{self, Write as _};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::chrome::{self, Track};

mod direct;

pub(super) use direct::{
    add_dropped_by_rate, forget_tracks, is_direct, process_name, start_direct,
};

/// A thread hands its buffer over once it holds this many bytes.
pub(super) const CHUNK: usize = 32 * 1024;
/// The most bytes waiting for the writer; beyond it chunks are dropped.
const MAX_QUEUED: usize = 64 << 20;
/// How often the writer collects every track's buffer.
const SWEEP: Duration = Duration::from_millis(100);
/// How long [`finish`] waits for the writer to write the rest.
const FINISH_WAIT: Duration = Duration::from_secs(2);

struct Sink {
    queue: Mutex<Queue>,
    /// Signalled when the queue gets work, and when the writer is done.
    cv: Condvar,
    tracks: Mutex<Vec<Arc<Mutex<Track>>>>,
    /// Set in direct mode: each process writes its chunks itself, and no
    /// writer thread runs.
    direct: Option<direct::Direct>,
}

#[derive(Default)]
struct Queue {
    chunks: Vec<Vec<u8>>,
    queued: usize,
    /// Events in chunks dropped because the writer fell behind.
    dropped_events: u64,
    /// Whether a write failed (the rest is then discarded).
    failed: bool,
    /// The closing metadata event and `]`, set by [`finish`].
    tail: Option<Vec<u8>>,
    /// Set by [`finish`]: later chunks are discarded.
    closed: bool,
    done: bool,
}

static SINK: OnceLock<Sink> = OnceLock::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Creates the file, writes the array's opening bracket and starts the
/// writer thread.
pub(super) fn start(path: &Path) -> io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(b"[\n")?;
    let sink = Sink {
        queue: Mutex::new(Queue::default()),
        cv: Condvar::new(),
        tracks: Mutex::new(Vec::new()),
        direct: None,
    };
    if SINK.set(sink).is_err() {
        return Err(io::Error::other("the chrome trace was started already"));
    }
    std::thread::Builder::new()
        .name("trace-writer".into())
        .spawn(move || write_loop(file))?;
    Ok(())
}

/// Makes `track` known to the writer (its buffer is collected each sweep).
pub(super) fn register(track: Arc<Mutex<Track>>) {
    if let Some(sink) = SINK.get() {
        lock(&sink.tracks).push(track);
    }
}

/// Queues one chunk of `events` whole events. Called with the chunk's
/// track locked, which keeps each thread's chunks in order.
pub(super) fn push(bytes: Vec<u8>, events: u64) {
    let Some(sink) = SINK.get() else { return };
    if let Some(direct) = &sink.direct {
        direct.write(&bytes, events);
        return;
    }
    let mut q = lock(&sink.queue);
    if q.closed {
        return;
    }
    if q.queued + bytes.len() > MAX_QUEUED {
        q.dropped_events += events;
        return;
    }
    q.queued += bytes.len();
    q.chunks.push(bytes);
    sink.cv.notify_all();
}

/// Moves every track's buffer into the queue; with `close`, also closes
/// their open slices at `now_ns` and stops them recording. Returns the
/// events the tracks' rate limits dropped.
fn sweep(sink: &Sink, close: Option<u64>) -> u64 {
    let mut dropped = 0;
    let mut tracks = lock(&sink.tracks);
    // A thread that ended leaves its track here alone: collect it one last
    // time, then forget it (one thread per connection would pile up).
    tracks.retain(|track| {
        let mut t = chrome::lock(track);
        if let Some(ns) = close {
            t.close_open(ns);
            t.closed = true;
        }
        dropped += t.dropped;
        if !t.bytes.is_empty() {
            let bytes = std::mem::take(&mut t.bytes);
            let events = std::mem::take(&mut t.events);
            push(bytes, events);
        }
        drop(t);
        Arc::strong_count(track) > 1 || close.is_some()
    });
    dropped
}

fn write_loop(mut file: File) {
    let Some(sink) = SINK.get() else { return };
    loop {
        sweep(sink, None);
        let (chunks, tail) = {
            let mut q = lock(&sink.queue);
            if q.chunks.is_empty() && q.tail.is_none() {
                q = sink
                    .cv
                    .wait_timeout(q, SWEEP)
                    .map_or_else(|e| e.into_inner().0, |(q, _)| q);
            }
            q.queued = 0;
            (std::mem::take(&mut q.chunks), q.tail.take())
        };
        let mut failed = false;
        for chunk in chunks.iter().chain(tail.as_ref()) {
            failed |= file.write_all(chunk).is_err();
        }
        if failed {
            lock(&sink.queue).failed = true;
        }
        if tail.is_some() {
            let _ = file.sync_data();
            lock(&sink.queue).done = true;
            sink.cv.notify_all();
            return;
        }
    }
}

/// What [`super::finish`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Events left out: by the rate limit, or because the writer fell
    /// behind.
    pub dropped_events: u64,
    /// Whether the file was closed (the writer wrote everything in time).
    pub complete: bool,
}

/// Closes every track (open slices end now), hands the rest to the writer
/// with the closing metadata event and `]`, and waits (at most
/// [`FINISH_WAIT`]) for it to be written. `None` if no chrome trace runs.
pub(super) fn finish(rate: u32, now_ns: u64) -> Option<Summary> {
    let sink = SINK.get()?;
    let by_rate = sweep(sink, Some(now_ns));
    let mut q = lock(&sink.queue);
    if q.closed {
        return None; // finished already
    }
    q.closed = true;
    if let Some(direct) = &sink.direct {
        return Some(direct.finish(by_rate, rate));
    }
    let dropped_events = by_rate + q.dropped_events;
    let tail = tail(by_rate, q.dropped_events, rate);
    q.tail = Some(tail.into_bytes());
    sink.cv.notify_all();
    let deadline = Instant::now() + FINISH_WAIT;
    while !q.done {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        q = sink
            .cv
            .wait_timeout(q, left)
            .map_or_else(|e| e.into_inner().0, |(q, _)| q);
    }
    Some(Summary {
        dropped_events,
        complete: q.done && !q.failed,
    })
}

/// The closing metadata event (`httplite_trace`, with the drop counts)
/// and the array's `]`.
fn tail(by_rate: u64, by_writer: u64, rate: u32) -> String {
    format!(
        "{{\"name\":\"httplite_trace\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"args\":{{\
         \"dropped_events\":{},\"dropped_by_rate_limit\":{by_rate},\
         \"dropped_by_writer\":{by_writer},\"rate_per_thread\":{rate}}}}}\n]\n",
        std::process::id(),
        by_rate + by_writer,
    )
}
