//! Header lines checked once and kept encoded, for answers whose headers do
//! not change between requests (a cached file's `Content-Type`, `ETag`,
//! `Last-Modified`): encoding them is then one copy, with no check and no
//! formatting per request.

use bytes::BytesMut;

use crate::encode::{BodyEncoder, Framing, ReplyTo, check_header, head_with, put_headers};
use crate::{Error, Status};

/// Header lines (`Name: value\r\n` each), checked as [`encode_head`]
/// checks its headers when the block is made.
///
/// [`encode_head`]: crate::encode_head
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderBlock(Box<[u8]>);

impl HeaderBlock {
    /// Checks and encodes `headers`; the same rules as
    /// [`encode_head`](crate::encode_head) (tokens for names, valid values,
    /// none of the headers the encoder writes itself).
    pub fn new(headers: &[(&str, &[u8])]) -> Result<HeaderBlock, Error> {
        for &(name, value) in headers {
            check_header(name, value)?;
        }
        let mut buf = BytesMut::new();
        put_headers(&mut buf, headers);
        Ok(HeaderBlock(buf.as_ref().into()))
    }

    /// The encoded lines.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// [`encode_head`](crate::encode_head) with a [`HeaderBlock`] for the
/// caller's headers; it cannot fail, the block being checked already.
///
/// ```
/// use bytes::BytesMut;
/// use http1::{encode_head_block, Framing, HeaderBlock, ReplyTo, Status, Version};
///
/// let block = HeaderBlock::new(&[("ETag", b"\"1\"")])?;
/// let to = ReplyTo { version: Version::Http11, keep_alive: true, head_only: false };
/// let mut buf = BytesMut::new();
/// let mut body = encode_head_block(&mut buf, to, Status::OK, &block, Framing::Length(2));
/// body.write(&mut buf, b"hi")?;
/// assert!(buf.ends_with(b"ETag: \"1\"\r\nContent-Length: 2\r\n\r\nhi"));
/// # Ok::<(), http1::Error>(())
/// ```
pub fn encode_head_block(
    buf: &mut BytesMut,
    to: ReplyTo,
    status: Status,
    block: &HeaderBlock,
    framing: Framing,
) -> BodyEncoder {
    head_with(buf, to, status, framing, |buf| {
        buf.extend_from_slice(block.as_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Version, encode_head};

    #[test]
    fn a_block_encodes_as_encode_head_does_and_is_checked_once() {
        let headers: &[(&str, &[u8])] = &[("Content-Type", b"text/css"), ("ETag", b"\"a-b\"")];
        let block = HeaderBlock::new(headers).unwrap();
        for (keep_alive, head_only) in [(true, false), (false, true)] {
            let to = ReplyTo {
                version: Version::Http11,
                keep_alive,
                head_only,
            };
            let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
            let ea = encode_head(&mut a, to, Status::OK, headers, Framing::Length(9)).unwrap();
            let eb = encode_head_block(&mut b, to, Status::OK, &block, Framing::Length(9));
            assert_eq!(a, b);
            assert_eq!(ea.keep_alive(), eb.keep_alive());
            assert_eq!(ea.wants_body(), eb.wants_body());
        }
        assert!(HeaderBlock::new(&[("Content-Length", b"1")]).is_err());
        assert!(HeaderBlock::new(&[("Bad Name", b"x")]).is_err());
        assert!(HeaderBlock::new(&[("X", b"a\r\nb")]).is_err());
    }
}
