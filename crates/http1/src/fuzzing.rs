//! The head parsers one by one, for the fuzz targets in `fuzz/` (feature
//! `fuzzing`; not a supported API).
//!
//! Through [`Decoder`] the fast path always runs first and the general path
//! only sees what it declines, so a differential fuzz target cannot compare
//! the two on the same bytes without these entry points.

use bytes::BytesMut;

use crate::{Decoder, Error, Limits, Message, Request};

/// The fast single-pass parser alone: `Some` for an ordinary, complete
/// head at the very start of `buf` (split off `buf`), `None` (leaving `buf`
/// alone) for anything it declines. Limits are capped as [`Decoder::new`]
/// caps them.
pub fn parse_fast(buf: &mut BytesMut, limits: Limits) -> Option<Request> {
    let limits = *Decoder::new(limits).limits();
    match crate::head::fast::parse(buf, &limits) {
        Ok(Some(Message::Head(req))) => Some(req),
        _ => None,
    }
}

/// The general path alone, on the head at the very start of `buf`: http1's
/// own strict request-line parser, then httparse for the header fields
/// only (the name is historical: httparse no longer reads the line). The
/// request (split off `buf`), `Ok(None)` for a partial head, or the error
/// the decoder would answer with. Limits are capped as [`Decoder::new`]
/// caps them; no empty lines are skipped.
pub fn parse_httparse(buf: &mut BytesMut, limits: Limits) -> Result<Option<Request>, Error> {
    let limits = *Decoder::new(limits).limits();
    match crate::head::parse_slow(buf, &limits)? {
        Some(Message::Head(req)) => Ok(Some(req)),
        _ => Ok(None),
    }
}
