//! Upstream states in memory that `--runtime fork`'s processes share: one
//! anonymous `MAP_SHARED` mapping made before the first fork, handed out
//! slot by slot as the routes are parsed at start-up, so that every child
//! counts into the same counters, sees the same health, and takes the
//! same turns (a child's own copy would start from the parent's, and its
//! lessons would die with it).

use std::sync::Mutex;
use std::sync::atomic::Ordering::Relaxed;

use site::reverse_proxy::UpstreamState;

/// Room for this many upstreams over all routes.
const SLOTS: usize = 1024;

struct Region {
    base: *mut UpstreamState,
    used: usize,
}

// SAFETY: the region is only a base pointer and a count, guarded by the
// mutex below; the states it points to are atomics (`Sync`).
unsafe impl Send for Region {}

static REGION: Mutex<Option<Region>> = Mutex::new(None);

/// A new state in the shared mapping (a [`site::reverse_proxy::Place`]).
pub fn place() -> Result<&'static UpstreamState, String> {
    let mut region = REGION.lock().unwrap_or_else(|e| e.into_inner());
    if region.is_none() {
        *region = Some(map()?);
    }
    let r = region.as_mut().expect("mapped above");
    if r.used == SLOTS {
        return Err(format!(
            "more than {SLOTS} upstreams: too many for --runtime fork's shared counters"
        ));
    }
    // SAFETY: `used < SLOTS`, so the slot is inside the mapping, which is
    // never unmapped; the mapping is zero-filled, and an all-zero
    // `UpstreamState` is its `Default` (atomics, every one 0); each slot
    // is handed out once.
    let state = unsafe { &*r.base.add(r.used) };
    r.used += 1;
    debug_assert_eq!(state.stats.requests.load(Relaxed), 0);
    Ok(state)
}

fn map() -> Result<Region, String> {
    let p = crate::fork::shared::map_shared(SLOTS * std::mem::size_of::<UpstreamState>())
        .map_err(|e| format!("cannot map the upstreams' shared counters: {e}"))?;
    Ok(Region {
        base: p.cast().as_ptr(),
        used: 0,
    })
}
