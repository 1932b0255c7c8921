//! `Content-Type` from a file extension.
//!
//! Types come from `mime_guess` (the ~1,000 extensions of Apache's and
//! IANA's lists, kept up to date by others), except for a short table
//! looked up first:
//!
//! - the types a web site serves most, because this runs on every static
//!   file response and `mime_guess` (a case-insensitive binary search)
//!   makes a lookup ~1,500 instructions where the table makes it ~200
//!   (`.css`, `.woff2`; measured with cachegrind);
//! - the extensions of nginx's `mime.types` where `mime_guess`'s first
//!   guess is a legacy or different type (`.woff` `application/font-woff`,
//!   `.m3u8` `audio/x-mpegurl`, `.ts`, `.rpm`, ...): nginx's answer is what
//!   clients have met for years. The exceptions go the other way where a
//!   newer registration exists: `.js` and `.mjs` are `text/javascript`
//!   (RFC 9239) and `.otf` `font/otf` (RFC 8081); `.bmp` is `mime_guess`'s
//!   `image/bmp`, not nginx's `image/x-ms-bmp`.
//!
//! The charset rule is nginx's `charset utf-8;` with `charset_types`
//! widened to every text type: `; charset=utf-8` goes on every `text/*`
//! type and on `application/javascript`, `application/rss+xml` and
//! `application/atom+xml`. Not on `application/json` (RFC 8259 defines no
//! charset parameter: JSON is UTF-8) nor on other XML types such as
//! `image/svg+xml` (an XML document declares its own encoding), as nginx
//! by default.

use std::borrow::Cow;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What a file of unknown type is sent as.
pub const OCTET_STREAM: &str = "application/octet-stream";

/// The `Content-Type` for a file name, by its extension (case-insensitive;
/// only the last one: `x.tar.gz` is gzip); [`OCTET_STREAM`] when unknown or
/// there is none (`noext`, `.bashrc`).
pub fn content_type(path: &Path) -> Cow<'static, str> {
    let ext = extension(path);
    if let Some(t) = common(ext) {
        return Cow::Borrowed(t);
    }
    let guess = std::str::from_utf8(ext)
        .ok()
        .filter(|e| !e.is_empty())
        .and_then(|e| mime_guess::from_ext(e).first_raw());
    match guess {
        Some(t) if wants_charset(t) => Cow::Owned(format!("{t}; charset=utf-8")),
        Some(t) => Cow::Borrowed(t),
        None => Cow::Borrowed(OCTET_STREAM),
    }
}

/// What [`Path::extension`] returns, as bytes; empty for none. By hand
/// because `Path::extension` parses every component (~180 instructions
/// more, measured), where the file name is all that matters.
fn extension(path: &Path) -> &[u8] {
    let bytes = path.as_os_str().as_bytes();
    let name = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
    match name.iter().rposition(|&b| b == b'.') {
        // A dotfile's dot starts its name: no extension (nor in "..").
        Some(0) | None => b"",
        Some(_) if name == b".." => b"",
        Some(i) => &name[i + 1..],
    }
}

/// Whether `essence` (a type without parameters) is sent with
/// `; charset=utf-8`.
fn wants_charset(essence: &str) -> bool {
    essence.starts_with("text/")
        || matches!(
            essence,
            "application/javascript" | "application/rss+xml" | "application/atom+xml"
        )
}

/// The table looked up before `mime_guess` (see the module's docs), with
/// the charset already applied.
fn common(ext: &[u8]) -> Option<&'static str> {
    // Lower-cased on the stack: the longest extension here has 7 bytes.
    let mut buf = [0u8; 8];
    let lower = buf.get_mut(..ext.len())?;
    lower.copy_from_slice(ext);
    lower.make_ascii_lowercase();
    Some(match &*lower {
        // Frequent.
        b"html" | b"htm" => "text/html; charset=utf-8",
        b"css" => "text/css; charset=utf-8",
        b"js" | b"mjs" => "text/javascript; charset=utf-8",
        b"json" => "application/json",
        b"txt" => "text/plain; charset=utf-8",
        b"xml" => "text/xml; charset=utf-8",
        b"svg" => "image/svg+xml",
        b"png" => "image/png",
        b"jpg" | b"jpeg" => "image/jpeg",
        b"gif" => "image/gif",
        b"webp" => "image/webp",
        b"avif" => "image/avif",
        b"ico" => "image/x-icon",
        b"woff2" => "font/woff2",
        b"wasm" => "application/wasm",
        // Where nginx, or a newer registration, differs from mime_guess.
        b"woff" => "font/woff",
        b"otf" => "font/otf",
        b"m3u8" => "application/vnd.apple.mpegurl",
        b"ts" => "video/mp2t",
        b"mid" | b"midi" => "audio/midi",
        b"m4a" => "audio/x-m4a",
        b"ra" => "audio/x-realaudio",
        b"rpm" => "application/x-redhat-package-manager",
        b"prc" | b"pdb" => "application/x-pilot",
        b"sea" => "application/x-sea",
        b"dll" => OCTET_STREAM,
        // A zstd sidecar requested by name (RFC 8878); `.br` has no
        // registered type and stays application/octet-stream.
        b"zst" => "application/zstd",
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
