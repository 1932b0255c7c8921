//! HKDF for the TLS 1.3 key schedule, over HMAC keys whose pads are hashed
//! once per secret.
//!
//! A full TLS 1.3 handshake expands about twenty labels from about eight
//! secrets (RFC 8446, section 7.1), each expand one HMAC. rustls's aws-lc-rs
//! provider calls aws-lc's HKDF entry points for each: an expand from an
//! extracted secret runs the extract again (aws-lc-rs keeps the salt and the
//! input, not the secret, and calls `HKDF`), and every call hashes the
//! HMAC key's inner and outer pads anew. With the SHA-384 suite that is most
//! of a handshake's SHA-512 compressions. Here each secret becomes one
//! `aws_lc_rs::hmac::Key`, whose pads are hashed when it is made, and an
//! expand copies that state and hashes only the label (rustls's own
//! `HkdfUsingHmac` does the HKDF steps of RFC 5869 over it). The output is
//! the same bytes; the unit tests compare it with aws-lc-rs's HKDF.
//!
//! The price: aws-lc's HKDF is its FIPS-approved service and this is not, so
//! a server built on it reports `fips() == false` (it did already: rustls's
//! default aws-lc-rs build is not the FIPS module).

use std::sync::OnceLock;

use aws_lc_rs::hmac as lc;
use rustls::crypto::CryptoProvider;
use rustls::crypto::hash::HashAlgorithm;
use rustls::crypto::hmac::{Hmac, Key, Tag};
use rustls::crypto::tls13::{Hkdf, HkdfUsingHmac};
use rustls::{CipherSuiteCommon, SupportedCipherSuite, Tls13CipherSuite};

/// HMAC with one of aws-lc-rs's algorithms.
struct AwsLcHmac(&'static lc::Algorithm);

impl Hmac for AwsLcHmac {
    fn with_key(&self, key: &[u8]) -> Box<dyn Key> {
        Box::new(PaddedKey(lc::Key::new(*self.0, key)))
    }

    fn hash_output_len(&self) -> usize {
        self.0.digest_algorithm().output_len()
    }
}

/// A key with its pads hashed: each signature starts from a copy of that
/// state.
struct PaddedKey(lc::Key);

impl Key for PaddedKey {
    fn sign_concat(&self, first: &[u8], middle: &[&[u8]], last: &[u8]) -> Tag {
        let mut ctx = lc::Context::with_key(&self.0);
        ctx.update(first);
        for part in middle {
            ctx.update(part);
        }
        ctx.update(last);
        Tag::new(ctx.sign().as_ref())
    }

    fn tag_len(&self) -> usize {
        self.0.algorithm().digest_algorithm().output_len()
    }
}

static HMAC_SHA256: AwsLcHmac = AwsLcHmac(&lc::HMAC_SHA256);
static HMAC_SHA384: AwsLcHmac = AwsLcHmac(&lc::HMAC_SHA384);
static HKDF_SHA256: HkdfUsingHmac<'static> = HkdfUsingHmac(&HMAC_SHA256);
static HKDF_SHA384: HkdfUsingHmac<'static> = HkdfUsingHmac(&HMAC_SHA384);

/// The HKDF here for a suite's hash, if there is one.
fn hkdf_for(hash: HashAlgorithm) -> Option<&'static dyn Hkdf> {
    match hash {
        HashAlgorithm::SHA256 => Some(&HKDF_SHA256),
        HashAlgorithm::SHA384 => Some(&HKDF_SHA384),
        _ => None,
    }
}

/// rustls's aws-lc-rs provider, its TLS 1.3 suites computing HKDF here:
/// the same suites, groups, AEADs and signatures, in the same order.
pub fn provider() -> CryptoProvider {
    // Suites are `&'static`: made once, kept for the process.
    static SUITES: OnceLock<Vec<SupportedCipherSuite>> = OnceLock::new();
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    let base = &provider.cipher_suites;
    let suites = SUITES.get_or_init(|| base.iter().copied().map(with_padded_keys).collect());
    provider.cipher_suites = suites.clone();
    provider
}

fn with_padded_keys(suite: SupportedCipherSuite) -> SupportedCipherSuite {
    let SupportedCipherSuite::Tls13(s) = suite else {
        return suite;
    };
    let Some(hkdf) = hkdf_for(s.common.hash_provider.algorithm()) else {
        return suite;
    };
    SupportedCipherSuite::Tls13(Box::leak(Box::new(Tls13CipherSuite {
        common: CipherSuiteCommon {
            suite: s.common.suite,
            hash_provider: s.common.hash_provider,
            confidentiality_limit: s.common.confidentiality_limit,
        },
        hkdf_provider: hkdf,
        aead_alg: s.aead_alg,
        quic: s.quic,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::hkdf;

    /// aws-lc-rs's HKDF output for the same inputs.
    fn reference(
        alg: hkdf::Algorithm,
        salt: &[u8],
        ikm: &[u8],
        info: &[u8],
        len: usize,
    ) -> Vec<u8> {
        struct Len(usize);
        impl hkdf::KeyType for Len {
            fn len(&self) -> usize {
                self.0
            }
        }
        let prk = hkdf::Salt::new(alg, salt).extract(ikm);
        let mut out = vec![0; len];
        prk.expand(&[info], Len(len))
            .expect("length within 255 blocks")
            .fill(&mut out)
            .expect("same length");
        out
    }

    #[test]
    fn expands_to_aws_lc_rs_hkdf_bytes_for_both_hashes() {
        let cases = [
            (hkdf::HKDF_SHA256, &HKDF_SHA256),
            (hkdf::HKDF_SHA384, &HKDF_SHA384),
        ];
        for (alg, ours) in cases {
            for (salt_len, ikm_len, len) in [(0, 32, 32), (13, 22, 42), (48, 48, 48), (64, 7, 100)]
            {
                let salt: Vec<u8> = (0..salt_len).map(|i| i as u8 ^ 0x5a).collect();
                let ikm: Vec<u8> = (0..ikm_len).map(|i| (i * 7) as u8).collect();
                let info = b"tls13 c hs traffic and a transcript hash";
                let expander = ours.extract_from_secret(Some(&salt), &ikm);
                let mut out = vec![0; len];
                expander
                    .expand_slice(&[info], &mut out)
                    .expect("short output");
                assert_eq!(
                    out,
                    reference(alg, &salt, &ikm, info, len),
                    "salt {salt_len}, ikm {ikm_len}, output {len}"
                );
            }
        }
    }

    #[test]
    fn rfc5869_test_case_1() {
        let ikm = [0x0b; 22];
        let salt: Vec<u8> = (0x00..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let mut okm = [0; 42];
        HKDF_SHA256
            .extract_from_secret(Some(&salt), &ikm)
            .expand_slice(&[&info], &mut okm)
            .expect("42 bytes");
        let want = "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf\
                    34007208d5b887185865";
        let got: String = okm.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn every_tls13_suite_of_the_provider_is_replaced_in_order() {
        let base = rustls::crypto::aws_lc_rs::default_provider().cipher_suites;
        let ours = provider().cipher_suites;
        let names = |v: &[SupportedCipherSuite]| v.iter().map(|s| s.suite()).collect::<Vec<_>>();
        assert_eq!(names(&ours), names(&base));
        for (a, b) in ours.iter().zip(&base) {
            if let (SupportedCipherSuite::Tls13(a), SupportedCipherSuite::Tls13(b)) = (a, b) {
                assert!(
                    !std::ptr::eq(*a, *b),
                    "{:?} still uses aws-lc's HKDF",
                    a.common.suite
                );
            }
        }
    }
}
