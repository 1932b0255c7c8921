//! The proactor as the executor's driver (see the `driver` crate): a turn
//! is one `io_uring_enter` that submits every queued SQE and, on a block,
//! waits for a CQE, the nearest timer or the notifier's eventfd read.

use std::io;

use driver::{Driver, Notify, Wait};

use crate::{EnterGuard, Notifier, Proactor};

impl Driver for Proactor {
    type Notifier = Notifier;
    type Entered = EnterGuard;

    #[inline]
    fn enter(&self) -> EnterGuard {
        Proactor::enter(self)
    }

    #[inline]
    fn notifier(&self) -> Notifier {
        Proactor::notifier(self)
    }

    #[inline]
    fn turn(&self, wait: Wait) -> io::Result<usize> {
        Proactor::turn(self, wait == Wait::Block)
    }
}

impl Notify for Notifier {
    #[inline]
    fn notify(&self) {
        Notifier::notify(self)
    }
}
