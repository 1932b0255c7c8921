//! The open-file cache: a served file's fd, its metadata and its response
//! headers, kept between requests, so that a hit costs no `openat2`, no
//! `statx` and no `close`, and no header formatting.
//!
//! **Freshness.** An entry is trusted for `valid` (`--file-cache-valid`,
//! default 1 s) after it was last checked; the first request after that
//! checks it with one `fstatat` of its path: if the path now names another
//! file (a deploy that renames a new file into place, a delete, a directory
//! swapped in), or the same file changed (written in place: size, mtime;
//! permissions: ctime), the entry is dropped and the request takes the
//! uncached path, which opens the file again. So a change is served at most
//! `valid` late; `0` checks on every request (one syscall instead of
//! three). The alternatives weighed: inotify sees every change at once but
//! needs a watch per directory, a watcher thread and a limit that an
//! operator must raise for large trees; clearing the whole cache every loop
//! turn (H2O) keeps nothing between turns of a loop serving one request per
//! turn, which is the common case here. A file that shrinks while it is
//! being sent is not the cache's business: the driver sees `sendfile`
//! return 0 and closes the connection (a small body copied with its head is
//! taken back, see `plan.rs`).
//!
//! **Shape.** One cache for all workers, in shards by the path's hash, each
//! behind its own mutex: the threads runtime has one thread per connection,
//! so a per-thread cache would hold one file; shards keep workers from
//! waiting on each other (a lock is uncontended when each worker mostly
//! serves its own connections). Eviction is CLOCK: a slot's bit is set on
//! every hit, and the hand clears bits until it finds a slot whose bit is
//! clear, so that recently used files stay. Missing files are cached too
//! (negative entries), checked the same way.
//!
//! **fds.** Every entry holds an open fd against the process's limit: the
//! cache's size is capped by the caller (see `--file-cache`), and a reply
//! shares the fd (an `Arc<File>`) rather than duplicating it. The cache also
//! gives fds back under pressure, so that it never holds the ones accepts
//! need: the kernel hands out the lowest free fd, so a newly opened file
//! whose fd is at or above seven eighths of `RLIMIT_NOFILE` proves that at
//! least that many fds are in use. Such a file is not cached, and an eighth
//! of the entries (the CLOCK's choice in each shard) are closed
//! (`FileCache::admit`); an `EMFILE` on open sheds the same way before the
//! one retry (`FileCache::shed`). Both are counted as `shed`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::ffi::CString;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http1::HeaderBlock;

use crate::static_files::NO_CACHE;

/// Largest file whose bytes an entry keeps: at the default 10,000 entries
/// that bounds the memory for bodies at 40 MiB.
pub const BODY_MAX: u64 = 4 * 1024;

/// Shards of the cache; a power of two.
const SHARDS: usize = 16;

/// What identifies a file's version: if any of these changed, so may have
/// its bytes or who may read them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Version {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    fn of_meta(m: &std::fs::Metadata) -> Version {
        use std::os::unix::fs::MetadataExt;
        Version {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    fn of(st: &libc::stat) -> Version {
        Version {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
        }
    }
}

/// A cached answer for one path: a regular file with its headers, or "no
/// such file".
#[derive(Debug)]
pub struct Entry {
    /// The open file; `None` for a negative entry (404).
    pub(crate) file: Option<Arc<File>>,
    pub(crate) size: u64,
    pub(crate) mtime: u64,
    /// `"mtime-nsec-size"` in hex, quoted.
    pub(crate) etag: String,
    /// The HTTP date of `mtime`.
    pub(crate) last_modified: String,
    pub(crate) content_type: Cow<'static, str>,
    /// The whole body of a file of at most [`BODY_MAX`] bytes, read once,
    /// so that a hit needs no `pread` either.
    pub(crate) body: Option<Arc<[u8]>>,
    /// The 200's and the 304's heads, encoded once.
    pub(crate) heads: Option<Arc<FileHeads>>,
    /// The path relative to the root, for `fstatat`.
    rel: CString,
    /// `None` for a negative entry.
    version: Option<Version>,
}

