//! A request's headers: the index of where its header lines start, and
//! reading each line's name and value back from the head when asked.

use super::{INLINE_HEADERS, Request};

/// Where the header lines are: the start of each of the first
/// [`INLINE_HEADERS`] lines, and the start of the empty line that ends the
/// header section. Each line is `name:value`, optionally padded with spaces
/// or tabs, ended by CRLF or LF: both parsers guarantee that shape, so a
/// line's start is all that needs keeping.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct HeaderIndex {
    count: u16,
    end: u16,
    starts: [u16; INLINE_HEADERS],
}

impl HeaderIndex {
    #[inline]
    pub(crate) fn new() -> HeaderIndex {
        HeaderIndex {
            count: 0,
            end: 0,
            starts: [0; INLINE_HEADERS],
        }
    }

    /// An index of `count` lines, the first of which start at `starts`,
    /// followed by the empty line at `end`. Callers guarantee what
    /// [`push`](HeaderIndex::push) and [`set_end`](HeaderIndex::set_end) do.
    #[inline(always)]
    pub(crate) fn from_parts(
        count: usize,
        starts: [u16; INLINE_HEADERS],
        end: usize,
    ) -> HeaderIndex {
        HeaderIndex {
            count: count as u16,
            end: end as u16,
            starts,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Adds the line starting at `start`. Callers guarantee that offsets fit
    /// `u16` and that there are at most [`MAX_HEADERS_CAP`] lines (the
    /// limits are checked first).
    ///
    /// [`MAX_HEADERS_CAP`]: crate::MAX_HEADERS_CAP
    #[inline]
    pub(crate) fn push(&mut self, start: usize) {
        if let Some(slot) = self.starts.get_mut(usize::from(self.count)) {
            *slot = start as u16;
        }
        self.count += 1;
    }

    /// Records where the empty line after the last header starts.
    #[inline]
    pub(crate) fn set_end(&mut self, end: usize) {
        self.end = end as u16;
    }
}

/// The header lines of a head, in order, each with its line ending.
#[derive(Clone, Debug)]
struct Lines<'a> {
    head: &'a [u8],
    index: &'a HeaderIndex,
    next: usize,
    /// Where the next line starts once past the indexed ones.
    pos: usize,
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let i = self.next;
        if i >= self.index.len() {
            return None;
        }
        let start = match self.index.starts.get(i) {
            Some(&start) => usize::from(start),
            None => self.pos,
        };
        let end = match self.index.starts.get(i + 1) {
            _ if i + 1 == self.index.len() => usize::from(self.index.end),
            Some(&next) => usize::from(next),
            None => {
                let rest = self.head.get(start..).unwrap_or_default();
                rest.iter()
                    .position(|&b| b == b'\n')
                    .map_or(self.head.len(), |lf| start + lf + 1)
            }
        };
        self.next = i + 1;
        self.pos = end;
        Some(self.head.get(start..end).unwrap_or_default())
    }
}

/// The value of a header line, given what follows its colon: without the
/// line ending and without surrounding spaces and tabs.
#[inline]
fn value_of(after_colon: &[u8]) -> &[u8] {
    let mut v = after_colon;
    if let [rest @ .., b'\n'] = v {
        v = rest;
    }
    if let [rest @ .., b'\r'] = v {
        v = rest;
    }
    crate::framing::trim(v)
}

impl Request {
    /// The value of the first header called `name` (ASCII case-insensitive).
    ///
    /// Values are bytes because HTTP allows non-ASCII (obs-text) in them;
    /// leading and trailing whitespace is already trimmed.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        let name = name.as_bytes();
        let n = name.len();
        self.lines()
            .find(|line| {
                // Names hold no colon, so the one after `n` bytes ends the
                // line's name exactly when `name` has none either.
                line.get(n) == Some(&b':')
                    && line[..n].eq_ignore_ascii_case(name)
                    && !name.contains(&b':')
            })
            .map(|line| value_of(&line[n + 1..]))
    }

    /// All headers in the order received, repeated names included.
    pub fn headers(&self) -> Headers<'_> {
        Headers {
            lines: self.lines(),
        }
    }

    fn lines(&self) -> Lines<'_> {
        Lines {
            head: &self.head,
            index: &self.headers,
            next: 0,
            pos: 0,
        }
    }
}

/// Iterator over a request's headers as `(name, value)`; see
/// [`Request::headers`].
#[derive(Clone, Debug)]
pub struct Headers<'a> {
    lines: Lines<'a>,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a str, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let line = self.lines.next()?;
        // Every line has a colon after a token name; should one not, its
        // name is empty rather than a piece of the value. Checked, not
        // assumed, UTF-8: names are short, and this is not the hot path.
        let colon = line.iter().position(|&b| b == b':').unwrap_or(0);
        let value = value_of(line.get(colon + 1..).unwrap_or_default());
        let name = std::str::from_utf8(&line[..colon]).unwrap_or_default();
        Some((name, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.lines.index.len() - self.lines.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Headers<'_> {}
