//! The fork parent's TLS configuration, which its children copy at the
//! fork, and its session-ticket keys, which it lets roll before forking so
//! that every child inherits keys that are current and take any ticket
//! another child issued.

use std::time::{Duration, Instant};

use super::Parent;

/// How often, at most, the parent asks its ticketers to roll their keys
/// (they roll when their period, hours long, is over).
const TICKET_CHECK: Duration = Duration::from_secs(60);

/// Bytes the parent encrypts so that its ticketer (and every child's copy)
/// accepts tickets up to that length: more than a session's ticket holds
/// without client certificates (a 48-byte secret, the SNI name and ALPN
/// protocol of at most 255 bytes each, and a few small fields).
const TICKET_PRIMER: [u8; 1024] = [0; 1024];

impl Parent {
    /// Serves HTTPS with `tls` (the children's `ctx.tls`): SIGHUP reads the
    /// certificate files again here, so every child forked from then on
    /// handshakes with the new pair (children already running keep theirs,
    /// as open connections do under the other designs).
    ///
    /// The session-ticket keys live in each process's copy of the ticketer,
    /// and two things in it change only when that process encrypts a
    /// ticket: the keys roll when their period is over (rustls's
    /// `TicketRotator`), and the ticketer refuses to decrypt a ticket longer
    /// than the longest it has encrypted itself (aws-lc-rs's RFC 5077
    /// ticketer). A child lives for one connection, so left alone every
    /// child would refuse every ticket it had not issued, and would start
    /// from the start-up keys forever. So the parent encrypts a ticket's
    /// worth of bytes (1 KiB) before it forks, at most once a
    /// minute: each child inherits keys that have rolled on time and that
    /// take any ticket another child issued (the session-ID cache, by
    /// contrast, is each child's own and dies with it: see docs/tls.md).
    pub fn tls(&mut self, tls: crate::tls::TlsByListener) {
        self.tls = tls;
    }

    /// Lets the ticketers roll their keys if they are due (see
    /// [`Parent::tls`]).
    pub(super) fn roll_ticket_keys(&mut self) {
        if !self.tls.any()
            || self
                .tickets_rolled
                .is_some_and(|t| t.elapsed() < TICKET_CHECK)
        {
            return;
        }
        self.tickets_rolled = Some(Instant::now());
        for tls in [&self.tls.public, &self.tls.admin].into_iter().flatten() {
            // Encrypting takes the rotator's path that rolls, and sets the
            // current key's longest ticket.
            let _ = tls.config.ticketer.encrypt(&TICKET_PRIMER);
        }
    }
}
