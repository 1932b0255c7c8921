//! `--precompressed`: `x.br`, `x.zst`, `x.gz` served for `x` by
//! `Accept-Encoding`, with Vary on every answer of such a path, an ETag per
//! representation, ranges and 304s on the chosen one, 406 when nothing
//! acceptable is left, and nothing of it without the flag. Every case on
//! every runtime, with the open-file cache on (its default) and off, over
//! one keep-alive connection so that cached answers are exercised.

use crate::harness::{Client, Response, Server, TempDir, curl, runtimes};

const CSS: &[u8] = b"body { color: rebeccapurple; margin: 0 auto; }\n";
// The server never decodes a sidecar, so distinct bytes are enough to tell
// which one was sent (except for curl, which gets a real gzip file).
const BR: &[u8] = b"brotli bytes of a.css";
const ZST: &[u8] = b"zstd bytes of a.css, a bit longer";
const GZ: &[u8] = b"gzip bytes of a.css, longer still...";

/// A root with `a.css` and its three sidecars, `plain.txt` without any, and
/// `only-br.css` with just a `.br`.
fn site() -> TempDir {
    let dir = TempDir::new("precompressed");
    dir.write("a.css", CSS);
    dir.write("a.css.br", BR);
    dir.write("a.css.zst", ZST);
    dir.write("a.css.gz", GZ);
    dir.write("plain.txt", b"no sidecars here");
    dir.write("only-br.css", CSS);
    dir.write("only-br.css.br", BR);
    dir
}

/// GET `path` with extra header lines, checking Content-Length.
fn get(c: &mut Client, path: &str, headers: &[&str]) -> Response {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: test\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    c.send(req.as_bytes());
    let r = c.read_response();
    if let Some(len) = r.header("content-length") {
        assert_eq!(len.parse::<usize>().unwrap(), r.body.len(), "{path}: {r:?}");
    }
    r
}

fn ae(value: &str) -> String {
    format!("Accept-Encoding: {value}")
}

/// The server for `rt` over `dir`, with the cache on (default) or off.
fn start(rt: &str, dir: &TempDir, cache: bool, flag: bool) -> Server {
    let root = dir.path().to_str().unwrap();
    // Stats on the connection itself (fork: each child's own cache).
    let mut args = vec!["--root", root, "--expose", "stats"];
    if flag {
        args.push("--precompressed");
    }
    if !cache {
        args.extend(["--file-cache", "0"]);
    }
    Server::start(rt, &args)
}

#[test]
fn codings_are_chosen_by_q_values_and_the_cache_keeps_them_apart() {
    let cases: &[(Option<&str>, &[u8], Option<&str>)] = &[
        (Some("gzip, deflate, br, zstd"), BR, Some("br")),
        (None, CSS, None),
        (Some("gzip;q=1, br;q=0.5"), GZ, Some("gzip")),
        (Some("zstd, gzip"), ZST, Some("zstd")),
        (Some("identity, gzip;q=0.5"), CSS, None),
        (Some("br;q=0, *;q=0.3"), ZST, Some("zstd")),
        (Some("GZIP;Q=0.9, Br;q=0.8"), GZ, Some("gzip")),
        (Some("gzip;q=5"), CSS, None), // malformed: identity
        (Some("deflate"), CSS, None),
        (Some("br"), BR, Some("br")),
    ];
    for rt in runtimes() {
        let dir = site();
        for cache in [true, false] {
            let server = start(rt, &dir, cache, true);
            let mut c = server.connect();
            // Twice round: the second answers come from the cache when on,
            // right after an answer of another representation.
            for round in 0..2 {
                for &(accept, body, coding) in cases {
                    let headers: Vec<String> = accept.map(ae).into_iter().collect();
                    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
                    let r = get(&mut c, "/a.css", &headers);
                    let at = format!("[{rt}] cache {cache} round {round} {accept:?}");
                    assert_eq!(r.status, 200, "{at}: {r:?}");
                    assert_eq!(r.body, body, "{at}: {r:?}");
                    assert_eq!(r.header("content-encoding"), coding, "{at}");
                    assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{at}");
                    assert_eq!(r.header_count("vary"), 1, "{at}");
                    assert_eq!(
                        r.header("content-type"),
                        Some("text/css; charset=utf-8"),
                        "{at}"
                    );
                }
            }
            if cache {
                // This connection's stats: under fork the cache is its child's.
                assert!(c.stats().get("file_cache.hits") > 0, "[{rt}]");
            }
        }
    }
}

