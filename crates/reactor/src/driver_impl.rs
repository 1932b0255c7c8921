//! The reactor as the executor's driver (see the `driver` crate): a turn is
//! one `epoll_wait`, a block waits until an event, the nearest timer or the
//! eventfd.

use std::io;
use std::time::Duration;

use driver::{Driver, Notify, Wait};

use crate::{EnterGuard, Notifier, Reactor};

impl Driver for Reactor {
    type Notifier = Notifier;
    type Entered = EnterGuard;

    #[inline]
    fn enter(&self) -> EnterGuard {
        Reactor::enter(self)
    }

    #[inline]
    fn notifier(&self) -> Notifier {
        Reactor::notifier(self)
    }

    #[inline]
    fn turn(&self, wait: Wait) -> io::Result<usize> {
        let timeout = match wait {
            Wait::Block => None,
            Wait::Peek => Some(Duration::ZERO),
        };
        Reactor::turn(self, timeout)
    }
}

impl Notify for Notifier {
    #[inline]
    fn notify(&self) {
        Notifier::notify(self)
    }
}
