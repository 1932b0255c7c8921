//! Directory listings (`--list-dirs`): an HTML page a person reads, built
//! on the blocking pool (see [`crate::static_files::StaticReply::ListDir`]).
//!
//! One table of name, size (human-readable, with the exact byte count as a
//! tooltip) and last-modified time (UTC), directories first. Each column
//! header is a link that sorts by it (`?sort=name|size|mtime&order=asc|desc`,
//! no JavaScript); dotfiles are left out unless `--show-hidden`. Names are
//! HTML-escaped and links percent-encoded. Listings are generated: they carry
//! `Cache-Control: no-store` and no validators, so the query never meets the
//! files' ETag logic.
//!
//! Symbolic links are shown with their target's type, size and time only
//! when the target resolves beneath the listed directory (`openat2` with
//! `RESOLVE_BENEATH`, the same rule that serves files); a link leading
//! elsewhere shows `-`, so a listing reveals nothing outside the root.

use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::static_files::stat_beneath;

/// The column a listing is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// By name (the default).
    Name,
    /// By size.
    Size,
    /// By last-modified time.
    Mtime,
}

impl SortKey {
    fn param(self) -> &'static str {
        match self {
            SortKey::Name => "name",
            SortKey::Size => "size",
            SortKey::Mtime => "mtime",
        }
    }

    /// The order a click on this column's header starts with: names A to
    /// Z, the largest and the newest first.
    fn first_order_desc(self) -> bool {
        self != SortKey::Name
    }
}

/// How to present one listing: its sort, from the request's query, and
/// whether dotfiles are shown (`--show-hidden`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListView {
    /// The column sorted by.
    pub sort: SortKey,
    /// Descending instead of ascending.
    pub desc: bool,
    /// Show names starting with a dot.
    pub show_hidden: bool,
}

impl ListView {
    /// From `sort=name|size|mtime&order=asc|desc` (unknown values are
    /// ignored: names, ascending; a sort without an order gets the column's
    /// first order).
    pub fn from_query(query: Option<&str>, show_hidden: bool) -> ListView {
        let mut sort = SortKey::Name;
        let mut order = None;
        for pair in query.unwrap_or("").split('&') {
            match pair.split_once('=').unwrap_or((pair, "")) {
                ("sort", "name") => sort = SortKey::Name,
                ("sort", "size") => sort = SortKey::Size,
                ("sort", "mtime") => sort = SortKey::Mtime,
                ("order", "asc") => order = Some(false),
                ("order", "desc") => order = Some(true),
                _ => {}
            }
        }
        ListView {
            sort,
            desc: order.unwrap_or(sort.first_order_desc()),
            show_hidden,
        }
    }

    fn is_default(&self) -> bool {
        self.sort == SortKey::Name && !self.desc
    }

    /// `?sort=…&order=…` for this view.
    fn query(&self) -> String {
        let order = if self.desc { "desc" } else { "asc" };
        format!("?sort={}&amp;order={order}", self.sort.param())
    }
}

/// One directory entry as listed.
#[derive(Debug)]
struct Entry {
    name: String,
    is_dir: bool,
    /// `None` for directories and links that cannot be followed.
    size: Option<u64>,
    /// Unix seconds; `None` for links that cannot be followed.
    mtime: Option<i64>,
}

/// Lists the open directory `dir`, served at `url_path` (as requested:
/// still percent-encoded, ending in `/`).
pub(crate) fn listing(url_path: &str, dir: &File, view: &ListView) -> io::Result<String> {
    // The open directory's own fd names it, so the listing is of exactly
    // the directory that was resolved beneath the root.
    let path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let mut entries = read_entries(&path, dir, view.show_hidden)?;
    sort(&mut entries, view);
    Ok(render(url_path, &entries, view))
}

