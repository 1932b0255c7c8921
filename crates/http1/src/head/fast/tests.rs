//! The fast path against httparse: whatever the fast path accepts, the
//! httparse path must accept too, with the very same result; and ordinary
//! heads must not fall back.

use proptest::prelude::*;

use super::byte_scan::{movemask_portable, stop_bits};
use super::*;
use crate::BodyKind;
use crate::head::parse_slow;

/// What the fast path makes of `input`: the request and what is left of the
/// buffer, or `None` for a fallback.
fn fast(input: &[u8], limits: &Limits) -> Option<(Request, BytesMut)> {
    let mut buf = BytesMut::from(input);
    match parse(&mut buf, limits) {
        Ok(Some(Message::Head(req))) => Some((req, buf)),
        Ok(None) => {
            assert_eq!(&buf[..], input, "a fallback leaves the buffer alone");
            None
        }
        Ok(Some(other)) => panic!("not a head: {other:?}"),
        Err(e) => panic!("the fast path never fails: {e}"),
    }
}

/// What httparse makes of `input`.
fn slow(input: &[u8], limits: &Limits) -> Result<Option<(Request, BytesMut)>, Error> {
    let mut buf = BytesMut::from(input);
    match parse_slow(&mut buf, limits)? {
        Some(Message::Head(req)) => Ok(Some((req, buf))),
        None => Ok(None),
        Some(other) => panic!("not a head: {other:?}"),
    }
}

/// Everything a `Request` holds, and everything it tells through its API.
fn assert_same(a: &Request, b: &Request) {
    assert_eq!(a.head, b.head);
    assert_eq!(a.verb, b.verb);
    assert_eq!(a.method, b.method);
    assert_eq!(a.target, b.target);
    assert_eq!(a.path, b.path);
    assert_eq!(a.query, b.query);
    assert_eq!(a.version, b.version);
    assert_eq!(a.body, b.body);
    assert_eq!(a.keep_alive, b.keep_alive);
    assert_eq!(a.expects_continue, b.expects_continue);
    assert_eq!(a.headers, b.headers);

    assert_eq!(a.method(), b.method());
    assert_eq!(a.target(), b.target());
    assert_eq!(a.path(), b.path());
    assert_eq!(a.query(), b.query());
    let ha: Vec<_> = a.headers().collect();
    let hb: Vec<_> = b.headers().collect();
    assert_eq!(ha, hb);
    assert_eq!(a.headers().len(), ha.len());
    for (name, _) in &ha {
        assert_eq!(a.header(name), b.header(name));
    }
}

/// The differential property, on one input.
fn check(input: &[u8], limits: &Limits) -> Option<Request> {
    let (req, rest) = fast(input, limits)?;
    match slow(input, limits) {
        Ok(Some((other, other_rest))) => {
            assert_same(&req, &other);
            assert_eq!(rest, other_rest);
        }
        r => panic!(
            "fast path accepted {:?}, httparse says {:?}",
            String::from_utf8_lossy(input),
            r.map(|o| o.map(|(req, _)| req))
        ),
    }
    Some(req)
}

// ---------------------------------------------------------------------------
// Generators: ordinary heads, and pieces that are anything but.

fn token() -> impl Strategy<Value = String> {
    "[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}"
}

fn ordinary_method() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("GET".to_owned()),
        Just("POST".to_owned()),
        Just("HEAD".to_owned()),
        token(),
    ]
}

fn ordinary_target() -> impl Strategy<Value = String> {
    "/[!-~]{0,40}"
}

fn ordinary_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "[ -~\t]{0,30}".prop_map(String::into_bytes),
        // obs-text is allowed in values.
        prop::collection::vec(prop_oneof![0x20u8..0x7f, 0x80u8..=0xff, Just(b'\t')], 0..20),
    ]
}