impl Entry {
    /// An entry for the regular file `file`, whose metadata is `meta`.
    pub(crate) fn file(
        file: Arc<File>,
        meta: &std::fs::Metadata,
        rel: CString,
        etag: String,
        last_modified: String,
        content_type: Cow<'static, str>,
    ) -> Entry {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let size = meta.size();
        let body = (size <= BODY_MAX).then(|| {
            let mut buf = vec![0; size as usize];
            // A file that shrank since its `fstat` keeps no body (and its
            // next check finds it changed).
            file.read_exact_at(&mut buf, 0)
                .ok()
                .map(|()| Arc::from(buf))
        });
        Entry {
            body: body.flatten(),
            heads: FileHeads::new(size, &etag, &last_modified, &content_type).map(Arc::new),
            file: Some(file),
            size,
            mtime: meta.mtime().max(0) as u64,
            etag,
            last_modified,
            content_type,
            rel,
            version: Some(Version::of_meta(meta)),
        }
    }

    /// A negative entry: `rel` does not exist.
    pub(crate) fn missing(rel: CString) -> Entry {
        Entry {
            file: None,
            size: 0,
            mtime: 0,
            etag: String::new(),
            last_modified: String::new(),
            content_type: Cow::Borrowed(""),
            body: None,
            heads: None,
            rel,
            version: None,
        }
    }

    /// Whether `rel` still names what this entry describes, by one
    /// `fstatat` beneath `root`.
    fn still_current(&self, root: RawFd) -> bool {
        // SAFETY: an all-zero stat is a valid buffer for the kernel to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `rel` is NUL-terminated and `st` writable, both alive for
        // the call; `root` is an open directory fd (or the call fails).
        let rc = unsafe { libc::fstatat(root, self.rel.as_ptr(), &mut st, 0) };
        match (rc, self.version) {
            (0, Some(v)) => Version::of(&st) == v && st.st_mode & libc::S_IFMT == libc::S_IFREG,
            (0, None) => false,
            (_, None) => std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT),
            (_, Some(_)) => false,
        }
    }
}

/// A cached file's answers with no per-request header (a 200 of the whole
/// file, a 304), their header lines encoded once: a hit copies them in one
/// piece instead of formatting and checking five headers. The lines and
/// their order are `static_files::reply`'s.
#[derive(Debug)]
pub struct FileHeads {
    /// The whole file's length (the 200's `Content-Length`).
    pub len: u64,
    /// The 200's `Content-Type`, `Last-Modified`, `ETag`, `Cache-Control`
    /// and `Accept-Ranges`.
    pub ok: HeaderBlock,
    /// The 304's `Last-Modified`, `ETag` and `Cache-Control`.
    pub not_modified: HeaderBlock,
}

impl FileHeads {
    fn new(len: u64, etag: &str, last_modified: &str, content_type: &str) -> Option<FileHeads> {
        let validators: [(&str, &[u8]); 3] = [
            ("Last-Modified", last_modified.as_bytes()),
            ("ETag", etag.as_bytes()),
            ("Cache-Control", NO_CACHE.as_bytes()),
        ];
        let mut ok = vec![("Content-Type", content_type.as_bytes())];
        ok.extend(validators);
        ok.push(("Accept-Ranges", b"bytes"));
        Some(FileHeads {
            len,
            ok: HeaderBlock::new(&ok).ok()?,
            not_modified: HeaderBlock::new(&validators).ok()?,
        })
    }
}

/// Counters of the cache, for `/_httplite/stats`.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Answers taken from an entry.
    pub hits: AtomicU64,
    /// Lookups that found no usable entry.
    pub misses: AtomicU64,
    /// Entries dropped to make room.
    pub evictions: AtomicU64,
    /// `fstatat` checks of entries older than the validity.
    pub revalidations: AtomicU64,
    /// Entries dropped because their file changed.
    pub invalidations: AtomicU64,
    /// Entries closed to give fds back (see the module: **fds**).
    pub shed: AtomicU64,
}

struct Slot {
    key: Box<str>,
    entry: Arc<Entry>,
    /// When it was last found current.
    checked: Instant,
    /// Used since the hand last passed.
    referenced: bool,
}

#[derive(Default)]
struct Shard {
    index: HashMap<Box<str>, usize>,
    slots: Vec<Slot>,
    hand: usize,
}

/// The cache; see the module documentation.
pub struct FileCache {
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
    valid: Duration,
    /// Its counters.
    pub stats: CacheStats,
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache")
            .field("capacity", &(self.per_shard * SHARDS))
            .field("valid", &self.valid)
            .finish_non_exhaustive()
    }
}

