//! The timeline written without a writer thread, by every process of a
//! process-per-connection server (`--runtime fork`): its parent may run no
//! thread (`fork` copies only the calling one), and each child lives for
//! one connection.
//!
//! **One file, appended to by every process**, rather than a file per
//! child merged by the parent at exit: a file per connection would pile up
//! thousands of files on a busy server, a parent killed before its merge
//! would leave no timeline at all, and the merge would read them all back
//! at shutdown. Instead the parent creates the file with `O_APPEND` and
//! writes the opening `[` before any fork, so every child inherits the one
//! open file description. Each process buffers its events as a thread
//! does in the writer-thread mode (whole JSON lines) and writes a buffer
//! with a single `write(2)` when it reaches a chunk, and when the child
//! ends ([`super::super::before_exit`]). To a regular file opened
//! `O_APPEND`, each `write(2)` is placed at the file's end and written in
//! one piece, so chunks from different processes never interleave inside
//! a line: the file is the same one-event-per-line array as the writer
//! thread's, readable whole after the parent's `finish` and with the
//! lenient rule after a crash. The parent writes the closing event and
//! `]` last: it finishes only once every child has been reaped.
//!
//! Each event carries its process's pid and, as `tid`, the OS thread id
//! (unique across processes, where the writer-thread mode's counter would
//! give every child the same tid), so Perfetto shows a process per child.
//!
//! The counts of dropped events live in a shared anonymous page that every
//! child inherits and adds to; the parent writes their sum in the closing
//! event. A failed or short write drops that chunk (counted), never stops
//! the process. The price of writing in place: a process waits for its own
//! `write(2)` (the parent once per chunk of its own events, a child at
//! most once per chunk and once at its end).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use super::{Queue, SINK, Sink, Summary, lock, tail};

/// What every process adds to: in a `MAP_SHARED` page, so a child's
/// additions reach the parent.
#[repr(C)]
struct Shared {
    /// Events the processes' rate limits dropped (children, at their end).
    dropped_by_rate: AtomicU64,
    /// Events in chunks whose write failed or was short.
    dropped_by_writer: AtomicU64,
    /// Whether any write failed.
    failed: AtomicBool,
}

/// The direct mode's file and counters.
pub(in crate::trace) struct Direct {
    file: File,
    shared: &'static Shared,
}

impl Direct {
    /// Writes `bytes` (`events` whole events) with one `write(2)`; on a
    /// failure or a short write, counts the chunk's events as dropped.
    pub(super) fn write(&self, bytes: &[u8], events: u64) {
        if bytes.is_empty() {
            return;
        }
        let written = loop {
            match (&self.file).write(bytes) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        if !matches!(written, Ok(n) if n == bytes.len()) {
            // A short write cannot be completed: another process may have
            // appended after it. The lenient rule reads up to the cut.
            let shared = self.shared;
            shared
                .dropped_by_writer
                .fetch_add(events, Ordering::Relaxed);
            shared.failed.store(true, Ordering::Relaxed);
        }
    }

    /// The parent's end: the closing event, with every process's drops,
    /// and `]`. `by_rate`: the parent's own rate-limit drops.
    pub(super) fn finish(&self, by_rate: u64, rate: u32) -> Summary {
        let shared = self.shared;
        let by_rate = by_rate + shared.dropped_by_rate.load(Ordering::Relaxed);
        let by_writer = shared.dropped_by_writer.load(Ordering::Relaxed);
        self.write(tail(by_rate, by_writer, rate).as_bytes(), 1);
        let _ = self.file.sync_data();
        Summary {
            dropped_events: by_rate + by_writer,
            complete: !shared.failed.load(Ordering::Relaxed),
        }
    }
}

/// Creates (or truncates) the file at `path` for appending, writes the
/// array's opening bracket and the process's name, and makes [`super::push`]
/// write in place. No thread is started.
pub(in crate::trace) fn start_direct(path: &Path, process: &str) -> io::Result<()> {
    // O_APPEND through the custom flags: std refuses `append` together
    // with `truncate`, which a new trace wants.
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_APPEND)
        .open(path)?;
    let shared = shared_page()?;
    let head = format!("[\n{}", process_name(process));
    (&file).write_all(head.as_bytes())?;
    let sink = Sink {
        queue: Mutex::new(Queue::default()),
        cv: Condvar::new(),
        tracks: Mutex::new(Vec::new()),
        direct: Some(Direct { file, shared }),
    };
    if SINK.set(sink).is_err() {
        return Err(io::Error::other("the chrome trace was started already"));
    }
    Ok(())
}

/// Whether the timeline is written in place (no writer thread).
pub(in crate::trace) fn is_direct() -> bool {
    SINK.get().is_some_and(|s| s.direct.is_some())
}

/// In a fork child: forgets the tracks copied from the parent, whose
/// events the parent writes itself.
pub(in crate::trace) fn forget_tracks() {
    if let Some(sink) = SINK.get() {
        lock(&sink.tracks).clear();
    }
}

/// Adds a child's rate-limit drops to the count the parent writes.
pub(in crate::trace) fn add_dropped_by_rate(n: u64) {
    if let Some(direct) = SINK.get().and_then(|s| s.direct.as_ref()) {
        (direct.shared.dropped_by_rate).fetch_add(n, Ordering::Relaxed);
    }
}

/// The `process_name` metadata event of this process, as a line.
pub(in crate::trace) fn process_name(name: &str) -> String {
    format!(
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\
         \"args\":{{\"name\":{}}}}},\n",
        std::process::id(),
        super::chrome::Json(name)
    )
}

/// A zeroed page shared with every child forked from now on.
fn shared_page() -> io::Result<&'static Shared> {
    let size = std::mem::size_of::<Shared>();
    // SAFETY: an anonymous mapping of `size` bytes at an address the
    // kernel picks; no fd or existing memory is involved.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the mapping is page-aligned, zero-filled (all-zero atomics
    // are valid `Shared`), at least `size` bytes, and never unmapped, so
    // the reference may live for the rest of the process.
    Ok(unsafe { &*ptr.cast::<Shared>() })
}
