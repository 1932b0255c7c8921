//! TLS counters for `/_httplite/stats`: handshakes by version, cipher
//! suite and kind (full or resumed), and failed handshakes by reason.
//!
//! Shared by all workers (atomics, touched once per handshake, not per
//! request), and written into the stats document as one `"tls"` member.
//! The counts themselves are one plain block of atomics ([`TlsCounts`]), so
//! that `--runtime fork` can place them in the page its processes share
//! ([`TlsStats::in_shared`]).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use rustls::{ProtocolVersion, SupportedCipherSuite};

/// Why a handshake failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The first bytes were not a TLS record but plain HTTP (answered 400
    /// or, with `--redirect-http`, 308, in cleartext).
    PlainHttp,
    /// Bytes that are not well-formed TLS records or messages.
    BadRecord,
    /// No protocol version, cipher suite, group or signature scheme in
    /// common, or no `http/1.1` in the client's ALPN list.
    Incompatible,
    /// The client sent a fatal alert (for example: it does not trust our
    /// certificate).
    Alert,
    /// A record that does not decrypt or authenticate.
    Decrypt,
    /// A message out of place, or another protocol violation.
    Misbehaved,
    /// The client stopped (closed, timed out, or reset) before the
    /// handshake finished; this includes connections that never sent a
    /// ClientHello.
    Incomplete,
    /// Anything else rustls reports.
    Other,
}

const FAILURES: [(Failure, &str); 8] = [
    (Failure::PlainHttp, "plain_http"),
    (Failure::BadRecord, "bad_record"),
    (Failure::Incompatible, "incompatible"),
    (Failure::Alert, "alert_received"),
    (Failure::Decrypt, "decrypt"),
    (Failure::Misbehaved, "misbehaved"),
    (Failure::Incomplete, "incomplete"),
    (Failure::Other, "other"),
];

impl Failure {
    /// The reason for a rustls error.
    pub fn of(e: &rustls::Error) -> Failure {
        use rustls::Error as E;
        match e {
            E::InvalidMessage(_) => Failure::BadRecord,
            E::PeerIncompatible(_) | E::NoApplicationProtocol => Failure::Incompatible,
            E::AlertReceived(_) => Failure::Alert,
            E::DecryptError => Failure::Decrypt,
            E::InappropriateMessage { .. }
            | E::InappropriateHandshakeMessage { .. }
            | E::PeerMisbehaved(_) => Failure::Misbehaved,
            _ => Failure::Other,
        }
    }
}

/// The most cipher suites counted one by one (aws-lc-rs's default
/// provider offers 9); a suite past it is counted in the versions only.
pub const MAX_SUITES: usize = 16;

/// The counts, as plain atomics with a fixed layout: in the process's heap,
/// or in memory several processes share.
#[derive(Debug, Default)]
#[repr(C)]
pub struct TlsCounts {
    full: AtomicU64,
    resumed: AtomicU64,
    tls12: AtomicU64,
    tls13: AtomicU64,
    /// One counter per suite, in the provider's order.
    suites: [AtomicU64; MAX_SUITES],
    failures: [AtomicU64; FAILURES.len()],
}

/// Where the counts live.
#[derive(Debug)]
enum Counts {
    Own(Box<TlsCounts>),
    Shared(&'static TlsCounts),
}

/// The counters.
#[derive(Debug)]
pub struct TlsStats {
    /// The suites the provider offers, in its order (the names of the
    /// first [`MAX_SUITES`] counts).
    suites: Vec<SupportedCipherSuite>,
    counts: Counts,
}

impl TlsStats {
    /// Counters for these suites.
    pub fn new(suites: &[SupportedCipherSuite]) -> TlsStats {
        TlsStats {
            suites: suites.to_vec(),
            counts: Counts::Own(Box::default()),
        }
    }

    /// Counters for these suites kept in `counts` (a `MAP_SHARED` page:
    /// every process that inherits it adds to the same numbers).
    pub fn in_shared(suites: &[SupportedCipherSuite], counts: &'static TlsCounts) -> TlsStats {
        TlsStats {
            suites: suites.to_vec(),
            counts: Counts::Shared(counts),
        }
    }

    #[inline]
    fn counts(&self) -> &TlsCounts {
        match &self.counts {
            Counts::Own(c) => c,
            Counts::Shared(c) => c,
        }
    }

    /// Counts a completed handshake.
    pub fn handshake(
        &self,
        version: Option<ProtocolVersion>,
        suite: Option<SupportedCipherSuite>,
        resumed: bool,
    ) {
        let c = self.counts();
        let kind = if resumed { &c.resumed } else { &c.full };
        kind.fetch_add(1, Ordering::Relaxed);
        match version {
            Some(ProtocolVersion::TLSv1_3) => c.tls13.fetch_add(1, Ordering::Relaxed),
            Some(_) => c.tls12.fetch_add(1, Ordering::Relaxed),
            None => 0,
        };
        if let Some(suite) = suite
            && let Some(i) = self.suites.iter().position(|s| s.suite() == suite.suite())
            && let Some(n) = c.suites.get(i)
        {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a failed handshake.
    pub fn failure(&self, why: Failure) {
        self.counts().failures[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Failed handshakes so far for one reason.
    pub fn failures(&self, why: Failure) -> u64 {
        self.counts().failures[why as usize].load(Ordering::Relaxed)
    }

    /// Appends `,"tls":{...}` to the stats document.
    pub fn write_json(&self, s: &mut String) {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let c = self.counts();
        let _ = write!(
            s,
            ",\"tls\":{{\"handshakes\":{{\"full\":{},\"resumed\":{}}},\"versions\":{{\"tls1_2\":{},\"tls1_3\":{}}},\"suites\":{{",
            n(&c.full),
            n(&c.resumed),
            n(&c.tls12),
            n(&c.tls13),
        );
        for (i, (suite, count)) in self.suites.iter().zip(&c.suites).enumerate() {
            let name = suite.suite().as_str().unwrap_or("unknown");
            let sep = if i > 0 { "," } else { "" };
            let _ = write!(s, "{sep}\"{name}\":{}", n(count));
        }
        s.push_str("},\"handshake_failures\":{");
        for (i, (why, name)) in FAILURES.iter().enumerate() {
            let sep = if i > 0 { "," } else { "" };
            let _ = write!(s, "{sep}\"{name}\":{}", n(&c.failures[*why as usize]));
        }
        s.push_str("}}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_counts_versions_suites_and_failures() {
        let provider = rustls::crypto::aws_lc_rs::default_provider();
        let st = TlsStats::new(&provider.cipher_suites);
        let suite = provider.cipher_suites[0];
        st.handshake(Some(ProtocolVersion::TLSv1_3), Some(suite), false);
        st.handshake(Some(ProtocolVersion::TLSv1_2), None, true);
        st.failure(Failure::PlainHttp);
        let mut j = String::new();
        st.write_json(&mut j);
        assert!(j.starts_with(",\"tls\":{") && j.ends_with('}'), "{j}");
        assert!(j.contains("\"full\":1,\"resumed\":1"), "{j}");
        assert!(j.contains("\"tls1_2\":1,\"tls1_3\":1"), "{j}");
        let name = suite.suite().as_str().unwrap();
        assert!(j.contains(&format!("\"{name}\":1")), "{j}");
        assert!(j.contains("\"plain_http\":1,\"bad_record\":0"), "{j}");
        assert_eq!(st.failures(Failure::PlainHttp), 1);
    }
}
