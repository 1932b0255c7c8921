//! Whole-request decoding for handlers that want the body in one piece.

use bytes::{Bytes, BytesMut};

use crate::{Decoder, Error, Limits, Message, Request};

/// A [`Decoder`] that collects each body, yielding `(head, body)` pairs.
///
/// The body is bounded by [`Limits::max_body`], so collecting is safe. A body
/// that arrives in one piece is returned as that piece (shared with the read
/// buffer, no copy); only bodies spread over several reads are copied
/// together.
///
/// ```
/// use bytes::BytesMut;
/// use http1::{FullDecoder, Limits};
///
/// let mut dec = FullDecoder::new(Limits::default());
/// let mut buf = BytesMut::from(&b"POST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\nhel"[..]);
/// assert!(dec.decode(&mut buf).unwrap().is_none());
/// buf.extend_from_slice(b"lo");
/// let (req, body) = dec.decode(&mut buf).unwrap().unwrap();
/// assert_eq!(req.path(), "/echo");
/// assert_eq!(&body[..], b"hello");
/// ```
#[derive(Debug)]
pub struct FullDecoder {
    decoder: Decoder,
    pending: Option<Request>,
    body: Collected,
    continue_sent: bool,
}

#[derive(Debug)]
enum Collected {
    Empty,
    One(Bytes),
    Many(BytesMut),
}

impl FullDecoder {
    /// A decoder for a new connection.
    pub fn new(limits: Limits) -> FullDecoder {
        FullDecoder {
            decoder: Decoder::new(limits),
            pending: None,
            body: Collected::Empty,
            continue_sent: false,
        }
    }

    /// The next complete request and its body (empty for body-less
    /// requests); `Ok(None)` when more bytes are needed. Errors as
    /// [`Decoder::decode`].
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<(Request, Bytes)>, Error> {
        loop {
            match self.decoder.decode(buf)? {
                None => return Ok(None),
                Some(Message::Head(req)) if !req.has_body() => {
                    return Ok(Some((req, Bytes::new())));
                }
                Some(Message::Head(req)) => {
                    self.pending = Some(req);
                    self.continue_sent = false;
                }
                Some(Message::Body(piece)) => self.collect(piece),
                Some(Message::End) => {
                    let body = match std::mem::replace(&mut self.body, Collected::Empty) {
                        Collected::Empty => Bytes::new(),
                        Collected::One(b) => b,
                        Collected::Many(b) => b.freeze(),
                    };
                    if let Some(req) = self.pending.take() {
                        return Ok(Some((req, body)));
                    }
                }
            }
        }
    }

    fn collect(&mut self, piece: Bytes) {
        self.body = match std::mem::replace(&mut self.body, Collected::Empty) {
            Collected::Empty => Collected::One(piece),
            Collected::One(first) => {
                let mut all = BytesMut::with_capacity(first.len() + piece.len());
                all.extend_from_slice(&first);
                all.extend_from_slice(&piece);
                Collected::Many(all)
            }
            Collected::Many(mut all) => {
                all.extend_from_slice(&piece);
                Collected::Many(all)
            }
        };
    }

    /// The head whose body is still arriving, if any.
    pub fn pending(&self) -> Option<&Request> {
        self.pending.as_ref()
    }

    /// `true` exactly once per request when the client waits for
    /// `100 Continue` (see [`encode_continue`](crate::encode_continue)):
    /// its head asked for it and no body byte has arrived yet. Call after
    /// [`decode`](FullDecoder::decode) returned `Ok(None)`.
    pub fn take_continue(&mut self) -> bool {
        let waiting = !self.continue_sent
            && matches!(self.body, Collected::Empty)
            && self.pending.as_ref().is_some_and(Request::expects_continue);
        if waiting {
            self.continue_sent = true;
        }
        waiting
    }

    /// As [`Decoder::is_idle`].
    pub fn is_idle(&self) -> bool {
        self.decoder.is_idle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_collected_and_single_pieces_not_copied() {
        let mut dec = FullDecoder::new(Limits::default());
        let mut buf = BytesMut::from(
            &b"GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyzPOST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n"[..],
        );
        let (a, body) = dec.decode(&mut buf).unwrap().unwrap();
        assert_eq!((a.path(), &body[..]), ("/a", &b""[..]));
        let body_start = buf.as_ptr() as usize + buf.iter().position(|&b| b == b'x').unwrap();
        let (b, body) = dec.decode(&mut buf).unwrap().unwrap();
        assert_eq!((b.path(), &body[..]), ("/b", &b"xyz"[..]));
        assert_eq!(
            body.as_ptr() as usize,
            body_start,
            "one piece is shared, not copied"
        );
        assert!(dec.decode(&mut buf).unwrap().is_none());
        assert_eq!(dec.pending().map(Request::path), Some("/c"));
        assert!(!dec.is_idle());
        buf.extend_from_slice(b"3\r\ncde\r\n0\r\n\r\n");
        let (c, body) = dec.decode(&mut buf).unwrap().unwrap();
        assert_eq!((c.path(), &body[..]), ("/c", &b"abcde"[..]));
        assert!(dec.is_idle() && dec.pending().is_none());
    }

    #[test]
    fn continue_is_offered_once_and_only_before_the_body() {
        let mut dec = FullDecoder::new(Limits::default());
        let mut buf = BytesMut::from(
            &b"PUT / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"[..],
        );
        assert!(!dec.take_continue());
        assert!(dec.decode(&mut buf).unwrap().is_none());
        assert!(dec.take_continue());
        assert!(!dec.take_continue());
        buf.extend_from_slice(b"ok");
        assert!(dec.decode(&mut buf).unwrap().is_some());

        // A client that sent its body without waiting is not sent 100.
        let mut buf = BytesMut::from(
            &b"PUT / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\no"[..],
        );
        assert!(dec.decode(&mut buf).unwrap().is_none());
        assert!(!dec.take_continue());
    }

    #[test]
    fn errors_pass_through() {
        let mut dec = FullDecoder::new(Limits {
            max_body: 1,
            ..Limits::default()
        });
        let mut buf = BytesMut::from(&b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab"[..]);
        assert_eq!(dec.decode(&mut buf).unwrap_err().status().code(), 413);
    }
}
