//! The PROXY protocol header (HAProxy's, versions 1 and 2), parsed without
//! I/O: bytes in, the client's address and the header's length out, so
//! that every driver can call it on what it has read before handing the
//! rest to TLS or `http1`.
//!
//! [`HeaderReader`] is how the drivers read it (`crate::proxy` for the
//! blocking designs, `stackless::proxied` for the stackless one): it peeks
//! to see what has arrived and reads exactly the header's bytes, never one
//! of the HTTP or TLS bytes behind it, so nothing has to be handed on to
//! the layer above. The parser is unit-tested and fuzzed
//! (`fuzz/fuzz_targets/proxy_protocol.rs`). Hand-written rather than a
//! crate: the format is two small fixed layouts (a text line of at most
//! 107 bytes, a 16-byte binary header with fixed-size addresses), the
//! crates that parse it bring their own buffer types and allocations, and
//! a parser this size is easier to fuzz and audit than to adapt.
//!
//! Bad input from the network is never a panic: every index is checked,
//! and a header longer than the bounds below is [`Parsed::Invalid`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The version 2 signature.
const V2_SIG: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// Longest version 1 line, CRLF included (the specification's bound).
const V1_MAX: usize = 107;
/// Longest version 2 address block accepted (addresses and TLVs).
const V2_MAX_LEN: usize = 2048;

/// What the start of a connection's bytes says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// Not enough bytes yet to tell: read more (the header comes first).
    Incomplete,
    /// A whole header of `len` bytes. `source` is the client the proxy
    /// speaks for; `None` when the header carries no address (v1
    /// `UNKNOWN`, v2 `LOCAL` such as a health check, or an address family
    /// other than IPv4/IPv6): use the connection's own peer then.
    Done {
        /// Bytes the header takes; the HTTP (or TLS) bytes follow.
        len: usize,
        /// The original client.
        source: Option<SocketAddr>,
    },
    /// Not a PROXY header, or a malformed one: close the connection.
    Invalid(&'static str),
}

/// The longest header [`HeaderReader`] may have to hold.
pub const MAX_HEADER: usize = 16 + V2_MAX_LEN;

/// Reads one header off a socket without reading past it, sans I/O: the
/// driver peeks (`recv` with `MSG_PEEK`) into [`HeaderReader::spare`],
/// calls [`HeaderReader::step`] with the count, and does what it says.
///
/// Why peek and read rather than read: a read may take bytes of the
/// request behind the header, which would then have to be given to the
/// HTTP decoder or the TLS session. Peeking shows what has arrived; the
/// reads then take only header bytes. While the header is incomplete,
/// every byte seen so far and the next one belong to it, so a read of one
/// byte more than was peeked cannot overshoot, and it is a real read that
/// waits (or reports `EAGAIN`, clearing an edge-triggered readiness) when
/// nothing more has arrived.
#[derive(Debug)]
pub struct HeaderReader {
    buf: Box<[u8; MAX_HEADER]>,
    have: usize,
}

/// What [`HeaderReader::step`] asks of the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Read (waiting if need be) at most this many bytes into
    /// [`HeaderReader::spare`], pass the count to
    /// [`HeaderReader::consumed`] (0 is the end of the stream: give up),
    /// then peek again.
    Read(usize),
    /// The header is whole: read exactly `consume` more bytes (they have
    /// arrived: the peek saw them) and the connection's own bytes follow.
    Done {
        /// Bytes still to read off the socket.
        consume: usize,
        /// The original client (`None`: keep the connection's peer).
        source: Option<SocketAddr>,
    },
    /// Not a valid header: close.
    Invalid(&'static str),
}

impl Default for HeaderReader {
    fn default() -> HeaderReader {
        HeaderReader {
            buf: Box::new([0; MAX_HEADER]),
            have: 0,
        }
    }
}

impl HeaderReader {
    /// Where the next peek or read goes (the bytes after those read).
    pub fn spare(&mut self) -> &mut [u8] {
        &mut self.buf[self.have..]
    }

    /// Given that a peek put `peeked` bytes into [`HeaderReader::spare`]
    /// (0 if nothing was there), what to do next.
    pub fn step(&mut self, peeked: usize) -> Step {
        let seen = (self.have + peeked).min(MAX_HEADER);
        match parse(&self.buf[..seen]) {
            Parsed::Done { len, source } => Step::Done {
                consume: len.saturating_sub(self.have),
                source,
            },
            Parsed::Invalid(why) => Step::Invalid(why),
            // The header is longer than `seen`: one byte more than was
            // seen is still header (and `seen < MAX_HEADER` here: the
            // parser bounds both versions below it).
            Parsed::Incomplete => Step::Read((seen + 1 - self.have).min(MAX_HEADER - self.have)),
        }
    }

    /// `n` bytes were read into [`HeaderReader::spare`].
    pub fn consumed(&mut self, n: usize) {
        self.have = (self.have + n).min(MAX_HEADER);
    }
}

