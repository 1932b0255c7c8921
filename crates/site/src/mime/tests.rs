use super::*;

fn ct(name: &str) -> String {
    content_type(Path::new(name)).into_owned()
}

/// The types of nginx's `conf/mime.types` (1.2x), with the exceptions the
/// module's docs give, and the charset rule applied.
const NGINX: &[(&str, &[&str])] = &[
    ("text/html; charset=utf-8", &["html", "htm", "shtml"]),
    ("text/css; charset=utf-8", &["css"]),
    ("text/xml; charset=utf-8", &["xml"]),
    ("image/gif", &["gif"]),
    ("image/jpeg", &["jpeg", "jpg"]),
    // nginx: application/javascript; RFC 9239 made text/javascript the one.
    ("text/javascript; charset=utf-8", &["js"]),
    ("application/atom+xml; charset=utf-8", &["atom"]),
    ("application/rss+xml; charset=utf-8", &["rss"]),
    ("text/mathml; charset=utf-8", &["mml"]),
    ("text/plain; charset=utf-8", &["txt"]),
    ("text/vnd.sun.j2me.app-descriptor; charset=utf-8", &["jad"]),
    ("text/vnd.wap.wml; charset=utf-8", &["wml"]),
    ("text/x-component; charset=utf-8", &["htc"]),
    ("image/png", &["png"]),
    ("image/svg+xml", &["svg", "svgz"]),
    ("image/tiff", &["tif", "tiff"]),
    ("image/vnd.wap.wbmp", &["wbmp"]),
    ("image/webp", &["webp"]),
    ("image/x-icon", &["ico"]),
    ("image/x-jng", &["jng"]),
    // nginx: image/x-ms-bmp; image/bmp is the registered one.
    ("image/bmp", &["bmp"]),
    ("font/woff", &["woff"]),
    ("application/java-archive", &["jar", "war", "ear"]),
    ("application/json", &["json"]),
    ("application/mac-binhex40", &["hqx"]),
    ("application/msword", &["doc"]),
    ("application/pdf", &["pdf"]),
    ("application/postscript", &["ps", "eps", "ai"]),
    ("application/rtf", &["rtf"]),
    ("application/vnd.apple.mpegurl", &["m3u8"]),
    ("application/vnd.google-earth.kml+xml", &["kml"]),
    ("application/vnd.google-earth.kmz", &["kmz"]),
    ("application/vnd.ms-excel", &["xls"]),
    ("application/vnd.ms-fontobject", &["eot"]),
    ("application/vnd.ms-powerpoint", &["ppt"]),
    ("application/vnd.oasis.opendocument.graphics", &["odg"]),
    ("application/vnd.oasis.opendocument.presentation", &["odp"]),
    ("application/vnd.oasis.opendocument.spreadsheet", &["ods"]),
    ("application/vnd.oasis.opendocument.text", &["odt"]),
    (
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        &["pptx"],
    ),
    (
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        &["xlsx"],
    ),
    (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        &["docx"],
    ),
    ("application/vnd.wap.wmlc", &["wmlc"]),
    ("application/x-7z-compressed", &["7z"]),
    ("application/x-cocoa", &["cco"]),
    ("application/x-java-archive-diff", &["jardiff"]),
    ("application/x-java-jnlp-file", &["jnlp"]),
    ("application/x-makeself", &["run"]),
    ("application/x-perl", &["pl", "pm"]),
    ("application/x-pilot", &["prc", "pdb"]),
    ("application/x-rar-compressed", &["rar"]),
    ("application/x-redhat-package-manager", &["rpm"]),
    ("application/x-sea", &["sea"]),
    ("application/x-shockwave-flash", &["swf"]),
    ("application/x-stuffit", &["sit"]),
    ("application/x-tcl", &["tcl", "tk"]),
    ("application/x-x509-ca-cert", &["der", "pem", "crt"]),
    ("application/x-xpinstall", &["xpi"]),
    ("application/xhtml+xml", &["xhtml"]),
    ("application/xspf+xml", &["xspf"]),
    ("application/zip", &["zip"]),
    (
        "application/octet-stream",
        &[
            "bin", "exe", "dll", "deb", "dmg", "iso", "img", "msi", "msp", "msm",
        ],
    ),
    ("audio/midi", &["mid", "midi", "kar"]),
    ("audio/mpeg", &["mp3"]),
    ("audio/ogg", &["ogg"]),
    ("audio/x-m4a", &["m4a"]),
    ("audio/x-realaudio", &["ra"]),
    ("video/3gpp", &["3gpp", "3gp"]),
    ("video/mp2t", &["ts"]),
    ("video/mp4", &["mp4"]),
    ("video/mpeg", &["mpeg", "mpg"]),
    ("video/quicktime", &["mov"]),
    ("video/webm", &["webm"]),
    ("video/x-flv", &["flv"]),
    ("video/x-m4v", &["m4v"]),
    ("video/x-mng", &["mng"]),
    ("video/x-ms-asf", &["asx", "asf"]),
    ("video/x-ms-wmv", &["wmv"]),
    ("video/x-msvideo", &["avi"]),
];

