//! Static files under `--root`: safe path resolution, conditional requests,
//! byte ranges (parsed in [`crate::ranges`]). The body itself is sent by
//! the connection with `sendfile(2)`; this module only decides what to send.
//!
//! Traversal is impossible by construction: the URL path is percent-decoded
//! (NUL refused), split into segments, `.` and empty segments dropped, any
//! `..` refused. The file is then opened with `openat2(2)` relative to the
//! root directory's fd with `RESOLVE_BENEATH`: the kernel itself refuses any
//! resolution, symlinks included, that would leave the root. One syscall
//! instead of a `readlink` per path component plus a `stat` (on kernels
//! before 5.6, which lack `openat2`, the path is canonicalised and checked
//! against the canonical root instead).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http1::{Request, Status};

use crate::file_cache::{Entry, FileCache, FileHeads};
use crate::file_features::FileFeatures;
use crate::httpdate::parse_http_date;
use crate::listing::{ListView, listing};
use crate::mime::content_type;
use crate::ranges::{Multipart, RangeSpec, if_range_allows, parse_ranges};

mod precompressed;

/// The directory being served.
#[derive(Debug, Clone)]
pub struct StaticRoot {
    root: PathBuf,
    /// The root, open (`O_PATH`), for `openat2`; `None` where the kernel
    /// lacks `openat2`.
    root_fd: Option<Arc<OwnedFd>>,
    list_dirs: bool,
    /// Open files kept between requests (`--file-cache`); `None` when off
    /// or where the kernel lacks `openat2`.
    cache: Option<Arc<FileCache>>,
    /// List dotfiles too (`--show-hidden`).
    show_hidden: bool,
    /// Header rules, CORS, fallback and error pages (applied by
    /// [`crate::file_features`]).
    features: Arc<FileFeatures>,
    /// Serve `x.br`, `x.zst`, `x.gz` for `x` when the client accepts them
    /// (`--precompressed`; see `precompressed.rs`).
    precompressed: bool,
}