/// Parses the header at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parsed {
    let n = buf.len().min(V2_SIG.len());
    if buf[..n] == V2_SIG[..n] {
        return if n < V2_SIG.len() {
            Parsed::Incomplete
        } else {
            parse_v2(buf)
        };
    }
    let n = buf.len().min(6);
    if buf[..n] == b"PROXY "[..n] {
        return if n < 6 {
            Parsed::Incomplete
        } else {
            parse_v1(buf)
        };
    }
    Parsed::Invalid("no PROXY protocol header")
}

fn parse_v1(buf: &[u8]) -> Parsed {
    let window = &buf[..buf.len().min(V1_MAX)];
    let Some(end) = window.windows(2).position(|w| w == b"\r\n") else {
        return match buf.len() >= V1_MAX {
            true => Parsed::Invalid("PROXY v1 line too long"),
            false => Parsed::Incomplete,
        };
    };
    let len = end + 2;
    let Ok(line) = std::str::from_utf8(&buf[6..end]) else {
        return Parsed::Invalid("PROXY v1 line is not text");
    };
    let mut parts = line.split(' ');
    let source = match parts.next() {
        Some("UNKNOWN") => None,
        Some(family @ ("TCP4" | "TCP6")) => {
            let (Some(src), Some(_dst), Some(sport), Some(_dport), None) = (
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
            ) else {
                return Parsed::Invalid("PROXY v1: wrong number of fields");
            };
            let ip: Option<IpAddr> = match family {
                "TCP4" => src.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
                _ => src.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
            };
            let port = port_v1(sport);
            match (ip, port) {
                (Some(ip), Some(port)) => Some(SocketAddr::new(ip, port)),
                _ => return Parsed::Invalid("PROXY v1: bad address or port"),
            }
        }
        _ => return Parsed::Invalid("PROXY v1: unknown protocol"),
    };
    Parsed::Done { len, source }
}

/// A decimal port without sign or leading zeros (as the specification
/// writes them).
fn port_v1(s: &str) -> Option<u16> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if s.len() > 1 && s.starts_with('0') {
        return None;
    }
    s.parse().ok()
}

