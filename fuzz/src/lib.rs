//! Shared pieces of httplite's fuzz targets: deterministic knobs drawn from
//! the input itself, and independent reference decoders that the targets
//! compare the server's code against.
//!
//! The targets take plain byte streams (what a client would send), so the
//! seed corpus is real requests, readable as they are. How the stream is
//! split into reads, and which limits apply, is drawn from a hash of the
//! input ([`Knobs`]): every mutation of the input also explores another
//! split, and a crash reproduces from the input file alone.

pub mod chunked_ref;
pub mod knobs;
pub mod requests_ref;
pub mod responses;
pub mod rfc_line;

pub use knobs::Knobs;
pub mod memio;
pub mod transcript;
