//! Listings of a temporary directory, rendered with no socket.

use std::time::{Duration, SystemTime};

use super::*;

/// A directory of its own under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("site-listing-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Writes `len` bytes to `name`, last modified `age_s` seconds after
    /// 2026-01-01 00:00 UTC.
    fn file(&self, name: &str, len: usize, at_s: u64) {
        let path = self.0.join(name);
        std::fs::write(&path, vec![b'x'; len]).unwrap();
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(JAN_2026 + at_s);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 2026-01-01T00:00:00Z.
const JAN_2026: u64 = 1_767_225_600;

/// small.txt (10 B, oldest), big.bin (3 MiB), mid.dat (1.5 KiB, newest),
/// `<b>&.txt`, `a dir/` and `zdir/`, `.hidden`.
fn demo(tag: &str) -> TempDir {
    let d = TempDir::new(tag);
    d.file("small.txt", 10, 0);
    d.file("big.bin", 3 << 20, 60);
    d.file("mid.dat", 1536, 3600);
    d.file("<b>&.txt", 5, 120);
    d.file(".hidden", 1, 0);
    std::fs::create_dir(d.0.join("a dir")).unwrap();
    std::fs::create_dir(d.0.join("zdir")).unwrap();
    d
}

fn list(d: &TempDir, url_path: &str, query: Option<&str>, show_hidden: bool) -> String {
    let dir = File::open(&d.0).unwrap();
    listing(url_path, &dir, &ListView::from_query(query, show_hidden)).unwrap()
}

/// The link targets of the rows, in order.
fn rows(html: &str) -> Vec<String> {
    html.split("<td class=\"name\"><a href=\"")
        .skip(1)
        .map(|r| r[..r.find('"').unwrap()].to_string())
        .collect()
}

#[test]
fn names_are_escaped_and_links_encoded() {
    let d = demo("escape");
    let html = list(&d, "/", None, false);
    assert!(html.contains(">&lt;b&gt;&amp;.txt</a>"), "{html}");
    assert!(html.contains("href=\"%3Cb%3E%26.txt\""), "{html}");
    assert!(html.contains("href=\"a%20dir/\">a dir/</a>"), "{html}");
    assert!(!html.contains("<b>&"), "{html}");
    // The title shows the decoded path, escaped.
    let html = list(&d, "/x%20%3Cy%3E/", None, false);
    assert!(
        html.contains("<title>Index of /x &lt;y&gt;/</title>"),
        "{html}"
    );
    assert!(html.contains("<a href=\"/\">/</a>"), "{html}");
    assert_eq!(
        html_escape("<a&\"b\">'"),
        "&lt;a&amp;&quot;b&quot;&gt;&#39;"
    );
    assert_eq!(percent_encode_segment("a b/c"), "a%20b%2Fc");
}

#[test]
fn a_page_a_person_reads() {
    let d = demo("page");
    let html = list(&d, "/", None, false);
    assert!(html.starts_with("<!doctype html>"), "{html}");
    assert!(html.contains("<meta charset=\"utf-8\">"));
    assert!(html.contains("name=\"viewport\""));
    assert!(html.contains("<title>Index of /</title>"));
    assert!(html.contains("<style>"));
    assert!(!html.contains("<script"));
    assert!(html.contains("2 directories, 4 files"), "{html}");
}

#[test]
fn sort_orders_keep_directories_first() {
    let d = demo("sort");
    let dirs = ["a%20dir/", "zdir/"];
    let cases: [(Option<&str>, [&str; 6]); 7] = [
        (
            None,
            [
                dirs[0],
                dirs[1],
                "%3Cb%3E%26.txt",
                "big.bin",
                "mid.dat",
                "small.txt",
            ],
        ),
        (
            Some("sort=name&order=desc"),
            [
                "zdir/?sort=name&amp;order=desc",
                "a%20dir/?sort=name&amp;order=desc",
                "small.txt",
                "mid.dat",
                "big.bin",
                "%3Cb%3E%26.txt",
            ],
        ),
        (
            Some("sort=size&order=desc"),
            [
                "a%20dir/?sort=size&amp;order=desc",
                "zdir/?sort=size&amp;order=desc",
                "big.bin",
                "mid.dat",
                "small.txt",
                "%3Cb%3E%26.txt",
            ],
        ),
        // A size sort with no order: the largest first.
        (
            Some("sort=size"),
            [
                "a%20dir/?sort=size&amp;order=desc",
                "zdir/?sort=size&amp;order=desc",
                "big.bin",
                "mid.dat",
                "small.txt",
                "%3Cb%3E%26.txt",
            ],
        ),
        (
            Some("sort=size&order=asc"),
            [
                "a%20dir/?sort=size&amp;order=asc",
                "zdir/?sort=size&amp;order=asc",
                "%3Cb%3E%26.txt",
                "small.txt",
                "mid.dat",
                "big.bin",
            ],
        ),
        (
            Some("sort=mtime&order=asc"),
            // small.txt is the oldest; the directories were made just now.
            [
                "a%20dir/?sort=mtime&amp;order=asc",
                "zdir/?sort=mtime&amp;order=asc",
                "small.txt",
                "big.bin",
                "%3Cb%3E%26.txt",
                "mid.dat",
            ],
        ),
        // Nonsense is the default.
        (
            Some("sort=colour&order=up&x"),
            [
                dirs[0],
                dirs[1],
                "%3Cb%3E%26.txt",
                "big.bin",
                "mid.dat",
                "small.txt",
            ],
        ),
    ];
    for (query, want) in cases {
        let html = list(&d, "/", query, false);
        assert_eq!(rows(&html), want, "{query:?}");
    }
}

#[test]
fn headers_link_to_each_sort() {
    let d = demo("headers");
    let html = list(&d, "/", None, false);
    // Sorted by name ascending: its header reverses it, the others start
    // with the largest and the newest.
    assert!(
        html.contains(
            "<th class=\"name\" aria-sort=\"ascending\"><a href=\"?sort=name&amp;order=desc\">Name"
        ),
        "{html}"
    );
    assert!(
        html.contains("<a href=\"?sort=size&amp;order=desc\">Size</a>"),
        "{html}"
    );
    assert!(
        html.contains("<a href=\"?sort=mtime&amp;order=desc\">Last modified</a>"),
        "{html}"
    );
    let html = list(&d, "/", Some("sort=size&order=desc"), false);
    assert!(
        html.contains("aria-sort=\"descending\"><a href=\"?sort=size&amp;order=asc\">Size"),
        "{html}"
    );
    assert!(
        html.contains("<a href=\"?sort=name&amp;order=asc\">Name</a>"),
        "{html}"
    );
}

#[test]
fn dotfiles_are_hidden_unless_asked() {
    let d = demo("hidden");
    assert!(!list(&d, "/", None, false).contains(".hidden"));
    let html = list(&d, "/", None, true);
    assert!(html.contains("href=\".hidden\""), "{html}");
}

#[test]
fn parent_link_except_at_the_root() {
    let d = demo("parent");
    assert!(!list(&d, "/", None, false).contains("href=\"../"));
    let html = list(&d, "/sub/", None, false);
    assert_eq!(rows(&html)[0], "../", "{html}");
    // The breadcrumbs link each ancestor.
    let html = list(&d, "/a%20b/c/", None, false);
    assert!(html.contains("<a href=\"/a%20b/\">a b</a>"), "{html}");
    // The parent keeps a sort that is not the default.
    let html = list(&d, "/sub/", Some("sort=mtime"), false);
    assert_eq!(rows(&html)[0], "../?sort=mtime&amp;order=desc", "{html}");
}

#[test]
fn sizes_and_times_are_readable() {
    assert_eq!(human_size(0), "0 B");
    assert_eq!(human_size(1023), "1023 B");
    assert_eq!(human_size(1024), "1.0 KiB");
    assert_eq!(human_size(1229), "1.2 KiB");
    assert_eq!(human_size(150 * 1024), "150 KiB");
    assert_eq!(human_size(3 << 20), "3.0 MiB");
    assert_eq!(human_size(u64::MAX), "16.0 EiB");
    assert!(utc_minutes(1_795_640_580).contains(">2026-11-25<span class=\"time\"> 21:03</span>"));
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(-1), (1969, 12, 31));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));

    let d = demo("sizes");
    let html = list(&d, "/", None, false);
    assert!(
        html.contains("title=\"3145728 bytes\">3.0 MiB</td>"),
        "{html}"
    );
    assert!(html.contains("title=\"1536 bytes\">1.5 KiB</td>"), "{html}");
    assert!(html.contains("title=\"10 bytes\">10 B</td>"), "{html}");
    // Directories have no size.
    assert!(
        html.contains("a dir/</a></td><td class=\"size\">-</td>"),
        "{html}"
    );
    // mid.dat: 2026-01-01 01:00 UTC.
    assert!(
        html.contains("2026-01-01<span class=\"time\"> 01:00</span>"),
        "{html}"
    );
}

#[test]
fn links_out_of_the_directory_show_nothing_of_their_target() {
    let d = TempDir::new("links");
    d.file("in.txt", 2048, 0);
    std::os::unix::fs::symlink("in.txt", d.0.join("inlink")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", d.0.join("outlink")).unwrap();
    let html = list(&d, "/", None, false);
    assert!(
        html.contains("inlink</a></td><td class=\"size\" title=\"2048 bytes\">"),
        "{html}"
    );
    assert!(
        html.contains("outlink</a></td><td class=\"size\">-</td><td class=\"mtime\"></td>"),
        "{html}"
    );
}
