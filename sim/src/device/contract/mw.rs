//! Memory window binds: the UMR WQE libmlx5's `set_bind_wr` writes for `IBV_WR_BIND_MW`
//! (and for `ibv_bind_mw`, which posts one), both ways: built from a [`BindMwWqe`] and read
//! back from the WQE's segments.

use mlx5_dv::AccessFlags;
use mlx5_dv::prm::wqe::compose::{UmrTranslation, WqeBody};
use mlx5_dv::prm::wqe::{KlmSeg, MkeyContextSeg, UmrCtrlSeg, umr_ctrl};

use super::WqeKind;
use crate::device::translation::Klm;

/// The QP number a window not tied to a QP carries (type 1, or unbound).
pub const NO_QPN: u32 = 0xff_ffff;

/// What a bound window exposes: its rights, where it starts and its length, and the one
/// KLM entry into the MR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MwRange {
    /// `IBV_ACCESS_*` bits of LW|RW|RR|A.
    pub access: u32,
    /// The window's first address (0 for a zero-based type-2 window).
    pub start_addr: u64,
    /// Its length.
    pub len: u64,
    /// The MR's lkey, the bind's address and length.
    pub klm: Klm,
}

/// A memory window bind as the device reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindMwWqe {
    /// The control segment's immediate: the window's key as the application holds it.
    pub key: u32,
    /// The tag the window's key takes (`bind_mw.rkey & 0xff`).
    pub tag: u8,
    /// Type 2: the window is tied to the binding QP and must be free to bind.
    pub type2: bool,
    /// `None` unbinds (a zero-length bind): the window becomes free.
    pub range: Option<MwRange>,
}

/// The segments of a bind after the control segment: `set_umr_control_seg`,
/// `set_umr_mkey_seg` and, for a non-empty bind, `set_umr_data_seg` (one KLM padded to 64
/// bytes).
pub fn bind_body(b: &BindMwWqe, qpn: u32) -> WqeBody {
    use umr_ctrl::{flags as f, mkey_mask as m};
    let mut umr =
        UmrCtrlSeg { flags: f::TRANSLATION_OFFSET | f::INLINE, mkey_mask: m::FREE | m::MKEY, ..UmrCtrlSeg::default() };
    if b.type2 {
        umr.mkey_mask |= m::QPN;
    }
    let tied = b.type2 && b.range.is_some();
    let mut mkc = MkeyContextSeg { qpn: if tied { qpn } else { NO_QPN }, mkey_7_0: b.tag, ..MkeyContextSeg::default() };
    let mut translation = UmrTranslation::Klm(Vec::new());
    match &b.range {
        Some(r) => {
            umr.klm_octowords = 4;
            if b.type2 {
                umr.flags |= f::CHECK_FREE;
            }
            umr.mkey_mask |= m::LEN
                | m::START_ADDR
                | m::ACCESS_LOCAL_WRITE
                | m::ACCESS_REMOTE_READ
                | m::ACCESS_REMOTE_WRITE
                | m::ACCESS_ATOMIC;
            let has = |x: AccessFlags| r.access & x.bits() != 0;
            (mkc.lw, mkc.rw, mkc.rr, mkc.a) = (
                has(AccessFlags::LOCAL_WRITE),
                has(AccessFlags::REMOTE_WRITE),
                has(AccessFlags::REMOTE_READ),
                has(AccessFlags::REMOTE_ATOMIC),
            );
            mkc.start_addr = r.start_addr;
            mkc.len = r.len;
            translation = UmrTranslation::Klm(vec![KlmSeg {
                byte_count: r.klm.byte_count,
                mkey: r.klm.key,
                address: r.klm.addr,
            }]);
        }
        None => {
            mkc.free = true;
            if b.type2 {
                umr.flags |= f::CHECK_QPN;
            }
        }
    }
    WqeBody::Umr { umr, mkc, translation, bsf: Vec::new() }
}

/// A bind read back from a UMR WQE: one whose control segment names a translation offset
/// (as `set_umr_control_seg` writes it); `None` for other UMRs.
pub fn bind_of(imm: u32, umr: &UmrCtrlSeg, k: &MkeyContextSeg, translation: &UmrTranslation) -> Option<WqeKind> {
    use umr_ctrl::{flags as f, mkey_mask as m};
    if umr.flags & f::TRANSLATION_OFFSET == 0 {
        return None;
    }
    let type2 = umr.mkey_mask & m::QPN != 0;
    let range = if umr.mkey_mask & m::LEN != 0 && !k.free {
        let UmrTranslation::Klm(entries) = translation else { return None };
        let e = entries.first()?;
        let access = [
            (k.lw, AccessFlags::LOCAL_WRITE),
            (k.rw, AccessFlags::REMOTE_WRITE),
            (k.rr, AccessFlags::REMOTE_READ),
            (k.a, AccessFlags::REMOTE_ATOMIC),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .fold(0, |acc, (_, x)| acc | x.bits());
        Some(MwRange {
            access,
            start_addr: k.start_addr,
            len: k.len,
            klm: Klm { byte_count: e.byte_count, key: e.mkey, addr: e.address },
        })
    } else {
        None
    };
    Some(WqeKind::BindMw(BindMwWqe { key: imm, tag: k.mkey_7_0, type2, range }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bind_reads_back_as_written() {
        let range = MwRange {
            access: AccessFlags::REMOTE_WRITE.bits() | AccessFlags::REMOTE_READ.bits(),
            start_addr: 0x1000,
            len: 64,
            klm: Klm { byte_count: 64, key: 0x1234, addr: 0x1000 },
        };
        for b in [
            BindMwWqe { key: 0x500, tag: 7, type2: true, range: Some(range) },
            BindMwWqe { key: 0x500, tag: 8, type2: false, range: Some(range) },
            BindMwWqe { key: 0x500, tag: 9, type2: false, range: None },
        ] {
            let WqeBody::Umr { umr, mkc, translation, .. } = bind_body(&b, 0x42) else { panic!("not a UMR") };
            assert_eq!(bind_of(0x500, &umr, &mkc, &translation), Some(WqeKind::BindMw(b)));
            assert_eq!(mkc.qpn, if b.type2 { 0x42 } else { NO_QPN });
        }
    }
}
