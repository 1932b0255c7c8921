//! The counters every process of `--runtime fork` writes: one anonymous
//! `MAP_SHARED` mapping made by the parent before the first `fork()`, so
//! that it sits at the same address in every child and the children's
//! atomic adds land in the same memory. Whichever child answers
//! `/_httplite/stats` reads them all, and the draining flag the parent
//! sets reaches every child's `/_httplite/health`.

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64};

use site::stats::Counters;

/// What the mapping holds: the site's counters for the one "worker" (the
/// parent and its children together), the parent's own, the jobs
/// process's, the access log's, and the draining flag.
#[derive(Debug, Default)]
#[repr(C)]
pub struct Page {
    /// Requests, responses, timeouts, errors (written by the children),
    /// connections and closes (written by the parent at fork and reap).
    pub counters: Counters,
    /// Children alive now.
    pub alive: AtomicU64,
    /// Most children alive at once.
    pub high_water: AtomicU64,
    /// Children that ended on a signal or a non-zero exit status.
    pub crashed: AtomicU64,
    /// `fork()` failures (the connection was closed unanswered).
    pub fork_failed: AtomicU64,
    /// Accepts held back by `--max-connections`.
    pub paused_at_max: AtomicU64,
    /// Times the jobs process ended while the server ran.
    pub jobs_restarts: AtomicU64,
    /// The highest job id the jobs process gave out: where a restarted
    /// one continues.
    pub jobs_last_id: AtomicU64,
    /// The access log's lines, written and dropped by the children.
    pub log: super::log::Counts,
    /// TLS handshakes and their failures, counted by the children.
    pub tls: crate::tls::stats::TlsCounts,
    /// Set by the parent when SIGTERM/SIGINT begins the drain: every
    /// child's health answer turns to 503 and its stats to "draining",
    /// the children already running included.
    pub draining: AtomicBool,
}

static PAGE: OnceLock<&'static Page> = OnceLock::new();

/// The process's page, mapped on first use (in the parent, before any
/// child exists) and never unmapped.
pub fn page() -> io::Result<&'static Page> {
    if let Some(p) = PAGE.get() {
        return Ok(p);
    }
    let ptr = map_shared(std::mem::size_of::<Page>())?;
    let page = ptr.cast::<Page>().as_ptr();
    // SAFETY: the mapping is fresh, page-aligned (so aligned for `Page`),
    // at least `size_of::<Page>()` bytes, readable and writable, never
    // unmapped, so a `&'static` to the value written into it stays valid.
    // `Page` is atomics only: sharing it between processes needs no more
    // than sharing it between threads.
    let page: &'static Page = unsafe {
        page.write(Page::default());
        &*page
    };
    Ok(PAGE.get_or_init(|| page))
}

/// A fresh anonymous `MAP_SHARED` mapping of `len` bytes: zero-filled,
/// page-aligned, never unmapped by anyone here. Made before a fork, it is
/// the same memory at the same address in the parent and every child.
pub(crate) fn map_shared(len: usize) -> io::Result<std::ptr::NonNull<u8>> {
    // SAFETY: an anonymous mapping with no address hint touches no memory
    // of ours; the result is checked against MAP_FAILED.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    std::ptr::NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))
}