fn framing_header() -> impl Strategy<Value = (String, Vec<u8>)> {
    let name = prop_oneof![
        Just("Content-Length"),
        Just("content-length"),
        Just("Transfer-Encoding"),
        Just("Connection"),
        Just("Expect"),
        Just("Host"),
    ];
    let value = prop_oneof![
        Just("0"),
        Just("5"),
        Just(" 5 , 5 "),
        Just("5, 6"),
        Just("abc"),
        Just("-1"),
        Just("99999999999999999999"),
        Just("2000000"),
        Just("chunked"),
        Just(" Chunked\t"),
        Just("gzip, chunked"),
        Just("chunked, gzip"),
        Just("close"),
        Just("keep-alive"),
        Just("Upgrade, CLOSE"),
        Just("100-continue"),
        Just(""),
    ];
    (name, value).prop_map(|(n, v)| (n.to_owned(), v.as_bytes().to_vec()))
}

fn ordinary_header() -> impl Strategy<Value = (String, Vec<u8>)> {
    prop_oneof![
        12 => (token(), ordinary_value()),
        1 => framing_header(),
    ]
}

/// Space after the colon: usually one, sometimes none, more, or tabs.
fn ows() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        6 => Just(" "),
        1 => Just(""),
        1 => Just("  "),
        1 => Just("\t"),
        1 => Just(" \t "),
    ]
}

#[derive(Clone, Debug)]
struct Head {
    method: String,
    target: String,
    http10: bool,
    headers: Vec<(String, &'static str, Vec<u8>)>,
}

fn ordinary_head() -> impl Strategy<Value = Head> {
    (
        ordinary_method(),
        ordinary_target(),
        any::<bool>(),
        prop::collection::vec((ordinary_header(), ows()), 0..20),
    )
        .prop_map(|(method, target, http10, headers)| Head {
            method,
            target,
            http10,
            headers: headers.into_iter().map(|((n, v), o)| (n, o, v)).collect(),
        })
}

/// Whether the head's `Host` lines are what the fast path takes: none, or
/// one with at most one space before a value of letters, digits, `-` and
/// `.`, then an optional port (at most five digits, at most 65535). Other
/// valid values (more whitespace, bracketed addresses, sub-delims) are
/// left to the general path.
fn plain_hosts(head: &Head) -> bool {
    let hosts: Vec<_> = head
        .headers
        .iter()
        .filter(|(n, ..)| n.eq_ignore_ascii_case("host"))
        .collect();
    let plain = |v: &[u8]| {
        let (name, port) = match v.iter().position(|&b| b == b':') {
            Some(c) => (&v[..c], Some(&v[c + 1..])),
            None => (v, None),
        };
        name.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            && port.is_none_or(|p| {
                p.len() <= 5
                    && p.iter().all(u8::is_ascii_digit)
                    && std::str::from_utf8(p).unwrap().parse::<u32>().unwrap_or(0) <= 65535
            })
    };
    match hosts[..] {
        [] => true,
        [(_, ows, value)] => matches!(*ows, "" | " ") && plain(value),
        _ => false,
    }
}

fn serialize(head: &Head) -> Vec<u8> {
    let version = if head.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
    let mut out = format!("{} {} {version}\r\n", head.method, head.target).into_bytes();
    for (name, ows, value) in &head.headers {
        out.extend_from_slice(name.as_bytes());
        out.push(b':');
        out.extend_from_slice(ows.as_bytes());
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Bytes that follow a head: nothing, a body, the next request.
fn after() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        Just(b"hello".to_vec()),
        Just(b"GET / HTTP/1.1\r\n\r\n".to_vec()),
        Just(b"\r\n".to_vec()),
    ]
}

/// One of `valid` most of the time, else one of `odd`.
fn mostly(valid: &[&'static [u8]], odd: &[&'static [u8]]) -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        24 => prop::sample::select(valid.to_vec()).prop_map(<[u8]>::to_vec),
        2 => prop::sample::select(odd.to_vec()).prop_map(<[u8]>::to_vec),
        1 => prop::collection::vec(any::<u8>(), 0..4),
    ]
    .boxed()
}

fn eol() -> BoxedStrategy<Vec<u8>> {
    mostly(&[b"\r\n"], &[b"\n", b"\r", b"\r\r\n", b"", b"\n\r"])
}