impl FileCache {
    /// A cache of about `capacity` entries (at least one per shard), each
    /// trusted for `valid` after a check.
    pub fn new(capacity: usize, valid: Duration) -> FileCache {
        FileCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            valid,
            stats: CacheStats::default(),
        }
    }

    /// Whether a file just opened as `fd` may be cached: not if its number
    /// shows the fd table seven eighths full; then the cache sheds too. The
    /// limit is read each time (one `getrlimit` per miss, which already
    /// cost an open and a `statx`), so that a limit changed at run time
    /// (`prlimit`) counts.
    pub(crate) fn admit(&self, fd: RawFd) -> bool {
        let high = fd_limit().map_or(u64::MAX, |limit| limit - limit / 8);
        if u64::try_from(fd).is_ok_and(|fd| fd < high) {
            return true;
        }
        self.shed();
        false
    }

    /// Closes about an eighth of the entries (at least one per non-empty
    /// shard), the CLOCK's choice, to give their fds back. An entry still
    /// shared with a reply in flight closes when that reply is done.
    pub(crate) fn shed(&self) {
        for shard in &self.shards[..] {
            let mut shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            let n = shard.slots.len().div_ceil(8);
            for _ in 0..n {
                let victim = shard.clock();
                shard.remove(victim);
            }
            self.stats.shed.fetch_add(n as u64, Relaxed);
        }
    }

    fn shard(&self, key: &str) -> &Mutex<Shard> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        &self.shards[h.finish() as usize & (SHARDS - 1)]
    }

    /// The current entry for `key` (the request path), checking it with
    /// `fstatat` beneath `root` if it is older than the validity; `None` (a
    /// miss) if there is none or it went stale (and is dropped).
    pub(crate) fn get(&self, key: &str, root: RawFd) -> Option<Arc<Entry>> {
        let mut shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        let Some(&i) = shard.index.get(key) else {
            self.stats.misses.fetch_add(1, Relaxed);
            return None;
        };
        if shard.slots[i].checked.elapsed() >= self.valid {
            self.stats.revalidations.fetch_add(1, Relaxed);
            if !shard.slots[i].entry.still_current(root) {
                self.stats.invalidations.fetch_add(1, Relaxed);
                self.stats.misses.fetch_add(1, Relaxed);
                shard.remove(i);
                return None;
            }
            shard.slots[i].checked = Instant::now();
        }
        let slot = &mut shard.slots[i];
        slot.referenced = true;
        self.stats.hits.fetch_add(1, Relaxed);
        Some(slot.entry.clone())
    }

    /// Keeps `entry` for `key`, evicting the least recently used entry of
    /// its shard if it is full.
    pub(crate) fn insert(&self, key: &str, entry: Entry) {
        let mut shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        let slot = Slot {
            key: key.into(),
            entry: Arc::new(entry),
            checked: Instant::now(),
            referenced: false,
        };
        if let Some(&i) = shard.index.get(key) {
            shard.slots[i] = slot;
            return;
        }
        if shard.slots.len() >= self.per_shard {
            let victim = shard.clock();
            self.stats.evictions.fetch_add(1, Relaxed);
            shard.remove(victim);
        }
        let i = shard.slots.len();
        shard.index.insert(slot.key.clone(), i);
        shard.slots.push(slot);
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).slots.len())
            .sum()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cache's members of the stats document (`"file_cache":{…}`),
    /// appended after a comma.
    pub fn stats_members(&self, s: &mut String) {
        use std::fmt::Write as _;
        let st = &self.stats;
        let _ = write!(
            s,
            ",\"file_cache\":{{\"entries\":{},\"hits\":{},\"misses\":{},\"evictions\":{},\
             \"revalidations\":{},\"invalidations\":{},\"shed\":{}}}",
            self.len(),
            st.hits.load(Relaxed),
            st.misses.load(Relaxed),
            st.evictions.load(Relaxed),
            st.revalidations.load(Relaxed),
            st.invalidations.load(Relaxed),
            st.shed.load(Relaxed),
        );
    }
}

