//! The steps of a `multipart/byteranges` answer: each part's header block
//! goes into the write buffer, then the part's bytes (copied when the
//! open-file cache holds them or the part is small, else a
//! [`Step::SendFile`] per part), and the closing boundary last. A driver
//! sees only `SendFile` steps and reports [`Event::Sent`] after each.

use std::fs::File;
use std::sync::Arc;

use bytes::BytesMut;
use http1::Status;

use super::file::{INLINE_FILE_MAX, read_into};
use super::{Plan, Stage, Step};
use crate::ranges::{Multipart, Part};
use crate::respond::Outcome;
use crate::stats::WorkerStats;

/// The parts still to send.
#[derive(Debug)]
pub(super) struct Sending {
    file: Arc<File>,
    /// The whole file's bytes, when the open-file cache holds them.
    body: Option<Arc<[u8]>>,
    parts: std::vec::IntoIter<Part>,
    closing: Vec<u8>,
    outcome: Outcome,
}

impl Plan {
    /// Encodes the head of a multipart answer and starts on its parts.
    pub(super) fn parts(
        &mut self,
        stats: &WorkerStats,
        wbuf: &mut BytesMut,
        file: Arc<File>,
        parts: Multipart,
        headers: &[(&'static str, String)],
        body: Option<Arc<[u8]>>,
    ) -> Step {
        let status = Status::PARTIAL_CONTENT;
        let total = parts.content_length();
        let outcome = match super::file::file_head(wbuf, stats, self.to, status, headers, total) {
            Ok(outcome) => outcome,
            Err(step) => return step,
        };
        let Multipart { parts, closing, .. } = parts;
        let sending = Sending {
            file,
            body,
            parts: parts.into_iter(),
            closing,
            outcome,
        };
        self.next_part(stats, wbuf, Box::new(sending))
    }

    /// Encodes parts until one must be sent with `sendfile` (that step), or
    /// until the closing boundary (done).
    pub(super) fn next_part(
        &mut self,
        stats: &WorkerStats,
        wbuf: &mut BytesMut,
        mut s: Box<Sending>,
    ) -> Step {
        while let Some(part) = s.parts.next() {
            wbuf.extend_from_slice(&part.head);
            let range = usize::try_from(part.offset)
                .ok()
                .zip(usize::try_from(part.offset + part.len).ok());
            if let Some(bytes) = s
                .body
                .as_ref()
                .zip(range)
                .and_then(|(b, (start, end))| b.get(start..end))
            {
                wbuf.extend_from_slice(bytes);
                continue;
            }
            if part.len <= INLINE_FILE_MAX {
                if read_into(&s.file, wbuf, part.offset, part.len) {
                    continue;
                }
                // The file shrank: the head promised more than it has.
                // Close rather than send a body of the wrong length.
                return Step::Close;
            }
            let (file, offset, len) = (s.file.clone(), part.offset, part.len);
            self.stage = Stage::SendingParts(s);
            return Step::SendFile { file, offset, len };
        }
        wbuf.extend_from_slice(&s.closing);
        stats.response(s.outcome.status.code());
        Step::Done(s.outcome)
    }
}