/// A header line, mostly well-formed, with its line ending.
fn odd_header_line() -> impl Strategy<Value = Vec<u8>> {
    let name = prop_oneof![
        24 => token().prop_map(String::into_bytes),
        1 => prop::sample::select(vec![
            &b" Host"[..], b"Host ", b"N@me", b"", b"Na me", b"N\xc3\xa9", b"\tX", b"X\x00",
        ]).prop_map(<[u8]>::to_vec),
    ];
    let sep = mostly(&[b": ", b":", b":  ", b":\t"], &[b" :", b"", b"::"]);
    let value = prop_oneof![
        24 => ordinary_value(),
        2 => framing_header().prop_map(|(_, v)| v),
        1 => prop::sample::select(vec![
            &b"\x00"[..], b"a\x7f", b"a\rb", b"a\nb", b"\x80\xff", b"a \t", b"\t",
        ]).prop_map(<[u8]>::to_vec),
    ];
    let fold = mostly(&[b""], &[b"\r\n folded", b"\r\n\tfolded", b"\n more"]);
    (name, sep, value, fold, eol()).prop_map(|(n, s, v, f, e)| [n, s, v, f, e].concat())
}

/// Heads with a twist or two: every part is usually well-formed, now and
/// then not.
fn odd_head() -> impl Strategy<Value = Vec<u8>> {
    let method = prop_oneof![
        24 => ordinary_method().prop_map(String::into_bytes),
        1 => prop::sample::select(vec![&b"get"[..], b"G\xc3\xa9T", b"", b"GE T", b"\r\nGET"])
            .prop_map(<[u8]>::to_vec),
    ];
    let sp = || mostly(&[b" "], &[b"  ", b"", b"\t", b"\r"]);
    let target = prop_oneof![
        24 => ordinary_target().prop_map(String::into_bytes),
        2 => prop::sample::select(vec![
            &b"/a?b?c"[..], b"/\xc3\xa9", b"/\xff", b"/\x7f", b"/a\tb", b"*",
            b"http://h.example/p?q", b"example.com:443", b"", b"?",
        ]).prop_map(<[u8]>::to_vec),
    ];
    let version = mostly(
        &[b"HTTP/1.1", b"HTTP/1.0"],
        &[
            b"HTTP/2.0",
            b"HTTP/1.2",
            b"http/1.1",
            b"HTTP/1.1 ",
            b"HTTP/1",
            b"HTTP/1.1x",
        ],
    );
    (
        method,
        sp(),
        target,
        sp(),
        version,
        eol(),
        prop::collection::vec(odd_header_line(), 0..12),
        eol(),
        after(),
    )
        .prop_map(|(m, s1, t, s2, v, e1, h, e2, rest)| {
            [m, s1, t, s2, v, e1, h.concat(), e2, rest].concat()
        })
}

fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        2 => Just(Limits::default()),
        // As the server runs: the `Host` rule on.
        1 => Just(Limits {
            require_host: true,
            ..Limits::default()
        }),
        1 => (1usize..120, 1usize..300, 0usize..6, 0u64..10, any::<bool>()).prop_map(
            |(max_request_line, max_head, max_headers, max_body, require_host)| Limits {
                max_request_line,
                max_head,
                max_headers,
                max_body,
                require_host,
            }
        ),
    ]
}

fn mutate(input: &mut Vec<u8>, pos: usize, kind: u8, byte: u8) {
    if input.is_empty() {
        input.push(byte);
        return;
    }
    let i = pos % input.len();
    match kind {
        0 => input[i] = byte,
        1 => input.insert(i, byte),
        2 => {
            input.remove(i);
        }
        _ => input.truncate(i),
    }
}

