//! `ibv_post_send` as libmlx5's `_mlx5_post_send` runs it: no state check but the send
//! queue's `qp_state_max_gs` (-1 until the first RTS, so every post before it is ENOMEM), each
//! WR checked and written in turn, and the doorbell rung for the WRs before a failing one.

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{DcDest, Error, Op, Qp, Result, SendFlags, SendWr, Sge, UdDest, qp_type, wc_opcode, wr_opcode};

use super::{Lower, Provider, QpObj, encode, fence_mode};
use crate::device::contract::WqeKind;
use crate::host::{Dma, Host};

/// Entries of libmlx5's `mlx5_ib_opcode` table: an opcode past it is EINVAL.
const OPCODES: u32 = wr_opcode::DRIVER1 + 1;

/// Why a WR cannot be posted: its errno and the reason.
type Refusal = (i32, String);

/// `_mlx5_post_send`'s checks of one WR, in its order: the opcode, room in the send queue
/// (`mlx5_wq_overflow`, counting the WRs of this call before it), the SGE count against
/// `qp_state_max_gs`, then what the QP type and opcode allow, and the inline size.
fn check(q: &QpObj, wr: &SendWr, nreq: u32) -> std::result::Result<(), Refusal> {
    if wr.opcode >= OPCODES {
        return Err((EINVAL, format!("bad opcode {}", wr.opcode)));
    }
    if u64::from(q.rings.sq.outstanding()) + u64::from(nreq) >= u64::from(q.max_post) {
        return Err((ENOMEM, format!("the send queue of {} WRs is full", q.max_post)));
    }
    if i64::try_from(wr.sge.len()).unwrap_or(i64::MAX) > q.sq_state_max_gs {
        let why = format!("{} SGEs, at most {} in the QP's state", wr.sge.len(), q.sq_state_max_gs);
        return Err((ENOMEM, why));
    }
    if !q.rc && !q.dci && !matches!(q.qp_type, qp_type::UC | qp_type::UD | qp_type::RAW_PACKET) {
        return Err((EOPNOTSUPP, "posting is simulated on RC, UC, UD, raw packet QPs and DCIs only".into()));
    }
    // A DCI's WQE names its DCT in the datagram segment `mlx5dv_wr_set_dc_addr` writes;
    // `_mlx5_post_send` writes none, which the device would misread.
    if q.dci && wr.dc.is_none() {
        return Err((EINVAL, "a WR on a DCI without its DC address (mlx5dv_wr_set_dc_addr)".into()));
    }
    // libmlx5 reads wr.ud.ah of every WR on a UD QP (a NULL one would crash it).
    if q.qp_type == qp_type::UD && wr.ud.is_none() {
        return Err((EINVAL, "a WR on a UD QP without wr.ud.ah".into()));
    }
    match wr.opcode {
        wr_opcode::ATOMIC_CMP_AND_SWP | wr_opcode::ATOMIC_FETCH_AND_ADD if !q.atomics => {
            return Err((EOPNOTSUPP, "atomic operations are not supported (atomic_cap NONE)".into()));
        }
        wr_opcode::BIND_MW if q.qp_type == qp_type::UD => {
            return Err((EOPNOTSUPP, "a memory window bind on a UD QP is not simulated".into()));
        }
        wr_opcode::BIND_MW if wr.bind_mw.is_none() => return Err((EINVAL, "IBV_WR_BIND_MW without wr.bind_mw".into())),
        wr_opcode::TSO | wr_opcode::DRIVER1 => {
            return Err((EOPNOTSUPP, format!("opcode {} is not simulated", wr.opcode)));
        }
        _ => {}
    }
    // copy_eth_inline_headers: a frame needs at least one SGE.
    if q.qp_type == qp_type::RAW_PACKET && wr.sge.is_empty() {
        return Err((EINVAL, "a raw packet WR without an SGE".into()));
    }
    // set_data_inl_seg: the bytes of an inline WR must fit the QP's max_inline_data.
    if wr.send_flags.contains(SendFlags::INLINE) && wr.opcode != wr_opcode::LOCAL_INV {
        let inl: u64 = wr.sge.iter().map(|s| u64::from(s.length)).sum();
        if i64::try_from(inl).unwrap_or(i64::MAX) > q.max_inline_data {
            return Err((ENOMEM, format!("{inl} inline bytes, max_inline_data {}", q.max_inline_data)));
        }
    }
    Ok(())
}