fn parse_v2(buf: &[u8]) -> Parsed {
    let Some(&[ver_cmd, fam, hi, lo]) = buf.get(12..16) else {
        return Parsed::Incomplete;
    };
    if ver_cmd >> 4 != 2 {
        return Parsed::Invalid("PROXY v2: bad version");
    }
    let local = match ver_cmd & 0x0f {
        0 => true,
        1 => false,
        _ => return Parsed::Invalid("PROXY v2: bad command"),
    };
    let body_len = u16::from_be_bytes([hi, lo]) as usize;
    if body_len > V2_MAX_LEN {
        return Parsed::Invalid("PROXY v2: header too long");
    }
    let len = 16 + body_len;
    let Some(body) = buf.get(16..len) else {
        return Parsed::Incomplete;
    };
    if local {
        return Parsed::Done { len, source: None };
    }
    let source = match fam {
        // TCP over IPv4: src 4, dst 4, sport 2, dport 2.
        0x11 => {
            let Some(a) = body.get(..12) else {
                return Parsed::Invalid("PROXY v2: short IPv4 addresses");
            };
            let ip = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
            Some(SocketAddr::new(
                IpAddr::V4(ip),
                u16::from_be_bytes([a[8], a[9]]),
            ))
        }
        // TCP over IPv6: src 16, dst 16, sport 2, dport 2.
        0x21 => {
            let Some(a) = body.get(..36) else {
                return Parsed::Invalid("PROXY v2: short IPv6 addresses");
            };
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&a[..16]);
            let ip = Ipv6Addr::from(octets);
            Some(SocketAddr::new(
                IpAddr::V6(ip),
                u16::from_be_bytes([a[32], a[33]]),
            ))
        }
        // UNSPEC, UDP, Unix: no address we can use.
        _ => None,
    };
    Parsed::Done { len, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1() {
        let h = b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n";
        assert_eq!(
            parse(h),
            Parsed::Done {
                len: 45,
                source: Some("192.0.2.1:56324".parse().unwrap())
            }
        );
        let h = b"PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n";
        assert_eq!(
            parse(h),
            Parsed::Done {
                len: h.len(),
                source: Some("[2001:db8::1]:1".parse().unwrap())
            }
        );
        assert_eq!(
            parse(b"PROXY UNKNOWN\r\n"),
            Parsed::Done {
                len: 15,
                source: None
            }
        );
        for partial in [&b"PRO"[..], b"PROXY TCP4 1.2.3.4", b"\r\n\r\n\0\r"] {
            assert_eq!(parse(partial), Parsed::Incomplete, "{partial:?}");
        }
        for bad in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
            b"PROXY TCP4 ::1 ::1 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
            b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
            &[b'P', b'R', b'O', b'X', b'Y', b' ', 0xff, b'\r', b'\n'],
        ] {
            assert!(matches!(parse(bad), Parsed::Invalid(_)), "{bad:?}");
        }
        let long = [b"PROXY ".as_slice(), &[b'x'; 200]].concat();
        assert!(matches!(parse(&long), Parsed::Invalid(_)));
    }

    /// Drives a [`HeaderReader`] over `arrivals` (what the socket holds
    /// after each wait), checking it never reads past the header.
    fn read_all(stream: &[u8], arrivals: &[usize]) -> (Step, usize) {
        let mut r = HeaderReader::default();
        let (mut pos, mut avail) = (0, 0);
        let mut arrivals = arrivals.iter();
        loop {
            let peeked = (avail - pos).min(r.spare().len());
            r.spare()[..peeked].copy_from_slice(&stream[pos..pos + peeked]);
            match r.step(peeked) {
                Step::Read(max) => {
                    assert!(max >= 1);
                    if avail == pos {
                        match arrivals.next() {
                            Some(&a) => avail = a.min(stream.len()),
                            None => return (Step::Read(max), pos),
                        }
                    }
                    let n = max.min(avail - pos);
                    r.spare()[..n].copy_from_slice(&stream[pos..pos + n]);
                    r.consumed(n);
                    pos += n;
                }
                Step::Done { consume, source } => {
                    assert!(pos + consume <= avail, "the peek saw them");
                    return (Step::Done { consume: 0, source }, pos + consume);
                }
                invalid => return (invalid, pos),
            }
        }
    }

    #[test]
    fn reader_stops_at_the_header_however_it_arrives() {
        let v1 = b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n";
        let body = [192, 0, 2, 1, 198, 51, 100, 2, 0xdc, 0x04, 0x01, 0xbb];
        let mut v2h = v2(1, 0x11, &body);
        let v2_len = v2h.len();
        v2h.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let want = Some("192.0.2.1:56324".parse().unwrap());
        for (stream, len) in [(&v1[..], 45), (&v2h[..], v2_len)] {
            for split in 0..stream.len() {
                let (step, pos) = read_all(stream, &[split, stream.len()]);
                assert_eq!(
                    step,
                    Step::Done {
                        consume: 0,
                        source: want
                    },
                    "split at {split}"
                );
                assert_eq!(pos, len, "read exactly the header (split at {split})");
            }
            // One byte at a time.
            let arrivals: Vec<usize> = (1..=stream.len()).collect();
            assert_eq!(read_all(stream, &arrivals).1, len);
        }
        let (step, _) = read_all(b"GET / HTTP/1.1\r\n", &[16]);
        assert!(matches!(step, Step::Invalid(_)));
        let (step, pos) = read_all(b"PROXY TCP4 1.2", &[14]);
        assert_eq!((step, pos), (Step::Read(1), 14), "waits for more");
    }

    fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut h = V2_SIG.to_vec();
        h.push(0x20 | cmd);
        h.push(fam);
        h.extend_from_slice(&(body.len() as u16).to_be_bytes());
        h.extend_from_slice(body);
        h
    }

    #[test]
    fn v2_headers() {
        let body = [192, 0, 2, 1, 198, 51, 100, 2, 0xdc, 0x04, 0x01, 0xbb];
        let h = v2(1, 0x11, &body);
        assert_eq!(
            parse(&h),
            Parsed::Done {
                len: 28,
                source: Some("192.0.2.1:56324".parse().unwrap())
            }
        );
        for cut in 0..h.len() {
            assert_eq!(parse(&h[..cut]), Parsed::Incomplete, "cut at {cut}");
        }
        let mut body6 = [0u8; 36 + 5]; // with a TLV after the addresses
        body6[15] = 1;
        body6[32] = 0x12;
        body6[33] = 0x34;
        assert_eq!(
            parse(&v2(1, 0x21, &body6)),
            Parsed::Done {
                len: 16 + 41,
                source: Some("[::1]:4660".parse().unwrap())
            }
        );
        // LOCAL (a proxy's health check): no address.
        assert_eq!(
            parse(&v2(0, 0x00, &[])),
            Parsed::Done {
                len: 16,
                source: None
            }
        );
        assert!(matches!(
            parse(&v2(1, 0x11, &body[..8])),
            Parsed::Invalid(_)
        ));
        assert!(matches!(parse(&v2(2, 0x11, &body)), Parsed::Invalid(_)));
        let mut bad_version = v2(1, 0x11, &body);
        bad_version[12] = 0x11;
        assert!(matches!(parse(&bad_version), Parsed::Invalid(_)));
        let mut huge = v2(1, 0x11, &body);
        huge[14] = 0xff;
        assert!(matches!(parse(&huge), Parsed::Invalid(_)));
    }
}
