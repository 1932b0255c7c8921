//! Byte-level scanning for the fast path: the classes of bytes its runs
//! stop at, the search for the first such byte 16 bytes at a time, and
//! word loads that read the bytes past a buffer's end as zero.

/// Whether `b` is in `lo..lo + n` (`n` below 128), as one add and one
/// signed compare: SSE2 has no unsigned byte compare, and an unsigned
/// range test would take it several operations per 16 bytes. Adding
/// `0x80 - lo` moves the range to the bottom of the signed bytes.
#[inline(always)]
fn in_range(b: u8, lo: u8, n: u8) -> bool {
    (b.wrapping_add(0x80u8.wrapping_sub(lo)) as i8) < (n as i8).wrapping_sub(-128i8)
}

/// Where a header name's common run ends: anything but ASCII letters and
/// `-`. Other token characters (digits among them) are checked one by one
/// where they stop the run. Setting bit 5 maps exactly the letters into
/// `a..=z`: a few vector operations and constants, which the header loop
/// keeps in registers.
#[inline(always)]
pub(super) fn is_name_stop(b: u8) -> bool {
    !(in_range(b | 0x20, b'a', 26) || b == b'-')
}

/// Where the path ends: anything but visible ASCII, `?`, and `#` (no
/// fragment may reach a server: the general path rejects it).
#[inline(always)]
pub(super) fn is_target_stop(b: u8) -> bool {
    !in_range(b, 0x21, 0x7f - 0x21) || b == b'?' || b == b'#'
}

/// Where the query ends: anything but visible ASCII, and `#`.
#[inline(always)]
pub(super) fn is_query_stop(b: u8) -> bool {
    !in_range(b, 0x21, 0x7f - 0x21) || b == b'#'
}

/// Where the common run of a `Host` value ends: anything but letters,
/// digits, `-` and `.` (every host name and IPv4 address is made of those).
/// The port's colon stops it; anything else the general path decides.
#[inline(always)]
pub(super) fn is_host_stop(b: u8) -> bool {
    !((b | 0x20).wrapping_sub(b'a') < 26 || b.wrapping_sub(b'0') < 10 || b.wrapping_sub(b'-') < 2)
}

/// Where a run of header-value characters ends: controls (tab included,
/// the caller steps over it), `0x7f`, and the bytes from `0x80` up. Those
/// are obs-text, which httparse allows in values, and which the caller
/// steps over too: they are rare, and with them in the stop set, the test
/// is one add and one signed compare per 16 bytes (`b + 1` as a signed
/// byte is below 33 exactly for these bytes).
#[inline(always)]
pub(super) fn is_value_stop(b: u8) -> bool {
    (b.wrapping_add(1) as i8) < 33
}

/// Index and value of the first byte at or after `from` that `stop` is true
/// for; `None` if the buffer ends first.
///
/// Sixteen bytes at a time, written so that the compiler vectorizes it: the
/// test of each byte becomes a few vector compares that set each byte of a
/// 16-byte mask to `0xff` or `0`, and [`stop_bits`] gathers the mask into
/// bits. No branch per byte. Fewer than 16 bytes before the end of the
/// buffer (where every head's last line is, when the client waits for
/// its answer) are tested as the buffer's last 16 bytes, with the bits of
/// those before `from` shifted out: one more block, not a loop byte by
/// byte (nor a `memcpy` into a padded block: any call in the header loop
/// makes it reload all its vector constants on every line). Only a buffer
/// shorter than 16 bytes goes byte by byte.
#[inline(always)]
pub(super) fn find(buf: &[u8], from: usize, stop: impl Fn(u8) -> bool) -> Option<(usize, u8)> {
    let mut at = from;
    while let Some(block) = buf.get(at..).and_then(<[u8]>::first_chunk::<16>) {
        let bits = stop_bits(block, &stop);
        if bits != 0 {
            let i = bits.trailing_zeros() as usize;
            // `& 15` keeps the index visibly in bounds: no check.
            return Some((at + i, block[i & 15]));
        }
        at += 16;
    }
    if at >= buf.len() {
        return None;
    }
    if let Some(base) = buf.len().checked_sub(16) {
        // `at - base` is below 16 here: the block ends where the buffer
        // does, and `at` is in it.
        let block = buf.last_chunk::<16>()?;
        let bits = stop_bits(block, &stop) >> (at - base);
        if bits == 0 {
            return None;
        }
        let i = (at - base) + bits.trailing_zeros() as usize;
        return Some((base + i, block[i & 15]));
    }
    while let Some(&b) = buf.get(at) {
        if stop(b) {
            return Some((at, b));
        }
        at += 1;
    }
    None
}