fn interesting_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        any::<u8>(),
        Just(b'\r'),
        Just(b'\n'),
        Just(b' '),
        Just(b'\t'),
        Just(b':'),
        Just(b'?'),
        Just(b'/'),
        Just(0x7f),
        Just(0x80),
        Just(0),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Ordinary heads: the fast path takes every one httparse accepts, and
    /// agrees with it.
    #[test]
    fn ordinary_heads_take_the_fast_path(
        head in ordinary_head(),
        rest in after(),
        limits in limits(),
    ) {
        let mut input = serialize(&head);
        input.extend_from_slice(&rest);
        let accepted = check(&input, &limits).is_some();
        if let (true, Ok(Some(_))) = (plain_hosts(&head), slow(&input, &limits)) {
            prop_assert!(accepted, "fell back on {:?}", String::from_utf8_lossy(&input));
        }
    }

    /// Mutated heads: whatever the fast path still accepts, httparse
    /// accepts the same way.
    #[test]
    fn mutated_heads_agree(
        head in ordinary_head(),
        rest in after(),
        edits in prop::collection::vec((any::<usize>(), 0u8..4, interesting_byte()), 1..4),
        limits in limits(),
    ) {
        let mut input = serialize(&head);
        input.extend_from_slice(&rest);
        for (pos, kind, byte) in edits {
            mutate(&mut input, pos, kind, byte);
        }
        check(&input, &limits);
    }

    /// Heads with odd parts: the same.
    #[test]
    fn odd_heads_agree(input in odd_head(), limits in limits()) {
        check(&input, &limits);
    }

    /// A long section the fast path remembered, then heads with other
    /// request lines, versions and limits and the same section, or the
    /// section changed a little: whatever the fast path answers (recalled
    /// or scanned), httparse answers the same way.
    #[test]
    fn remembered_sections_agree(
        first in ordinary_head(),
        second in ordinary_head(),
        filler in 100usize..400,
        edits in prop::collection::vec((any::<usize>(), 0u8..4, interesting_byte()), 0..3),
        rest in after(),
        limits in (limits(), limits()),
    ) {
        super::memo::forget();
        // A section long enough to be remembered.
        let mut first = first;
        first.headers.insert(0, ("X-Filler".into(), " ", vec![b'a'; filler]));
        let input = serialize(&first);
        check(&input, &limits.0);
        // The same section after another request line.
        let line_end = input.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
        let other = serialize(&second);
        let other_line = other.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
        let mut input2 = other[..other_line].to_vec();
        let section_at = input2.len();
        input2.extend_from_slice(&input[line_end..]);
        input2.extend_from_slice(&rest);
        // Twice the same limits, then the second's.
        check(&input2, &limits.0);
        check(&input2, &limits.1);
        // Edits inside the section only, so the request line stays fast.
        for (pos, kind, byte) in edits {
            let mut section = input2.split_off(section_at);
            mutate(&mut section, pos, kind, byte);
            input2.extend_from_slice(&section);
            check(&input2, &limits.0);
        }
    }

    /// Every prefix of an ordinary head is partial for both.
    #[test]
    fn partial_heads_fall_back(head in ordinary_head(), cut in any::<usize>()) {
        let input = serialize(&head);
        let cut = cut % input.len();
        prop_assert!(fast(&input[..cut], &Limits::default()).is_none());
    }
}

// ---------------------------------------------------------------------------
// Examples: what falls back, what does not.

#[test]
fn ordinary_shapes_are_taken() {
    let limits = Limits::default();
    for input in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        b"GET /_httplite/plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
        // `Host` last, fewer than 16 bytes (or 8 of port) before the end.
        b"GET /_httplite/plaintext HTTP/1.1\r\nHost: example.com:80\r\n\r\n",
        b"GET /_httplite/plaintext HTTP/1.1\r\nHost: a.b:80\r\n\r\n",
        b"GET /_httplite/plaintext HTTP/1.1\r\nHost: a.b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        b"PURGE /a?b?c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"POST /p HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
        b"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET / HTTP/1.1\r\nX:\r\nY:   \r\nZ: a \t b \t\r\nW: \x80\xff\r\n\r\n",
        // Digits and other token characters stop the letters' run, and
        // the scan goes on past them.
        b"GET / HTTP/1.1\r\nX-B3-TraceId: 1\r\nA!b#c$d%e&f'g*h+i.j^k_l`m|n~o: p\r\n\r\n",
        b"GET / HTTP/1.1\r\nAbcdefghijklmnopqrstuvwxyz-0123456789-abcdefghijklmnop: x\r\n\r\n",
    ] {
        assert!(check(input, &limits).is_some(), "{input:?}");
    }
}

