//! The `Date` header value, formatted by hand and cached per thread.
//!
//! Every response carries `Date` (RFC 9110 §6.6.1) in IMF-fixdate form:
//! `Sun, 06 Nov 1994 08:49:37 GMT`. Formatting it takes a few hundred
//! instructions, more than the rest of a small response, so each thread keeps
//! the last formatted value and reformats only when the second changes. The
//! cache is thread-local because every worker thread encodes its own
//! responses: no sharing, no atomics. It holds the `Server` and `Date` lines
//! ready-made, so a response copies them in one go.
//!
//! Reading the clock is still a per-response cost (a vDSO call). An event
//! loop can remove it: after [`refresh_date`] has been called on a thread,
//! encoders there use the value of the latest refresh without reading the
//! clock, so the loop calls it after every wait for events.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const HTTP_DATE_LEN: usize = 29;

/// 9999-12-31 23:59:59 UTC: the last instant a four-digit year can show.
const MAX_SECS: u64 = 253_402_300_799;

const DAYS: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// `Server: httplite\r\nDate: ` before the date, `\r\n` after it.
const LINES_PREFIX: &[u8; 24] = b"Server: httplite\r\nDate: ";
/// Length of the `Server` and `Date` header lines together.
pub(crate) const LINES_LEN: usize = LINES_PREFIX.len() + HTTP_DATE_LEN + 2;

#[derive(Clone, Copy)]
struct Cache {
    /// The second `lines` shows; `u64::MAX` before the first use.
    secs: u64,
    lines: [u8; LINES_LEN],
    /// [`refresh_date`] keeps this thread's cache current.
    driven: bool,
}

thread_local! {
    static CACHE: Cell<Cache> = const {
        Cell::new(Cache { secs: u64::MAX, lines: [0; LINES_LEN], driven: false })
    };
}

/// Formats `unix_secs` (seconds since 1970-01-01 UTC) as an IMF-fixdate.
///
/// Times past the year 9999 are clamped to its last second, since the format
/// has room for four digits only.
///
/// ```
/// assert_eq!(&http1::format_http_date(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
/// ```
pub fn format_http_date(unix_secs: u64) -> [u8; HTTP_DATE_LEN] {
    let secs = unix_secs.min(MAX_SECS);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    // 1970-01-01 was a Thursday.
    let weekday = ((days + 4) % 7) as usize;

    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[0..3].copy_from_slice(DAYS[weekday]);
    two_digits(&mut out[5..7], day);
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    two_digits(&mut out[12..14], year / 100);
    two_digits(&mut out[14..16], year % 100);
    two_digits(&mut out[17..19], (rem / 3600) as u32);
    two_digits(&mut out[20..22], (rem / 60 % 60) as u32);
    two_digits(&mut out[23..25], (rem % 60) as u32);
    out
}

/// The current time as an IMF-fixdate, reformatted at most once a second per
/// thread.
pub fn http_date_now() -> [u8; HTTP_DATE_LEN] {
    let lines = server_and_date_lines();
    let mut date = [0; HTTP_DATE_LEN];
    date.copy_from_slice(&lines[LINES_PREFIX.len()..LINES_PREFIX.len() + HTTP_DATE_LEN]);
    date
}

/// Updates this thread's cached `Date` from the clock and switches the
/// thread to event-loop mode: from now on, responses encoded on this thread
/// show the time of the latest refresh instead of reading the clock each.
///
/// Call it after every return from the event loop's wait (and at least once
/// a second while serving); then a response never shows a time older than
/// the wake-up that led to it.
pub fn refresh_date() {
    CACHE.with(|cache| {
        let mut c = cache.get();
        let now = unix_now();
        if now != c.secs {
            c.secs = now;
            c.lines = lines_for(now);
        }
        c.driven = true;
        cache.set(c);
    });
}

/// `Server: httplite\r\nDate: <now>\r\n`, from the cache when it is current.
pub(crate) fn server_and_date_lines() -> [u8; LINES_LEN] {
    CACHE.with(|cache| {
        let c = cache.get();
        if c.driven {
            return c.lines;
        }
        let now = unix_now();
        if now == c.secs {
            return c.lines;
        }
        let lines = lines_for(now);
        cache.set(Cache {
            secs: now,
            lines,
            driven: false,
        });
        lines
    })
}

