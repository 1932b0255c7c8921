//! Parsing HTTP dates (`If-Modified-Since`). Formatting lives in `http1`.

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) into Unix
/// seconds. The obsolete RFC 850 and asctime forms are not accepted: a date
/// that does not parse is ignored, which only costs a full response.
pub fn parse_http_date(s: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(s).ok()?.trim();
    let mut parts = s.split(' ');
    let _weekday = parts.next()?.strip_suffix(',')?;
    let day: u64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':');
    let h: u64 = hms.next()?.parse().ok()?;
    let m: u64 = hms.next()?.parse().ok()?;
    let sec: u64 = hms.next()?.parse().ok()?;
    if parts.next()? != "GMT" || parts.next().is_some() {
        return None;
    }
    if !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 || year < 1970 {
        return None;
    }
    let days = days_from_civil(year, month, day as i64);
    Some(days as u64 * 86_400 + h * 3600 + m * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_http1_formatting() {
        for t in [0u64, 784_111_777, 1_700_000_000, 4_102_444_800] {
            let s = http1::format_http_date(t);
            assert_eq!(
                parse_http_date(&s),
                Some(t),
                "{}",
                String::from_utf8_lossy(&s)
            );
        }
        assert_eq!(
            parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(parse_http_date(b"yesterday"), None);
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 PST"), None);
        assert_eq!(parse_http_date(b"Sun, 32 Nov 1994 08:49:37 GMT"), None);
    }
}