fn read_entries(path: &Path, dir: &File, show_hidden: bool) -> io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for e in std::fs::read_dir(path)? {
        let Ok(e) = e else { continue };
        let name = e.file_name().to_string_lossy().into_owned();
        if !show_hidden && name.starts_with('.') {
            continue;
        }
        // `DirEntry::metadata` does not follow links (fstatat with
        // AT_SYMLINK_NOFOLLOW); a link is followed only beneath `dir`.
        let Ok(mut meta) = e.metadata() else { continue };
        if meta.is_symlink() {
            match stat_beneath(dir.as_raw_fd(), Path::new(&e.file_name())) {
                Ok(m) => meta = m,
                Err(_) => {
                    entries.push(Entry {
                        name,
                        is_dir: false,
                        size: None,
                        mtime: None,
                    });
                    continue;
                }
            }
        }
        let is_dir = meta.is_dir();
        entries.push(Entry {
            name,
            is_dir,
            size: (!is_dir).then_some(meta.len()),
            mtime: Some(meta.mtime()),
        });
    }
    Ok(entries)
}

/// Directories first, then by the column (reversed for `desc`); ties by
/// name, A to Z (so directories, which have no size, stay A to Z by size).
fn sort(entries: &mut [Entry], view: &ListView) {
    let by_name = |a: &Entry, b: &Entry| {
        a.name
            .to_lowercase()
            .cmp(&b.name.to_lowercase())
            .then_with(|| a.name.cmp(&b.name))
    };
    entries.sort_by(|a, b| {
        let column = match view.sort {
            SortKey::Name => by_name(a, b),
            SortKey::Size => a.size.cmp(&b.size),
            SortKey::Mtime => a.mtime.cmp(&b.mtime),
        };
        let column = if view.desc { column.reverse() } else { column };
        b.is_dir
            .cmp(&a.is_dir)
            .then(column)
            .then_with(|| by_name(a, b))
    });
}

const STYLE: &str = "\
:root{color-scheme:light dark;--fg:#1f2328;--muted:#59636e;--bg:#fff;--line:#d1d9e0;\
--zebra:#f6f8fa;--hover:#eef3fb;--link:#0758c9}\
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#9198a1;--bg:#0d1117;\
--line:#3d444d;--zebra:#151b23;--hover:#1c2533;--link:#4493f8}}\
*{box-sizing:border-box}\
body{margin:0;padding:2rem 1rem;background:var(--bg);color:var(--fg);\
font:15px/1.5 system-ui,-apple-system,\"Segoe UI\",Roboto,\"Helvetica Neue\",Arial,sans-serif}\
main{max-width:60rem;margin:0 auto}\
h1{font-size:1.35rem;font-weight:600;margin:0 0 1.25rem;overflow-wrap:anywhere}\
h1 a{color:var(--link);text-decoration:none}h1 a:hover{text-decoration:underline}\
h1 .sep{color:var(--muted);margin:0 .15em}\
table{width:100%;border-collapse:collapse}\
th,td{padding:.45rem .75rem;text-align:left;vertical-align:top}\
th{border-bottom:2px solid var(--line);font-weight:600;white-space:nowrap}\
th a{color:inherit;text-decoration:none}th a:hover{color:var(--link)}\
th .arrow{color:var(--muted);font-size:.8em;margin-left:.3em}\
tbody tr:nth-child(even){background:var(--zebra)}\
tbody tr:hover{background:var(--hover)}\
td{border-bottom:1px solid var(--line)}\
td a{color:var(--link);text-decoration:none}td a:hover{text-decoration:underline}\
.name{overflow-wrap:anywhere;width:100%}\
tr.dir .name a{font-weight:600}\
.size{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}\
.mtime{white-space:nowrap;font-variant-numeric:tabular-nums}td.mtime{color:var(--muted)}\
.note{color:var(--muted);font-size:.85em;margin-left:.4em}\
footer{margin-top:1rem;color:var(--muted);font-size:.85rem}\
@media (max-width:32rem){body{padding:1rem .5rem;font-size:14px}\
th,td{padding:.4rem .4rem}.mtime .time{display:none}}";

