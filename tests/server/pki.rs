//! TLS for the tests: a certificate authority and server certificates
//! made at test time (rcgen; RSA keys by Debian's `openssl`, which rcgen
//! cannot generate), and the rustls client the raw [`Client`] speaks when
//! the suite runs over TLS.
//!
//! No key is ever committed: each test process makes its own, in a
//! temporary directory that is removed when the process's [`Pki`] drops.
//!
//! `HTTPLITE_TEST_TLS=1` runs the whole suite over HTTPS: every
//! [`Server`](super::harness::Server) gets `--tls-cert`/`--tls-key` from
//! [`Pki::shared`], every [`Client`](super::harness::Client) connects with
//! TLS, and `curl` is given the CA (`scripts/test.sh` runs the protocol
//! and static-file modules that way).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, OnceLock};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType, SerialNumber,
};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use super::harness::{IO_TIMEOUT, TempDir};

/// Whether the suite runs over TLS (`HTTPLITE_TEST_TLS=1`).
pub fn tls_mode() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE.get_or_init(|| std::env::var_os("HTTPLITE_TEST_TLS").is_some_and(|v| v != "0"))
}

/// The kind of key a server certificate gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA on P-256.
    EcdsaP256,
    /// RSA, 2048 bits (made by `openssl genpkey`).
    Rsa2048,
}

/// A test certificate authority, and where its files live.
pub struct Pki {
    dir: TempDir,
    ca_pem: PathBuf,
    ca_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").field("ca_pem", &self.ca_pem).finish()
    }
}

/// A server certificate (with the CA's after it: a chain) and its key.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The PEM chain: the server's certificate, then the CA's.
    pub cert: PathBuf,
    /// The PEM private key.
    pub key: PathBuf,
}

impl Pki {
    /// A new CA in a new temporary directory.
    pub fn new(tag: &str) -> Pki {
        let dir = TempDir::new(&format!("pki-{tag}"));
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "httplite test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let ca_pem = dir.write("ca.pem", cert.pem().as_bytes());
        Pki {
            ca_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
            dir,
            ca_pem,
        }
    }

    /// The CA shared by every test of this process that does not need one
    /// of its own (and by `HTTPLITE_TEST_TLS=1` runs), with its server
    /// certificate for `localhost` and 127.0.0.1.
    pub fn shared() -> &'static (Pki, Issued) {
        static SHARED: OnceLock<(Pki, Issued)> = OnceLock::new();
        SHARED.get_or_init(|| {
            let pki = Pki::new("shared");
            let issued = pki.issue("server", KeyKind::EcdsaP256, 1);
            (pki, issued)
        })
    }

    /// The CA's certificate file (for `curl --cacert`, `openssl -CAfile`).
    pub fn ca(&self) -> &PathBuf {
        &self.ca_pem
    }

    /// Issues a certificate for `localhost` and 127.0.0.1 with `serial`,
    /// written as `NAME.pem` (chain) and `NAME.key`.
    pub fn issue(&self, name: &str, kind: KeyKind, serial: u64) -> Issued {
        self.issue_valid(name, kind, serial, false)
    }

    /// Like [`Pki::issue`], valid only during 2020 (expired).
    pub fn issue_expired(&self, name: &str, serial: u64) -> Issued {
        self.issue_valid(name, KeyKind::EcdsaP256, serial, true)
    }

    fn issue_valid(&self, name: &str, kind: KeyKind, serial: u64, expired: bool) -> Issued {
        let key = match kind {
            KeyKind::EcdsaP256 => KeyPair::generate().unwrap(),
            KeyKind::Rsa2048 => {
                let out = Command::new("openssl")
                    .args([
                        "genpkey",
                        "-algorithm",
                        "RSA",
                        "-pkeyopt",
                        "rsa_keygen_bits:2048",
                    ])
                    .output()
                    .expect("cannot run openssl (Debian package openssl)");
                assert!(out.status.success(), "openssl genpkey failed");
                let pem = String::from_utf8(out.stdout).unwrap();
                KeyPair::from_pem_and_sign_algo(&pem, &rcgen::PKCS_RSA_SHA256).unwrap()
            }
        };
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params
            .distinguished_name
            .push(DnType::CommonName, format!("httplite test {name}"));
        params.serial_number = Some(SerialNumber::from(serial));
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 12, 31);
        }
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let ca = std::fs::read_to_string(&self.ca_pem).unwrap();
        let chain = format!("{}{ca}", cert.pem());
        Issued {
            cert: self.dir.write(&format!("{name}.pem"), chain.as_bytes()),
            key: self
                .dir
                .write(&format!("{name}.key"), key.serialize_pem().as_bytes()),
        }
    }

    /// A rustls client configuration trusting this CA only, offering
    /// `http/1.1`, with rustls' default session cache (resumption on).
    pub fn client_config(&self) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

/// A TLS client stream over TCP, as the raw test client uses it.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// Connects to `addr` and starts TLS for `localhost` with `config` (the
/// handshake completes with the first read or write).
pub fn tls_connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> std::io::Result<TlsStream> {
    let sock = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    tls_over(sock, config)
}

/// Starts TLS for `localhost` on a connected socket (after whatever was
/// already sent on it in the clear, such as a PROXY header).
pub fn tls_over(sock: TcpStream, config: &Arc<ClientConfig>) -> std::io::Result<TlsStream> {
    sock.set_read_timeout(Some(IO_TIMEOUT))?;
    sock.set_write_timeout(Some(IO_TIMEOUT))?;
    let name = ServerName::try_from("localhost").unwrap();
    let conn = ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
    Ok(StreamOwned::new(conn, sock))
}

/// The client configuration of [`Pki::shared`], made once (so that its
/// session cache spans the process).
pub fn shared_client_config() -> Arc<ClientConfig> {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| Pki::shared().0.client_config())
        .clone()
}
