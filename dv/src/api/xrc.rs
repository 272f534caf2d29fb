//! XRC: extended reliable connected transport domains (`ibv_open_xrcd`, `ibv_close_xrcd`),
//! XRC SRQs (an [`crate::SrqInitAttr`] with [`SrqXrc`]), XRC QPs (`IBV_QPT_XRC_SEND`, the
//! initiator, and `IBV_QPT_XRC_RECV`, the target, created with
//! [`crate::QpInitAttr::xrcd`]) and `ibv_open_qp`, which hands a process a target QP another
//! created in the same domain. The methods are [`crate::Srqs`]'.

use serde::{Deserialize, Serialize};

use crate::handle::{ContextHandle, CqHandle, XrcdHandle};

/// `enum ibv_xrcd_init_attr_mask`.
pub mod xrcd_init_mask {
    /// `IBV_XRCD_INIT_ATTR_FD`.
    pub const FD: u32 = 1 << 0;
    /// `IBV_XRCD_INIT_ATTR_OFLAGS`.
    pub const OFLAGS: u32 = 1 << 1;
    /// `IBV_XRCD_INIT_ATTR_RESERVED`: the first bit libibverbs does not know.
    pub const RESERVED: u32 = 1 << 2;
}

/// `oflags` values (Linux's `open(2)` flags, the ones `ibv_open_xrcd` looks at).
pub mod xrcd_oflags {
    /// `O_CREAT`: make the file's domain if it has none.
    pub const O_CREAT: i32 = 0o100;
    /// `O_EXCL`: fail if the file has a domain.
    pub const O_EXCL: i32 = 0o200;
}

/// `struct ibv_xrcd_init_attr`, with the context it is opened on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct XrcdInitAttr {
    /// The device context.
    pub ctx: ContextHandle,
    /// `comp_mask` ([`xrcd_init_mask`]): libibverbs wants both FD and OFLAGS.
    pub comp_mask: u32,
    /// `fd`: a file whose inode names the domain, shared by every process that opens it; -1
    /// for a domain of this process alone.
    pub fd: i32,
    /// `oflags`: `O_CREAT` (create the inode's domain if it has none) and `O_EXCL` (fail if
    /// it has one).
    pub oflags: i32,
}

/// An opened XRC domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Xrcd {
    /// The backend handle.
    pub handle: XrcdHandle,
}

/// What makes an SRQ an XRC SRQ (`IBV_SRQT_XRC`: `IBV_SRQ_INIT_ATTR_XRCD | _CQ`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrqXrc {
    /// The domain whose target QPs may deliver to the SRQ.
    pub xrcd: XrcdHandle,
    /// The CQ its receive completions go to (an XRC target QP has none).
    pub cq: CqHandle,
}

/// `struct ibv_qp_open_attr`: a target QP of the domain by its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpOpenAttr {
    /// The domain the QP was created in.
    pub xrcd: XrcdHandle,
    /// `qp_num`.
    pub qp_num: u32,
    /// `qp_type`: `IBV_QPT_XRC_RECV`.
    pub qp_type: u32,
}
