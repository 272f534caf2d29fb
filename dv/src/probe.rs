//! Learning the kernel's features from outside, with calls whose outcome depends on them.
//!
//! User space cannot read what mlx5_ib granted at context allocation; a backend over the real
//! stack probes it once when it opens, and reports the answers in [`crate::Caps`]. Each probe
//! answers `None` when its call failed for a reason that says nothing about the feature.

use crate::api::context::ContextAttr;
use crate::api::mkey::{MkeyInitAttr, MkeyInitFlags};
use crate::api::queue::{DvQpCreateFlags, DvQpInitAttr, DvSendOpsFlags, QpCap, QpInitAttr, dv_qp};
use crate::backend::Backend;
use crate::caps::KernelFacts;
use crate::errno::EOPNOTSUPP;

/// Probe all three kernel facts on the mlx5 device `dev`.
pub fn kernel_facts(b: &mut dyn Backend, dev: &str) -> KernelFacts {
    let devx = devx(b, dev);
    KernelFacts {
        devx,
        mkey_update_tag: if devx == Some(true) { mkey_update_tag(b, dev) } else { None },
        sqd2rts: sqd2rts(b, dev),
    }
}

/// The kernel grants DEVX iff `mlx5dv_open_device` with `MLX5DV_CONTEXT_FLAGS_DEVX` succeeds;
/// EOPNOTSUPP means the device is not an mlx5 device at all.
pub fn devx(b: &mut dyn Backend, dev: &str) -> Option<bool> {
    match b.open_device(dev, Some(&ContextAttr::devx())) {
        Ok(ctx) => {
            let _ = b.close_device(ctx);
            Some(true)
        }
        Err(e) if e.errno() == EOPNOTSUPP => None,
        Err(_) => Some(false),
    }
}

/// Tag update is granted iff an `INDIRECT | UPDATE_TAG` mkey can be created on a DEVX
/// context; the provider refuses the flag with EOPNOTSUPP otherwise.
pub fn mkey_update_tag(b: &mut dyn Backend, dev: &str) -> Option<bool> {
    let ctx = b.open_device(dev, Some(&ContextAttr::devx())).ok()?;
    let answer = b.alloc_pd(ctx).ok().and_then(|pd| {
        let attr =
            MkeyInitAttr { pd, create_flags: MkeyInitFlags::INDIRECT | MkeyInitFlags::UPDATE_TAG, max_entries: 4 };
        let r = match b.create_mkey(&attr) {
            Ok(m) => {
                let _ = b.destroy_mkey(&m);
                Some(true)
            }
            Err(e) if e.errno() == EOPNOTSUPP => Some(false),
            Err(_) => None,
        };
        let _ = b.dealloc_pd(pd);
        r
    });
    let _ = b.close_device(ctx);
    answer
}

/// SQD→RTS is granted iff an RC QP with `MLX5DV_QP_CREATE_SIG_PIPELINING` can be created;
/// the provider refuses the flag with EOPNOTSUPP otherwise.
pub fn sqd2rts(b: &mut dyn Backend, dev: &str) -> Option<bool> {
    rc_qp_is_created(b, dev, DvQpInitAttr::new(dv_qp::CREATE_SIG_PIPELINING, dv_qp::WITH_MKEY_CONFIGURE))
}

/// The device has the DMA engine of `MLX5DV_QP_EX_WITH_MEMCPY` iff an RC QP with that send op
/// can be created; the provider refuses it with EOPNOTSUPP otherwise.
pub fn dma_mmo(b: &mut dyn Backend, dev: &str) -> Option<bool> {
    rc_qp_is_created(b, dev, DvQpInitAttr::new(DvQpCreateFlags::empty(), dv_qp::WITH_MEMCPY))
}

/// Raw packet QPs are offered iff one is created: EOPNOTSUPP (an InfiniBand port, a device
/// without them) says no; EPERM (no `CAP_NET_RAW`) or another failure says nothing (`None`).
pub fn raw_packet(b: &mut dyn Backend, dev: &str) -> Option<bool> {
    qp_is_created(b, dev, |pd, cq, cap| QpInitAttr {
        qp_type: crate::qp_type::RAW_PACKET,
        send_ops_flags: crate::send_ops::SEND,
        ..QpInitAttr::rc(pd, cq, cap, None)
    })
}

/// Whether an RC QP with `dv` is created: `Some(false)` for EOPNOTSUPP, `None` for any other
/// failure, which says nothing about the feature.
fn rc_qp_is_created(b: &mut dyn Backend, dev: &str, dv: DvQpInitAttr) -> Option<bool> {
    qp_is_created(b, dev, |pd, cq, cap| QpInitAttr::rc(pd, cq, cap, Some(dv)))
}

/// Whether the QP `attr` describes is created on `dev`: `Some(false)` for EOPNOTSUPP, `None`
/// for any other failure.
fn qp_is_created(
    b: &mut dyn Backend,
    dev: &str,
    attr: impl Fn(crate::PdHandle, crate::CqHandle, QpCap) -> QpInitAttr,
) -> Option<bool> {
    let ctx = b.open_ibv_device(dev).ok()?;
    let answer = (|| {
        let pd = b.alloc_pd(ctx).ok()?;
        let cq = b.create_cq(ctx, 4).ok()?;
        let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let r = match b.create_qp(&attr(pd, cq.handle, cap)) {
            Ok(qp) => {
                let _ = b.destroy_qp(&qp);
                Some(true)
            }
            Err(e) if e.errno() == EOPNOTSUPP => Some(false),
            Err(_) => None,
        };
        let _ = b.destroy_cq(&cq);
        let _ = b.dealloc_pd(pd);
        r
    })();
    let _ = b.close_device(ctx);
    answer
}

/// Out-of-order data placement is offered iff an RC QP with `MLX5DV_QP_CREATE_OOO_DP` can be
/// created: EOPNOTSUPP means the device lacks it; EINVAL a library older than the flag (`None`).
pub fn ooo_dp(b: &mut dyn Backend, dev: &str) -> Option<bool> {
    rc_qp_is_created(b, dev, DvQpInitAttr::new(dv_qp::CREATE_OOO_DP, DvSendOpsFlags::empty()))
}
