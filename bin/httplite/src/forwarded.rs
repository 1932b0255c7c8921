//! Who the client is when proxies stand in front: the `--trusted-proxy`
//! networks, and the `X-Forwarded-For` / `Forwarded` (RFC 7239) headers
//! such proxies add.
//!
//! The rule, for the access log's address: start from the connection's
//! client (the PROXY header's source if the listener takes one, else the
//! socket's peer). If it is not trusted, that is the client, whatever the
//! headers say (anyone can send them). If it is trusted, walk the
//! forwarding header's hops from the right (the nearest proxy appended
//! last): skip trusted addresses; the first untrusted one is the client.
//! If every hop is trusted, the leftmost is.
//!
//! `Forwarded` is used when the request has one, `X-Forwarded-For`
//! otherwise (repeated headers are joined in order). A hop that is not an
//! address (`unknown`, an obfuscated `_name`, a `Forwarded` element
//! without `for=`, garbage, non-UTF-8) ends the walk: nothing to its left
//! can be believed, so the client is the last address walked (the nearest
//! trusted hop, or the connection's client). Malformed headers are thus
//! ignored for address purposes; they never fail the request.

use std::net::{IpAddr, SocketAddr};

/// One `--trusted-proxy` network: `10.0.0.0/8`, `::1/128`, or a bare
/// address (all its bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `ADDR/PREFIX` or `ADDR` (IPv4 or IPv6).
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let bad = || format!("{s:?} is not a network (try 10.0.0.0/8, 127.0.0.1, ::1/128 or unix)");
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(bad)?,
        };
        Ok(Cidr {
            net: mask(net, prefix),
            prefix,
        })
    }

    /// Whether `ip` is in the network (IPv4-mapped IPv6 addresses count
    /// as the IPv4 address they carry).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.net.is_ipv4() && mask(ip, self.prefix) == self.net
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let m = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((bits & m).into())
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let m = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((bits & m).into())
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

/// A connection's immediate peer, as its socket says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// A TCP peer.
    Ip(SocketAddr),
    /// A Unix-socket peer (no address).
    Unix,
    /// The socket could not say (the client already reset it).
    Unknown,
}

impl Peer {
    /// The address to log for it.
    pub fn addr(self) -> Option<SocketAddr> {
        match self {
            Peer::Ip(a) => Some(a),
            Peer::Unix | Peer::Unknown => None,
        }
    }
}

/// What `--trusted-proxy` trusts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trusted {
    nets: Vec<Cidr>,
    /// `--trusted-proxy unix`: peers on Unix sockets (whoever the socket
    /// file's mode lets connect).
    unix: bool,
}

/// One `--trusted-proxy` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustedArg {
    /// A network.
    Net(Cidr),
    /// `unix`: Unix-socket peers.
    Unix,
}

impl TrustedArg {
    /// Parses a CIDR, a bare address or `unix`.
    pub fn parse(s: &str) -> Result<TrustedArg, String> {
        match s {
            "unix" => Ok(TrustedArg::Unix),
            _ => Cidr::parse(s).map(TrustedArg::Net),
        }
    }
}

impl Trusted {
    /// From the `--trusted-proxy` values.
    pub fn new(args: &[TrustedArg]) -> Trusted {
        let mut t = Trusted::default();
        for a in args {
            match a {
                TrustedArg::Net(c) => t.nets.push(*c),
                TrustedArg::Unix => t.unix = true,
            }
        }
        t
    }

    /// Whether nothing is trusted (no `--trusted-proxy`): the forwarding
    /// headers are then never read.
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty() && !self.unix
    }

    /// Whether `ip` is in a trusted network.
    pub fn trusts_ip(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|c| c.contains(ip))
    }

    /// Whether `peer` is a trusted proxy.
    pub fn trusts(&self, peer: Peer) -> bool {
        match peer {
            Peer::Ip(a) => self.trusts_ip(a.ip()),
            Peer::Unix => self.unix,
            Peer::Unknown => false,
        }
    }

    /// The address to log for a request from `client` (see the module
    /// docs), `headers` being the request's headers in order.
    pub fn client<'a>(
        &self,
        client: Peer,
        headers: impl Iterator<Item = (&'a str, &'a [u8])> + Clone,
    ) -> Option<SocketAddr> {
        if !self.trusts(client) {
            return client.addr();
        }
        let forwarded = headers
            .clone()
            .any(|(n, _)| n.eq_ignore_ascii_case("forwarded"));
        let name = if forwarded {
            "forwarded"
        } else {
            "x-forwarded-for"
        };
        let mut hops: Vec<&[u8]> = Vec::new();
        for (n, v) in headers {
            if n.eq_ignore_ascii_case(name) {
                hops.extend(split_list(v));
            }
        }
        let mut current = client.addr();
        for hop in hops.iter().rev() {
            let addr = match forwarded {
                true => forwarded_for(hop),
                false => std::str::from_utf8(hop).ok().and_then(node),
            };
            let Some(addr) = addr else {
                return current;
            };
            current = Some(addr);
            if !self.trusts_ip(addr.ip()) {
                return current;
            }
        }
        current
    }
}