#[test]
fn unusual_shapes_fall_back() {
    let limits = Limits::default();
    for input in [
        // Partial.
        &b"GET / HTTP/1.1\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: a\r\n",
        // Bare LF, anywhere.
        b"GET / HTTP/1.1\n\n",
        b"GET / HTTP/1.1\r\nHost: a\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n\n",
        // Not origin-form.
        b"GET http://h/p HTTP/1.1\r\n\r\n",
        b"OPTIONS * HTTP/1.1\r\n\r\n",
        // Non-ASCII or controls in the target.
        b"GET /\xc3\xa9 HTTP/1.1\r\n\r\n",
        b"GET /a\x7f HTTP/1.1\r\n\r\n",
        // Obs-fold, odd names, controls in values.
        b"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
        b"GET / HTTP/1.1\r\nA b: c\r\n\r\n",
        b"GET / HTTP/1.1\r\nA: \x00\r\n\r\n",
        b"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",
        // Other versions, errors, limits.
        b"GET / HTTP/2.0\r\n\r\n",
        b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        assert!(fast(input, &limits).is_none(), "{input:?}");
    }
    let tight = Limits {
        max_headers: 1,
        ..Limits::default()
    };
    assert!(fast(b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n", &tight).is_none());
    assert!(check(b"GET / HTTP/1.1\r\nA: 1\r\n\r\n", &tight).is_some());
}

#[test]
fn host_lines_are_counted_as_httparse_does() {
    let strict = Limits {
        require_host: true,
        ..Limits::default()
    };
    let head = |version: &str, hosts: usize, before: usize| {
        let mut s = format!("GET / {version}\r\n");
        for i in 0..before {
            s.push_str(&format!("H{i}: v\r\n"));
        }
        for _ in 0..hosts {
            s.push_str("hOsT: h\r\n");
        }
        s.push_str("\r\n");
        s.into_bytes()
    };
    // Inside and past the indexed lines.
    for before in [0, 3, 20] {
        assert!(check(&head("HTTP/1.1", 1, before), &strict).is_some());
        assert!(check(&head("HTTP/1.0", 0, before), &strict).is_some());
        assert!(check(&head("HTTP/1.1", 0, before), &Limits::default()).is_some());
        for (version, hosts) in [("HTTP/1.1", 0), ("HTTP/1.1", 2), ("HTTP/1.0", 2)] {
            let input = head(version, hosts, before);
            assert!(
                fast(&input, &strict).is_none(),
                "{version} {hosts} {before}"
            );
            assert_eq!(slow(&input, &strict).unwrap_err().status().code(), 400);
        }
    }
}

#[test]
fn query_and_framing_come_out_right() {
    let limits = Limits::default();
    let req = check(b"GET /a/b?x=1?y HTTP/1.1\r\nHost: h\r\n\r\n", &limits).unwrap();
    assert_eq!(req.path(), "/a/b");
    assert_eq!(req.query(), Some("x=1?y"));
    assert_eq!(req.target(), "/a/b?x=1?y");
    assert!(req.keep_alive());

    let req = check(
        b"POST / HTTP/1.1\r\ncontent-length: 12 \r\nConnection: close\r\n\r\n",
        &limits,
    )
    .unwrap();
    assert_eq!(req.body_kind(), BodyKind::Length(12));
    assert!(!req.keep_alive());
}

#[test]
fn headers_past_the_index_are_found() {
    // More headers than are indexed, with bare LFs (httparse) and with
    // CRLFs (fast path).
    for eol in ["\n", "\r\n"] {
        let mut input = format!("GET / HTTP/1.1{eol}");
        for i in 0..40 {
            input.push_str(&format!("H{i}: v{i} {eol}"));
        }
        input.push_str(eol);
        let (req, _) = slow(input.as_bytes(), &Limits::default()).unwrap().unwrap();
        if eol == "\r\n" {
            assert_same(&check(input.as_bytes(), &Limits::default()).unwrap(), &req);
        }
        assert_eq!(req.headers().len(), 40);
        for (i, (name, value)) in req.headers().enumerate() {
            assert_eq!(name, format!("H{i}"));
            assert_eq!(value, format!("v{i}").as_bytes());
        }
        assert_eq!(req.header("h39"), Some(&b"v39"[..]));
        assert_eq!(req.header("H16"), Some(&b"v16"[..]));
        assert_eq!(req.header("H15"), Some(&b"v15"[..]));
        assert_eq!(req.header("H40"), None);
        let mut it = req.headers();
        it.nth(20);
        assert_eq!(it.len(), 19);
    }
}

#[test]
fn header_lookup_matches_whole_names_only() {
    let req = check(
        b"GET / HTTP/1.1\r\nA: b: c\r\nAb: d\r\nE:\r\n\r\n",
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(req.header("a"), Some(&b"b: c"[..]));
    assert_eq!(req.header("A: b"), None);
    assert_eq!(req.header("a:"), None);
    assert_eq!(req.header("AB"), Some(&b"d"[..]));
    assert_eq!(req.header("e"), Some(&b""[..]));
    assert_eq!(req.header(""), None);
}

#[test]
fn stops_are_the_byte_classes() {
    for b in 0..=255u8 {
        assert_eq!(is_value_stop(b), !(0x20..0x7f).contains(&b), "{b:#x}");
        let letter_or_dash = b.is_ascii_alphabetic() || b == b'-';
        assert_eq!(is_name_stop(b), !letter_or_dash, "{b:#x}");
        let visible = (0x21..0x7f).contains(&b);
        assert_eq!(
            is_target_stop(b),
            !visible || b == b'?' || b == b'#',
            "{b:#x}"
        );
        assert_eq!(is_query_stop(b), !visible || b == b'#', "{b:#x}");
    }
}

#[test]
fn find_finds_the_first_stop() {
    let stops: [fn(u8) -> bool; 4] = [is_name_stop, is_target_stop, is_query_stop, is_value_stop];
    for stop in stops {
        for len in 0..40 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut buf = vec![b'a'; len];
                    buf[at] = b;
                    let want = buf.iter().position(|&c| stop(c)).map(|i| (i, buf[i]));
                    assert_eq!(find(&buf, 0, stop), want, "{buf:?}");
                    if at > 0 {
                        let want = want.filter(|&(i, _)| i >= 1);
                        assert_eq!(find(&buf, 1, stop), want, "{buf:?} from 1");
                    }
                }
            }
        }
        // From anywhere, the last block of a buffer included.
        for len in 0..40 {
            for at in 0..len {
                for b in [
                    0, b'\t', b'\r', b' ', b':', b'-', b'0', b'?', b'#', 0x7f, 0x80, 0xff,
                ] {
                    let mut buf = vec![b'a'; len];
                    buf[at] = b;
                    for from in 0..=len + 1 {
                        let want = buf
                            .iter()
                            .enumerate()
                            .skip(from)
                            .find(|&(_, &c)| stop(c))
                            .map(|(i, &c)| (i, c));
                        assert_eq!(find(&buf, from, stop), want, "{buf:?} from {from}");
                    }
                }
            }
        }
        assert_eq!(find(b"abc", 4, stop), None);
        assert_eq!(find(b"abc", 3, stop), None);
    }
}