/// The WQE of an atomic WR: the remote address and atomic segments (`set_atomic_seg`: the
/// swap value of CMP_AND_SWP, else `compare_add`, in `swap_add`), then each non-empty SGE as
/// an 8-byte data segment (`set_data_ptr_seg_atomic`). `None` for other opcodes.
fn atomic_kind(wr: &SendWr) -> Option<WqeKind> {
    let compare = match wr.opcode {
        wr_opcode::ATOMIC_CMP_AND_SWP => Some(wr.compare_add),
        wr_opcode::ATOMIC_FETCH_AND_ADD => None,
        _ => return None,
    };
    let swap_add = if compare.is_some() { wr.swap } else { wr.compare_add };
    let sge = wr.sge.iter().filter(|s| s.length != 0).map(|s| Sge { length: 8, ..*s }).collect();
    Some(WqeKind::Atomic { rkey: wr.rkey, raddr: wr.remote_addr, swap_add, compare, sge })
}

/// The payload of an `IBV_SEND_INLINE` WR with SGEs (`set_data_inl_seg`): the bytes the caller
/// gave, or those its SGEs name in host memory (keys are not looked at; an unmapped SGE reads
/// as nothing). `None` for a WR that is not inline.
fn inline_bytes(host: &Host, wr: &SendWr) -> Option<Vec<u8>> {
    if !wr.send_flags.contains(SendFlags::INLINE) || wr.sge.is_empty() {
        return None;
    }
    if !wr.inline_data.is_empty() {
        return Some(wr.inline_data.clone());
    }
    let mut out = Vec::new();
    for s in &wr.sge {
        out.extend_from_slice(host.read(s.addr, s.length as usize).unwrap_or_default());
    }
    Some(out)
}

