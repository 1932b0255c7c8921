//! The kernel's io_uring ABI, written out by hand.
//!
//! The `libc` crate has the syscall numbers but not the structures, so the
//! few this crate uses are transcribed here from the kernel's
//! `include/uapi/linux/io_uring.h` (field for field; sizes are checked by
//! the tests below). Nothing here does anything: it is layout and numbers.

#![allow(missing_docs)] // Names are the kernel's; see io_uring.h for each.

/// `struct io_uring_sqe`: one submission, 64 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Sqe {
    pub opcode: u8,
    pub flags: u8,
    pub ioprio: u16,
    pub fd: i32,
    /// `off` / `addr2`.
    pub off: u64,
    /// `addr` / `splice_off_in`.
    pub addr: u64,
    pub len: u32,
    /// `rw_flags`, `msg_flags`, `accept_flags`, `cancel_flags`, `timeout_flags`...
    pub op_flags: u32,
    pub user_data: u64,
    /// `buf_index` / `buf_group`.
    pub buf_group: u16,
    pub personality: u16,
    /// `splice_fd_in` / `file_index`.
    pub splice_fd_in: i32,
    pub addr3: u64,
    pub pad2: u64,
}

/// `struct io_uring_cqe`: one completion, 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub user_data: u64,
    pub res: i32,
    pub flags: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SqringOffsets {
    pub head: u32,
    pub tail: u32,
    pub ring_mask: u32,
    pub ring_entries: u32,
    pub flags: u32,
    pub dropped: u32,
    pub array: u32,
    pub resv1: u32,
    pub user_addr: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CqringOffsets {
    pub head: u32,
    pub tail: u32,
    pub ring_mask: u32,
    pub ring_entries: u32,
    pub overflow: u32,
    pub cqes: u32,
    pub flags: u32,
    pub resv1: u32,
    pub user_addr: u64,
}

/// `struct io_uring_params`: in and out of `io_uring_setup`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Params {
    pub sq_entries: u32,
    pub cq_entries: u32,
    pub flags: u32,
    pub sq_thread_cpu: u32,
    pub sq_thread_idle: u32,
    pub features: u32,
    pub wq_fd: u32,
    pub resv: [u32; 3],
    pub sq_off: SqringOffsets,
    pub cq_off: CqringOffsets,
}

/// `struct io_uring_getevents_arg` for `IORING_ENTER_EXT_ARG`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GeteventsArg {
    pub sigmask: u64,
    pub sigmask_sz: u32,
    pub min_wait_usec: u32,
    pub ts: u64,
}

/// `struct __kernel_timespec`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Timespec {
    pub tv_sec: i64,
    pub tv_nsec: i64,
}

/// `struct io_uring_buf`: one entry of a provided-buffer ring, 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Buf {
    pub addr: u64,
    pub len: u32,
    pub bid: u16,
    /// In entry 0 this field is the ring's tail (`io_uring_buf_ring.tail`).
    pub resv: u16,
}

/// `struct io_uring_buf_reg` for `IORING_REGISTER_PBUF_RING`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BufReg {
    pub ring_addr: u64,
    pub ring_entries: u32,
    pub bgid: u16,
    pub flags: u16,
    pub resv: [u64; 3],
}

/// `struct io_uring_probe` with room for 256 ops.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    pub last_op: u8,
    pub ops_len: u8,
    pub resv: u16,
    pub resv2: [u32; 3],
    pub ops: [ProbeOp; 256],
}

/// `struct io_uring_probe_op`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ProbeOp {
    pub op: u8,
    pub resv: u8,
    pub flags: u16,
    pub resv2: u32,
}

pub const IO_URING_OP_SUPPORTED: u16 = 1;

// io_uring_setup flags.
pub const IORING_SETUP_CQSIZE: u32 = 1 << 3;
pub const IORING_SETUP_CLAMP: u32 = 1 << 4;
pub const IORING_SETUP_SUBMIT_ALL: u32 = 1 << 7;
pub const IORING_SETUP_COOP_TASKRUN: u32 = 1 << 8;
pub const IORING_SETUP_TASKRUN_FLAG: u32 = 1 << 9;
pub const IORING_SETUP_SINGLE_ISSUER: u32 = 1 << 12;
pub const IORING_SETUP_DEFER_TASKRUN: u32 = 1 << 13;

// io_uring_params.features.
pub const IORING_FEAT_SINGLE_MMAP: u32 = 1 << 0;
pub const IORING_FEAT_NODROP: u32 = 1 << 1;
pub const IORING_FEAT_EXT_ARG: u32 = 1 << 8;
/// Every feature bit the header of kernel 6.18 names, for reports.
pub const FEATURE_NAMES: [&str; 18] = [
    "SINGLE_MMAP",
    "NODROP",
    "SUBMIT_STABLE",
    "RW_CUR_POS",
    "CUR_PERSONALITY",
    "FAST_POLL",
    "POLL_32BITS",
    "SQPOLL_NONFIXED",
    "EXT_ARG",
    "NATIVE_WORKERS",
    "RSRC_TAGS",
    "CQE_SKIP",
    "LINKED_FILE",
    "REG_REG_RING",
    "RECVSEND_BUNDLE",
    "MIN_TIMEOUT",
    "RW_ATTR",
    "NO_IOWAIT",
];