#[test]
fn stop_bits_are_the_portable_answer() {
    let mut masks = vec![[0u8; 16], [0xff; 16]];
    for i in 0..16 {
        for j in i..16 {
            let mut m = [0u8; 16];
            m[i] = 0xff;
            m[j] = 0xff;
            masks.push(m);
        }
    }
    for m in masks {
        let want = m
            .iter()
            .enumerate()
            .fold(0u32, |bits, (i, &b)| bits | u32::from(b != 0) << i);
        assert_eq!(stop_bits(&m, |b| b != 0), want, "{m:?}");
        assert_eq!(movemask_portable(m), want);
    }
}

#[test]
fn framing_headers_past_the_index_are_taken_into_account() {
    // `Semantics` sees the first lines' values after the loop, and those
    // past the indexed lines by a walk from the first of them.
    let head = |extra: &[&str]| {
        let mut s = String::from("POST / HTTP/1.1\r\nContent-Length: 5\r\n");
        for i in 0..20 {
            s.push_str(&format!("H{i}: v\r\n"));
        }
        for line in extra {
            s.push_str(line);
            s.push_str("\r\n");
        }
        s.push_str("\r\n");
        s.into_bytes()
    };
    let limits = Limits::default();
    let req = check(&head(&["Connection: close", "Content-Length: 5"]), &limits).unwrap();
    assert_eq!(req.body_kind(), BodyKind::Length(5));
    assert!(!req.keep_alive());
    assert_eq!(req.headers().len(), 23);

    // Disagreements past the index: the fast path declines, httparse's
    // path answers 400.
    for extra in [
        &["Content-Length: 6"][..],
        &["H: x", "Transfer-Encoding: chunked"][..],
    ] {
        let input = head(extra);
        assert!(fast(&input, &limits).is_none(), "{extra:?}");
        assert_eq!(slow(&input, &limits).unwrap_err().status().code(), 400);
    }
}

