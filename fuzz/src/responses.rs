//! Reads a server's output back as HTTP/1.1 responses, checking that each
//! is well-formed and framed: httparse for the head, then `Content-Length`
//! or chunked framing (none for `HEAD`, 1xx, 204 and 304).

use crate::chunked_ref::{self, ChunkedEnd};

/// One final response, with the interim (1xx) responses sent before it.
#[derive(Debug, Clone)]
pub struct Response {
    /// Interim status codes that preceded it.
    pub interim: Vec<u16>,
    /// The status code.
    pub status: u16,
    /// `Connection: close` was sent.
    pub close: bool,
    /// The body (as far as it was sent).
    pub body: Vec<u8>,
    /// The output ended inside the body.
    pub truncated: bool,
}

/// Parses `output` as responses; `is_head(i)` says whether the `i`th final
/// response answers a `HEAD` request. An `Err` describes the first
/// malformed byte. A response whose body is cut short must be the last.
pub fn parse(output: &[u8], is_head: impl Fn(usize) -> bool) -> Result<Vec<Response>, String> {
    let mut out: Vec<Response> = Vec::new();
    let mut interim = Vec::new();
    let mut at = 0;
    while at < output.len() {
        let rest = &output[at..];
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let head_len = match resp.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Err(format!("partial head at {at}")),
            Err(e) => return Err(format!("invalid head at {at}: {e}")),
        };
        let status = resp.code.unwrap_or_default();
        if resp.version != Some(1) {
            return Err(format!("response {} is not HTTP/1.1", out.len()));
        }
        let mut lengths = Vec::new();
        let (mut chunked, mut close, mut other_te, mut dates) = (false, false, false, 0);
        for h in resp.headers.iter() {
            let value = String::from_utf8_lossy(h.value);
            match h.name.to_ascii_lowercase().as_str() {
                "content-length" => lengths.push(
                    value
                        .trim()
                        .parse::<usize>()
                        .map_err(|_| format!("bad Content-Length {value:?}"))?,
                ),
                "transfer-encoding" if value.trim().eq_ignore_ascii_case("chunked") => {
                    chunked = true;
                }
                "transfer-encoding" => other_te = true,
                "connection" => {
                    close |= value
                        .split(',')
                        .any(|t| t.trim().eq_ignore_ascii_case("close"));
                }
                "date" => dates += 1,
                _ => {}
            }
        }
        at += head_len;
        if (100..200).contains(&status) {
            if !resp.headers.is_empty() && status == 100 {
                return Err("100 Continue with headers".into());
            }
            interim.push(status);
            continue;
        }
        if other_te || lengths.len() > 1 || (chunked && !lengths.is_empty()) {
            return Err(format!("ambiguous framing in response {}", out.len()));
        }
        if dates != 1 {
            return Err(format!("response {} has {dates} Date headers", out.len()));
        }
        let bodyless = is_head(out.len()) || status == 204 || status == 304;
        let rest = &output[at..];
        let (body, used, truncated) = if bodyless {
            (Vec::new(), 0, false)
        } else if chunked {
            match chunked_ref::decode(rest, u64::MAX, usize::MAX) {
                (data, ChunkedEnd::Complete(n)) => (data, n, false),
                (data, ChunkedEnd::NeedMore) => (data, rest.len(), true),
                (_, ChunkedEnd::Error(_)) => {
                    return Err(format!("bad chunked body in response {}", out.len()));
                }
            }
        } else if let Some(&n) = lengths.first() {
            let n_here = n.min(rest.len());
            (rest[..n_here].to_vec(), n_here, n_here < n)
        } else {
            return Err(format!("response {} has no framing", out.len()));
        };
        at += used;
        if truncated && at != output.len() {
            return Err("a truncated response is followed by more".into());
        }
        out.push(Response {
            interim: std::mem::take(&mut interim),
            status,
            close,
            body,
            truncated,
        });
    }
    if !interim.is_empty() {
        // An interim answer may end the output only if the connection
        // then failed; the caller decides (it is kept as a last entry).
        out.push(Response {
            interim,
            status: 0,
            close: false,
            body: Vec::new(),
            truncated: true,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences() {
        let out = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 200 OK\r\nDate: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nab\r\n0\r\n\r\n";
        let r = parse(out, |_| false).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].interim.as_slice(), r[0].status, &r[0].body[..]),
            (&[100][..], 200, &b"hi"[..])
        );
        assert!(r[1].close && r[1].body == b"ab" && !r[1].truncated);
        let head = b"HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 5\r\n\r\n";
        assert!(!parse(head, |_| true).unwrap()[0].truncated);
        assert!(parse(head, |_| false).unwrap()[0].truncated);
        assert!(parse(b"HTTP/1.1 200 OK\r\nDate: x\r\n\r\n", |_| false).is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\n", |_| false).is_err());
    }
}