#[test]
fn etag_and_304_per_representation() {
    for rt in runtimes() {
        let dir = site();
        for cache in [true, false] {
            let server = start(rt, &dir, cache, true);
            let mut c = server.connect();
            let br = ae("br");
            let gz = ae("gzip");
            let tag = |c: &mut Client, h: &[&str]| {
                let r = get(c, "/a.css", h);
                r.header("etag").unwrap().to_owned()
            };
            let (t_id, t_br, t_gz) = (tag(&mut c, &[]), tag(&mut c, &[&br]), tag(&mut c, &[&gz]));
            assert!(
                t_br != t_id && t_gz != t_id && t_br != t_gz,
                "[{rt}] {t_id} {t_br} {t_gz}"
            );

            let inm = format!("If-None-Match: {t_br}");
            let r = get(&mut c, "/a.css", &[&br, &inm]);
            assert_eq!(r.status, 304, "[{rt}] cache {cache}: {r:?}");
            assert_eq!(r.header("etag"), Some(t_br.as_str()), "[{rt}]");
            assert_eq!(r.header("vary"), Some("Accept-Encoding"), "[{rt}]");
            // The br tag does not match the other representations.
            let r = get(&mut c, "/a.css", &[&inm]);
            assert_eq!((r.status, &r.body[..]), (200, CSS), "[{rt}] cache {cache}");
            let r = get(&mut c, "/a.css", &[&gz, &inm]);
            assert_eq!((r.status, &r.body[..]), (200, GZ), "[{rt}] cache {cache}");
            // And the identity tag only matches identity.
            let inm = format!("If-None-Match: {t_id}");
            let r = get(&mut c, "/a.css", &[&inm]);
            assert_eq!(r.status, 304, "[{rt}] cache {cache}: {r:?}");
            assert_eq!(r.header("vary"), Some("Accept-Encoding"), "[{rt}]");
            let r = get(&mut c, "/a.css", &[&br, &inm]);
            assert_eq!((r.status, &r.body[..]), (200, BR), "[{rt}] cache {cache}");
        }
    }
}

#[test]
fn a_range_applies_to_the_chosen_representation() {
    for rt in runtimes() {
        let dir = site();
        for cache in [true, false] {
            let server = start(rt, &dir, cache, true);
            let mut c = server.connect();
            for _ in 0..2 {
                let r = get(&mut c, "/a.css", &[&ae("gzip"), "Range: bytes=5-14"]);
                let at = format!("[{rt}] cache {cache}");
                assert_eq!(r.status, 206, "{at}: {r:?}");
                assert_eq!(r.body, &GZ[5..15], "{at}");
                let cr = format!("bytes 5-14/{}", GZ.len());
                assert_eq!(r.header("content-range"), Some(cr.as_str()), "{at}");
                assert_eq!(r.header("content-encoding"), Some("gzip"), "{at}");
                assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{at}");

                let r = get(&mut c, "/a.css", &["Range: bytes=-4"]);
                assert_eq!(
                    (r.status, &r.body[..]),
                    (206, &CSS[CSS.len() - 4..]),
                    "{at}"
                );
                assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{at}");
                assert_eq!(r.header("content-encoding"), None, "{at}");

                // Unsatisfiable on the br file (shorter than the original).
                let range = format!("Range: bytes={}-", BR.len());
                let r = get(&mut c, "/a.css", &[&ae("br"), &range]);
                assert_eq!(r.status, 416, "{at}: {r:?}");
                assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{at}");
            }
        }
    }
}

