//! Memory windows: `ibv_alloc_mw`, `ibv_dealloc_mw`, `ibv_bind_mw` (type 1), and the bind
//! a type-2 window takes as a send WR (`IBV_WR_BIND_MW`, `ibv_wr_bind_mw`).

use serde::{Deserialize, Serialize};

use super::memory::{AccessFlags, Mr};
use super::wr::SendFlags;
use crate::handle::MwHandle;

/// `IBV_MW_TYPE_1`: bound with `ibv_bind_mw`, tied to its PD.
pub const MW_TYPE_1: u32 = 1;
/// `IBV_MW_TYPE_2`: bound by a send WR, tied to the QP that bound it.
pub const MW_TYPE_2: u32 = 2;

/// A memory window (`struct ibv_mw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mw {
    /// The backend handle.
    pub handle: MwHandle,
    /// `mw->rkey`: the key a bind changes the low byte of.
    pub rkey: u32,
    /// `mw->type` ([`MW_TYPE_1`] or [`MW_TYPE_2`]).
    pub mw_type: u32,
}

/// `struct ibv_mw_bind_info`: the part of an MR the window exposes, and its rights.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MwBindInfo {
    /// `mr`: the region bound to (`None` is a NULL pointer).
    pub mr: Option<Mr>,
    /// `addr`: where the window starts, a virtual address of the MR.
    pub addr: u64,
    /// `length`: 0 unbinds the window.
    pub length: u64,
    /// `mw_access_flags`.
    pub access: AccessFlags,
}

/// `struct ibv_mw_bind`: what `ibv_bind_mw` takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MwBind {
    /// `wr_id` of the bind's completion.
    pub wr_id: u64,
    /// `send_flags`.
    pub send_flags: SendFlags,
    /// `bind_info`.
    pub bind_info: MwBindInfo,
}

/// `wr.bind_mw` of a send WR: the window, the rkey it is to answer to after the bind, and
/// the bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindMw {
    /// `bind_mw.mw`.
    pub mw: Mw,
    /// `bind_mw.rkey`: the new key (its low byte is what the bind writes).
    pub rkey: u32,
    /// `bind_mw.bind_info`.
    pub bind_info: MwBindInfo,
}

/// `ibv_inc_rkey`: the key with its low byte (the tag) one more, wrapping.
pub fn inc_rkey(rkey: u32) -> u32 {
    let tag = ((rkey & 0xff) + 1) & 0xff;
    (rkey & 0xffff_ff00) | tag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inc_rkey_wraps_the_tag_only() {
        assert_eq!(inc_rkey(0x1234_56fe), 0x1234_56ff);
        assert_eq!(inc_rkey(0x1234_56ff), 0x1234_5600);
    }
}
