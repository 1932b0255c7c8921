//! Coroutine stacks: `mmap`ed, with a guard page below, recycled through a
//! per-thread pool.
//!
//! ```text
//!   base                     base + guard                          top
//!   ├── guard page (4 KiB) ──┼───────── usable stack (64 KiB) ──────┤
//!   │ any access: SIGSEGV    │ ◀── grows down, from `top`           │
//! ```
//!
//! - **`mmap`, not `malloc`**: the kernel hands out pages lazily. A 64 KiB
//!   stack of which a coroutine touches 6 KiB costs 8 KiB of memory (two
//!   pages), not 64: the rest is address space only (`MAP_NORESERVE`).
//! - **Guard page**: the page just below the stack can never be touched, so
//!   an overflow faults at once instead of silently overwriting whatever
//!   lies below. Rust code probes every page of a large frame in order
//!   (stack probes), so no frame can jump over it. See `guard.rs` for how the
//!   fault is reported.
//! - **Two ways to make it**: `mprotect(PROT_NONE)`, the classic, splits the
//!   mapping in two, and Linux limits a process to `vm.max_map_count`
//!   (65,530 by default) mappings: about 32,000 stacks. Linux 6.13 added
//!   *guard regions*, `madvise(MADV_GUARD_INSTALL)`, which fault the same way
//!   without splitting the mapping, and neighbouring stacks even merge into
//!   one mapping. We use them when the kernel has them and fall back to
//!   `PROT_NONE` when it says `EINVAL`; `COROUTINE_GUARD=mprotect` forces the
//!   classic one. [`guard_kind`] says which is in use.
//! - **Pool**: a finished coroutine's stack goes back to its thread's pool
//!   and the next coroutine takes it: no syscall, and its pages are already
//!   faulted in. [`pool_stats`] counts both paths.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use crate::valgrind;

/// Default usable size of a coroutine stack: 64 KiB.
///
/// Why 64 KiB: a connection handler's deepest path is parsing a request head
/// (the parser's header array lives on the stack, a few KiB), formatting a
/// response, and the syscalls in between; the panic machinery adds a few KiB
/// more when a handler panics. That is well under 16 KiB. Four times that
/// leaves headroom for handlers we have not written, for `std::fmt` and for
/// debug builds, whose frames are several times larger. It costs nothing
/// extra in memory: untouched pages are never backed, so a coroutine that
/// uses 8 KiB costs 8 KiB of RAM whatever the size. Measure instead of
/// guessing: turn on [`crate::Builder::stack_watermarks`] (or set
/// `COROUTINE_WATERMARKS=1`) and read the high-water marks.
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;

/// Stacks kept per thread (per size) by default; more are unmapped.
pub const DEFAULT_POOL_CAPACITY: usize = 1024;

/// `MADV_GUARD_INSTALL` from Linux's uapi (6.13+; not yet in `libc`).
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// How guard pages are made (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardKind {
    /// `madvise(MADV_GUARD_INSTALL)`: a guard region inside the mapping.
    GuardRegion,
    /// `mprotect(PROT_NONE)`: a separate inaccessible mapping.
    ProtNone,
}

const KIND_UNKNOWN: u8 = 0;
const KIND_REGION: u8 = 1;
const KIND_PROT_NONE: u8 = 2;
static GUARD_KIND: AtomicU8 = AtomicU8::new(KIND_UNKNOWN);

/// How this process makes guard pages. Decided on the first stack: the kernel
/// is asked for a guard region and falls back to `PROT_NONE` if it has none.
pub fn guard_kind() -> GuardKind {
    if GUARD_KIND.load(Ordering::Relaxed) == KIND_UNKNOWN
        && std::env::var_os("COROUTINE_GUARD").is_some_and(|v| v == "mprotect")
    {
        GUARD_KIND.store(KIND_PROT_NONE, Ordering::Relaxed);
    }
    match GUARD_KIND.load(Ordering::Relaxed) {
        KIND_PROT_NONE => GuardKind::ProtNone,
        _ => GuardKind::GuardRegion,
    }
}

/// The system page size.
pub fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let p = PAGE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no memory arguments.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if p > 0 { p as usize } else { 4096 };
    PAGE.store(p, Ordering::Relaxed);
    p
}

/// One mapped stack with its guard page. Unmapped on drop.
pub(crate) struct Stack {
    /// Start of the mapping: the guard page.
    base: NonNull<u8>,
    /// Length of the whole mapping, guard included.
    len: usize,
    /// Length of the guard (one page). Four bytes, like the next field, so
    /// that the two share a word: every live coroutine's slot holds a
    /// `Stack`.
    guard: u32,
    /// Valgrind's id for this stack (its client request returns an
    /// `unsigned`).
    valgrind_id: u32,
    /// Watermark bookkeeping: below this address the fill pattern is known
    /// to be intact (0: nothing is known). See `watermark.rs`.
    pub(crate) pattern_intact_below: usize,
}

