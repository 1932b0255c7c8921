//! Precompressed sidecars (`--precompressed`): for a request of `x.css`,
//! `x.css.br`, `x.css.zst` or `x.css.gz` is sent when it exists and the
//! client's `Accept-Encoding` allows it (see [`crate::encoding`] for the
//! negotiation). Nothing is compressed here: the files are made beforehand.
//!
//! Each coding is a *representation* of its own: the sidecar's size, its
//! ETag (its own mtime and size, suffixed `-br`/`-zstd`/`-gzip` so that two
//! sidecars written in the same instant with the same size still differ),
//! its Last-Modified, so `If-None-Match`, `If-Range` and `Range` all work
//! on the bytes actually sent. Content-Type stays the original's.
//!
//! `Vary: Accept-Encoding` goes on every answer for a path that has at
//! least one sidecar: 200, 206, 304, 416 and 406, identity answers
//! included, since a shared cache must not give a stored identity answer
//! to a client that would have got br, nor the reverse. A path without
//! sidecars is not negotiated at all: no Vary, and `identity;q=0` still
//! gets the file (RFC 9110 §12.1 lets a server disregard `Accept-*`; a
//! 406 there would depend on a header the answer does not declare it
//! varies on). With sidecars and `identity;q=0` but none acceptable: 406.
//!
//! **Cost.** Each coding is looked up at most once per request, the
//! client's best first, stopping at the first that exists; codings the
//! client refuses are still looked up (until one exists) because Vary
//! depends on them. A lookup is one `openat2` (plus the `fstat` of a
//! found file, as for any file served). Requests for a sidecar itself
//! (`/x.css.gz`, served as a plain `application/gzip` file) look up
//! nothing.
//!
//! **Open-file cache.** Each representation is its own cache entry, keyed
//! by the request path, a NUL and the coding (`/x.css\0br`): a NUL cannot
//! occur in a request path, so the key never meets a real path's, and a
//! cached identity entry is only ever used when identity was chosen.
//! Missing sidecars are negative entries, so with the cache on a hit costs
//! no syscall at all, and a sidecar added, changed or deleted is noticed
//! within `--file-cache-valid` like any file. The price: up to three
//! negative entries per file served, in the cache's capacity.

use std::borrow::Cow;
use std::ffi::OsString;

use super::*;
use crate::encoding::{AcceptEncoding, Coding};

const VARY: (&str, &str) = ("Vary", "Accept-Encoding");

/// A sidecar that exists: from the cache, or just opened.
enum Sidecar {
    Cached(Arc<Entry>),
    Opened {
        file: Arc<File>,
        size: u64,
        mtime: u64,
        etag: String,
        last_modified: String,
    },
}

impl Sidecar {
    fn file(&self) -> Arc<File> {
        match self {
            // A cached sidecar always has a file: negative entries are not
            // turned into a `Sidecar`.
            Sidecar::Cached(e) => e.file.clone().expect("positive entry"),
            Sidecar::Opened { file, .. } => file.clone(),
        }
    }

    fn facts<'a>(&'a self, content_type: &'a str) -> Facts<'a> {
        match self {
            Sidecar::Cached(e) => Facts {
                content_type,
                ..e.as_facts()
            },
            Sidecar::Opened {
                size,
                mtime,
                etag,
                last_modified,
                ..
            } => Facts {
                body: None,
                heads: None,
                size: *size,
                mtime: *mtime,
                etag,
                last_modified,
                content_type,
            },
        }
    }
}

