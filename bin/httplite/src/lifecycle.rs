//! The server's life after start-up: serving, draining (the lame-duck
//! period), stopping; and the copies of the listening sockets that a
//! binary upgrade hands to the next process.
//!
//! ```text
//!  serving ──SIGTERM/SIGINT/quit──▶ draining ──--drain-delay──▶ stopping
//!     │      health 200               health 503, still          stop accepting,
//!     │                               accepting and serving      finish in-flight
//!     └──SIGUSR2, new process ready─────────────────────────────▶ (within
//!                                                                --shutdown-timeout)
//! ```
//!
//! During the drain delay nothing changes for clients except the health
//! answer: a balancer that checks `/_httplite/health` sees 503 and stops
//! sending new requests, so that by the time the listener closes no client
//! is being sent here. A second signal ends the delay at once.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use dispatch::{Listener, ShutdownHandle};
use site::stats::Stats;

/// Shared by the signal thread, the console and the upgrade.
#[derive(Debug)]
pub struct Lifecycle {
    stats: Arc<Stats>,
    shutdown: ShutdownHandle,
    grace: Duration,
    drain_delay: Duration,
    /// Copies of the listening sockets for an upgrade; dropped when
    /// stopping, so that closing the listeners refuses new clients.
    handover: Mutex<Option<Vec<Listener>>>,
    /// Set to end the drain delay early.
    skip_delay: (Mutex<bool>, Condvar),
    /// Held while deciding between a stop and an upgrade's hand-over, so
    /// that exactly one of them comes first.
    transition: Mutex<()>,
    quiet: bool,
}

impl Lifecycle {
    /// `handover`: copies of the listeners, for an upgrade to pass on (see
    /// [`Lifecycle::take_handover`]).
    pub fn new(
        stats: Arc<Stats>,
        shutdown: ShutdownHandle,
        grace: Duration,
        drain_delay: Duration,
        handover: Vec<Listener>,
        quiet: bool,
    ) -> Arc<Lifecycle> {
        Arc::new(Lifecycle {
            stats,
            shutdown,
            grace,
            drain_delay,
            handover: Mutex::new(Some(handover)),
            skip_delay: (Mutex::new(false), Condvar::new()),
            transition: Mutex::new(()),
            quiet,
        })
    }

    /// Whether stopping (the graceful shutdown) has begun.
    pub fn is_stopping(&self) -> bool {
        self.shutdown.is_shutdown_requested()
    }

    /// Whether draining (or stopping) has begun.
    pub fn is_draining(&self) -> bool {
        self.stats.is_draining()
    }

    /// SIGTERM, SIGINT, the console's `quit`: the first call starts the
    /// drain delay (health 503), then the graceful shutdown; a later call
    /// ends the delay at once. Returns at once.
    pub fn drain(self: &Arc<Self>) {
        {
            let _decide = self.transition.lock().unwrap_or_else(|e| e.into_inner());
            if self.is_draining() {
                drop(_decide);
                self.end_delay();
                return;
            }
            self.stats.set_draining();
        }
        if self.drain_delay.is_zero() {
            self.stop();
            return;
        }
        if !self.quiet {
            eprintln!(
                "httplite: draining: health checks now fail; stopping in {:?}",
                self.drain_delay
            );
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("httplite-drain".into())
            .spawn(move || {
                let (lock, cv) = &me.skip_delay;
                let skip = lock.lock().unwrap_or_else(|e| e.into_inner());
                let _ = cv
                    .wait_timeout_while(skip, me.drain_delay, |skip| !*skip)
                    .unwrap_or_else(|e| e.into_inner());
                me.stop();
            });
        if spawned.is_err() {
            self.stop();
        }
    }

    /// Stops at once, without the drain delay (the upgrade: the new
    /// process already accepts on the same sockets).
    pub fn stop(&self) {
        self.stats.set_draining();
        // The flag first: an upgrade that fails from now on closes its
        // copies instead of putting them back.
        self.shutdown.shutdown(self.grace);
        drop(self.take_handover());
    }

    /// Hands over to a new process that accepts on the same sockets (an
    /// upgrade): stops accepting at once, leaving what is queued to it,
    /// and drains.
    pub fn hand_over(&self) {
        self.stats.set_draining();
        self.shutdown.hand_over(self.grace);
        drop(self.take_handover());
    }

    /// [`Lifecycle::hand_over`] unless a stop (or another hand-over) has
    /// begun; false then, and nothing is done (see `crate::upgrade`).
    pub fn hand_over_unless_draining(&self) -> bool {
        let _decide = self.transition.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_draining() {
            return false;
        }
        self.hand_over();
        true
    }

    fn end_delay(&self) {
        let (lock, cv) = &self.skip_delay;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }

    /// The listening sockets' copies, for an upgrade to pass on; `None`
    /// once stopping (or while another upgrade holds them).
    pub fn take_handover(&self) -> Option<Vec<Listener>> {
        self.handover
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Puts the copies back after an upgrade that failed (unless stopping
    /// began meanwhile, in which case they are closed).
    pub fn return_handover(&self, listeners: Vec<Listener>) {
        let mut slot = self.handover.lock().unwrap_or_else(|e| e.into_inner());
        if !self.shutdown.is_shutdown_requested() {
            *slot = Some(listeners);
        }
    }
}