/// Bit `i` set for each byte `block[i]` that `stop` is true for.
#[inline(always)]
pub(super) fn stop_bits(block: &[u8; 16], stop: impl Fn(u8) -> bool) -> u32 {
    let mut mask = [0u8; 16];
    for (m, &b) in mask.iter_mut().zip(block) {
        *m = 0u8.wrapping_sub(u8::from(stop(b)));
    }
    #[cfg(target_arch = "x86_64")]
    return movemask_sse2(mask);
    #[cfg(not(target_arch = "x86_64"))]
    return movemask_portable(mask);
}

/// The top bit of each byte of `mask`, gathered into the low 16 bits: SSE2's
/// `pmovmskb`, which keeps the mask in the vector register it was computed
/// in. (Without it, the mask is stored, reloaded as a `u128` and counted in
/// two halves: a dozen more instructions for every 16 bytes scanned.) SSE2
/// is part of the x86_64 baseline, so no feature detection is needed.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn movemask_sse2(mask: [u8; 16]) -> u32 {
    use std::arch::x86_64::{__m128i, _mm_movemask_epi8};
    // SAFETY: `[u8; 16]` and `__m128i` are both 16 bytes of plain data,
    // valid for any bit pattern, so the transmute is a reinterpretation
    // (which the compiler leaves in the register the mask is in). The
    // intrinsic needs SSE2, which every x86_64 target has.
    unsafe { _mm_movemask_epi8(std::mem::transmute::<[u8; 16], __m128i>(mask)) as u32 }
}

/// [`movemask_sse2`] for other targets, and for tests to compare with.
#[cfg(any(test, not(target_arch = "x86_64")))]
pub(super) fn movemask_portable(mask: [u8; 16]) -> u32 {
    mask.iter()
        .enumerate()
        .fold(0, |bits, (i, &m)| bits | u32::from(m >> 7) << i)
}

/// The 16 bytes of `b` from `at` as a little-endian word, with zero bytes
/// for those past its end (which no byte of a head is); `None` if `at` is
/// past the end or `b` is shorter than 16 bytes. Near the end, the load
/// is of `b`'s last 16 bytes, shifted: no copy, no call.
#[inline(always)]
pub(super) fn load16(b: &[u8], at: usize) -> Option<u128> {
    if let Some(bytes) = b.get(at..).and_then(<[u8]>::first_chunk::<16>) {
        return Some(u128::from_le_bytes(*bytes));
    }
    let base = b.len().checked_sub(16)?;
    // Here `at - base` is 1..=15 when `at` is inside `b`.
    (at < b.len()).then(|| {
        u128::from_le_bytes(*b.last_chunk::<16>().unwrap_or(&[0; 16])) >> (8 * (at - base))
    })
}

/// [`load16`] for 8 bytes.
#[inline(always)]
pub(super) fn load8(b: &[u8], at: usize) -> Option<u64> {
    if let Some(bytes) = b.get(at..).and_then(<[u8]>::first_chunk::<8>) {
        return Some(u64::from_le_bytes(*bytes));
    }
    let base = b.len().checked_sub(8)?;
    (at < b.len())
        .then(|| u64::from_le_bytes(*b.last_chunk::<8>().unwrap_or(&[0; 8])) >> (8 * (at - base)))
}
