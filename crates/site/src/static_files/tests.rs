//! Unit tests of path resolution, ranges and validators.

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
fn ranges() {
    assert_eq!(parse_range(b"bytes=0-9", 100), RangeSpec::Satisfiable(0, 9));
    assert_eq!(
        parse_range(b"bytes=90-", 100),
        RangeSpec::Satisfiable(90, 99)
    );
    assert_eq!(
        parse_range(b"bytes=-10", 100),
        RangeSpec::Satisfiable(90, 99)
    );
    assert_eq!(
        parse_range(b"bytes=-1000", 100),
        RangeSpec::Satisfiable(0, 99)
    );
    assert_eq!(
        parse_range(b"bytes=50-1000", 100),
        RangeSpec::Satisfiable(50, 99)
    );
    assert_eq!(parse_range(b"bytes=100-", 100), RangeSpec::Unsatisfiable);
    assert_eq!(parse_range(b"bytes=-0", 100), RangeSpec::Unsatisfiable);
    assert_eq!(parse_range(b"bytes=5-1", 100), RangeSpec::Ignore);
    assert_eq!(parse_range(b"bytes=0-1,5-6", 100), RangeSpec::Ignore);
    assert_eq!(parse_range(b"items=0-1", 100), RangeSpec::Ignore);
}

#[test]
fn etags_compare_weakly() {
    assert!(etag_list_matches(b"\"a\", \"b\"", "\"b\""));
    assert!(etag_list_matches(b"W/\"b\"", "\"b\""));
    assert!(etag_list_matches(b"*", "\"b\""));
    assert!(!etag_list_matches(b"\"c\"", "\"b\""));
}
