//! The certificate and key files, and the resolver that gives each new
//! handshake the pair loaded last.
//!
//! rustls asks a [`ResolvesServerCert`] for the certificate at every
//! ClientHello. Ours answers with the pair behind a lock, so a reload
//! swaps one `Arc` and changes nothing else: the server configuration,
//! its session cache and its ticket keys stay, and so resumption keeps
//! working across a reload. A connection past its handshake never asks
//! again, which is what "open connections keep their certificate" means.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The files named by `--tls-cert` and `--tls-key`, and the pair loaded
/// from them last.
#[derive(Debug)]
pub struct CertStore {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertStore {
    /// Loads the pair, or says why it cannot (the message names the file);
    /// an expired certificate is loaded with a warning on stderr.
    pub fn load(
        cert_path: PathBuf,
        key_path: PathBuf,
        provider: Arc<CryptoProvider>,
    ) -> Result<CertStore, String> {
        let (key, warning) = load_pair(&cert_path, &key_path, &provider)?;
        if let Some(w) = warning {
            // Served anyway (clients decide), but said once at start-up.
            eprintln!("httplite: warning: {w}");
        }
        Ok(CertStore {
            cert_path,
            key_path,
            provider,
            current: RwLock::new(key),
        })
    }

    /// Reads both files again. The old pair stays if anything is wrong
    /// (missing or unreadable file, no certificate, a key that does not
    /// match); an expired certificate is loaded, with a warning. Returns
    /// one line for the log.
    pub fn reload(&self) -> String {
        match load_pair(&self.cert_path, &self.key_path, &self.provider) {
            Ok((key, warning)) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = key;
                match warning {
                    Some(w) => format!("httplite: TLS certificate reloaded; warning: {w}"),
                    None => "httplite: TLS certificate reloaded".to_string(),
                }
            }
            Err(e) => format!("httplite: TLS reload failed, keeping the old certificate: {e}"),
        }
    }

    /// The pair new handshakes get.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Reads a PEM chain and a PEM private key (PKCS#8, PKCS#1 RSA or SEC1
/// EC), checks that they belong together, and notes an expired (or not
/// yet valid) leaf certificate as a warning.
fn load_pair(
    cert_path: &PathBuf,
    key_path: &PathBuf,
    provider: &CryptoProvider,
) -> Result<(Arc<CertifiedKey>, Option<String>), String> {
    let cert_name = cert_path.display();
    let key_name = key_path.display();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .map_err(|e| format!("--tls-cert {cert_name}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {cert_name}: {e}"))?;
    if chain.is_empty() {
        return Err(format!(
            "--tls-cert {cert_name}: no certificate in the file"
        ));
    }
    let key =
        PrivateKeyDer::from_pem_file(key_path).map_err(|e| format!("--tls-key {key_name}: {e}"))?;
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("--tls-key {key_name}: {e}"))?;
    let pair = CertifiedKey::new(chain, signer);
    pair.keys_match()
        .map_err(|e| format!("--tls-key {key_name} does not match --tls-cert {cert_name}: {e}"))?;
    let warning = validity_warning(&pair.cert[0], SystemTime::now())
        .map(|w| format!("--tls-cert {cert_name}: {w}"));
    Ok((Arc::new(pair), warning))
}

/// A warning if the certificate's validity period does not contain `now`
/// (the server still serves it: the operator decides, clients refuse).
fn validity_warning(cert: &CertificateDer<'_>, now: SystemTime) -> Option<String> {
    let (not_before, not_after) = validity(cert)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    if now > not_after {
        Some(format!(
            "the certificate expired {} days ago",
            (now - not_after) / 86_400
        ))
    } else if now < not_before {
        Some("the certificate is not valid yet".to_string())
    } else {
        None
    }
}

