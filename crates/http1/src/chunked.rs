//! Decoding of `Transfer-Encoding: chunked` bodies (RFC 9112 §7.1).
//!
//! ```text
//! chunked-body = *chunk last-chunk trailer-section CRLF
//! chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! last-chunk   = 1*("0") [ chunk-ext ] CRLF
//! ```
//!
//! A byte-at-a-time state machine for the framing, and zero-copy splits for
//! the data: framing bytes are consumed as they arrive, so nothing is ever
//! re-scanned and a chunk-size line split across reads needs no buffering.
//! Chunk extensions and trailer fields are skipped (they are rarely sent and
//! a server must not depend on them), but bounded, so a client cannot keep
//! the connection busy forever with one endless line. Line ends must be CRLF:
//! a lone LF inside chunked framing is a classic smuggling ingredient.

use bytes::{Buf, Bytes, BytesMut};

use crate::{Error, Status};

/// Longest chunk extension accepted on one chunk-size line.
const MAX_EXTENSION: u32 = 4096;

/// What the chunked decoder produced.
pub(crate) enum Chunk {
    Data(Bytes),
    End,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// In the hex digits of a chunk size.
    Size {
        seen_digit: bool,
    },
    /// Whitespace after the size, which may only lead to `;`.
    SizeSpace,
    /// Inside chunk extensions, skipped up to CR.
    Extension {
        len: u32,
    },
    /// Saw CR after the size line; LF must follow.
    SizeLf,
    /// Inside chunk data, this many bytes left.
    Data {
        left: u64,
    },
    /// After chunk data: CR then LF must follow.
    DataCr,
    DataLf,
    /// At the start of a trailer line, or of the final empty line.
    TrailerStart,
    /// Inside a trailer field line, skipped up to CR.
    Trailer,
    TrailerLf,
    /// Saw the CR of the final empty line; LF ends the body.
    EndLf,
}

/// State of one chunked body.
#[derive(Debug)]
pub(crate) struct ChunkedDecoder {
    state: State,
    /// Size of the chunk being read in its size line.
    size: u64,
    /// Data bytes announced so far, checked against the body limit.
    total: u64,
    /// Trailer bytes so far, checked against the header limit.
    trailer_len: usize,
}

impl ChunkedDecoder {
    pub(crate) fn new() -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::Size { seen_digit: false },
            size: 0,
            total: 0,
            trailer_len: 0,
        }
    }

    /// Consumes framing from `buf` until it can return a data piece or the
    /// end of the body; `Ok(None)` means `buf` ran out first.
    pub(crate) fn decode(
        &mut self,
        buf: &mut BytesMut,
        max_body: u64,
        max_trailer: usize,
    ) -> Result<Option<Chunk>, Error> {
        let mut used = 0;
        let result = self.step(&buf[..], &mut used, max_body, max_trailer);
        buf.advance(used);
        match result? {
            Step::NeedMore => Ok(None),
            Step::End => Ok(Some(Chunk::End)),
            Step::Data(left) => {
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                let data = buf.split_to(n).freeze();
                let left = left - n as u64;
                self.state = if left == 0 {
                    State::DataCr
                } else {
                    State::Data { left }
                };
                Ok(Some(Chunk::Data(data)))
            }
        }
    }

    /// Runs the framing state machine over `bytes`, counting consumed bytes
    /// in `used`. Stops in `Data` when data bytes are available, so the
    /// caller can split them off without copying.
    fn step(
        &mut self,
        bytes: &[u8],
        used: &mut usize,
        max_body: u64,
        max_trailer: usize,
    ) -> Result<Step, Error> {
        const BAD_SIZE: Error = Error::bad_request("invalid chunk size");
        const NO_CRLF: Error = Error::bad_request("missing CRLF in chunked body");
        while let Some(&b) = bytes.get(*used) {
            self.state = match self.state {
                // Data bytes are available: hand them out as one piece.
                State::Data { left } => return Ok(Step::Data(left)),
                State::Size { seen_digit } => match hex(b) {
                    Some(d) => {
                        self.size = self
                            .size
                            .checked_mul(16)
                            .map(|s| s | u64::from(d))
                            .ok_or(BAD_SIZE)?;
                        State::Size { seen_digit: true }
                    }
                    None if !seen_digit => return Err(BAD_SIZE),
                    None => match b {
                        b'\r' => State::SizeLf,
                        b';' => State::Extension { len: 0 },
                        b' ' | b'\t' => State::SizeSpace,
                        _ => return Err(BAD_SIZE),
                    },
                },
                State::SizeSpace => match b {
                    b' ' | b'\t' => State::SizeSpace,
                    b';' => State::Extension { len: 0 },
                    _ => return Err(BAD_SIZE),
                },
                State::Extension { len } => match b {
                    b'\r' => State::SizeLf,
                    b'\n' | 0 => return Err(Error::bad_request("invalid chunk extension")),
                    _ if len >= MAX_EXTENSION => {
                        return Err(Error::bad_request("chunk extension too long"));
                    }
                    _ => State::Extension { len: len + 1 },
                },
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(NO_CRLF);
                    }
                    self.chunk_started(max_body)?
                }
                State::DataCr if b == b'\r' => State::DataLf,
                State::DataLf if b == b'\n' => State::Size { seen_digit: false },
                State::DataCr | State::DataLf => return Err(NO_CRLF),
                State::TrailerStart => match b {
                    b'\r' => State::EndLf,
                    b'\n' => return Err(NO_CRLF),
                    _ => self.trailer_byte(max_trailer)?,
                },
                State::Trailer => match b {
                    b'\r' => State::TrailerLf,
                    b'\n' => return Err(NO_CRLF),
                    _ => self.trailer_byte(max_trailer)?,
                },
                State::TrailerLf if b == b'\n' => State::TrailerStart,
                State::EndLf if b == b'\n' => {
                    *used += 1;
                    *self = ChunkedDecoder::new();
                    return Ok(Step::End);
                }
                State::TrailerLf | State::EndLf => return Err(NO_CRLF),
            };
            *used += 1;
        }
        Ok(Step::NeedMore)
    }

    /// The size line is complete: start its data, or the trailers after the
    /// last chunk.
    fn chunk_started(&mut self, max_body: u64) -> Result<State, Error> {
        let size = std::mem::take(&mut self.size);
        if size == 0 {
            return Ok(State::TrailerStart);
        }
        // Reject as soon as the announced size passes the limit, before the
        // data arrives: waiting would only cost bandwidth.
        self.total = self
            .total
            .checked_add(size)
            .filter(|&t| t <= max_body)
            .ok_or(Error::new(
                Status::CONTENT_TOO_LARGE,
                "chunked body over the body limit",
            ))?;
        Ok(State::Data { left: size })
    }

    fn trailer_byte(&mut self, max_trailer: usize) -> Result<State, Error> {
        self.trailer_len += 1;
        if self.trailer_len > max_trailer {
            return Err(Error::new(
                Status::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "trailer section too large",
            ));
        }
        Ok(State::Trailer)
    }
}

enum Step {
    NeedMore,
    /// In `Data { left }` with at least one data byte buffered.
    Data(u64),
    End,
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
