//! Interest (what a task waits for) and readiness (what the kernel said).

use std::fmt;

/// Which direction a task waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interest {
    /// Waiting until a read will not return `EAGAIN`.
    Readable,
    /// Waiting until a write will not return `EAGAIN`.
    Writable,
}

/// Readiness bits the reactor keeps per fd, set by epoll events and cleared
/// only when an operation returns `EAGAIN`.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Readiness(u8);

impl Readiness {
    /// No readiness.
    pub const EMPTY: Readiness = Readiness(0);
    /// Bytes (or a FIN) are waiting to be read.
    pub const READABLE: Readiness = Readiness(1);
    /// Buffer space is free for writing.
    pub const WRITABLE: Readiness = Readiness(2);
    /// The peer closed its sending side: reads return EOF from now on.
    pub const READ_CLOSED: Readiness = Readiness(4);
    /// Both directions closed (`EPOLLHUP`): writes will fail from now on.
    pub const WRITE_CLOSED: Readiness = Readiness(8);
    /// An error is pending (`EPOLLERR`): the next operation reports it.
    pub const ERROR: Readiness = Readiness(16);

    /// Bits that make a read worth trying. The closed and error bits are
    /// sticky: the operation will return EOF or the error, never `EAGAIN`.
    const READ_MASK: u8 = 1 | 4 | 8 | 16;
    /// Bits that make a write worth trying.
    const WRITE_MASK: u8 = 2 | 8 | 16;

    /// The bits an epoll event sets: one table lookup, since it runs for
    /// every event of every turn.
    #[inline]
    pub fn from_epoll(flags: u32) -> Readiness {
        // The five low epoll bits (IN, PRI, OUT, ERR, HUP) index the table
        // directly; RDHUP (0x2000) is folded into the sixth index bit.
        let index = (flags & 0x1f) | ((flags & libc::EPOLLRDHUP as u32) >> 8);
        Readiness(FROM_EPOLL[index as usize])
    }

    /// The readiness for a table index (see [`Readiness::from_epoll`]).
    const fn from_index(index: u32) -> u8 {
        let mut r = 0;
        if index & (libc::EPOLLIN | libc::EPOLLPRI) as u32 != 0 {
            r |= Self::READABLE.0;
        }
        if index & libc::EPOLLOUT as u32 != 0 {
            r |= Self::WRITABLE.0;
        }
        if index & 0x20 != 0 {
            r |= Self::READ_CLOSED.0;
        }
        if index & libc::EPOLLHUP as u32 != 0 {
            r |= Self::READ_CLOSED.0 | Self::WRITE_CLOSED.0;
        }
        if index & libc::EPOLLERR as u32 != 0 {
            r |= Self::ERROR.0;
        }
        r
    }

    /// Whether an operation in `interest`'s direction is worth trying now.
    #[inline]
    pub fn is_ready_for(self, interest: Interest) -> bool {
        let mask = match interest {
            Interest::Readable => Self::READ_MASK,
            Interest::Writable => Self::WRITE_MASK,
        };
        self.0 & mask != 0
    }

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Readiness) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no bit is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether the event is a hang-up or error, which wakes both directions.
    pub fn is_closed_or_error(self) -> bool {
        self.0 & (Self::READ_CLOSED.0 | Self::WRITE_CLOSED.0 | Self::ERROR.0) != 0
    }

    /// The bit an `EAGAIN` in `interest`'s direction clears.
    pub fn clear_bit(interest: Interest) -> Readiness {
        match interest {
            Interest::Readable => Self::READABLE,
            Interest::Writable => Self::WRITABLE,
        }
    }

    pub(crate) fn insert(&mut self, other: Readiness) {
        self.0 |= other.0;
    }

    pub(crate) fn remove(&mut self, other: Readiness) {
        self.0 &= !other.0;
    }
}

/// [`Readiness::from_epoll`]'s table, built at compile time.
static FROM_EPOLL: [u8; 64] = {
    let mut table = [0; 64];
    let mut i = 0;
    while i < 64 {
        table[i] = Readiness::from_index(i as u32);
        i += 1;
    }
    table
};

impl fmt::Debug for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 5] = [
            "READABLE",
            "WRITABLE",
            "READ_CLOSED",
            "WRITE_CLOSED",
            "ERROR",
        ];
        let mut first = true;
        for (i, name) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("EMPTY")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hangup_makes_both_directions_ready() {
        let r = Readiness::from_epoll(libc::EPOLLHUP as u32);
        assert!(r.is_ready_for(Interest::Readable));
        assert!(r.is_ready_for(Interest::Writable));
        assert!(r.is_closed_or_error());
    }

    #[test]
    fn rdhup_is_read_side_only() {
        let r = Readiness::from_epoll(libc::EPOLLRDHUP as u32);
        assert!(r.is_ready_for(Interest::Readable));
        assert!(!r.is_ready_for(Interest::Writable));
    }

    #[test]
    fn the_table_matches_every_flag() {
        let cases = [
            (libc::EPOLLIN, Readiness::READABLE),
            (libc::EPOLLPRI, Readiness::READABLE),
            (libc::EPOLLOUT, Readiness::WRITABLE),
            (libc::EPOLLRDHUP, Readiness::READ_CLOSED),
            (libc::EPOLLERR, Readiness::ERROR),
        ];
        for (flag, want) in cases {
            assert_eq!(Readiness::from_epoll(flag as u32), want, "{flag:#x}");
        }
        let all =
            (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR)
                as u32;
        assert_eq!(Readiness::from_epoll(all).0, 31);
        // Bits epoll may add that carry no readiness change nothing.
        assert_eq!(
            Readiness::from_epoll(libc::EPOLLIN as u32 | libc::EPOLLET as u32),
            Readiness::READABLE
        );
    }

    #[test]
    fn clearing_keeps_sticky_bits() {
        let mut r = Readiness::from_epoll((libc::EPOLLIN | libc::EPOLLRDHUP) as u32);
        r.remove(Readiness::clear_bit(Interest::Readable));
        assert!(
            r.is_ready_for(Interest::Readable),
            "EOF is still to be read"
        );
        assert_eq!(format!("{r:?}"), "READ_CLOSED");
    }
}
