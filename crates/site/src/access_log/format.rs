//! The access log's line formats (`--access-log-format`):
//!
//! ```text
//! clf       127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /a HTTP/1.1" 200 2326
//! combined  127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /a HTTP/1.1" 200 2326 "http://r/" "curl/8.0" 153 1
//! json      {"time":"2000-10-10T13:55:36Z","remote":"127.0.0.1","method":"GET","target":"/a",
//!            "version":"HTTP/1.1","status":200,"bytes":2326,"referer":"http://r/",
//!            "user_agent":"curl/8.0","time_us":153,"worker":1}
//! ```
//!
//! `clf` is the Common Log Format exactly. `combined` is Apache's combined
//! format followed by the request time in microseconds, the worker id and
//! the listener (read them with a custom format in a log analyser, as
//! Apache's `%D`); a proxied request's line adds three more: the upstream's
//! address in quotes, its status (`-` if it gave none) and its time in
//! microseconds. `json` is one object per line with every field, and an
//! `upstream` object on a proxied request's. The request time runs
//! from the first byte of the request's head, as the event loop saw it (for
//! a connection's first request, from its accept), to its answer being
//! ready to send; a file body's transfer is not in it. `-` (or `null`)
//! stands for what is unknown: the client of a Unix socket has no address.

use std::fmt::Write as _;

use super::{Entry, clf_time};

/// How each line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Common Log Format.
    #[default]
    Common,
    /// Apache's combined format, plus the request time (µs) and the worker.
    Combined,
    /// One JSON object per line.
    Json,
}

/// Appends one line (with its newline) for `e`, logged at `now` (Unix
/// seconds) by worker `worker`.
pub(super) fn write_line(
    out: &mut Vec<u8>,
    format: Format,
    e: &Entry<'_>,
    now: u64,
    worker: usize,
) {
    let mut s = String::with_capacity(160);
    let host = e.peer.map(|p| p.ip().to_string());
    match format {
        Format::Common | Format::Combined => {
            let bytes = match e.bytes {
                0 => "-".to_string(),
                n => n.to_string(),
            };
            let _ = write!(
                s,
                "{} - - [{}] \"{} {} {}\" {} {}",
                host.as_deref().unwrap_or("-"),
                clf_time(now),
                sanitize(e.method),
                sanitize(e.target),
                e.version,
                e.status,
                bytes
            );
            if format == Format::Combined {
                let micros = e.micros.map_or("-".to_string(), |m| m.to_string());
                let _ = write!(
                    s,
                    " \"{}\" \"{}\" {micros} {worker} {}",
                    e.referer.map_or("-".to_string(), sanitize),
                    e.user_agent.map_or("-".to_string(), sanitize),
                    e.on.as_str(),
                );
                if let Some(u) = e.upstream {
                    let status = u.status.map_or("-".to_string(), |s| s.to_string());
                    let _ = write!(s, " \"{}\" {status} {}", sanitize(u.addr), u.micros);
                }
            }
        }
        Format::Json => {
            s.push_str("{\"time\":\"");
            s.push_str(&iso_time(now));
            s.push_str("\",\"remote\":");
            json_opt(&mut s, host.as_deref());
            s.push_str(",\"method\":");
            json_str(&mut s, e.method);
            s.push_str(",\"target\":");
            json_str(&mut s, e.target);
            s.push_str(",\"version\":");
            json_str(&mut s, e.version);
            let _ = write!(s, ",\"status\":{},\"bytes\":{}", e.status, e.bytes);
            s.push_str(",\"referer\":");
            json_opt(&mut s, e.referer);
            s.push_str(",\"user_agent\":");
            json_opt(&mut s, e.user_agent);
            s.push_str(",\"time_us\":");
            match e.micros {
                Some(m) => {
                    let _ = write!(s, "{m}");
                }
                None => s.push_str("null"),
            }
            let _ = write!(s, ",\"worker\":{worker},\"listener\":\"{}\"", e.on.as_str());
            if let Some(u) = e.upstream {
                s.push_str(",\"upstream\":{\"addr\":");
                json_str(&mut s, u.addr);
                s.push_str(",\"status\":");
                match u.status {
                    Some(code) => {
                        let _ = write!(s, "{code}");
                    }
                    None => s.push_str("null"),
                }
                let _ = write!(s, ",\"time_us\":{}}}", u.micros);
            }
            s.push('}');
        }
    }
    s.push('\n');
    out.extend_from_slice(s.as_bytes());
}