/// Splits a comma-separated header value into its elements, trimmed,
/// commas inside double quotes kept (RFC 9110 §5.6.1).
fn split_list(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, &b) in v.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => {
                out.push(v[start..i].trim_ascii());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(v[start..].trim_ascii());
    // Empty elements (`a,,b`, a trailing comma) are list syntax, not hops.
    out.into_iter().filter(|e| !e.is_empty())
}

/// The `for=` of one `Forwarded` element, if it is an address.
fn forwarded_for(element: &[u8]) -> Option<SocketAddr> {
    let element = std::str::from_utf8(element).ok()?;
    let value = element.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        k.trim().eq_ignore_ascii_case("for").then_some(v.trim())
    })?;
    let value = match value.strip_prefix('"') {
        Some(rest) => rest.strip_suffix('"')?,
        None => value,
    };
    node(value)
}

/// A node: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`, `[2001:db8::1]`,
/// `[2001:db8::1]:80` (the port, if any, is kept; the log shows the
/// address only).
fn node(s: &str) -> Option<SocketAddr> {
    let s = s.trim();
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, 0));
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Some(a);
    }
    let inner = s.strip_prefix('[')?.strip_suffix(']')?;
    inner
        .parse::<std::net::Ipv6Addr>()
        .ok()
        .map(|ip| SocketAddr::new(IpAddr::V6(ip), 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted(nets: &[&str]) -> Trusted {
        let args: Vec<TrustedArg> = nets.iter().map(|n| TrustedArg::parse(n).unwrap()).collect();
        Trusted::new(&args)
    }

    fn ip(s: &str) -> Peer {
        Peer::Ip(SocketAddr::new(s.parse().unwrap(), 1234))
    }

    fn client(t: &Trusted, peer: Peer, headers: &[(&'static str, &'static str)]) -> Option<IpAddr> {
        let h = headers.iter().map(|(n, v)| (*n, v.as_bytes()));
        t.client(peer, h).map(|a| a.ip())
    }

    fn a(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn cidrs() {
        let c = Cidr::parse("10.1.2.3/8").unwrap();
        assert_eq!(c.to_string(), "10.0.0.0/8");
        assert!(c.contains("10.200.0.1".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.0.0.1".parse().unwrap()), "mapped");
        let c = Cidr::parse("2001:db8::/32").unwrap();
        assert!(c.contains("2001:db8:1::5".parse().unwrap()));
        assert!(!c.contains("2001:db9::5".parse().unwrap()));
        assert!(!c.contains("10.0.0.1".parse().unwrap()));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        assert!(
            Cidr::parse("::/0")
                .unwrap()
                .contains("::1".parse().unwrap())
        );
        assert!(
            Cidr::parse("127.0.0.1")
                .unwrap()
                .contains("127.0.0.1".parse().unwrap())
        );
        assert!(
            !Cidr::parse("127.0.0.1")
                .unwrap()
                .contains("127.0.0.2".parse().unwrap())
        );
        for bad in [
            "",
            "10.0.0.0/33",
            "::1/129",
            "10.0.0.0/",
            "10.0.0/8",
            "x",
            "10.0.0.0/-1",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(TrustedArg::parse("unix"), Ok(TrustedArg::Unix));
    }

    #[test]
    fn rightmost_untrusted_hop() {
        let t = trusted(&["10.0.0.0/8", "2001:db8::/32"]);
        let xff = |v| [("X-Forwarded-For", v)];
        // An untrusted peer: the headers are ignored.
        assert_eq!(client(&t, ip("192.0.2.9"), &xff("1.1.1.1")), a("192.0.2.9"));
        // A trusted peer: the rightmost untrusted hop.
        assert_eq!(
            client(&t, ip("10.0.0.1"), &xff("1.1.1.1, 2.2.2.2, 10.0.0.7")),
            a("2.2.2.2")
        );
        assert_eq!(client(&t, ip("10.0.0.1"), &xff("1.1.1.1")), a("1.1.1.1"));
        // Every hop trusted: the leftmost.
        assert_eq!(
            client(&t, ip("10.0.0.1"), &xff("10.0.0.3, 10.0.0.2")),
            a("10.0.0.3")
        );
        // No header: the peer.
        assert_eq!(client(&t, ip("10.0.0.1"), &[]), a("10.0.0.1"));
        // Repeated headers join in order.
        let two = [
            ("x-forwarded-for", "1.1.1.1"),
            ("X-Forwarded-For", "3.3.3.3, 10.9.9.9"),
        ];
        assert_eq!(client(&t, ip("10.0.0.1"), &two), a("3.3.3.3"));
        // Ports and brackets, IPv6.
        assert_eq!(client(&t, ip("10.0.0.1"), &xff("1.1.1.1:80")), a("1.1.1.1"));
        assert_eq!(
            client(&t, ip("10.0.0.1"), &xff("[2001:db9::1]:80")),
            a("2001:db9::1")
        );
        assert_eq!(
            client(&t, ip("2001:db8::1"), &xff("2001:db9::1")),
            a("2001:db9::1")
        );
        // A malformed hop ends the walk at the last address walked.
        assert_eq!(
            client(&t, ip("10.0.0.1"), &xff("1.1.1.1, junk")),
            a("10.0.0.1")
        );
        assert_eq!(
            client(&t, ip("10.0.0.1"), &xff("1.1.1.1, junk, 10.0.0.5")),
            a("10.0.0.5")
        );
        assert_eq!(client(&t, ip("10.0.0.1"), &xff("unknown")), a("10.0.0.1"));
        assert_eq!(
            client(&t, ip("10.0.0.1"), &xff(", ,1.1.1.1,")),
            a("1.1.1.1")
        );
        // A Unix-socket peer: trusted only with `unix`.
        assert_eq!(client(&t, Peer::Unix, &xff("1.1.1.1")), None);
        let tu = trusted(&["unix"]);
        assert_eq!(client(&tu, Peer::Unix, &xff("1.1.1.1")), a("1.1.1.1"));
        assert_eq!(client(&tu, Peer::Unknown, &xff("1.1.1.1")), None);
    }

    #[test]
    fn forwarded_header() {
        let t = trusted(&["10.0.0.0/8"]);
        let fwd = |v| [("Forwarded", v), ("X-Forwarded-For", "9.9.9.9")];
        // Forwarded wins over X-Forwarded-For.
        assert_eq!(
            client(&t, ip("10.0.0.1"), &fwd("for=1.1.1.1")),
            a("1.1.1.1")
        );
        assert_eq!(
            client(
                &t,
                ip("10.0.0.1"),
                &fwd("for=1.1.1.1;proto=https, For=\"[2001:db8::17]:4711\";by=x, for=10.0.0.2")
            ),
            a("2001:db8::17")
        );
        assert_eq!(
            client(&t, ip("10.0.0.1"), &fwd("for=\"1.1.1.1:80\"")),
            a("1.1.1.1")
        );
        // Obfuscated, unknown, no for=, quoted commas, bad quoting.
        assert_eq!(
            client(&t, ip("10.0.0.1"), &fwd("for=1.1.1.1, for=_hidden")),
            a("10.0.0.1")
        );
        assert_eq!(
            client(&t, ip("10.0.0.1"), &fwd("for=unknown")),
            a("10.0.0.1")
        );
        assert_eq!(
            client(&t, ip("10.0.0.1"), &fwd("proto=https")),
            a("10.0.0.1")
        );
        assert_eq!(
            client(&t, ip("10.0.0.1"), &fwd("for=\"a,b\", for=2.2.2.2")),
            a("2.2.2.2")
        );
        assert_eq!(
            client(&t, ip("10.0.0.1"), &fwd("for=\"1.1.1.1")),
            a("10.0.0.1")
        );
        assert_eq!(client(&t, ip("10.0.0.1"), &fwd("for=\"")), a("10.0.0.1"));
    }

    #[test]
    fn non_utf8_is_malformed() {
        let t = trusted(&["10.0.0.0/8"]);
        let h = [("X-Forwarded-For", &b"1.1.1.1, \xff\xfe"[..])];
        let got = t.client(ip("10.0.0.1"), h.iter().map(|(n, v)| (*n, *v)));
        assert_eq!(got.map(|a| a.ip()), a("10.0.0.1"));
    }
}