fn render(url_path: &str, entries: &[Entry], view: &ListView) -> String {
    let shown = decode(url_path);
    let mut html = String::with_capacity(2048 + entries.len() * 200);
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Index of {}</title><style>{STYLE}</style></head>\n<body><main>\n<h1>Index of {}</h1>\n",
        html_escape(&shown),
        breadcrumbs(&shown),
    );
    html.push_str("<table>\n<thead><tr>");
    for (key, class, label) in [
        (SortKey::Name, "name", "Name"),
        (SortKey::Size, "size", "Size"),
        (SortKey::Mtime, "mtime", "Last modified"),
    ] {
        let active = view.sort == key;
        let next = ListView {
            sort: key,
            desc: if active {
                !view.desc
            } else {
                key.first_order_desc()
            },
            ..*view
        };
        let (aria, arrow) = match (active, view.desc) {
            (false, _) => ("", ""),
            (true, false) => (" aria-sort=\"ascending\"", "<span class=\"arrow\">▲</span>"),
            (true, true) => (
                " aria-sort=\"descending\"",
                "<span class=\"arrow\">▼</span>",
            ),
        };
        let _ = write!(
            html,
            "<th class=\"{class}\"{aria}><a href=\"{}\">{label}{arrow}</a></th>",
            next.query()
        );
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    // Links to subdirectories keep the sort.
    let keep = if view.is_default() {
        String::new()
    } else {
        view.query()
    };
    if url_path != "/" {
        let _ = writeln!(
            html,
            "<tr class=\"dir parent\"><td class=\"name\"><a href=\"../{keep}\">../</a> \
             <span class=\"note\">parent directory</span></td>\
             <td class=\"size\">-</td><td class=\"mtime\"></td></tr>"
        );
    }
    for e in entries {
        let (class, slash, query) = if e.is_dir {
            ("dir", "/", keep.as_str())
        } else {
            ("file", "", "")
        };
        let size = match e.size {
            Some(n) => format!(
                "<td class=\"size\" title=\"{n} bytes\">{}</td>",
                human_size(n)
            ),
            None => "<td class=\"size\">-</td>".to_string(),
        };
        let mtime = e.mtime.map(utc_minutes).unwrap_or_default();
        let _ = writeln!(
            html,
            "<tr class=\"{class}\"><td class=\"name\"><a href=\"{href}{slash}{query}\">{name}{slash}</a></td>\
             {size}<td class=\"mtime\">{mtime}</td></tr>",
            href = percent_encode_segment(&e.name),
            name = html_escape(&e.name),
        );
    }
    let dirs = entries.iter().filter(|e| e.is_dir).count();
    let files = entries.len() - dirs;
    let _ = write!(
        html,
        "</tbody>\n</table>\n<footer>{dirs} director{}, {files} file{}</footer>\n\
         </main></body></html>\n",
        if dirs == 1 { "y" } else { "ies" },
        if files == 1 { "" } else { "s" },
    );
    html
}

/// The decoded path as links to each ancestor: `/ a / b /`.
fn breadcrumbs(shown: &str) -> String {
    let segments: Vec<&str> = shown.split('/').filter(|s| !s.is_empty()).collect();
    let mut out = String::new();
    let mut href = String::from("/");
    let _ = write!(out, "<a href=\"/\">/</a>");
    for (i, seg) in segments.iter().enumerate() {
        href.push_str(&percent_encode_segment(seg));
        href.push('/');
        if i + 1 == segments.len() {
            let _ = write!(out, "{}<span class=\"sep\">/</span>", html_escape(seg));
        } else {
            let _ = write!(
                out,
                "<a href=\"{href}\">{}</a><span class=\"sep\">/</span>",
                html_escape(seg)
            );
        }
    }
    out
}

/// The request path as the person typed it (`%20` shown as a space).
fn decode(url_path: &str) -> String {
    http1::percent_decode_str(url_path)
        .map(|s| s.into_owned())
        .unwrap_or_else(|_| url_path.to_string())
}

/// `512 B`, `1.2 KiB`, `34.0 MiB`, `120 GiB` (binary units).
fn human_size(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v < 99.95 {
        format!("{v:.1} {}", UNITS[unit])
    } else {
        format!("{v:.0} {}", UNITS[unit])
    }
}

/// `2026-11-25 21:03` (UTC), the time in its own span (hidden on phones).
fn utc_minutes(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "<time datetime=\"{y:04}-{m:02}-{d:02}T{:02}:{:02}Z\">{y:04}-{m:02}-{d:02}\
         <span class=\"time\"> {:02}:{:02}</span></time>",
        rem / 3600,
        rem % 3600 / 60,
        rem / 3600,
        rem % 3600 / 60,
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

fn percent_encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests;