/// The soft `RLIMIT_NOFILE`, if it is finite.
fn fd_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a writable rlimit for the duration of the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (rc == 0 && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

impl Shard {
    /// The slot the CLOCK hand stops at: the first whose bit is clear,
    /// clearing bits on the way.
    fn clock(&mut self) -> usize {
        loop {
            if self.hand >= self.slots.len() {
                self.hand = 0;
            }
            let slot = &mut self.slots[self.hand];
            if !slot.referenced {
                return self.hand;
            }
            slot.referenced = false;
            self.hand += 1;
        }
    }

    /// Removes slot `i` (the last slot moves into its place).
    fn remove(&mut self, i: usize) {
        let gone = self.slots.swap_remove(i);
        self.index.remove(&gone.key);
        if let Some(moved) = self.slots.get(i) {
            self.index.insert(moved.key.clone(), i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn neg(name: &str) -> Entry {
        Entry::missing(CString::new(name).unwrap())
    }

    #[test]
    fn a_high_fd_is_not_admitted_and_sheds_an_eighth() {
        let cache = FileCache::new(1600, Duration::from_secs(60));
        for i in 0..800 {
            cache.insert(&format!("k{i}"), neg("n"));
        }
        assert!(cache.admit(3), "a low fd is cached");
        assert_eq!(cache.len(), 800);
        // An fd number no limit here allows: the table is "full".
        assert!(!cache.admit(RawFd::MAX));
        let shed = cache.stats.shed.load(Relaxed);
        assert_eq!(cache.len() as u64, 800 - shed);
        // About an eighth of each shard (rounded up): 100 of 800, plus at
        // most one per shard.
        assert!((100..=100 + SHARDS as u64).contains(&shed), "shed {shed}");
    }

    #[test]
    fn clock_keeps_what_is_used() {
        // One slot per shard is too few to test eviction order; 16 shards
        // of 2: fill one shard's worth by finding keys that share a shard.
        let cache = FileCache::new(2 * SHARDS, Duration::from_secs(60));
        let shard_of = |k: &str| std::ptr::from_ref(cache.shard(k));
        let first = shard_of("k0");
        let keys: Vec<String> = (0..10_000)
            .map(|i| format!("k{i}"))
            .filter(|k| shard_of(k) == first)
            .take(3)
            .collect();
        let root = libc::AT_FDCWD;
        cache.insert(&keys[0], neg("a"));
        cache.insert(&keys[1], neg("b"));
        // Use the first: the second is evicted for the third.
        assert!(cache.get(&keys[0], root).is_some());
        cache.insert(&keys[2], neg("c"));
        assert!(cache.get(&keys[0], root).is_some());
        assert!(cache.get(&keys[1], root).is_none());
        assert!(cache.get(&keys[2], root).is_some());
        assert_eq!(cache.stats.evictions.load(Relaxed), 1);
    }

    #[test]
    fn stale_entries_are_checked_and_dropped() {
        let dir = std::env::temp_dir().join(format!("httplite-fc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let root = File::open(&dir).unwrap();
        let root_fd = std::os::fd::AsRawFd::as_raw_fd(&root);
        // Checked on every lookup.
        let cache = FileCache::new(64, Duration::ZERO);
        cache.insert("/gone", neg("gone"));
        assert!(cache.get("/gone", root_fd).is_some(), "still missing");
        std::fs::write(dir.join("gone"), "here now").unwrap();
        assert!(cache.get("/gone", root_fd).is_none(), "created since");
        assert_eq!(cache.stats.invalidations.load(Relaxed), 1);

        let path = dir.join("f");
        std::fs::write(&path, "one").unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        let meta = file.metadata().unwrap();
        let rel = CString::new("f").unwrap();
        let entry = Entry::file(file, &meta, rel, "e".into(), "d".into(), "t".into());
        cache.insert("/f", entry);
        assert!(cache.get("/f", root_fd).is_some());
        let hit = cache.get("/f", root_fd).expect("current");
        assert_eq!(
            hit.body.as_deref(),
            Some(&b"one"[..]),
            "a small file's bytes are kept"
        );
        std::fs::write(&path, "longer now").unwrap();
        assert!(cache.get("/f", root_fd).is_none(), "rewritten in place");

        // A larger file keeps its fd only.
        let big = dir.join("big");
        let size = BODY_MAX as usize + 1;
        std::fs::write(&big, vec![b'x'; size]).unwrap();
        let file = Arc::new(File::open(&big).unwrap());
        let meta = file.metadata().unwrap();
        let entry = Entry::file(
            file,
            &meta,
            CString::new("big").unwrap(),
            "e".into(),
            "d".into(),
            "t".into(),
        );
        assert!(entry.body.is_none() && entry.size == size as u64);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
