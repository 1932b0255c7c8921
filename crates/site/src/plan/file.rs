//! The file steps of a [`Plan`]: a file answer's head (a list of headers,
//! or the open-file cache's encoded block), then its body copied from the
//! cache, read into the write buffer with the head, or left to the driver
//! ([`Step::SendFile`]).

use std::fs::File;
use std::io::Write as _;
use std::sync::Arc;

use bytes::BytesMut;
use http1::{Framing, ReplyTo, Status};

use super::{Plan, Stage, Step, done};
use crate::action::{HTML, TEXT};
use crate::respond::{Outcome, respond_owned, respond_with};
use crate::static_files::StaticReply;
use crate::stats::WorkerStats;

/// Encodes the head of a file answer whose body is `len` bytes: the
/// outcome to report once the body is out, or the step that ends the
/// answer now (`Close` if the head cannot be encoded; `Done` when no body
/// follows: HEAD).
pub(super) fn file_head(
    wbuf: &mut BytesMut,
    stats: &WorkerStats,
    to: ReplyTo,
    status: Status,
    headers: &[(&'static str, String)],
    len: u64,
) -> Result<Outcome, Step> {
    let hs: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
    let Ok(enc) = http1::encode_head(wbuf, to, status, &hs, Framing::Length(len)) else {
        return Err(Step::Close);
    };
    after_head(stats, status, len, enc)
}

/// What [`file_head`] reports once the head is encoded by `enc`.
fn after_head(
    stats: &WorkerStats,
    status: Status,
    len: u64,
    enc: http1::BodyEncoder,
) -> Result<Outcome, Step> {
    let outcome = Outcome {
        status,
        bytes: len,
        keep_alive: enc.keep_alive(),
    };
    if !enc.wants_body() {
        stats.response(status.code());
        return Err(Step::Done(Outcome {
            bytes: 0,
            ..outcome
        }));
    }
    Ok(outcome)
}

/// Largest file body copied into the write buffer with its head instead of
/// sent by `sendfile` (see [`Plan`]'s file step).
pub const INLINE_FILE_MAX: u64 = 16 * 1024;

/// Appends `len` bytes of `file` from `offset` to `wbuf`; `false` (with
/// `wbuf` as it was) if the file no longer has them.
pub(super) fn read_into(file: &File, wbuf: &mut BytesMut, offset: u64, len: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let start = wbuf.len();
    // Zeroed, not uninitialised: safe, and a memset of at most 16 KiB.
    wbuf.resize(start + len as usize, 0);
    if file.read_exact_at(&mut wbuf[start..], offset).is_ok() {
        return true;
    }
    wbuf.truncate(start);
    false
}

impl Plan {
    /// The body of a file answer whose head (from `head_start` in `wbuf`)
    /// promised `len` bytes: copied from the cache's bytes, read into the
    /// buffer if small, or sent by the driver.
    #[allow(clippy::too_many_arguments)]
    fn file_body(
        &mut self,
        stats: &WorkerStats,
        wbuf: &mut BytesMut,
        head_start: usize,
        outcome: Outcome,
        file: Arc<File>,
        offset: u64,
        len: u64,
        cached: Option<Arc<[u8]>>,
    ) -> Step {
        let status = outcome.status;
        // The open-file cache holds the bytes of a small file.
        let range = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(offset + len).ok());
        if let Some(part) = cached
            .as_ref()
            .zip(range)
            .and_then(|(b, (s, e))| b.get(s..e))
        {
            wbuf.extend_from_slice(part);
            stats.response(status.code());
            return Step::Done(outcome);
        }
        if len <= INLINE_FILE_MAX {
            // A small body goes out with its head: one `send` and
            // one TCP segment, where a head by `send` and a body by
            // `sendfile` are two segments and an extra ACK (four
            // segments per 1 KiB response instead of two, measured
            // on loopback). The copy is from the page cache, as
            // `sendfile`'s would be.
            let body = head_start..wbuf.len();
            if read_into(&file, wbuf, offset, len) {
                stats.response(status.code());
                return Step::Done(outcome);
            }
            // The file shrank since it was opened: the head already
            // promised `len` bytes, so take it back and close rather
            // than send a short body.
            wbuf.truncate(body.start);
            return Step::Close;
        }
        self.stage = Stage::Sending(outcome);
        Step::SendFile { file, offset, len }
    }

    /// Encodes a static file decision's head (and the whole answer if there
    /// is no file body to send).
    pub(super) fn file(
        &mut self,
        stats: &WorkerStats,
        wbuf: &mut BytesMut,
        reply: StaticReply,
    ) -> Step {
        let to = self.to;
        match reply {
            StaticReply::File {
                status,
                file,
                offset,
                len,
                headers,
                body: cached,
            } => {
                let head_start = wbuf.len();
                let outcome = match file_head(wbuf, stats, to, status, &headers, len) {
                    Ok(outcome) => outcome,
                    Err(step) => return step,
                };
                self.file_body(stats, wbuf, head_start, outcome, file, offset, len, cached)
            }
            StaticReply::Whole { file, heads, body } => {
                let (head_start, len) = (wbuf.len(), heads.len);
                let framing = Framing::Length(len);
                let enc = http1::encode_head_block(wbuf, to, Status::OK, &heads.ok, framing);
                let outcome = match after_head(stats, Status::OK, len, enc) {
                    Ok(outcome) => outcome,
                    Err(step) => return step,
                };
                self.file_body(stats, wbuf, head_start, outcome, file, 0, len, body)
            }
            StaticReply::Unchanged(heads) => {
                let status = Status::NOT_MODIFIED;
                let enc = http1::encode_head_block(
                    wbuf,
                    to,
                    status,
                    &heads.not_modified,
                    Framing::Length(0),
                );
                let keep = enc.keep_alive();
                done(stats, status, 0, Some(keep))
            }
            StaticReply::Parts {
                file,
                parts,
                headers,
                body,
            } => self.parts(stats, wbuf, file, *parts, &headers, body),
            StaticReply::NotModified { headers } => {
                let keep =
                    respond_owned(wbuf, stats, to, Status::NOT_MODIFIED, None, &headers, b"");
                done(stats, Status::NOT_MODIFIED, 0, keep)
            }
            StaticReply::Redirect(location) => {
                let body = b"301 Moved Permanently\n";
                let headers = [("Location", location)];
                let status = Status::MOVED_PERMANENTLY;
                let keep = respond_owned(wbuf, stats, to, status, Some(TEXT), &headers, body);
                done(stats, status, body.len(), keep)
            }
            StaticReply::ListDir {
                dir,
                url_path,
                view,
            } => {
                // `answer` lists on the pool; a listing that reaches here
                // (none today) is still answered right.
                self.file(stats, wbuf, StaticReply::list(&dir, &url_path, &view))
            }
            StaticReply::Listing(html) => {
                // Generated each time, with no validator to revalidate
                // against: not to be stored (`no-cache` without one is a
                // caching mistake HTTP linters flag).
                let html = html.as_bytes();
                let headers = [("Cache-Control", "no-store".to_string())];
                let keep = respond_owned(wbuf, stats, to, Status::OK, Some(HTML), &headers, html);
                done(stats, Status::OK, html.len(), keep)
            }
            StaticReply::Error(status, headers) => {
                // "404 Not Found\n", built on the stack.
                // The longest reason has 31 bytes: "NNN " + 31 + "\n" fits.
                const MAX: usize = 64;
                let mut body = [0u8; MAX];
                let n = {
                    let mut w = &mut body[..];
                    let _ = writeln!(w, "{} {}", status.code(), status.reason());
                    MAX - w.len()
                };
                let body = &body[..n];
                let keep = if headers.is_empty() {
                    // The common 404: no allocation for its headers either.
                    let ct = [("Content-Type", TEXT.as_bytes())];
                    respond_with(wbuf, stats, to, status, &ct, body)
                } else {
                    respond_owned(wbuf, stats, to, status, Some(TEXT), &headers, body)
                };
                done(stats, status, n, keep)
            }
        }
    }
}
