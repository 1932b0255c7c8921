//! HTTP/1.1 without I/O: bytes in, requests out; responses encoded into a
//! buffer.
//!
//! # Sans-IO
//!
//! This crate never reads a socket, never writes one, never blocks, never
//! waits, and never looks at a clock except for the `Date` header. It is
//! handed the bytes a connection has received so far and says what they
//! mean: "a request head", "a piece of body", "the body ended", or "not
//! enough yet". Answers go the other way: the server appends an encoded
//! response to an output buffer, and writing that buffer out is again the
//! caller's business.
//!
//! Keeping I/O out is what makes this layer:
//!
//! - **testable alone**: every rule (limits, framing, keep-alive, pipelining)
//!   is a unit test on byte strings, and property tests split one byte
//!   stream at every possible boundary to check that how the bytes arrive
//!   never changes what they mean;
//! - **shared by every runtime**: the stackless executor, the stackful
//!   coroutines and plain OS threads all drive this same code, so when the
//!   benchmarks compare them they compare the runtimes, not three parsers;
//! - **cheap**: no allocation per request. A request head is split off the
//!   read buffer as a reference-counted `Bytes` (shared, not copied) and
//!   header lines are offsets into it; responses are appended to a buffer
//!   the connection reuses.
//!
//! # The flow
//!
//! ```text
//!   socket bytes          one Decoder per connection        your handler
//!  ┌──────────────┐      ┌────────────────────────┐      ┌──────────────┐
//!  │ read buffer  │─────▶│ Decoder::decode(&mut b)│─────▶│ Message::Head│
//!  │ (BytesMut)   │      │  head: fast / httparse │      │ Message::Body│
//!  └──────────────┘      │  body: length / chunked │      │ Message::End │
//!         ▲              └────────────────────────┘      └──────┬───────┘
//!         │ read more on Ok(None)                               │
//!         │                                                     ▼
//!  ┌──────┴───────┐      ┌────────────────────────┐      ┌──────────────┐
//!  │   kernel     │◀─────│ write buffer (BytesMut)│◀─────│ encode_*()   │
//!  └──────────────┘      └────────────────────────┘      └──────────────┘
//! ```
//!
//! - [`Decoder`] turns bytes into [`Message`]s: a [`Request`] head, then the
//!   body as [`Message::Body`] pieces and [`Message::End`] (only for requests
//!   that have a body). Pipelined requests come out one at a time; the bytes
//!   after a request stay in the buffer. [`FullDecoder`] collects bodies for
//!   handlers that want them whole.
//! - Every [`Error`] carries the status to answer with (400, 413, 414, 431,
//!   501, 505); after it the connection closes ([`encode_error`]).
//! - [`encode_response`] is the fast path for small complete responses, and
//!   [`encode_static`] for those fixed at compile time ([`StaticResponse`]);
//!   both keep the last one per thread and copy it whole when the next is
//!   the same (`Date` changes once a second). [`encode_head`] and
//!   [`BodyEncoder`] handle arbitrary headers and streamed (chunked)
//!   bodies; [`encode_continue`] answers `Expect: 100-continue`. Header
//!   names and values are validated, so a handler cannot inject headers.
//! - Smaller helpers: [`Status`] codes with reason phrases,
//!   [`percent_decode`] for paths, and the per-thread `Date` cache
//!   ([`refresh_date`] lets an event loop take the clock read off the
//!   per-response path).
//!
//! # Cost
//!
//! Measured with callgrind on x86-64, release build, with
//! `examples/hotpath.rs` (buffers reused the way a server reuses them, the
//! `Date` cache driven by [`refresh_date`]): decoding
//! `GET /_httplite/plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n`,
//! splitting the head off the buffer (shared, not copied) and dropping it,
//! and encoding the 13-byte `200 OK` answer take about 520 instructions
//! per request (480 with 16 requests per buffer fill). With a browser-like
//! head of 12 headers and 491 bytes, sent again and again as a browser
//! does for a page's images, about 800: a header section equal to the
//! last long one the thread scanned is compared, not scanned again (see
//! `head/memo.rs`). No heap allocation happens on these paths.
//!
//! # Example
//!
//! ```
//! use bytes::BytesMut;
//! use http1::{Decoder, Limits, Message, ReplyTo, Status, TEXT_PLAIN, encode_response};
//!
//! let mut decoder = Decoder::new(Limits::default());
//! // Two pipelined requests, the second one not complete yet.
//! let mut input = BytesMut::from(&b"GET /hello HTTP/1.1\r\nHost: a\r\n\r\nGET /wor"[..]);
//! let mut output = BytesMut::new();
//!
//! while let Some(msg) = decoder.decode(&mut input)? {
//!     if let Message::Head(req) = msg {
//!         let body = format!("you asked for {}", req.path());
//!         encode_response(&mut output, ReplyTo::new(&req), Status::OK, Some(TEXT_PLAIN), body.as_bytes());
//!     }
//! }
//! // The partial second request waits in the buffer for more bytes.
//! assert_eq!(&input[..], b"GET /wor");
//! assert!(output.starts_with(b"HTTP/1.1 200 OK\r\n"));
//! assert!(output.ends_with(b"\r\n\r\nyou asked for /hello"));
//! # Ok::<(), http1::Error>(())
//! ```
#![deny(missing_docs)]

mod chunked;
mod collect;
mod date;
mod decode;
mod encode;
mod error;
mod framing;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod head;
mod header_block;
mod percent;
mod request;
mod response;
mod status;
mod uri;

pub use collect::FullDecoder;
pub use date::{HTTP_DATE_LEN, format_http_date, http_date_now, refresh_date};
pub use decode::{Decoder, Limits, MAX_HEAD_CAP, MAX_HEADERS_CAP, MAX_REQUEST_LINE_CAP, Message};
pub use encode::{
    BodyEncoder, Framing, HeaderValue, ReplyTo, StaticResponse, TEXT_PLAIN, encode_chunk,
    encode_continue, encode_error, encode_head, encode_last_chunk, encode_response, encode_static,
};
pub use error::Error;
pub use header_block::{HeaderBlock, encode_head_block};
pub use percent::{percent_decode, percent_decode_str};
pub use request::{BodyKind, Headers, INLINE_HEADERS, Method, Request, Version};
pub use response::{ResponseBody, ResponseDecoder, ResponseHead, ResponseMessage};
pub use status::Status;
