//! Valgrind client requests, so that memcheck knows our stacks are stacks.
//!
//! Memcheck tracks the stack pointer: a sudden jump of `rsp` by megabytes
//! looks like an enormous allocation or a stack overflow, and it warns
//! ("client switching stacks?"). `VALGRIND_STACK_REGISTER` tells it which
//! ranges are stacks, so a switch between them is recognised as one.
//!
//! A client request is a magic instruction sequence that does nothing on a
//! real CPU (rotations that add up to a full turn, then an exchange of a
//! register with itself) and that valgrind's JIT recognises. So these
//! functions cost a handful of instructions natively and need no valgrind
//! headers or library; the numbers come from `valgrind/valgrind.h`.

/// `VG_USERREQ__STACK_REGISTER`.
const STACK_REGISTER: usize = 0x1501;
/// `VG_USERREQ__STACK_DEREGISTER`.
const STACK_DEREGISTER: usize = 0x1502;

/// Memcheck's `VALGRIND_MAKE_MEM_DEFINED`: `VG_USERREQ_TOOL_BASE('M','C') + 2`.
const MAKE_MEM_DEFINED: usize = (((b'M' as usize) << 24) | ((b'C' as usize) << 16)) + 2;

/// Tells memcheck that `[ptr, ptr + len)` may be read and written. The
/// stack watermarks fill and scan the unused part of a stack, below its
/// stack pointer, which memcheck otherwise treats as out of bounds.
pub(crate) fn make_mem_defined(ptr: *const u8, len: usize) {
    client_request(0, [MAKE_MEM_DEFINED, ptr as usize, len, 0, 0, 0]);
}

/// Declares `[lo, hi)` a stack; returns valgrind's id for it (0 natively).
pub(crate) fn stack_register(lo: *const u8, hi: *const u8) -> usize {
    // valgrind wants the highest addressable byte, inclusive.
    client_request(0, [STACK_REGISTER, lo as usize, hi as usize - 1, 0, 0, 0])
}

/// Forgets a stack registered by [`stack_register`].
pub(crate) fn stack_deregister(id: usize) {
    client_request(0, [STACK_DEREGISTER, id, 0, 0, 0, 0]);
}

#[cfg(target_arch = "x86_64")]
fn client_request(default: usize, args: [usize; 6]) -> usize {
    let result;
    // SAFETY: natively the sequence changes nothing but the flags and rdi,
    // which is rotated by 3 + 13 + 61 + 51 = 128 bits, i.e. back to its value
    // (declared clobbered anyway); `xchg rbx, rbx` is a no-op. Under valgrind
    // it reads the six words at rax (a live local array) and writes rdx.
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            inout("rdx") default => result,
            in("rax") args.as_ptr(),
            inout("rdi") 0usize => _,
            options(nostack),
        );
    }
    result
}

#[cfg(target_arch = "aarch64")]
fn client_request(default: usize, args: [usize; 6]) -> usize {
    let result;
    // SAFETY: natively x12 is rotated by 3 + 13 + 51 + 61 = 128 bits (back to
    // its value, declared clobbered anyway) and `orr x10, x10, x10` is a
    // no-op. Under valgrind it reads the six words at x4 and writes x3.
    unsafe {
        std::arch::asm!(
            "ror x12, x12, #3",
            "ror x12, x12, #13",
            "ror x12, x12, #51",
            "ror x12, x12, #61",
            "orr x10, x10, x10",
            inout("x3") default => result,
            in("x4") args.as_ptr(),
            inout("x12") 0usize => _,
            options(nostack),
        );
    }
    result
}

#[cfg(test)]
mod tests {
    #[test]
    fn requests_are_harmless_natively() {
        let buf = [0u8; 64];
        let id = super::stack_register(buf.as_ptr(), buf.as_ptr().wrapping_add(64));
        super::stack_deregister(id);
    }
}