#[test]
fn plain_ports_to_the_letter() {
    let end = |s: &[u8]| plain_port_end(s, 0);
    assert_eq!(end(b"8080\r\n\r\n"), Some(4));
    assert_eq!(end(b"\r\n\r\nxxxx"), Some(0));
    assert_eq!(end(b"65535\r\n\r\n"), Some(5));
    assert_eq!(end(b"00080\r\n\r\n"), Some(5));
    assert_eq!(end(b"65536\r\n\r\n"), None);
    assert_eq!(end(b"99999\r\n\r\n"), None);
    assert_eq!(end(b"123456\r\n\r\n"), None);
    assert_eq!(end(b"80 \r\n\r\nxx"), None);
    assert_eq!(end(b"8a\r\n\r\nxxx"), None);
    assert_eq!(end(b"8\xb9\r\n\r\nxxx"), None);
    assert_eq!(end(b"8:\r\n\r\nxxx"), None);
    // Fewer than eight bytes to the end of the buffer: the last eight are
    // loaded and shifted.
    let head = b"GET / HTTP/1.1\r\nHost: a:80\r\n\r\n";
    assert_eq!(plain_port_end(head, head.len() - 6), Some(head.len() - 4));
    assert_eq!(plain_port_end(b"xxxxxx:80\r", 7), Some(9));
    assert_eq!(plain_port_end(b"xxxxxx:80", 7), None);
    assert_eq!(plain_port_end(b"xxxxxx:8", 9), None);
    // Shorter than eight bytes in all: the general path decides.
    assert_eq!(end(b"80\r\n\r\n"), None);
}

#[test]
fn loads_near_the_end_pad_with_zeros() {
    let buf: Vec<u8> = (1..=40).collect();
    for len in 0..=buf.len() {
        let b = &buf[..len];
        for at in 0..=len + 1 {
            let naive = |n: usize| {
                let mut w = [0u8; 16];
                for (i, x) in w.iter_mut().take(n).enumerate() {
                    *x = b.get(at + i).copied().unwrap_or(0);
                }
                u128::from_le_bytes(w)
            };
            let want16 = (len >= 16 && at < len).then(|| naive(16));
            assert_eq!(load16(b, at), want16, "{len} {at}");
            let want8 = (len >= 8 && at < len).then(|| naive(8) as u64);
            assert_eq!(load8(b, at), want8, "{len} {at}");
        }
    }
}