#[test]
fn not_acceptable_only_where_sidecars_exist() {
    for rt in runtimes() {
        let dir = site();
        for cache in [true, false] {
            let server = start(rt, &dir, cache, true);
            let mut c = server.connect();
            let at = format!("[{rt}] cache {cache}");
            for _ in 0..2 {
                let r = get(&mut c, "/only-br.css", &[&ae("gzip, identity;q=0")]);
                assert_eq!(r.status, 406, "{at}: {r:?}");
                assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{at}");
                let r = get(&mut c, "/only-br.css", &[&ae("br, identity;q=0")]);
                assert_eq!((r.status, &r.body[..]), (200, BR), "{at}");
                let r = get(&mut c, "/a.css", &[&ae("*;q=0, zstd")]);
                assert_eq!((r.status, &r.body[..]), (200, ZST), "{at}");
                // The identity answer of a path with a sidecar varies too.
                let r = get(&mut c, "/only-br.css", &[&ae("gzip")]);
                assert_eq!((r.status, &r.body[..]), (200, CSS), "{at}");
                assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{at}");
                // No sidecars: not negotiated, no Vary, even identity;q=0.
                let r = get(&mut c, "/plain.txt", &[&ae("identity;q=0")]);
                assert_eq!(r.status, 200, "{at}: {r:?}");
                assert_eq!(r.header("vary"), None, "{at}");
                assert_eq!(r.header("content-encoding"), None, "{at}");
            }
        }
    }
}

#[test]
fn sidecars_requested_by_name_and_the_flag_off() {
    for rt in runtimes() {
        let dir = site();
        let on = start(rt, &dir, true, true);
        let mut c = on.connect();
        let r = get(&mut c, "/a.css.gz", &[&ae("gzip, br")]);
        assert_eq!((r.status, &r.body[..]), (200, GZ), "[{rt}]");
        assert_eq!(r.header("content-type"), Some("application/gzip"), "[{rt}]");
        assert_eq!(r.header("content-encoding"), None, "[{rt}]");
        assert_eq!(r.header("vary"), None, "[{rt}]");
        let r = get(&mut c, "/a.css.zst", &[&ae("zstd")]);
        assert_eq!((r.status, &r.body[..]), (200, ZST), "[{rt}]");
        assert_eq!(r.header("content-type"), Some("application/zstd"), "[{rt}]");
        assert_eq!(r.header("content-encoding"), None, "[{rt}]");

        // Without --precompressed the sidecars are plain files and nothing
        // is negotiated.
        let off = start(rt, &dir, true, false);
        let mut c = off.connect();
        for accept in ["br, gzip, zstd", "identity;q=0"] {
            let r = get(&mut c, "/a.css", &[&ae(accept)]);
            assert_eq!((r.status, &r.body[..]), (200, CSS), "[{rt}] {accept}");
            assert_eq!(r.header("content-encoding"), None, "[{rt}]");
            assert_eq!(r.header("vary"), None, "[{rt}]");
        }
        let r = get(&mut c, "/a.css.br", &[]);
        assert_eq!((r.status, &r.body[..]), (200, BR), "[{rt}]");
    }
}

#[test]
fn curl_compressed_decodes_the_gzip_sidecar() {
    let original: Vec<u8> = (0..3000u32)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .collect();
    let dir = TempDir::new("precompressed-curl");
    dir.write("big.txt", &original);
    dir.write("big.txt.gz", &gzip_stored(&original));
    for rt in runtimes() {
        let server = start(rt, &dir, true, true);
        let url = server.url("/big.txt");
        let out = curl(&["--compressed", "-D", "/dev/stderr", &url]);
        let head = String::from_utf8_lossy(&out.stderr).to_ascii_lowercase();
        assert!(head.contains("content-encoding: gzip"), "[{rt}] {head}");
        assert_eq!(out.stdout, original, "[{rt}] decoded body differs");
    }
}

/// `data` as a gzip file of stored (uncompressed) deflate blocks: valid
/// gzip that any decoder reads, without a compressor in the tests.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut chunks = data.chunks(0xffff).peekable();
    while let Some(chunk) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        let len = chunk.len() as u16;
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend(chunk);
    }
    out.extend(crc32(data).to_le_bytes());
    out.extend((data.len() as u32).to_le_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}
