//! `mlx5dv_wr_mkey_configure` and its setters (access, layouts), and `umr_wqe_finalize`.

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{Mkey, MrInterleaved, Op, QpHandle, SendFlags, Sge};

use super::super::qp::{INL_SEG, align};
use super::super::{BsfState, Provider, SigCtx, UMR_ACCESS};
use super::sig::{sig_config, transient_signature};
use super::{Chain, OpenConfigure};
use crate::device::contract::{SigBsf, UmrWqe, WqeKind};
use crate::device::translation::{Klm, RepeatEntry, Translation};

impl Provider {
    /// `mlx5_send_wr_mkey_configure`. It does not look at an earlier error: its own checks
    /// overwrite it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn configure(
        &mut self,
        qp: QpHandle,
        ch: &mut Chain,
        wr_id: u64,
        flags: SendFlags,
        mkey: &Mkey,
        num_setters: u8,
        conf_flags: mlx5_dv::MkeyConfFlags,
        comp_mask: u64,
        outstanding: u32,
        max_post: u32,
        update_tag: bool,
    ) {
        ch.open = None;
        if !flags.contains(SendFlags::INLINE) {
            ch.err = EOPNOTSUPP;
            return;
        }
        if !mlx5_dv::MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR.contains(conf_flags) || comp_mask != 0 {
            ch.err = EOPNOTSUPP;
            return;
        }
        // A full queue records ENOMEM and the builder goes on, as `mlx5_send_wr_mkey_configure`
        // does: the tag check may still replace the error, and the state changes apply.
        let _has_room = Self::wqe_init(ch, outstanding, max_post);
        let qdev = self.qps.get(qp, Op::PostSend).ok().map(|q| q.dev);
        let Some(m) = self.mkeys.get_mut(mkey.handle, Op::PostSend).ok().filter(|m| Some(m.dev) == qdev) else {
            ch.fail(EINVAL);
            return;
        };
        if mkey.lkey & 0xff != 0 && !update_tag {
            ch.err = EOPNOTSUPP;
            return;
        }
        if let Some(s) = &mut m.sig {
            s.on_configure(conf_flags.intersects(mlx5_dv::MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR));
        }
        if let Some(c) = &mut m.crypto_ctx {
            c.on_configure();
        }
        let num_desc = m.num_desc;
        let umr = UmrWqe {
            index: mkey.lkey >> 8,
            tag: (mkey.lkey & 0xff) as u8,
            access: None,
            layout: None,
            bsf_disable: false,
            sig_bsf: None,
            sig_err_count: None,
            crypto_bsf: None,
        };
        ch.open = Some(OpenConfigure {
            qp,
            xlat_bytes: 0,
            mkey: mkey.handle,
            umr,
            wr_id,
            signaled: flags.contains(SendFlags::SIGNALED),
            expected: num_setters,
            done: 0,
            num_desc,
        });
        if num_setters == 0 {
            self.finalize(ch);
        }
    }

    pub(super) fn set_access(&mut self, ch: &mut Chain, access: mlx5_dv::AccessFlags) {
        let access = access.bits();
        if ch.err != 0 {
            return;
        }
        let Some(open) = &mut ch.open else {
            ch.err = EINVAL;
            return;
        };
        if access & !UMR_ACCESS != 0 || open.umr.access.is_some() {
            ch.err = EINVAL;
            return;
        }
        open.umr.access = Some(access);
        open.done += 1;
        if open.done == open.expected {
            self.finalize(ch);
        }
    }

    pub(super) fn set_layout(&mut self, qp: QpHandle, ch: &mut Chain, layout: Layout<'_>) {
        if ch.err != 0 {
            return;
        }
        let max_inline = self.qps.get(qp, Op::PostSend).map_or(0, |q| q.max_inline_data);
        let Some(open) = &mut ch.open else {
            ch.err = EINVAL;
            return;
        };
        // size_t arithmetic, as the provider does it: a WQE with no inline room wraps.
        let room = (max_inline as u64).wrapping_add(INL_SEG as u64) / 16;
        let (n, limit) = match &layout {
            Layout::List(s) => (s.len(), room.min(u64::from(open.num_desc))),
            Layout::Interleaved(_, e) => (e.len(), room.wrapping_sub(1).min(u64::from(open.num_desc))),
        };
        // num_entries is a uint16_t in C.
        if (n as u16) as u64 > limit || n > usize::from(u16::MAX) {
            ch.err = ENOMEM;
            return;
        }
        let already = match &open.umr.layout {
            Some((_, Translation::Klm(k))) => !k.is_empty(),
            Some((_, Translation::Repeat { .. })) => true,
            _ => false,
        };
        if already {
            ch.err = EINVAL;
            return;
        }
        open.xlat_bytes = 16
            * match &layout {
                Layout::List(s) => s.len() as u32,
                Layout::Interleaved(_, e) => e.len() as u32 + 1,
            };
        let (len, xlat) = match layout {
            Layout::List(sge) => {
                let len = sge.iter().map(|s| u64::from(s.length)).sum();
                (
                    len,
                    Translation::Klm(
                        sge.iter().map(|s| Klm { byte_count: s.length, key: s.lkey, addr: s.addr }).collect(),
                    ),
                )
            }
            Layout::Interleaved(repeat, entries) => {
                let per: u64 = entries.iter().map(|e| u64::from(e.bytes_count)).sum();
                let entries = entries
                    .iter()
                    .map(|e| RepeatEntry {
                        stride: e.bytes_count.wrapping_add(e.bytes_skip) as u16,
                        byte_count: e.bytes_count as u16,
                        key: e.lkey,
                        addr: e.addr,
                    })
                    .collect();
                (per.wrapping_mul(u64::from(repeat)), Translation::Repeat { repeat_count: repeat, entries })
            }
        };
        open.umr.layout = Some((len, xlat));
        let mkey = open.mkey;
        open.done += 1;
        let finished = open.done == open.expected;
        if let Ok(m) = self.mkeys.get_mut(mkey, Op::PostSend) {
            m.length = len;
        }
        if finished {
            self.finalize(ch);
        }
    }

    /// `umr_wqe_finalize`: close the UMR WQE. A signature mkey without attributes gets its
    /// BSF disabled; new attributes get a BSF and SET_PSVs; kept attributes get SET_PSVs when
    /// a signature error must be re-armed.
    pub(super) fn finalize(&mut self, ch: &mut Chain) {
        let Some(mut open) = ch.open.take() else { return };
        let max_inline = self.qps.get(open.qp, Op::PostSend).map_or(0, |q| q.max_inline_data);
        let mut psvs: Vec<(u32, u64)> = Vec::new();
        let is_crypto = self.mkeys.get(open.mkey, Op::PostSend).is_ok_and(|m| m.crypto_ctx.is_some());
        if is_crypto {
            match self.crypto_finalize(&mut open, max_inline) {
                Ok(true) => {
                    psvs = self.mkeys.get(open.mkey, Op::PostSend).map_or(Vec::new(), |m| psv_writes(m.sig.as_ref()))
                }
                Ok(false) => {}
                Err(e) => {
                    ch.err = e;
                    return;
                }
            }
        } else if let Ok(m) = self.mkeys.get_mut(open.mkey, Op::PostSend) {
            let (length, crypto) = (m.length, m.crypto);
            if let Some(s) = &mut m.sig {
                if !s.has_attributes() && !crypto {
                    open.umr.bsf_disable = true;
                }
                let mut set_psv = false;
                if s.err_count_updated {
                    // upd_mkc_sig_err_cnt: the mkey context learns the error count's low bit.
                    s.err_count_updated = false;
                    open.umr.sig_err_count = Some((s.err_count & 1) as u8);
                    set_psv = s.state == BsfState::Set;
                }
                if s.state == BsfState::Updated {
                    let xlat = i64::from(align(open.xlat_bytes, 64));
                    if xlat + 64 > max_inline + INL_SEG {
                        ch.err = ENOMEM;
                        return;
                    }
                    if length > u64::from(u32::MAX) {
                        ch.err = EINVAL;
                        return;
                    }
                    let (mem_psv, wire_psv) = (s.mem_psv.unwrap_or(0), s.wire_psv.unwrap_or(0));
                    match s.attr.as_ref().map(sig_config) {
                        Some(Ok(cfg)) => open.umr.sig_bsf = Some(SigBsf { cfg, mem_psv, wire_psv }),
                        Some(Err(e)) => {
                            ch.err = e;
                            return;
                        }
                        None => {}
                    }
                    set_psv = true;
                }
                if set_psv {
                    psvs = psv_writes(Some(s));
                }
            }
        }
        let flags = |last: bool| if last && open.signaled { SendFlags::SIGNALED } else { SendFlags::empty() };
        Self::push(ch, open.wr_id, flags(psvs.is_empty()), mlx5_dv::wc_opcode::DRIVER1, WqeKind::Umr(open.umr.clone()));
        let n = psvs.len();
        for (i, (psv, transient)) in psvs.into_iter().enumerate() {
            // mlx5_umr_set_psv: each SET_PSV is a WQE of its own and needs room.
            if !Self::wqe_init(ch, ch.room.0, ch.room.1) {
                return;
            }
            Self::push(
                ch,
                open.wr_id,
                flags(i + 1 == n),
                mlx5_dv::wc_opcode::DRIVER1,
                WqeKind::SetPsv { psv, transient },
            );
        }
    }
}

/// `mlx5_umr_set_psv`'s writes: the memory domain's PSV first, then the wire's.
fn psv_writes(s: Option<&SigCtx>) -> Vec<(u32, u64)> {
    let Some(a) = s.and_then(|s| s.attr.map(|a| (a, s))) else { return Vec::new() };
    let (a, s) = a;
    [(a.mem, s.mem_psv), (a.wire, s.wire_psv)]
        .into_iter()
        .filter_map(|(d, p)| Some((p.unwrap_or(0), transient_signature(&d?))))
        .collect()
}

pub(super) enum Layout<'a> {
    List(&'a [Sge]),
    Interleaved(u32, &'a [MrInterleaved]),
}