#[test]
fn keep_alive_in_http11_needs_no_second_look_and_changes_nothing() {
    let limits = Limits::default();
    for (version, value, keep_alive) in [
        ("1.1", "keep-alive", true),
        ("1.1", "Keep-Alive", true),
        ("1.1", "KEEP-ALIVE", true),
        ("1.1", "keep-alive ", true),
        ("1.1", "keep-alive, close", false),
        ("1.1", "keep-alivex", true),
        ("1.1", "keep_alive", true),
        ("1.1", "close", false),
        ("1.0", "keep-alive", true),
        ("1.0", "Keep-alive", true),
        ("1.0", "close", false),
        ("1.0", "keep-alivex", false),
    ] {
        for last in ["", "Accept: */*\r\n"] {
            let input =
                format!("GET / HTTP/{version}\r\nHost: a\r\nConnection: {value}\r\n{last}\r\n");
            let req = check(input.as_bytes(), &limits).expect(&input);
            assert_eq!(req.keep_alive(), keep_alive, "{input:?}");
        }
    }
}

/// One connection's decoder sending Host values in a row: the remembered
/// one is taken on one compare, anything else is checked again, and the
/// answers are those of a fresh decoder.
#[test]
fn host_cache_never_changes_an_answer() {
    let hosts: &[&[u8]] = &[
        b"127.0.0.1:8080",
        b"127.0.0.1:8080",
        b"127.0.0.1:8080\rx",
        b"127.0.0.1:8080",
        b"127.0.0.1:80800",
        b"127.0.0.1:65535",
        b"127.0.0.1:65535",
        b"127.0.0.1:65536",
        b"127.0.0.1:65535",
        b"127.0.0.1:6553",
        b"127.0.0.1:8080",
        b"127.0.0.1:808",
        b"127.0.0.1:8080 x",
        b"127.0.0.1:8080",
        b"a b",
        b"localhost",
        b"localhost/",
        b"localhost",
        b"a-very-long-host-name.example:443",
        b"a-very-long-host-name.example:443",
        b"a-very-long-host-name.example:99999",
        b"api.example.com:8080",
        b"api.example.com:8080",
        b"api.example.com:8081",
        b"api.example.com:80",
        b"api.example.com:8",
        b"api.example.com:",
        b"api.example.com",
        b"api.example.com:8080",
        b"api.example.com:8080/",
        b"api.example.com:8080",
        b"0123456789abcdef",
        b"0123456789abcdef",
        b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
        b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
        b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdf",
        b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
        b"[::1]:80",
        b"",
    ];
    let limits = Limits {
        require_host: true,
        ..Limits::default()
    };
    // `Host` first (taken before the header loop when remembered) and
    // after another line (in the loop); spelled in other cases and with
    // other whitespace; with a line after it, and last, near the end of
    // the buffer.
    let names: &[&[u8]] = &[b"Host: ", b"hOST: ", b"Host:", b"Host:  ", b"Host:\t"];
    let befores: &[&[u8]] = &[b"", b"Accept: */*\r\n"];
    let rests: &[&[u8]] = &[b"\r\nAccept: */*\r\n\r\n", b"\r\n\r\n"];
    for ((name, before), rest) in names
        .iter()
        .flat_map(|n| befores.iter().map(move |b| (n, b)))
        .flat_map(|nb| rests.iter().map(move |r| (nb, r)))
    {
        let mut shared = crate::Decoder::new(limits);
        for host in hosts {
            let mut input = b"GET / HTTP/1.1\r\n".to_vec();
            input.extend_from_slice(before);
            input.extend_from_slice(name);
            input.extend_from_slice(host);
            input.extend_from_slice(rest);
            let verdict = |d: &mut crate::Decoder| match d.decode(&mut BytesMut::from(&input[..])) {
                Ok(Some(Message::Head(req))) => Ok(req.header("host").map(<[u8]>::to_vec)),
                Ok(other) => panic!("{other:?}"),
                Err(e) => Err(e.status().code()),
            };
            let fresh = verdict(&mut crate::Decoder::new(limits));
            assert_eq!(verdict(&mut shared), fresh, "{}", host.escape_ascii());
            if fresh.is_err() {
                // A failed decoder stays failed: go on with a new connection.
                shared = crate::Decoder::new(limits);
            }
        }
    }
}