impl Provider {
    /// `ibv_post_send` of `wrs`: each WR that passes [`check`] is written at the producer
    /// index; at the first that does not, the call stops with its errno and index, after the
    /// doorbell for the WRs before it.
    pub(crate) fn post_send_wr(&mut self, low: &mut Lower<'_>, qp: &Qp, wrs: &[SendWr]) -> Result<()> {
        let op = Op::PostSendWr;
        let q = self.qps.get_mut(qp.handle, op)?;
        q.rings.adopt_program_posts(low.host);
        let mut failed = None;
        let mut nreq = 0u32;
        let mut bytes = Vec::new();
        // fm_cache: a LOCAL_INV asks the next WQE to wait for it.
        let mut next_fence = q.fence_next;
        for (i, wr) in wrs.iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            let fail = |(errno, why): Refusal| Error::new(op, errno, format!("WR {i}: {why}")).with_bad_wr(index);
            if let Err(r) = check(q, wr, nreq) {
                failed = Some(fail(r));
                break;
            }
            let c = encode::CtrlFields {
                wqe_index: q.rings.sq.cur_post as u16,
                qpn: q.qpn,
                signaled: wr.send_flags.contains(SendFlags::SIGNALED) || q.sig_all,
                solicited: wr.send_flags.contains(SendFlags::SOLICITED),
                fm: fence_mode(wr.send_flags, next_fence),
            };
            bytes.clear();
            let bind = match &wr.bind_mw {
                Some(b) if wr.opcode == wr_opcode::BIND_MW => {
                    match super::super::mw::bind_kind(b, super::super::mw::is_type2(b)) {
                        Ok(k) => Some(k),
                        Err(r) => {
                            failed = Some(fail(r));
                            break;
                        }
                    }
                }
                _ => None,
            };
            let (encoded, wr_data) = if let Some(k) = bind {
                (encode::encode(&k, c).map(|b| bytes.extend_from_slice(&b)), wc_opcode::BIND_MW)
            } else if wr.opcode == wr_opcode::LOCAL_INV {
                let e = encode::encode(&WqeKind::LocalInv { key: wr.invalidate_rkey }, c)
                    .map(|b| bytes.extend_from_slice(&b));
                (e, wc_opcode::LOCAL_INV)
            } else if let Some(k) = atomic_kind(wr) {
                (encode::encode(&k, c).map(|b| bytes.extend_from_slice(&b)), 0)
            } else {
                let w = wr.to_op();
                let inline = inline_bytes(low.host, wr);
                match w.as_ref().and_then(encode::DataWqe::of) {
                    Some((_, _, d)) => {
                        let d = match &inline {
                            Some(b) => d.with_inline(b),
                            None => d,
                        };
                        (encode::encode_data(&d, c, &mut bytes), 0)
                    }
                    None => {
                        failed = Some(fail((EINVAL, format!("opcode {} has no data WQE", wr.opcode))));
                        break;
                    }
                }
            };
            if let Err(e) = encoded {
                failed = Some(fail((EINVAL, format!("WQE encoding: {e}"))));
                break;
            }
            // _mlx5_post_send's UC case writes a remote address segment for the WRITEs only,
            // its UD case for none (the encoder writes one for every READ and WRITE).
            let rdma =
                matches!(wr.opcode, wr_opcode::RDMA_WRITE | wr_opcode::RDMA_WRITE_WITH_IMM | wr_opcode::RDMA_READ);
            let keeps_raddr = match q.qp_type {
                qp_type::UC => wr.opcode != wr_opcode::RDMA_READ,
                qp_type::UD => false,
                _ => true,
            };
            if rdma && !keeps_raddr {
                resize_after_ctrl(&mut bytes, None);
            }
            // The raw case: the 16-byte Ethernet segment, with no inline headers (a device
            // whose minimum inline mode is NONE, as ConnectX-5 and later report).
            if q.qp_type == qp_type::RAW_PACKET {
                insert_after_ctrl(&mut bytes, &[0u8; 16]);
            }
            if let (true, Some(dc)) = (q.dci, &wr.dc) {
                resize_after_ctrl(&mut bytes, Some(&dc_seg(dc)));
                // mlx5_send_wr_set_dc_addr_stream: the stream in the control segment.
                if let Some(s) = bytes.get_mut(9..11) {
                    s.copy_from_slice(&dc.stream_id.to_be_bytes());
                }
            } else if let Some(ud) = &wr.ud {
                resize_after_ctrl(&mut bytes, Some(&datagram_seg(ud)));
            }
            // _mlx5_post_send's XRC_SEND case: the XRC segment (the remote SRQ number) after
            // the control segment of every WR but LOCAL_INV and BIND_MW.
            if q.qp_type == qp_type::XRC_SEND && !matches!(wr.opcode, wr_opcode::LOCAL_INV | wr_opcode::BIND_MW) {
                insert_after_ctrl(&mut bytes, &xrc_seg(wr.xrc_remote_srqn));
            }
            next_fence = matches!(wr.opcode, wr_opcode::LOCAL_INV | wr_opcode::BIND_MW);
            q.rings.sq.write(low.host, &bytes, wr.wr_id, wr_data, nreq);
            if let Some(log) = &mut self.wqe_log
                && let Ok(r) = mlx5_dv::WqeRecord::decode(q.qpn, bytes.clone())
            {
                log.push(r);
            }
            nreq += 1;
        }
        q.fence_next = next_fence;
        if nreq > 0 {
            Self::ring(low, q, nreq);
        }
        failed.map_or(Ok(()), Err)
    }
}

/// The datagram segment `set_datagram_seg` writes: the address vector `mlx5_create_ah`
/// builds from the AH's attributes (as the C ABI's `ibv_create_ah` does), then the remote
/// QP number with `MLX5_EXTENDED_UD_AV` and the Q_Key.
fn datagram_seg(ud: &UdDest) -> [u8; 48] {
    let mut av = [0u8; 48];
    let a = ud;
    av[..4].copy_from_slice(&ud.remote_qkey.to_be_bytes());
    av[8..12].copy_from_slice(&(ud.remote_qpn & 0xff_ffff | 0x8000_0000).to_be_bytes());
    av[14..16].copy_from_slice(&a.dlid.to_be_bytes());
    if a.is_global {
        let g = &a.dgid.0;
        if g[0] == 0xfe && g[1] == 0x80 {
            av[20..26].copy_from_slice(&[g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]]);
        }
        av[27] = a.hop_limit;
        av[28..32].copy_from_slice(&(1u32 << 30 | u32::from(a.sgid_index) << 20).to_be_bytes());
        av[32..48].copy_from_slice(g);
    }
    av
}

/// The datagram segment `mlx5_send_wr_set_dc_addr` writes: the AH's address vector, the
/// DCT number with `MLX5_EXTENDED_UD_AV`, and the access key in the first 8 bytes (the
/// union the Q_Key shares).
fn dc_seg(dc: &DcDest) -> [u8; 48] {
    let mut av = datagram_seg(&dc.av);
    av[..8].copy_from_slice(&dc.access_key.to_be_bytes());
    av
}