/// The second this thread's `Date` shows now: the latest refresh in
/// event-loop mode, else the clock's (updating the cache when it moved on).
#[inline]
pub(crate) fn current_secs() -> u64 {
    CACHE.with(|cache| {
        let c = cache.get();
        if c.driven {
            return c.secs;
        }
        let now = unix_now();
        if now != c.secs {
            cache.set(Cache {
                secs: now,
                lines: lines_for(now),
                driven: false,
            });
        }
        now
    })
}

/// `Server: httplite\r\nDate: <secs>\r\n`, from the cache when it shows
/// `secs`.
pub(crate) fn lines_at(secs: u64) -> [u8; LINES_LEN] {
    let c = CACHE.with(Cell::get);
    if c.secs == secs {
        c.lines
    } else {
        lines_for(secs)
    }
}

fn unix_now() -> u64 {
    // A clock before 1970 is a broken clock; any valid date beats none.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn lines_for(secs: u64) -> [u8; LINES_LEN] {
    let mut lines = [0; LINES_LEN];
    let (prefix, rest) = lines.split_at_mut(LINES_PREFIX.len());
    prefix.copy_from_slice(LINES_PREFIX);
    rest[..HTTP_DATE_LEN].copy_from_slice(&format_http_date(secs));
    rest[HTTP_DATE_LEN..].copy_from_slice(b"\r\n");
    lines
}

fn two_digits(out: &mut [u8], n: u32) {
    out[0] = b'0' + (n / 10 % 10) as u8;
    out[1] = b'0' + (n % 10) as u8;
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month
/// 1..=12, day 1..=31) in the proleptic Gregorian calendar. Works in 400-year
/// eras, whose length in days is fixed, so no loop over years is needed.
fn civil_from_days(days: u64) -> (u32, u32, u32) {
    // Shift the epoch to 0000-03-01 so leap days fall at the end of a year.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097; // day of era, 0..=146_096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // 0..=365, from March 1st
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = (yoe + era * 400) as u32 + u32::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(secs: u64) -> String {
        String::from_utf8(format_http_date(secs).to_vec()).unwrap()
    }

    #[test]
    fn rfc_example() {
        assert_eq!(fmt(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn epoch_and_leap_days() {
        assert_eq!(fmt(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(fmt(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(fmt(1_709_208_000), "Thu, 29 Feb 2024 12:00:00 GMT");
        assert_eq!(fmt(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT");
        assert_eq!(fmt(4_107_456_000), "Sun, 28 Feb 2100 00:00:00 GMT");
        assert_eq!(fmt(1_735_689_599), "Tue, 31 Dec 2024 23:59:59 GMT");
    }

    #[test]
    fn far_future_is_clamped() {
        assert_eq!(fmt(MAX_SECS), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(fmt(u64::MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
    }

    #[test]
    fn every_day_round_trips() {
        // Walk day by day across several centuries and check that the civil
        // date advances exactly like a calendar does.
        let (mut y, mut m, mut d) = (1970u32, 1u32, 1u32);
        for days in 0..200_000u64 {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let len = match m {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    }

    #[test]
    fn header_lines_are_well_formed() {
        let lines = lines_for(784_111_777);
        assert_eq!(
            &lines[..],
            b"Server: httplite\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
        );
    }

    #[test]
    fn refresh_switches_the_thread_to_the_cached_value() {
        // Runs on its own thread, so other tests keep the clock-reading mode.
        std::thread::spawn(|| {
            refresh_date();
            // Pretend the refresh happened in 1994: the encoder must now show
            // that instead of reading the clock.
            CACHE.with(|c| {
                c.set(Cache {
                    secs: 784_111_777,
                    lines: lines_for(784_111_777),
                    driven: true,
                })
            });
            assert_eq!(&http_date_now(), b"Sun, 06 Nov 1994 08:49:37 GMT");
            refresh_date();
            assert_ne!(&http_date_now(), b"Sun, 06 Nov 1994 08:49:37 GMT");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn now_is_cached_and_well_formed() {
        let a = http_date_now();
        let b = http_date_now();
        // Both calls may straddle a second; the shape is what matters.
        for d in [a, b] {
            assert_eq!(&d[25..], b" GMT");
            assert_eq!(d[3], b',');
        }
    }
}