impl Stack {
    /// Maps a stack of at least `size` usable bytes (rounded up to pages,
    /// at least two) with a guard page below it.
    pub(crate) fn new(size: usize) -> io::Result<Stack> {
        let page = page_size();
        let usable = size.max(2 * page).next_multiple_of(page);
        let len = usable + page;
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).expect("mmap returned null");
        let stack = Stack {
            base,
            len,
            guard: u32::try_from(page).expect("a page fits in u32"),
            valgrind_id: 0,
            pattern_intact_below: 0,
        };
        // From here on, dropping `stack` unmaps it.
        stack.install_guard()?;
        // Huge pages would turn every touched stack into 2 MiB of memory.
        // (MAP_STACK implies this on Linux 6.7+; older kernels need asking.)
        // SAFETY: advice on our own mapping; failure only means no effect.
        unsafe { libc::madvise(ptr, len, libc::MADV_NOHUGEPAGE) };
        let mut stack = stack;
        stack.valgrind_id = valgrind::stack_register(stack.bottom(), stack.top()) as u32;
        Ok(stack)
    }

    fn install_guard(&self) -> io::Result<()> {
        let ptr = self.base.as_ptr().cast();
        if guard_kind() == GuardKind::GuardRegion {
            // SAFETY: the first page of our own mapping; it holds nothing yet.
            if unsafe { libc::madvise(ptr, self.guard as usize, MADV_GUARD_INSTALL) } == 0 {
                GUARD_KIND.store(KIND_REGION, Ordering::Relaxed);
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINVAL) {
                return Err(err);
            }
            // An older kernel: use PROT_NONE from now on.
            GUARD_KIND.store(KIND_PROT_NONE, Ordering::Relaxed);
        }
        // SAFETY: as above.
        if unsafe { libc::mprotect(ptr, self.guard as usize, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// One past the highest usable byte (16-aligned: page-aligned).
    pub(crate) fn top(&self) -> *mut u8 {
        // SAFETY: one past the end of our mapping.
        unsafe { self.base.as_ptr().add(self.len) }
    }

    /// The lowest usable byte, just above the guard page.
    pub(crate) fn bottom(&self) -> *mut u8 {
        // SAFETY: inside our mapping.
        unsafe { self.base.as_ptr().add(self.guard as usize) }
    }

    /// Usable bytes.
    pub(crate) fn size(&self) -> usize {
        self.len - self.guard as usize
    }

    /// The guard page's address range.
    pub(crate) fn guard_range(&self) -> Range<usize> {
        let b = self.base.as_ptr() as usize;
        b..b + self.guard as usize
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        valgrind::stack_deregister(self.valgrind_id as usize);
        // SAFETY: we own the mapping and nothing runs on it any more (a stack
        // is dropped only once its coroutine has finished).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        bump(|s| &s.munmaps);
    }
}

impl fmt::Debug for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stack({:p}..{:p})", self.bottom(), self.top())
    }
}

/// Counters of this thread's stack pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Stacks mapped (`mmap` calls) on this thread.
    pub mmaps: u64,
    /// Stacks unmapped.
    pub munmaps: u64,
    /// Stacks handed out from the pool, with no syscall.
    pub reuses: u64,
    /// Stacks waiting in the pool now.
    pub cached: usize,
}

struct Counters {
    mmaps: Cell<u64>,
    munmaps: Cell<u64>,
    reuses: Cell<u64>,
}

struct Pool {
    /// Free stacks by usable size (a runtime uses one size; rarely two).
    free: Vec<(usize, Vec<Stack>)>,
    capacity: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool {
            free: Vec::new(),
            capacity: DEFAULT_POOL_CAPACITY,
        })
    };
    // Separate from the pool, and with no destructor, so that stacks
    // dropped while the pool itself is being destroyed can still count.
    static STATS: Counters = const {
        Counters {
            mmaps: Cell::new(0),
            munmaps: Cell::new(0),
            reuses: Cell::new(0),
        }
    };
}

fn bump(counter: impl Fn(&Counters) -> &Cell<u64>) {
    let _ = STATS.try_with(|s| {
        let c = counter(s);
        c.set(c.get() + 1);
    });
}

/// A stack of `size` usable bytes (rounded as [`Stack::new`] does): from
/// this thread's pool if it has one, otherwise freshly mapped.
pub(crate) fn take(size: usize) -> io::Result<Stack> {
    let page = page_size();
    let size = size.max(2 * page).next_multiple_of(page);
    let reused = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        let i = p.free.iter().position(|(s, _)| *s == size)?;
        p.free[i].1.pop()
    });
    if let Ok(Some(stack)) = reused {
        bump(|s| &s.reuses);
        return Ok(stack);
    }
    let stack = Stack::new(size)?;
    bump(|s| &s.mmaps);
    Ok(stack)
}

/// Returns a stack to this thread's pool (or unmaps it if the pool is full
/// or the thread is exiting).
pub(crate) fn give(stack: Stack) {
    let size = stack.size();
    let mut slot = Some(stack);
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        let capacity = p.capacity;
        let i = match p.free.iter().position(|(s, _)| *s == size) {
            Some(i) => i,
            None => {
                p.free.push((size, Vec::new()));
                p.free.len() - 1
            }
        };
        let list = &mut p.free[i].1;
        if list.len() < capacity {
            list.extend(slot.take());
        }
    });
    // Pool full or thread exiting: unmapped here, outside the borrow.
    drop(slot);
}

/// Counters of the calling thread's stack pool.
pub fn pool_stats() -> PoolStats {
    let cached = POOL.with(|p| p.borrow().free.iter().map(|(_, l)| l.len()).sum());
    STATS.with(|s| PoolStats {
        mmaps: s.mmaps.get(),
        munmaps: s.munmaps.get(),
        reuses: s.reuses.get(),
        cached,
    })
}

/// Sets how many free stacks (per size) this thread keeps; unmaps the excess.
pub fn set_pool_capacity(capacity: usize) {
    let excess: Vec<Stack> = POOL.with(|p| {
        let mut p = p.borrow_mut();
        p.capacity = capacity;
        p.free
            .iter_mut()
            .flat_map(|(_, l)| l.drain(capacity.min(l.len())..))
            .collect()
    });
    drop(excess);
}