/// The leaf's `notBefore` and `notAfter`, in seconds since the epoch, read
/// from its DER (RFC 5280 4.1: Certificate → TBSCertificate → [0] version,
/// serialNumber, signature, issuer, validity). `None` if it does not parse;
/// rustls has checked nothing of this, and the warning is all it is for.
fn validity(cert: &[u8]) -> Option<(u64, u64)> {
    let (certificate, _) = der(cert, 0x30)?; // Certificate
    let (mut tbs, _) = der(certificate, 0x30)?; // TBSCertificate
    if tbs.first() == Some(&0xa0) {
        tbs = der(tbs, 0xa0)?.1; // version
    }
    for tag in [0x02, 0x30, 0x30] {
        tbs = der(tbs, tag)?.1; // serial, signature, issuer
    }
    let (validity, _) = der(tbs, 0x30)?;
    let (nb_tag, rest) = (*validity.first()?, validity);
    let (nb, rest) = der(rest, nb_tag)?;
    let na_tag = *rest.first()?;
    let (na, _) = der(rest, na_tag)?;
    Some((asn1_time(nb_tag, nb)?, asn1_time(na_tag, na)?))
}

/// Splits one DER element of type `tag` off `input`: (its contents, what
/// follows it).
fn der(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    if *input.first()? != tag {
        return None;
    }
    let first = *input.get(1)?;
    let (len, head) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for b in input.get(2..2 + n)? {
            len = (len << 8) | usize::from(*b);
        }
        (len, 2 + n)
    };
    let end = head.checked_add(len)?;
    Some((input.get(head..end)?, input.get(end..)?))
}

/// UTCTime (`YYMMDDHHMMSSZ`, tag 0x17) or GeneralizedTime
/// (`YYYYMMDDHHMMSSZ`, tag 0x18) as seconds since the epoch.
fn asn1_time(tag: u8, s: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(s).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        0x17 => {
            let yy: u64 = s.get(..2)?.parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, s.get(2..)?)
        }
        0x18 => (s.get(..4)?.parse().ok()?, s.get(4..)?),
        _ => return None,
    };
    if rest.len() != 10 || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| rest[r].parse::<u64>().ok();
    let (month, day) = (num(0..2)?, num(2..4)?);
    let (h, m, sec) = (num(4..6)?, num(6..8)?, num(8..10)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || year < 1970 {
        return None;
    }
    // Days since the epoch (the civil-from-days inverse, proleptic
    // Gregorian calendar).
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + h * 3600 + m * 60 + sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asn1_times() {
        assert_eq!(asn1_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(asn1_time(0x18, b"20000301000000Z"), Some(951_868_800));
        assert_eq!(asn1_time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(asn1_time(0x17, b"7001010000Z"), None);
        assert_eq!(asn1_time(0x18, b"20001301000000Z"), None);
    }

    #[test]
    fn validity_of_a_real_certificate() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["a".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 12, 31);
        let cert = params.self_signed(&key).unwrap();
        let (nb, na) = validity(cert.der()).unwrap();
        assert_eq!((nb, na), (1_577_836_800, 1_609_372_800));
        let at = |secs| UNIX_EPOCH + std::time::Duration::from_secs(secs);
        let w = validity_warning(cert.der(), at(1_609_372_800 + 3 * 86_400)).unwrap();
        assert_eq!(w, "the certificate expired 3 days ago");
        assert!(validity_warning(cert.der(), at(1_600_000_000)).is_none());
        assert_eq!(
            validity_warning(cert.der(), at(1_500_000_000)).as_deref(),
            Some("the certificate is not valid yet")
        );
    }

    #[test]
    fn der_lengths() {
        assert_eq!(der(&[0x30, 1, 7, 9], 0x30), Some((&[7][..], &[9][..])));
        assert_eq!(der(&[0x30, 0x81, 1, 7], 0x30), Some((&[7][..], &[][..])));
        assert_eq!(der(&[0x30, 5, 7], 0x30), None);
        assert_eq!(der(&[0x31, 0], 0x30), None);
    }
}