#[test]
fn every_nginx_extension_has_its_type() {
    for (want, exts) in NGINX {
        for ext in *exts {
            assert_eq!(ct(&format!("f.{ext}")), *want, ".{ext}");
        }
    }
}

#[test]
fn newer_web_types() {
    for (name, want) in [
        ("f.woff2", "font/woff2"),
        ("f.wasm", "application/wasm"),
        ("f.avif", "image/avif"),
        ("f.mjs", "text/javascript; charset=utf-8"),
        ("f.otf", "font/otf"),
        ("f.ttf", "font/ttf"),
        ("f.webmanifest", "application/manifest+json"),
        ("f.jsonld", "application/ld+json"),
        ("f.wav", "audio/wav"),
        ("f.pdf", "application/pdf"),
    ] {
        assert_eq!(ct(name), want, "{name}");
    }
}

#[test]
fn text_types_from_mime_guess_get_the_charset_too() {
    for (name, want) in [
        ("README.md", "text/markdown; charset=utf-8"),
        ("t.csv", "text/csv; charset=utf-8"),
        ("c.ics", "text/calendar; charset=utf-8"),
        ("s.vtt", "text/vtt; charset=utf-8"),
    ] {
        assert_eq!(ct(name), want, "{name}");
    }
    assert!(wants_charset("application/javascript"));
    assert!(!wants_charset("application/json"));
    assert!(!wants_charset("image/svg+xml"));
    assert!(!wants_charset("application/xml"));
}

#[test]
fn extensions_are_case_insensitive() {
    for (name, want) in [
        ("a/INDEX.HTML", "text/html; charset=utf-8"),
        ("x.CsS", "text/css; charset=utf-8"),
        ("X.WOFF2", "font/woff2"),
        ("x.JPG", "image/jpeg"),
        // Through mime_guess, not the table.
        ("DOC.PDF", "application/pdf"),
        ("Notes.MD", "text/markdown; charset=utf-8"),
        (
            "sheet.XlSx",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        ),
    ] {
        assert_eq!(ct(name), want, "{name}");
    }
}

#[test]
fn no_extension_dotfiles_and_unknown_are_octet_stream() {
    for name in [
        "noext",
        "dir.d/noext",
        ".bashrc",
        "dir/.htaccess",
        "trailing.",
        "x.unknownext",
        "x.averyveryverylongunknownextension",
        "",
    ] {
        assert_eq!(ct(name), OCTET_STREAM, "{name:?}");
    }
    // An extension that is not UTF-8.
    use std::os::unix::ffi::OsStrExt;
    let odd = std::ffi::OsStr::from_bytes(b"x.\xff\xfe");
    assert_eq!(content_type(Path::new(odd)), OCTET_STREAM);
}

#[test]
fn extension_is_what_path_extension_returns() {
    for name in [
        "a.css",
        "dir/a.css",
        "dir.d/noext",
        ".bashrc",
        "d/.bashrc",
        "x.",
        "..",
        "d/..",
        ".",
        "a..b",
        "noext",
        "",
        "/abs/x.tar.gz",
        "d/.x.y",
    ] {
        let p = Path::new(name);
        let want = p.extension().map_or(&b""[..], |e| e.as_bytes());
        assert_eq!(extension(p), want, "{name:?}");
    }
}

#[test]
fn only_the_last_extension_counts() {
    for (name, want) in [
        ("a.tar.gz", "application/gzip"),
        ("a.css.zst", "application/zstd"),
        ("a.css.br", OCTET_STREAM),
        ("app.min.js", "text/javascript; charset=utf-8"),
        ("style.css.map", "text/plain; charset=utf-8"),
        ("archive.zip.part", OCTET_STREAM),
        (".config.json", "application/json"),
    ] {
        assert_eq!(ct(name), want, "{name}");
    }
}

/// The table is a fast path, not a second source of truth: outside its
/// listed exceptions it answers what `mime_guess` (and the charset rule)
/// would.
#[test]
fn the_fast_table_agrees_with_mime_guess_but_for_the_exceptions() {
    let exceptions = [
        "mjs", "woff", "otf", "m3u8", "ts", "mid", "midi", "m4a", "ra", "rpm", "prc", "pdb", "sea",
        "dll", "zst",
    ];
    let fast = [
        "html", "htm", "css", "js", "json", "txt", "xml", "svg", "png", "jpg", "jpeg", "gif",
        "webp", "avif", "ico", "woff2", "wasm",
    ];
    for ext in fast.iter().chain(&exceptions) {
        assert!(common(ext.as_bytes()).is_some(), "{ext} is in the table");
    }
    for ext in fast {
        let guess = mime_guess::from_ext(ext).first_raw().unwrap();
        let want = if wants_charset(guess) {
            format!("{guess}; charset=utf-8")
        } else {
            guess.to_string()
        };
        assert_eq!(common(ext.as_bytes()), Some(want.as_str()), "{ext}");
    }
    for ext in exceptions {
        let guess = mime_guess::from_ext(ext).first_raw();
        assert_ne!(
            common(ext.as_bytes()),
            guess,
            "{ext} is no longer an exception"
        );
    }
}
