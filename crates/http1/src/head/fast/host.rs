//! The `Host` value a connection's fast path checked last, so that the
//! next request's equal value is taken on a compare instead of a check.

use super::{load8, load16};

/// The last `Host` value a connection's fast path found valid, with the CR
/// after it: its first 16 bytes as a word, masked when the value is
/// shorter, and up to [`HOST_MORE`] more words. A load, an `and` and a
/// compare tell whether the next request's value is the same, and where
/// its line ends, without scanning it; a longer value compares its other
/// words out of the header loop's way. Only a value after exactly one
/// space is taken this way (every client sends that); one longer than
/// `16 * (1 + HOST_MORE) - 1` bytes is not kept, and is checked every
/// time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostCache {
    word: u128,
    mask: u128,
    /// Where the CR is, counted from the value's start.
    cr: usize,
    /// How many of `more` the value and its CR go on into.
    more_len: usize,
    /// The words after the first, the last masked with `more_mask`.
    more: [u128; HOST_MORE],
    more_mask: u128,
}

/// The words a [`HostCache`] holds after the first: values up to 63
/// bytes, which host names with a port nearly always are.
const HOST_MORE: usize = 3;

impl Default for HostCache {
    /// Empty: no bytes masked in can equal a word of 1.
    fn default() -> HostCache {
        HostCache {
            word: 1,
            mask: 0,
            cr: 0,
            more_len: 0,
            more: [0; HOST_MORE],
            more_mask: 0,
        }
    }
}

impl HostCache {
    /// Where the CR of the value after `colon` is, if the value is the one
    /// remembered, after one space.
    #[inline(always)]
    pub(super) fn hit(&self, b: &[u8], colon: usize) -> Option<usize> {
        let start = colon + 2;
        // A CR the words expect past the end of `b` meets a zero byte.
        let word = load16(b, start)?;
        (b[colon + 1] == b' '
            && word & self.mask == self.word
            && (self.more_len == 0 || self.more_match(b, start)))
        .then_some(start + self.cr)
    }

    /// Where the next line starts, if the line at `at` is `Host: ` (any
    /// case) and the value remembered, then CRLF. For the first header
    /// line, before the loop: the second word is compared in line.
    #[inline(always)]
    pub(super) fn first_line(&self, b: &[u8], at: usize) -> Option<usize> {
        const NAME: u64 = u64::from_le_bytes(*b"host: \0\0");
        // Bit 5 of the four letters, and the six bytes of the name.
        const FOLD: u64 = 0x2020_2020;
        const MASK: u64 = 0xffff_ffff_ffff;
        if (load8(b, at)? | FOLD) & MASK != NAME {
            return None;
        }
        let start = at + 6;
        let word = load16(b, start)?;
        let same = word & self.mask == self.word
            && match self.more_len {
                0 => true,
                1 => self.second_word_matches(b, start),
                _ => self.more_match(b, start),
            };
        let cr = start + self.cr;
        (same && b.get(cr + 1) == Some(&b'\n')).then_some(cr + 2)
    }

    /// Whether a value of one word more (up to 31 bytes with its CR)
    /// matches in its second word, from `start + 16`.
    #[inline(always)]
    fn second_word_matches(&self, b: &[u8], start: usize) -> bool {
        load16(b, start + 16).map(|w| w & self.more_mask) == Some(self.more[0])
    }

    /// Whether the words after the first match those from `start + 16`.
    /// Out of line: the call costs the header loop a reload of its vector
    /// constants, which only heads with a long value pay; comparing in
    /// line would cost every head registers.
    #[cold]
    #[inline(never)]
    fn more_match(&self, b: &[u8], start: usize) -> bool {
        // A value of up to 31 bytes (a host name and port, most often)
        // has one word more: one compare, without the loop's setup.
        if self.more_len == 1 {
            return self.second_word_matches(b, start);
        }
        let last = self.more_len - 1;
        self.more
            .iter()
            .take(last)
            .enumerate()
            .all(|(i, &w)| load16(b, start + 16 * (i + 1)) == Some(w))
            && load16(b, start + 16 * self.more_len).map(|w| w & self.more_mask)
                == self.more.get(last).copied()
    }

    /// Remembers the valid value `b[at..cr]`.
    #[inline(always)]
    pub(super) fn remember(&mut self, b: &[u8], at: usize, cr: usize) {
        let bytes = cr + 1 - at;
        let (Some(word), true) = (load16(b, at), bytes <= 16 * (1 + HOST_MORE)) else {
            return;
        };
        if bytes <= 16 {
            self.mask = u128::MAX >> (8 * (16 - bytes));
            self.more_len = 0;
        } else {
            self.remember_more(b, at, bytes);
            self.mask = u128::MAX;
        }
        self.word = word & self.mask;
        self.cr = cr - at;
    }

    /// Remembers the words after the first of a value of `bytes` bytes
    /// (its CR included), from 17 up to `16 * (1 + HOST_MORE)`.
    #[cold]
    #[inline(never)]
    fn remember_more(&mut self, b: &[u8], at: usize, bytes: usize) {
        let more_len = bytes.div_ceil(16) - 1;
        for i in 0..more_len {
            // The CR is in `b`, so each of these words starts inside it.
            self.more[i] = load16(b, at + 16 * (i + 1)).unwrap_or(0);
        }
        self.more_mask = u128::MAX >> (8 * (16 * (more_len + 1) - bytes));
        self.more[more_len - 1] &= self.more_mask;
        self.more_len = more_len;
    }
}
