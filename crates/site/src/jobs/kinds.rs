//! What each job type computes. Pure functions of the input bytes, run on a
//! pool thread.

use std::time::Duration;

use sha2::{Digest, Sha256};

/// A job type, chosen with `?type=` at submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// The input, as text.
    Echo,
    /// Words: runs of non-whitespace characters.
    WordCount,
    /// Unicode scalar values (not bytes).
    CharCount,
    /// The input with the first letter of every word upper-cased.
    Capitalize,
    /// SHA-256 of the input bytes, in hex.
    Sha256,
    /// Test only: panics on every attempt (exercises the retries).
    TestPanic,
    /// Test only: sleeps for the number of milliseconds in the input (at
    /// most 10 s), to hold a pool thread.
    TestSleep,
    /// Test only: hashes as many MiB (SHA-256, 4 KiB at a time) as the
    /// input says (at most 1024): CPU work with a tiny input, for
    /// benchmarks that load the pool without loading the event loop.
    TestSpin,
}

/// The job types any client may submit, in the order error messages list
/// them.
pub const PUBLIC_KINDS: [JobKind; 5] = [
    JobKind::Echo,
    JobKind::WordCount,
    JobKind::CharCount,
    JobKind::Capitalize,
    JobKind::Sha256,
];

/// Longest a test `sleep` job sleeps.
const MAX_TEST_SLEEP: Duration = Duration::from_secs(10);

/// A finished job's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobValue {
    /// Shown as a JSON string.
    Text(String),
    /// Shown as a JSON number.
    Count(u64),
}

impl JobKind {
    /// The kind named `name`; test kinds only when `test_kinds` is on.
    pub fn parse(name: &str, test_kinds: bool) -> Option<JobKind> {
        Some(match name {
            "echo" => JobKind::Echo,
            "wordcount" => JobKind::WordCount,
            "charcount" => JobKind::CharCount,
            "capitalize" => JobKind::Capitalize,
            "sha256" => JobKind::Sha256,
            "panic" if test_kinds => JobKind::TestPanic,
            "sleep" if test_kinds => JobKind::TestSleep,
            "spin" if test_kinds => JobKind::TestSpin,
            _ => return None,
        })
    }

    /// The name clients use.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Echo => "echo",
            JobKind::WordCount => "wordcount",
            JobKind::CharCount => "charcount",
            JobKind::Capitalize => "capitalize",
            JobKind::Sha256 => "sha256",
            JobKind::TestPanic => "panic",
            JobKind::TestSleep => "sleep",
            JobKind::TestSpin => "spin",
        }
    }

    /// Runs the job. `Err` is an expected failure (bad input), final at
    /// once; a panic is an unexpected one, which the caller retries.
    pub fn run(self, input: &[u8]) -> Result<JobValue, String> {
        let text = || std::str::from_utf8(input).map_err(|e| format!("input is not UTF-8: {e}"));
        Ok(match self {
            JobKind::Echo => JobValue::Text(text()?.to_owned()),
            JobKind::WordCount => JobValue::Count(text()?.split_whitespace().count() as u64),
            JobKind::CharCount => JobValue::Count(text()?.chars().count() as u64),
            JobKind::Capitalize => JobValue::Text(capitalize(text()?)),
            JobKind::Sha256 => JobValue::Text(hex(&Sha256::digest(input))),
            JobKind::TestPanic => panic!("test job panicked on purpose"),
            JobKind::TestSleep => {
                let d = test_millis(input)?;
                std::thread::sleep(d);
                JobValue::Text(format!("slept {} ms", d.as_millis()))
            }
            JobKind::TestSpin => {
                let mib: u64 = text()?
                    .trim()
                    .parse()
                    .map_err(|_| "spin: input must be a number of MiB".to_string())?;
                let mib = mib.min(1024);
                let mut block = [0u8; 4096];
                for _ in 0..mib * 256 {
                    let digest = Sha256::digest(block);
                    block[..32].copy_from_slice(&digest);
                }
                JobValue::Text(format!("hashed {mib} MiB"))
            }
        })
    }
}

/// Lowercase hex, two digits a byte.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)].into());
        s.push(DIGITS[usize::from(b & 15)].into());
    }
    s
}

/// A test job's input: milliseconds, at most [`MAX_TEST_SLEEP`].
fn test_millis(input: &[u8]) -> Result<Duration, String> {
    let ms: u64 = std::str::from_utf8(input)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or("input must be a number of milliseconds")?;
    Ok(Duration::from_millis(ms).min(MAX_TEST_SLEEP))
}

/// Upper-cases the first letter of every word (a word starts after
/// whitespace); everything else is kept, whitespace included.
fn capitalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut at_word_start = true;
    for c in s.chars() {
        if at_word_start && !c.is_whitespace() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        at_word_start = c.is_whitespace();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(v: JobValue) -> String {
        match v {
            JobValue::Text(s) => s,
            JobValue::Count(n) => panic!("a count: {n}"),
        }
    }

    #[test]
    fn each_kind_computes_its_value() {
        let run = |k: JobKind, s: &str| k.run(s.as_bytes()).unwrap();
        assert_eq!(run(JobKind::Echo, "héllo"), JobValue::Text("héllo".into()));
        assert_eq!(
            run(JobKind::WordCount, "  one two\tthree\n"),
            JobValue::Count(3)
        );
        assert_eq!(run(JobKind::WordCount, ""), JobValue::Count(0));
        assert_eq!(run(JobKind::CharCount, "héllo"), JobValue::Count(5));
        assert_eq!(
            text(run(JobKind::Capitalize, "hello  wörld\nélan x")),
            "Hello  Wörld\nÉlan X"
        );
        assert_eq!(
            text(run(JobKind::Sha256, "abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    // The examples of FIPS 180-4 (NIST's "SHA256.pdf", "SHA2_Additional.pdf"),
    // through the job: the digest and its hex.
    #[test]
    fn sha256_matches_fips_180_4_vectors() {
        let long = "a".repeat(1_000_000);
        let cases: [(&str, &str); 5] = [
            (
                "abc",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            ),
            (
                "",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                &long[..56],
                "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a",
            ),
            (
                &long,
                "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
            ),
        ];
        for (input, want) in cases {
            let got = JobKind::Sha256.run(input.as_bytes()).unwrap();
            assert_eq!(got, JobValue::Text(want.into()), "{} bytes", input.len());
        }
    }

    #[test]
    fn bad_utf8_fails_text_kinds_but_not_sha256() {
        let bad = [0x66, 0xff, 0x6f];
        assert!(JobKind::CharCount.run(&bad).unwrap_err().contains("UTF-8"));
        assert!(JobKind::Sha256.run(&bad).is_ok());
    }

    #[test]
    fn names_round_trip_and_test_kinds_are_gated() {
        for k in PUBLIC_KINDS {
            assert_eq!(JobKind::parse(k.name(), false), Some(k));
        }
        assert_eq!(JobKind::parse("panic", false), None);
        assert_eq!(JobKind::parse("panic", true), Some(JobKind::TestPanic));
        assert_eq!(JobKind::parse("spin", false), None);
        assert_eq!(
            JobKind::TestSpin.run(b"2").unwrap(),
            JobValue::Text("hashed 2 MiB".into())
        );
        assert_eq!(JobKind::parse("ECHO", true), None);
    }
}