// mmap offsets.
pub const IORING_OFF_SQ_RING: i64 = 0;
pub const IORING_OFF_CQ_RING: i64 = 0x800_0000;
pub const IORING_OFF_SQES: i64 = 0x1000_0000;

// sq_ring->flags.
pub const IORING_SQ_CQ_OVERFLOW: u32 = 1 << 1;
pub const IORING_SQ_TASKRUN: u32 = 1 << 2;

// io_uring_enter flags.
pub const IORING_ENTER_GETEVENTS: u32 = 1 << 0;
pub const IORING_ENTER_EXT_ARG: u32 = 1 << 3;

// io_uring_register opcodes.
pub const IORING_REGISTER_PROBE: u32 = 8;
pub const IORING_REGISTER_PBUF_RING: u32 = 22;
pub const IORING_UNREGISTER_PBUF_RING: u32 = 23;
pub const IORING_REGISTER_FILES: u32 = 2;
pub const IORING_UNREGISTER_FILES: u32 = 3;

// Opcodes (enum io_uring_op).
pub const IORING_OP_NOP: u8 = 0;
pub const IORING_OP_POLL_ADD: u8 = 6;
pub const IORING_OP_TIMEOUT: u8 = 11;
pub const IORING_OP_ACCEPT: u8 = 13;
pub const IORING_OP_ASYNC_CANCEL: u8 = 14;
pub const IORING_OP_LINK_TIMEOUT: u8 = 15;
pub const IORING_OP_CLOSE: u8 = 19;
pub const IORING_OP_READ: u8 = 22;
pub const IORING_OP_WRITE: u8 = 23;
pub const IORING_OP_SEND: u8 = 26;
pub const IORING_OP_RECV: u8 = 27;
pub const IORING_OP_SPLICE: u8 = 30;
pub const IORING_OP_SHUTDOWN: u8 = 34;
pub const IORING_OP_MSG_RING: u8 = 40;
pub const IORING_OP_SEND_ZC: u8 = 47;

/// The name of an opcode we submit, for trace lines (`OP#n` otherwise).
pub fn op_name(op: u8) -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Borrowed(match op {
        IORING_OP_NOP => "NOP",
        IORING_OP_POLL_ADD => "POLL_ADD",
        IORING_OP_TIMEOUT => "TIMEOUT",
        IORING_OP_ACCEPT => "ACCEPT",
        IORING_OP_ASYNC_CANCEL => "ASYNC_CANCEL",
        IORING_OP_LINK_TIMEOUT => "LINK_TIMEOUT",
        IORING_OP_CLOSE => "CLOSE",
        IORING_OP_READ => "READ",
        IORING_OP_WRITE => "WRITE",
        IORING_OP_SEND => "SEND",
        IORING_OP_RECV => "RECV",
        IORING_OP_SPLICE => "SPLICE",
        IORING_OP_SHUTDOWN => "SHUTDOWN",
        IORING_OP_MSG_RING => "MSG_RING",
        IORING_OP_SEND_ZC => "SEND_ZC",
        other => return std::borrow::Cow::Owned(format!("OP#{other}")),
    })
}

// sqe->flags.
pub const IOSQE_FIXED_FILE: u8 = 1 << 0;
pub const IOSQE_IO_LINK: u8 = 1 << 2;
pub const IOSQE_BUFFER_SELECT: u8 = 1 << 5;
pub const IOSQE_CQE_SKIP_SUCCESS: u8 = 1 << 6;

// sqe->ioprio for accept and recv.
pub const IORING_ACCEPT_MULTISHOT: u16 = 1 << 0;
pub const IORING_RECV_MULTISHOT: u16 = 1 << 1;
/// `IORING_OP_SEND_ZC`'s ioprio: the notification says whether the kernel
/// copied after all (bit 31 of its `res`, [`IORING_NOTIF_USAGE_ZC_COPIED`]).
pub const IORING_SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
pub const IORING_NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;

// sqe->cancel_flags.
pub const IORING_ASYNC_CANCEL_ALL: u32 = 1 << 0;
pub const IORING_ASYNC_CANCEL_ANY: u32 = 1 << 2;

// cqe->flags.
pub const IORING_CQE_F_BUFFER: u32 = 1 << 0;
pub const IORING_CQE_F_MORE: u32 = 1 << 1;
pub const IORING_CQE_F_SOCK_NONEMPTY: u32 = 1 << 2;
pub const IORING_CQE_F_NOTIF: u32 = 1 << 3;
pub const IORING_CQE_BUFFER_SHIFT: u32 = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn layouts_match_the_kernel_header() {
        assert_eq!(size_of::<Sqe>(), 64);
        assert_eq!(size_of::<Cqe>(), 16);
        assert_eq!(size_of::<Params>(), 120);
        assert_eq!(size_of::<GeteventsArg>(), 24);
        assert_eq!(size_of::<Buf>(), 16);
        assert_eq!(size_of::<BufReg>(), 40);
        assert_eq!(size_of::<ProbeOp>(), 8);
        assert_eq!(std::mem::offset_of!(Sqe, user_data), 32);
        assert_eq!(std::mem::offset_of!(Sqe, buf_group), 40);
        assert_eq!(std::mem::offset_of!(Sqe, splice_fd_in), 44);
    }
}
