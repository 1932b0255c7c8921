//! HTTPS: the TLS record layer that sits between a driver's socket and
//! `http1`, once, for every runtime.
//!
//! [rustls](https://docs.rs/rustls) does the protocol and the cryptography
//! without doing any I/O itself: bytes from the socket go in
//! (`read_tls`), plaintext comes out (`reader`), plaintext goes in
//! (`writer`) and records come out (`write_tls`). That is the same sans-IO
//! shape as `http1`, which is why it fits our own runtimes. This module
//! adds what every driver needs around it:
//!
//! - [`certs`]: the certificate and key files (PEM, RSA or ECDSA, with a
//!   chain), and the resolver that hands the current pair to each new
//!   handshake, so that a reload ([`Tls::reload`], on SIGHUP or the
//!   console's `reload`) changes what new connections get while open ones
//!   keep theirs;
//! - [`session`]: one connection's TLS state as a small pump over a
//!   [`session::RawIo`] (the socket, blocking or not), with the
//!   plain-HTTP-on-a-TLS-port answer ([`plain`]) and the counting of
//!   handshakes and failures ([`stats`]).
//!
//! The drivers wrap it in their own shape of socket: `blocking::tls`
//! (stackful and threads, a [`BlockingIo`](crate::blocking::BlockingIo)
//! over another) and `stackless::transport` (a non-blocking stream the
//! stackless connection is generic over). Nothing above them (`http1`, the
//! site, the connection loops) knows whether the bytes were encrypted.

pub mod certs;
mod hkdf;
pub mod plain;
pub mod session;
pub mod stats;

use std::path::PathBuf;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::server::ServerSessionMemoryCache;

use certs::CertStore;
use stats::TlsStats;

pub use session::Session;

/// TLS sessions the server remembers for resumption by session ID (TLS
/// 1.2 clients without tickets, and TLS 1.3 clients when tickets are
/// off). Each entry is a few hundred bytes.
const SESSION_CACHE: usize = 4096;

/// Everything the connections of all workers share for TLS: the rustls
/// configuration (with its certificate resolver, session cache and
/// ticket keys), the counters, and whether cleartext requests get a
/// redirect.
#[derive(Debug)]
pub struct Tls {
    /// The rustls configuration each new connection starts from.
    pub config: Arc<ServerConfig>,
    /// The certificate files and the pair handed to new handshakes.
    pub certs: Arc<CertStore>,
    /// Handshakes, versions, suites and failures.
    pub stats: Arc<TlsStats>,
    /// `--redirect-http`: a plain HTTP request on this TLS port is answered
    /// `308` to its `https://` URL instead of `400`.
    pub redirect_http: bool,
}

impl Tls {
    /// Loads `cert` and `key` and builds the server configuration: TLS 1.2
    /// and 1.3 with rustls' default (safe) suites and groups, ALPN
    /// `http/1.1` (and `http/1.0`), resumption by session ID and by ticket.
    pub fn new(cert: PathBuf, key: PathBuf, redirect_http: bool) -> Result<Tls, String> {
        // aws-lc-rs's, with the TLS 1.3 key schedule's HMAC keys kept
        // ready per secret (see `hkdf`).
        let provider = Arc::new(hkdf::provider());
        let certs = Arc::new(CertStore::load(cert, key, provider.clone())?);
        let mut config = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("TLS configuration: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(certs.clone());
        // HTTP/1.0 too: `curl -0` offers only that, and nginx accepts it.
        // A client that offers ALPN without either (only `h2`) gets the
        // `no_application_protocol` alert RFC 7301 asks for.
        config.alpn_protocols = vec![b"http/1.1".to_vec(), b"http/1.0".to_vec()];
        config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
        config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()
            .map_err(|e| format!("TLS session tickets: {e}"))?;
        // The server's order of suites wins over the client's (see
        // docs/tls.md, "Suites and their order"): AES-256-GCM, AES-128-GCM,
        // then ChaCha20-Poly1305, ECDHE only, forward secrecy always.
        config.ignore_client_order = true;
        // Renegotiation does not exist in rustls; nothing to turn off.
        let stats = Arc::new(TlsStats::new(&provider.cipher_suites));
        Ok(Tls {
            config: Arc::new(config),
            certs,
            stats,
            redirect_http,
        })
    }

    /// The same, counting into `stats` (another listener's): one `tls`
    /// member in the stats document for both kinds of listener.
    pub fn counting_into(mut self, stats: Arc<TlsStats>) -> Tls {
        self.stats = stats;
        self
    }

    /// The same, counting into `counts` in memory several processes share
    /// (`--runtime fork`'s page): a handshake a child makes is counted where
    /// the child that answers `/_httplite/stats` reads it.
    pub fn counting_in_shared(self, counts: &'static stats::TlsCounts) -> Tls {
        let suites = &self.config.crypto_provider().cipher_suites;
        let stats = Arc::new(TlsStats::in_shared(suites, counts));
        self.counting_into(stats)
    }

    /// Reads the certificate and key files again: on success new
    /// handshakes use the new pair (open connections keep theirs); on
    /// failure the old pair stays. Returns the one line to log.
    pub fn reload(&self) -> String {
        self.certs.reload()
    }
}

/// The TLS of each kind of listener (see [`site::exposure`]): `--tls-cert`
/// on `--bind`, `--admin-tls-cert` on `--admin`; `None` serves plain HTTP.
#[derive(Debug, Clone, Default)]
pub struct TlsByListener {
    /// `--tls-cert`.
    pub public: Option<Arc<Tls>>,
    /// `--admin-tls-cert`.
    pub admin: Option<Arc<Tls>>,
}

impl TlsByListener {
    /// Reloads each listener's certificate; one line saying how it went.
    pub fn reload(&self) -> String {
        match (&self.public, &self.admin) {
            (None, None) => "reload: nothing to reload (no --tls-cert)".to_string(),
            (Some(tls), None) => tls.reload(),
            (None, Some(admin)) => format!("admin: {}", admin.reload()),
            (Some(tls), Some(admin)) => format!("{}; admin: {}", tls.reload(), admin.reload()),
        }
    }

    /// Whether any listener serves TLS.
    pub fn any(&self) -> bool {
        self.public.is_some() || self.admin.is_some()
    }

    /// The TLS of the listener a connection came in on.
    #[inline]
    pub fn on(&self, on: site::exposure::Surface) -> Option<&Arc<Tls>> {
        match on {
            site::exposure::Surface::Public => self.public.as_ref(),
            site::exposure::Surface::Admin => self.admin.as_ref(),
        }
    }
}