impl StaticRoot {
    /// The answer for the file `file` (`identity`, its facts) at the
    /// request's path, or for one of its sidecars.
    pub(super) fn negotiate(
        &self,
        req: &Request,
        file: Arc<File>,
        identity: &Facts<'_>,
    ) -> StaticReply {
        let rel = match url_to_relative(req.path()) {
            Ok(rel) if !is_sidecar(&rel) => rel,
            _ => return reply(req, file, identity, false),
        };
        let accept = AcceptEncoding::parse(req.header("accept-encoding"));
        let mut looked = [false; 3];
        for coding in accept.ranked() {
            looked[coding as usize] = true;
            if let Some(side) = self.sidecar(req.path(), &rel, coding, identity.content_type) {
                let mut answer = reply(req, side.file(), &side.facts(identity.content_type), false);
                with_vary(&mut answer, Some(coding));
                return answer;
            }
        }
        let has_sidecar = Coding::ALL.into_iter().any(|c| {
            !looked[c as usize]
                && self
                    .sidecar(req.path(), &rel, c, identity.content_type)
                    .is_some()
        });
        if !has_sidecar {
            return reply(req, file, identity, false);
        }
        if !accept.identity_acceptable() {
            return StaticReply::Error(Status::NOT_ACCEPTABLE, vec![(VARY.0, VARY.1.into())]);
        }
        let mut answer = reply(req, file, identity, false);
        with_vary(&mut answer, None);
        answer
    }

    /// The `coding` sidecar of `rel` (requested as `url_path`), if it
    /// exists as a regular file; through the open-file cache when it is on.
    fn sidecar(
        &self,
        url_path: &str,
        rel: &Path,
        coding: Coding,
        content_type: &str,
    ) -> Option<Sidecar> {
        let cache = self.cache.as_deref().zip(self.root_fd.as_deref());
        let key = cache.map(|_| format!("{url_path}\0{}", coding.token()));
        if let (Some((cache, root)), Some(key)) = (cache, &key)
            && let Some(entry) = cache.get(key, root.as_raw_fd())
        {
            return entry.file.is_some().then_some(Sidecar::Cached(entry));
        }
        let mut name = OsString::from(rel.as_os_str());
        name.push(coding.suffix());
        let path = PathBuf::from(name);
        let file = match self.open(&path) {
            Ok(f) => f,
            Err(e) => {
                if let (Some((cache, _)), Some(key)) = (cache, &key)
                    && e.raw_os_error() == Some(libc::ENOENT)
                    && let Some(c) = c_path(&path)
                {
                    cache.insert(key, Entry::missing(c));
                }
                return None;
            }
        };
        // A directory or FIFO named like a sidecar is no sidecar (and is
        // not cached: it is looked up again next time, which is rare).
        let meta = file.metadata().ok().filter(|m| m.is_file())?;
        let mtime = meta.mtime().max(0) as u64;
        let etag = format!(
            "\"{:x}-{:x}-{:x}-{}\"",
            mtime,
            meta.mtime_nsec(),
            meta.len(),
            coding.token()
        );
        let last_modified = String::from_utf8_lossy(&http1::format_http_date(mtime)).into_owned();
        let file = Arc::new(file);
        if let (Some((cache, _)), Some(key)) = (cache, &key)
            && let Some(c) = c_path(&path)
        {
            let ty = Cow::Owned(content_type.to_owned());
            let entry = Entry::file(
                file.clone(),
                &meta,
                c,
                etag.clone(),
                last_modified.clone(),
                ty,
            );
            cache.insert(key, entry);
        }
        Some(Sidecar::Opened {
            file,
            size: meta.len(),
            mtime,
            etag,
            last_modified,
        })
    }
}

/// Whether `rel` names a sidecar itself: served as it is, with its own
/// type, and not negotiated (no `x.gz.br`).
fn is_sidecar(rel: &Path) -> bool {
    let name = rel.as_os_str().as_bytes();
    Coding::ALL
        .iter()
        .any(|c| name.ends_with(c.suffix().as_bytes()))
}

/// Adds `Vary` (and `Content-Encoding` for a coding) to an answer of a
/// negotiated path. A 304 carries Vary but not Content-Encoding (RFC 9110
/// §15.4.5 lists what a 304 repeats).
fn with_vary(answer: &mut StaticReply, coding: Option<Coding>) {
    let headers = match answer {
        StaticReply::File { headers, .. } => {
            if let Some(c) = coding {
                headers.push(("Content-Encoding", c.token().to_owned()));
            }
            headers
        }
        StaticReply::NotModified { headers } | StaticReply::Error(_, headers) => headers,
        _ => return,
    };
    headers.push((VARY.0, VARY.1.to_owned()));
}