/// `struct mlx5_wqe_xrc_seg`: the remote SRQ number, then 12 reserved bytes.
fn xrc_seg(srqn: u32) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[..4].copy_from_slice(&srqn.to_be_bytes());
    s
}

/// Put a 16-byte segment right after the control segment of the WQE in `bytes` (`ds` one
/// unit more), padded to whole basic blocks.
fn insert_after_ctrl(bytes: &mut Vec<u8>, seg: &[u8; 16]) {
    use mlx5_dv::prm::wqe::{SEND_WQE_BB, SEND_WQE_DS};
    let Some(ds) = bytes.get(7).map(|b| b & 0x3f) else { return };
    let used = (usize::from(ds) * SEND_WQE_DS).clamp(SEND_WQE_DS, bytes.len());
    bytes.truncate(used);
    bytes.splice(SEND_WQE_DS..SEND_WQE_DS, seg.iter().copied());
    bytes[7] = (bytes[7] & !0x3f) | (ds + 1).min(0x3f);
    bytes.resize(bytes.len().next_multiple_of(SEND_WQE_BB), 0);
}

/// Rewrite the segment after the control segment of the WQE in `bytes`: put a datagram
/// segment there (`Some`: as libmlx5 writes a UD WQE, control, datagram, then data or inline
/// segments; `ds` three units more), or take the 16-byte remote address segment out (`None`;
/// `ds` one unit less); padded to whole basic blocks.
fn resize_after_ctrl(bytes: &mut Vec<u8>, av: Option<&[u8; 48]>) {
    use mlx5_dv::prm::wqe::{SEND_WQE_BB, SEND_WQE_DS};
    let Some(ds) = bytes.get(7).map(|b| b & 0x3f) else { return };
    let used = (usize::from(ds) * SEND_WQE_DS).clamp(SEND_WQE_DS, bytes.len());
    bytes.truncate(used);
    let ds = match av {
        Some(av) => {
            bytes.splice(SEND_WQE_DS..SEND_WQE_DS, av.iter().copied());
            (ds + 3).min(0x3f)
        }
        None if bytes.len() >= 2 * SEND_WQE_DS => {
            bytes.drain(SEND_WQE_DS..2 * SEND_WQE_DS);
            ds.saturating_sub(1)
        }
        None => return,
    };
    bytes[7] = (bytes[7] & !0x3f) | ds;
    bytes.resize(bytes.len().next_multiple_of(SEND_WQE_BB), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ud_wqe_carries_the_datagram_segment_and_no_remote_address() {
        // A control segment (ds 3: control, remote address, one data segment) and its data.
        let mut wqe = vec![0u8; 64];
        wqe[7] = 3;
        wqe[16..24].copy_from_slice(&0xdead_beefu64.to_be_bytes());
        wqe[32..36].copy_from_slice(&100u32.to_be_bytes());
        resize_after_ctrl(&mut wqe, None);
        assert_eq!((wqe.len(), wqe[7]), (64, 2));
        assert_eq!(wqe[16..20], 100u32.to_be_bytes(), "the data segment moved up");
        let ud = UdDest {
            dlid: 0,
            is_global: true,
            dgid: mlx5_dv::Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0xff, 0xfe, 0, 0, 1]),
            sgid_index: 3,
            hop_limit: 64,
            remote_qpn: 0x12_3456,
            remote_qkey: 0x1111_1111,
        };
        let av = datagram_seg(&ud);
        assert_eq!(av[..4], 0x1111_1111u32.to_be_bytes());
        assert_eq!(av[8..12], (0x8000_0000u32 | 0x12_3456).to_be_bytes(), "MLX5_EXTENDED_UD_AV");
        assert_eq!(av[20..26], [0, 0, 0, 0, 0, 1], "the MAC of a link-local GID");
        assert_eq!(av[28..32], (1u32 << 30 | 3 << 20).to_be_bytes());
        resize_after_ctrl(&mut wqe, Some(&av));
        assert_eq!((wqe.len(), wqe[7]), (128, 5));
        assert_eq!(wqe[16..64], av);
        assert_eq!(wqe[64..68], 100u32.to_be_bytes());
    }
}
