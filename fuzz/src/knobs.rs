//! Deterministic choices (splits, limits) derived from the fuzz input.

use std::ops::Range;

/// A small PRNG (xorshift64*) seeded with a hash (FNV-1a) of the input.
#[derive(Debug, Clone)]
pub struct Knobs {
    state: u64,
}

impl Knobs {
    /// Knobs for `input`; the same input always gives the same choices.
    pub fn new(input: &[u8]) -> Knobs {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in input {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Knobs { state: h | 1 }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// One of `choices`.
    pub fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        choices[self.below(choices.len())]
    }

    /// `true` one time in `n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// Splits `0..len` into consecutive non-empty reads: all at once, byte
    /// by byte, or at random points (mostly small pieces, sometimes big).
    pub fn splits(&mut self, len: usize) -> Vec<Range<usize>> {
        let style = self.below(4);
        let mut out = Vec::new();
        let mut at = 0;
        while at < len {
            let n = match style {
                0 => len - at,
                1 => 1,
                2 => 1 + self.below(8),
                _ => {
                    let most = if self.one_in(4) { 4096 } else { 64 };
                    1 + self.below(most)
                }
            };
            let end = (at + n).min(len);
            out.push(at..end);
            at = end;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_the_input_in_order() {
        for seed in 0..200u32 {
            let input = seed.to_le_bytes();
            let mut k = Knobs::new(&input);
            let len = k.below(300);
            let splits = k.splits(len);
            let mut at = 0;
            for r in &splits {
                assert_eq!(r.start, at);
                assert!(r.end > r.start);
                at = r.end;
            }
            assert_eq!(at, len);
        }
        assert_eq!(Knobs::new(b"x").next_u64(), Knobs::new(b"x").next_u64());
    }
}