/// Quotes and control bytes would let a client forge log lines.
pub(super) fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c == '"' || c.is_control() { '?' } else { c })
        .collect()
}

fn json_opt(s: &mut String, v: Option<&str>) {
    match v {
        Some(v) => json_str(s, v),
        None => s.push_str("null"),
    }
}

/// A JSON string: quotes, backslashes and control characters escaped, so
/// that no client input can end the string or the line.
fn json_str(s: &mut String, v: &str) {
    s.push('"');
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
}

/// `2000-10-10T13:55:36Z`.
fn iso_time(secs: u64) -> String {
    // From the CLF form: `10/Oct/2000:13:55:36 +0000`.
    let clf = clf_time(secs);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == &clf[3..6]).unwrap_or(0) + 1;
    format!(
        "{}-{month:02}-{}T{}Z",
        &clf[7..11],
        &clf[0..2],
        &clf[12..20]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry<'static> {
        Entry {
            peer: Some("127.0.0.1:5000".parse().unwrap()),
            method: "GET",
            target: "/a\"b\nc",
            version: "HTTP/1.1",
            status: 200,
            bytes: 13,
            referer: Some("http://r/"),
            user_agent: Some("ua \"x\"\u{1}"),
            micros: Some(153),
            on: crate::exposure::Surface::Admin,
            upstream: None,
        }
    }

    #[test]
    fn a_proxied_line_names_its_upstream() {
        let upstream = |status| crate::access_log::UpstreamLog {
            addr: "unix:/run/a\"pp.sock",
            status,
            micros: 812,
        };
        let e = Entry {
            upstream: Some(upstream(Some(201))),
            ..entry()
        };
        let mut out = Vec::new();
        write_line(&mut out, Format::Combined, &e, 0, 0);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.ends_with(" 153 0 admin \"unix:/run/a?pp.sock\" 201 812\n"),
            "{text}"
        );
        let e = Entry {
            upstream: Some(upstream(None)),
            ..entry()
        };
        let mut out = Vec::new();
        write_line(&mut out, Format::Json, &e, 0, 0);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.ends_with(
                ",\"listener\":\"admin\",\"upstream\":{\"addr\":\"unix:/run/a\\\"pp.sock\",\
                 \"status\":null,\"time_us\":812}}\n"
            ),
            "{text}"
        );
    }

    fn line(format: Format) -> String {
        let mut out = Vec::new();
        write_line(&mut out, format, &entry(), 971_186_136, 1);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_three_formats() {
        assert_eq!(
            line(Format::Common),
            "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a?b?c HTTP/1.1\" 200 13\n"
        );
        assert_eq!(
            line(Format::Combined),
            "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a?b?c HTTP/1.1\" 200 13 \
             \"http://r/\" \"ua ?x??\" 153 1 admin\n"
        );
        assert_eq!(
            line(Format::Json),
            "{\"time\":\"2000-10-10T13:55:36Z\",\"remote\":\"127.0.0.1\",\"method\":\"GET\",\
             \"target\":\"/a\\\"b\\u000ac\",\"version\":\"HTTP/1.1\",\"status\":200,\"bytes\":13,\
             \"referer\":\"http://r/\",\"user_agent\":\"ua \\\"x\\\"\\u0001\",\"time_us\":153,\
             \"worker\":1,\"listener\":\"admin\"}\n"
        );
    }

    #[test]
    fn unknowns() {
        let e = Entry {
            peer: None,
            referer: None,
            user_agent: None,
            micros: None,
            ..entry()
        };
        let mut out = Vec::new();
        write_line(&mut out, Format::Json, &e, 0, 0);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\"remote\":null"), "{text}");
        assert!(text.contains("\"time_us\":null"), "{text}");
        assert!(
            text.starts_with("{\"time\":\"1970-01-01T00:00:00Z\""),
            "{text}"
        );
        let mut out = Vec::new();
        write_line(&mut out, Format::Combined, &e, 0, 0);
        assert!(
            String::from_utf8(out)
                .unwrap()
                .ends_with("\"-\" \"-\" - 0 admin\n")
        );
    }
}