/// What to answer.
#[derive(Debug)]
pub enum StaticReply {
    /// 200 or 206 with (part of) a file as the body.
    File {
        /// 200 or 206.
        status: Status,
        /// The open file (shared with the open-file cache).
        file: Arc<File>,
        /// First byte to send.
        offset: u64,
        /// Bytes to send.
        len: u64,
        /// Content-Type, Last-Modified, ETag, Accept-Ranges, Content-Range.
        headers: Vec<(&'static str, String)>,
        /// The whole file's bytes, when the open-file cache holds them (a
        /// small file): the range is copied from here, not read.
        body: Option<Arc<[u8]>>,
    },
    /// 304: the client's copy is current.
    NotModified {
        /// Last-Modified and ETag.
        headers: Vec<(&'static str, String)>,
    },
    /// 301 to the same path with a trailing slash (a directory).
    Redirect(String),
    /// 200 with an HTML directory listing (`--list-dirs`).
    Listing(String),
    /// A directory to list (`--list-dirs`). Reading a directory of
    /// thousands of entries takes milliseconds, so the runtimes build the
    /// listing with [`StaticReply::list`] on the blocking pool, never on an
    /// event loop (measured by `examples/static_open_cost.rs`).
    ListDir {
        /// The directory, opened beneath the root.
        dir: File,
        /// The request path (the listing's title and link base).
        url_path: String,
        /// Sort (from the query) and dotfiles.
        view: ListView,
    },
    /// 206 with several ranges of a file as a `multipart/byteranges` body.
    Parts {
        /// The open file (shared with the open-file cache).
        file: Arc<File>,
        /// The body's layout: each part's header block and range (boxed:
        /// the replies stay small).
        parts: Box<Multipart>,
        /// Content-Type (multipart), Last-Modified, ETag, Accept-Ranges.
        headers: Vec<(&'static str, String)>,
        /// The whole file's bytes, when the open-file cache holds them.
        body: Option<Arc<[u8]>>,
    },
    /// An error status, with extra headers (416 carries Content-Range).
    Error(Status, Vec<(&'static str, String)>),
    /// 200 with the whole file: [`StaticReply::File`] with its head encoded
    /// once by the open-file cache (no header rule, CORS or sidecar adds to
    /// it).
    Whole {
        /// The open file (shared with the open-file cache).
        file: Arc<File>,
        /// The encoded head lines and the length.
        heads: Arc<FileHeads>,
        /// The whole file's bytes, when the cache holds them.
        body: Option<Arc<[u8]>>,
    },
    /// 304: [`StaticReply::NotModified`] with its head encoded once.
    Unchanged(Arc<FileHeads>),
}

impl StaticReply {
    /// Builds the listing of a [`StaticReply::ListDir`] (blocking: run it on
    /// the pool).
    pub fn list(dir: &File, url_path: &str, view: &ListView) -> StaticReply {
        match listing(url_path, dir, view) {
            Ok(html) => StaticReply::Listing(html),
            Err(e) => StaticReply::Error(io_status(&e), Vec::new()),
        }
    }
}

impl StaticRoot {
    /// Serves `dir`, which must be an existing directory.
    pub fn new(dir: &Path, list_dirs: bool) -> io::Result<StaticRoot> {
        let root = dir.canonicalize()?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        // Reading it now turns a permission problem into a start-up error.
        std::fs::read_dir(&root)?;
        let root_fd = File::open(&root)?;
        let root_fd = match openat2_beneath(root_fd.as_raw_fd(), Path::new(".")) {
            Ok(_) => Some(Arc::new(OwnedFd::from(root_fd))),
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => None,
            Err(e) => return Err(e),
        };
        Ok(StaticRoot {
            root,
            root_fd,
            list_dirs,
            cache: None,
            show_hidden: false,
            features: Arc::default(),
            precompressed: false,
        })
    }

    /// Keeps up to `entries` open files between requests, each trusted for
    /// `valid` after a check (see [`FileCache`]); `0` entries turns it off.
    /// Needs `openat2` (a kernel from 5.6): elsewhere files are opened on
    /// every request.
    pub fn with_file_cache(mut self, entries: usize, valid: Duration) -> StaticRoot {
        self.cache = (entries > 0 && self.root_fd.is_some())
            .then(|| Arc::new(FileCache::new(entries, valid)));
        self
    }

    /// The open-file cache, if on.
    pub fn file_cache(&self) -> Option<&FileCache> {
        self.cache.as_deref()
    }

    /// Lists dotfiles too (`--show-hidden`; they are left out by default).
    pub fn show_hidden(mut self, show: bool) -> StaticRoot {
        self.show_hidden = show;
        self
    }

    /// Header rules, CORS, fallback and error pages.
    pub fn with_features(mut self, features: FileFeatures) -> StaticRoot {
        self.features = Arc::new(features);
        self
    }

    /// The features [`crate::file_features`] applies.
    pub fn features(&self) -> &FileFeatures {
        &self.features
    }

    /// Serves precompressed sidecars (`--precompressed`). Off, a request
    /// costs no syscall more than without the feature.
    pub fn precompressed(mut self, on: bool) -> StaticRoot {
        self.precompressed = on;
        self
    }

    /// The canonical root.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Decides the answer to a GET or HEAD for `req`.
    pub fn serve(&self, req: &Request) -> StaticReply {
        self.serve_at(req, req.path())
    }

    /// As [`StaticRoot::serve`] for the URL path `path` instead of the
    /// request's (`--fallback`), with the request's conditions and ranges.
    pub fn serve_at(&self, req: &Request, path: &str) -> StaticReply {
        let cache = self.cache.as_deref().zip(self.root_fd.as_deref());
        if let Some((cache, root)) = cache
            && let Some(entry) = cache.get(path, root.as_raw_fd())
        {
            return match &entry.file {
                Some(file) => self.finish(req, file.clone(), &entry.as_facts(), true),
                None => StaticReply::Error(Status::NOT_FOUND, Vec::new()),
            };
        }
        let rel = match url_to_relative(path) {
            Ok(p) => p,
            Err(status) => return StaticReply::Error(status, Vec::new()),
        };
        let mut opened = self.open(&rel);
        if let (Some((cache, _)), Err(e)) = (cache, &opened)
            && matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
        {
            // Out of fds: the cache gives some back, and the open is tried
            // once more.
            cache.shed();
            opened = self.open(&rel);
        }
        let opened = match opened {
            Ok(f) => f,
            Err(e) => {
                if let Some((cache, _)) = cache
                    && e.raw_os_error() == Some(libc::ENOENT)
                    && let Some(c) = c_path(&rel)
                {
                    cache.insert(path, Entry::missing(c));
                }
                return StaticReply::Error(io_status(&e), Vec::new());
            }
        };
        let meta = match opened.metadata() {
            Ok(m) => m,
            Err(e) => return StaticReply::Error(io_status(&e), Vec::new()),
        };
        if !meta.is_dir() {
            let key = cache.map(|(cache, _)| (cache, path));
            return self.file_reply(req, opened, &meta, &rel, key, true);
        }
        if !path.ends_with('/') {
            let mut loc = format!("{}/", path);
            if let Some(q) = req.query() {
                loc.push('?');
                loc.push_str(q);
            }
            return StaticReply::Redirect(loc);
        }
        let index = Path::new("index.html");
        match self.open_in(&opened, &rel, index) {
            Ok(f) => match f.metadata() {
                // No sidecars for an index: its path is not the request's.
                Ok(m) if m.is_file() => return self.file_reply(req, f, &m, index, None, false),
                Ok(_) => {}
                Err(e) => return StaticReply::Error(io_status(&e), Vec::new()),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return StaticReply::Error(io_status(&e), Vec::new()),
        }
        if self.list_dirs {
            return StaticReply::ListDir {
                dir: opened,
                url_path: path.to_string(),
                view: ListView::from_query(req.query(), self.show_hidden),
            };
        }
        StaticReply::Error(Status::FORBIDDEN, Vec::new())
    }

    /// The file at the URL path `path`, for an error page: open, with its
    /// size and type.
    pub(crate) fn open_page(&self, path: &str) -> io::Result<(File, u64, String)> {
        let rel =
            url_to_relative(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let file = self.open(&rel)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        Ok((file, meta.len(), content_type(&rel).to_string()))
    }

    /// Opens `rel` (relative to the root) without leaving the root.
    fn open(&self, rel: &Path) -> io::Result<File> {
        match &self.root_fd {
            Some(fd) => openat2_beneath(fd.as_raw_fd(), rel),
            None => {
                let real = self.root.join(rel).canonicalize()?;
                if !real.starts_with(&self.root) {
                    return Err(io::Error::from_raw_os_error(libc::EXDEV));
                }
                File::open(real)
            }
        }
    }

    /// Opens `name` inside the already opened directory `dir` (= `rel`).
    fn open_in(&self, dir: &File, rel: &Path, name: &Path) -> io::Result<File> {
        match &self.root_fd {
            Some(_) => openat2_beneath(dir.as_raw_fd(), name),
            None => self.open(&rel.join(name)),
        }
    }

    /// The answer for the regular file `file` (found at `path`), kept in
    /// the cache under `key` if given; `sidecars`: it may be negotiated.
    fn file_reply(
        &self,
        req: &Request,
        file: File,
        meta: &std::fs::Metadata,
        path: &Path,
        key: Option<(&FileCache, &str)>,
        sidecars: bool,
    ) -> StaticReply {
        if !meta.is_file() {
            return StaticReply::Error(Status::FORBIDDEN, Vec::new());
        }
        let size = meta.len();
        let mtime = meta.mtime().max(0) as u64;
        let etag = format!("\"{:x}-{:x}-{:x}\"", mtime, meta.mtime_nsec(), size);
        let last_modified = String::from_utf8_lossy(&http1::format_http_date(mtime)).into_owned();
        let file = Arc::new(file);
        let content_type = content_type(path);
        if let Some((cache, key)) = key
            && cache.admit(file.as_raw_fd())
            && let Some(rel) = c_path(path)
        {
            let entry = Entry::file(file.clone(), meta, rel, etag, last_modified, content_type);
            let answer = self.finish(req, file, &entry.as_facts(), sidecars);
            cache.insert(key, entry);
            return answer;
        }
        let facts = Facts {
            body: None,
            heads: None,
            size,
            mtime,
            etag: &etag,
            last_modified: &last_modified,
            content_type: &content_type,
        };
        self.finish(req, file, &facts, sidecars)
    }

    /// The answer for the file at the request's own path (`negotiable`;
    /// not a directory's index), with sidecars if `--precompressed`.
    fn finish(
        &self,
        req: &Request,
        file: Arc<File>,
        f: &Facts<'_>,
        negotiable: bool,
    ) -> StaticReply {
        if self.precompressed && negotiable {
            return self.negotiate(req, file, f);
        }
        reply(req, file, f, !self.features.adds_headers())
    }
}

/// What a file's answer is made of, from a fresh open or from the cache.
struct Facts<'a> {
    body: Option<&'a Arc<[u8]>>,
    heads: Option<&'a Arc<FileHeads>>,
    size: u64,
    mtime: u64,
    etag: &'a str,
    last_modified: &'a str,
    content_type: &'a str,
}

impl Entry {
    fn as_facts(&self) -> Facts<'_> {
        Facts {
            body: self.body.as_ref(),
            heads: self.heads.as_ref(),
            size: self.size,
            mtime: self.mtime,
            etag: &self.etag,
            last_modified: &self.last_modified,
            content_type: &self.content_type,
        }
    }
}

/// A file's default `Cache-Control`: a cache may keep the file but asks
/// again before using it (a 304 while it is unchanged): this server cannot
/// know how long a site's files stay current. A `--header` rule replaces it
/// (`file_features::decorate`); a 304 carries it as its 200 would.
pub(crate) const NO_CACHE: &str = "no-cache";

/// The answer to `req` for a regular file: 304 if the client's copy is
/// current, a range, or the whole file. `plain`: no feature adds headers,
/// so the cache's encoded heads serve a 304 and a whole file as they are.
fn reply(req: &Request, file: Arc<File>, f: &Facts<'_>, plain: bool) -> StaticReply {
    if let Some(heads) = f.heads.filter(|_| plain) {
        if not_modified(req, f.etag, f.mtime) {
            return StaticReply::Unchanged(heads.clone());
        }
        if req.header("range").is_none() {
            return StaticReply::Whole {
                file,
                heads: heads.clone(),
                body: f.body.cloned(),
            };
        }
    }
    let size = f.size;
    let validators = vec![
        ("Last-Modified", f.last_modified.to_string()),
        ("ETag", f.etag.to_string()),
        ("Cache-Control", NO_CACHE.to_string()),
    ];
    if not_modified(req, f.etag, f.mtime) {
        return StaticReply::NotModified {
            headers: validators,
        };
    }
    let mut headers = vec![("Content-Type", f.content_type.to_string())];
    headers.extend(validators);
    headers.push(("Accept-Ranges", "bytes".to_string()));

    let range = req
        .header("range")
        .filter(|_| if_range_allows(req, f.etag, f.mtime));
    match range.map(|r| parse_ranges(r, size)) {
        Some(RangeSpec::Multi(ranges)) => {
            let parts = Box::new(Multipart::new(&ranges, size, f.content_type));
            headers[0].1 = parts.content_type();
            StaticReply::Parts {
                file,
                parts,
                headers,
                body: f.body.cloned(),
            }
        }
        Some(RangeSpec::Single(start, end)) => {
            headers.push(("Content-Range", format!("bytes {start}-{end}/{size}")));
            StaticReply::File {
                status: Status::PARTIAL_CONTENT,
                file,
                offset: start,
                len: end - start + 1,
                headers,
                body: f.body.cloned(),
            }
        }
        Some(RangeSpec::Unsatisfiable) => StaticReply::Error(
            Status::RANGE_NOT_SATISFIABLE,
            vec![("Content-Range", format!("bytes */{size}"))],
        ),
        Some(RangeSpec::Ignore) | None => StaticReply::File {
            status: Status::OK,
            file,
            offset: 0,
            len: size,
            headers,
            body: f.body.cloned(),
        },
    }
}

/// `path` (relative to the root) as a C string for `fstatat`; `None` if it
/// holds a NUL (it cannot: `url_to_relative` refuses those).
fn c_path(path: &Path) -> Option<CString> {
    let bytes = path.as_os_str().as_bytes();
    CString::new(if bytes.is_empty() { &b"."[..] } else { bytes }).ok()
}

/// Percent-decodes and normalises a URL path into a relative filesystem path.
fn url_to_relative(path: &str) -> Result<PathBuf, Status> {
    if !path.starts_with('/') {
        return Err(Status::BAD_REQUEST);
    }
    // A NUL (which would cut the path short in the kernel) or bytes that
    // are not UTF-8 once decoded are 400: no file is named like that here.
    let decoded = http1::percent_decode_str(path).map_err(|_| Status::BAD_REQUEST)?;
    let mut rel = PathBuf::new();
    for seg in decoded.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err(Status::FORBIDDEN),
            _ if seg.contains('\0') => return Err(Status::BAD_REQUEST),
            _ => rel.push(seg),
        }
    }
    Ok(rel)
}

/// `openat2(dirfd, path, O_RDONLY, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`:
/// fails with `EXDEV` instead of resolving outside `dirfd`.
fn openat2_beneath(dirfd: RawFd, path: &Path) -> io::Result<File> {
    openat2_with(dirfd, path, libc::O_RDONLY)
}

/// The metadata of `path` beneath `dirfd`, links followed only as far as
/// they stay beneath it (`O_PATH`: a FIFO is not opened). Where the kernel
/// lacks `openat2`, an error: the caller shows nothing.
pub(crate) fn stat_beneath(dirfd: RawFd, path: &Path) -> io::Result<std::fs::Metadata> {
    openat2_with(dirfd, path, libc::O_PATH)?.metadata()
}

fn openat2_with(dirfd: RawFd, path: &Path, access: libc::c_int) -> io::Result<File> {
    let path = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open_how is plain data; all-zero is a valid value to fill in.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    // openat2 refuses O_PATH with any flag but O_CLOEXEC, O_DIRECTORY and
    // O_NOFOLLOW (EINVAL).
    let noctty = if access == libc::O_PATH {
        0
    } else {
        libc::O_NOCTTY
    };
    how.flags = (access | libc::O_CLOEXEC | noctty) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: c_path is a valid NUL-terminated string and `how` a valid
    // open_how of the size passed, both alive for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            c_path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat2 returned a new fd that nothing else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
}

fn io_status(e: &io::Error) -> Status {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => Status::NOT_FOUND,
        io::ErrorKind::PermissionDenied => Status::FORBIDDEN,
        _ if e.raw_os_error() == Some(libc::ENAMETOOLONG) => Status::URI_TOO_LONG,
        _ if e.raw_os_error() == Some(libc::ELOOP) => Status::FORBIDDEN,
        // RESOLVE_BENEATH: the path (a symlink) leads out of the root.
        _ if e.raw_os_error() == Some(libc::EXDEV) => Status::FORBIDDEN,
        // Out of fds (or kernel memory): the file may well exist; try later.
        _ if matches!(
            e.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)
        ) =>
        {
            Status::SERVICE_UNAVAILABLE
        }
        _ => Status::NOT_FOUND,
    }
}

/// `If-None-Match` wins over `If-Modified-Since` (RFC 9110 §13.2.2).
fn not_modified(req: &Request, etag: &str, mtime: u64) -> bool {
    if let Some(inm) = req.header("if-none-match") {
        return etag_list_matches(inm, etag);
    }
    if let Some(ims) = req.header("if-modified-since") {
        return parse_http_date(ims).is_some_and(|since| mtime <= since);
    }
    false
}

/// Weak comparison against a list of entity tags (or `*`).
fn etag_list_matches(list: &[u8], etag: &str) -> bool {
    let list = String::from_utf8_lossy(list);
    list.split(',').map(str::trim).any(|t| {
        t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag.strip_prefix("W/").unwrap_or(etag)
    })
}

#[cfg(test)]
mod tests;
