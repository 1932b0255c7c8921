//! Unit tests of path resolution, validators and precompressed sidecars
//! (ranges are tested in `ranges.rs`).

use super::*;

#[test]
fn traversal_is_refused() {
    assert_eq!(url_to_relative("/../etc/passwd"), Err(Status::FORBIDDEN));
    assert_eq!(url_to_relative("/%2e%2e/etc"), Err(Status::FORBIDDEN));
    assert_eq!(url_to_relative("/a/..%2f..%2fetc"), Err(Status::FORBIDDEN));
    assert_eq!(url_to_relative("/a%00b"), Err(Status::BAD_REQUEST));
    assert_eq!(url_to_relative("/bad%zz"), Err(Status::BAD_REQUEST));
    assert_eq!(url_to_relative("/caf%C3"), Err(Status::BAD_REQUEST));
    assert_eq!(url_to_relative("/%FF%FE"), Err(Status::BAD_REQUEST));
    assert!(url_to_relative("/caf%C3%A9").is_ok());
    assert_eq!(url_to_relative("relative"), Err(Status::BAD_REQUEST));
    assert_eq!(
        url_to_relative("/a/./b//c").unwrap(),
        PathBuf::from("a/b/c")
    );
    assert_eq!(url_to_relative("/").unwrap(), PathBuf::new());
}

#[test]
fn etags_compare_weakly() {
    assert!(etag_list_matches(b"\"a\", \"b\"", "\"b\""));
    assert!(etag_list_matches(b"W/\"b\"", "\"b\""));
    assert!(etag_list_matches(b"*", "\"b\""));
    assert!(!etag_list_matches(b"\"c\"", "\"b\""));
}

/// A GET of `path` with `Accept-Encoding: accept` (none if empty).
fn get(path: &str, accept: &str) -> Request {
    let ae = if accept.is_empty() {
        String::new()
    } else {
        format!("Accept-Encoding: {accept}\r\n")
    };
    let raw = format!("GET {path} HTTP/1.1\r\nHost: a\r\n{ae}\r\n");
    let mut buf = bytes::BytesMut::from(raw.as_bytes());
    match http1::Decoder::new(http1::Limits::default()).decode(&mut buf) {
        Ok(Some(http1::Message::Head(req))) => req,
        other => panic!("{other:?}"),
    }
}

/// The body bytes and Content-Encoding of a 200.
fn sent(reply: StaticReply) -> (Vec<u8>, Option<String>) {
    use std::os::unix::fs::FileExt;
    let StaticReply::File {
        file, len, headers, ..
    } = reply
    else {
        panic!("{reply:?}")
    };
    let mut buf = vec![0; len as usize];
    file.read_exact_at(&mut buf, 0).unwrap();
    let coding = headers.iter().find(|(n, _)| *n == "Content-Encoding");
    (buf, coding.map(|(_, v)| v.clone()))
}

#[test]
fn the_cache_keeps_one_entry_per_representation() {
    let dir = std::env::temp_dir().join(format!("site-precompressed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.css"), "plain").unwrap();
    std::fs::write(dir.join("a.css.br"), "brotli").unwrap();
    let root = StaticRoot::new(&dir, false)
        .unwrap()
        .with_file_cache(100, Duration::from_secs(60))
        .precompressed(true);
    let br = || (b"brotli".to_vec(), Some("br".to_string()));
    let plain = || (b"plain".to_vec(), None);
    // Identity first, so that a cached identity entry exists when br asks,
    // then the other way round; each answer twice (a miss, then a hit).
    for (accept, want) in [("", plain()), ("br", br()), ("gzip", plain()), ("br", br())] {
        for _ in 0..2 {
            assert_eq!(sent(root.serve(&get("/a.css", accept))), want, "{accept:?}");
        }
    }
    let cache = root.file_cache().unwrap();
    // a.css, a.css\0br and the negative a.css\0gzip; zstd was never looked
    // up: the search for "any sidecar" (for Vary) stops at the br one.
    assert_eq!(cache.len(), 3);
    assert!(cache.stats.hits.load(std::sync::atomic::Ordering::Relaxed) >= 4);
    let _ = std::fs::remove_dir_all(&dir);
}
