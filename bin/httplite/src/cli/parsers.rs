//! The parsers of the flags' values that are text with a meaning:
//! durations, sizes, paths under the root, error pages, file modes, the
//! health path. Each refuses a bad value with a line saying what it
//! expected.

use std::time::Duration;

/// `--health`'s path: absolute, outside /_httplite/, no query.
pub fn parse_health_path(s: &str) -> Result<String, String> {
    if !s.starts_with('/') || s.contains(['?', '#', ' ']) {
        return Err(format!("{s:?} is not a path (e.g. /healthz)"));
    }
    if s.starts_with(site::action::PREFIX) {
        return Err(format!(
            "{s:?} is under {}: that is /_httplite/health's place",
            site::action::PREFIX
        ));
    }
    Ok(s.to_string())
}

/// An octal file mode, e.g. `660` or `0o660`.
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let digits = s.trim_start_matches("0o");
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("{s:?} is not an octal mode (e.g. 660)"))
}

/// A file under the root as a URL path: `index.html` → `/index.html`.
pub fn parse_root_file(s: &str) -> Result<String, String> {
    let s = s.trim().trim_start_matches('/');
    if s.is_empty() || s.split('/').any(|seg| seg == "..") || s.contains(['\0', '?', '#']) {
        return Err(format!("{s:?} is not a file path under --root"));
    }
    Ok(format!("/{s}"))
}

/// `CODE=PAGE`, e.g. `404=/404.html`: an error status (400 to 599) and a
/// file under the root.
pub fn parse_error_page(s: &str) -> Result<(u16, String), String> {
    let (code, page) = s
        .split_once('=')
        .ok_or("expected CODE=PAGE, e.g. 404=/404.html")?;
    let code: u16 = code
        .trim()
        .parse()
        .ok()
        .filter(|c| (400..600).contains(c))
        .ok_or_else(|| format!("{code:?} is not an error status (400-599)"))?;
    Ok((code, parse_root_file(page)?))
}

/// Parses `500ms`, `10s`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = split_number(s);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration '{s}' (try 500ms, 10s, 2m)"))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!("invalid duration '{s}'"));
    }
    let secs = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit in '{s}' (use ms, s, m or h)")),
    };
    if secs > 1e9 {
        return Err(format!("duration '{s}' is too long"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// [`parse_duration`], from 10 ms to 1 minute (an event stream's pace).
pub fn parse_events_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if !(Duration::from_millis(10)..=Duration::from_secs(60)).contains(&d) {
        return Err(format!("'{s}' is out of range (10ms to 60s)"));
    }
    Ok(d)
}

/// [`parse_size`], or `unlimited` (`u64::MAX`).
pub fn parse_size_or_unlimited(s: &str) -> Result<u64, String> {
    if s == "unlimited" {
        return Ok(u64::MAX);
    }
    parse_size(s)
}

/// Parses `1048576`, `64KiB`, `1MiB`, `10MB`, `1G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, unit) = split_number(s);
    let value: u64 = num
        .parse()
        .map_err(|_| format!("invalid size '{s}' (try 1MiB, 64KiB, 1048576)"))?;
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "unknown unit in '{s}' (use KiB, MiB, GiB, KB, MB, GB)"
            ));
        }
    };
    value
        .checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (&s[..end], s[end..].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert!(parse_size("-1").is_err());
        assert!(parse_size("1XB").is_err());
    }
}
