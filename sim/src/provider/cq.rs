//! CQs: `mlx5_create_cq` (and `mlx5dv_create_cq`'s vendor attributes) sizing and checks,
//! destroy and resize.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{ContextHandle, Cq, CqEntry, CqInitAttrEx, DvCqAttr, Error, Op, Result, cq_flags, dv_cq};

use super::qp::roundup_pow2;
use super::ring::CqRing;
use super::{CqObj, CtxKind, Lower, Provider};
use crate::host::Dma;
use crate::kernel::CqRequest;

impl Provider {
    /// `mlx5_create_cq`: `cqe + 1` rounded up to a power of two, capacity one less; then the
    /// kernel refuses a completion vector past the context's `num_comp_vectors`.
    pub(crate) fn create_cq(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        cqe: u32,
        comp_vector: u32,
    ) -> Result<Cq> {
        self.create_cq_with(low, ctx, &CqInitAttrEx { cqe, comp_vector, ..CqInitAttrEx::default() })
    }

    /// `mlx5dv_create_cq`: `mlx5_create_cq` with the vendor attributes checked in libmlx5's
    /// order.
    pub(crate) fn create_dv_cq(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        cqe: u32,
        comp_vector: u32,
        attr: &DvCqAttr,
    ) -> Result<Cq> {
        self.create_cq_with(low, ctx, &CqInitAttrEx { cqe, comp_vector, dv: Some(*attr), ..CqInitAttrEx::default() })
    }

    /// `ibv_create_cq_ex` / `mlx5dv_create_cq` (libmlx5's `create_cq`): after `cqe` 0, a
    /// `comp_mask` bit other than FLAGS (the trait names no parent domain) and a flag other
    /// than SINGLE_THREADED and IGNORE_OVERRUN are EINVAL; then the vendor attributes;
    /// IGNORE_OVERRUN reaches the kernel as `cqc.oi`.
    pub(crate) fn create_cq_with(&mut self, low: &mut Lower<'_>, ctx: ContextHandle, a: &CqInitAttrEx) -> Result<Cq> {
        let (cqe, comp_vector, dv) = (a.cqe, a.comp_vector, a.dv.as_ref());
        let op = if dv.is_some() { Op::CreateDvCq } else { Op::CreateCq };
        let c = self.contexts.get(ctx, op)?;
        match c.kind {
            // libibverbs' dummy op: the VFIO provider has no create_cq.
            CtxKind::Vfio => return Err(Error::new(op, EOPNOTSUPP, "the VFIO provider has no ibv_create_cq")),
            CtxKind::Other => return Err(Error::new(op, EOPNOTSUPP, "CQs are simulated on mlx5 contexts only")),
            CtxKind::Kernel { .. } => {}
        }
        if cqe == 0 {
            return Err(Error::new(op, EINVAL, "cqe is 0"));
        }
        if a.comp_mask & !cq_flags::MASK_FLAGS != 0 {
            return Err(Error::new(op, EINVAL, format!("comp_mask 0x{:x}", a.comp_mask)));
        }
        let flags = if a.comp_mask & cq_flags::MASK_FLAGS != 0 { a.flags } else { 0 };
        if flags & !(cq_flags::SINGLE_THREADED | cq_flags::IGNORE_OVERRUN) != 0 {
            return Err(Error::new(op, EINVAL, format!("creation flags 0x{flags:x}")));
        }
        let ncqe = roundup_pow2(u64::from(cqe) + 1);
        if ncqe > 1 << 24 {
            return Err(Error::new(op, EINVAL, format!("{cqe} entries round to {ncqe}, over 2^24")));
        }
        let cap = (ncqe - 1) as u32;
        let (cqe_size, compress, pad) = match dv {
            Some(a) => vendor_attrs(a, c.caps.cq, op)?,
            None => (64, None, false),
        };
        // uverbs' CQ_CREATE: the vector is an unsigned index (a negative C int is past the end).
        if comp_vector >= u32::from(self.num_comp_vectors) {
            let why = format!("comp_vector {comp_vector} is past num_comp_vectors {}", self.num_comp_vectors);
            return Err(Error::new(op, EINVAL, why));
        }
        let dev = c.dev;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let ring = CqRing::map(low.host, cap + 1, cqe_size, op)?;
        let oi = flags & cq_flags::IGNORE_OVERRUN != 0;
        let req = CqRequest { cqe: cap, ring: ring.ring.addr, dbrec: ring.dbrec, cqe_size, oi, compress, pad };
        let cqn = match low.kernel.create_cq(d, dev, ctx.id(), req) {
            Ok(n) => n,
            Err(e) => {
                ring.free(low.host);
                return Err(e);
            }
        };
        // libmlx5 marks the entries before the kernel call. Nothing reads them in between, and
        // a ring the kernel refuses (one past `log_max_cq_sz` is half a gigabyte) goes back
        // untouched.
        ring.mark_invalid(low.host);
        let handle = match self.cqs.insert(op, CqObj { ctx, dev, cqn, ring: ring.clone(), arm_sn: 0 }) {
            Ok(h) => h,
            Err(e) => {
                let _ = low.kernel.destroy_cq(low.devices, dev, cqn);
                ring.free(low.host);
                return Err(e);
            }
        };
        low.kernel.set_cq_handle(dev, cqn, handle);
        Ok(Cq { handle, cqe: cap })
    }

    /// Entry `index` of the CQ's ring as `mlx5dv_init_obj` shows it: the entry's bytes,
    /// `cqe_size` and `cqe_cnt`.
    pub(crate) fn cq_entry(&self, low: &Lower<'_>, cq: &Cq, index: u32) -> Result<CqEntry> {
        let op = Op::InitObj;
        let r = &self.cqs.get(cq.handle, op)?.ring.ring;
        let bytes = low
            .host
            .read(r.slot(index), r.stride as usize)
            .ok_or_else(|| Error::new(op, EINVAL, "the CQ's ring is not mapped"))?
            .to_vec();
        Ok(CqEntry { cqe_size: r.stride, cqe_cnt: r.wqe_cnt, bytes })
    }

    /// `ibv_destroy_cq`: EBUSY while a QP uses it.
    pub(crate) fn destroy_cq(&mut self, low: &mut Lower<'_>, cq: &Cq) -> Result<()> {
        let op = Op::DestroyCq;
        if self.cqs.users(cq.handle, op)? > 0 {
            return Err(Error::new(op, mlx5_dv::errno::EBUSY, "a QP still uses the CQ"));
        }
        // mlx5_ib_destroy_cq: a failed DESTROY_CQ fails the call, and the CQ stays.
        let (dev, cqn) = self.cqs.get(cq.handle, op).map(|c| (c.dev, c.cqn))?;
        low.kernel.destroy_cq(low.devices, dev, cqn)?;
        let c = self.cqs.take(cq.handle, op)?;
        c.ring.free(low.host);
        Ok(())
    }

    /// `mlx5_resize_cq`: `cqe` times 64 past `INT_MAX` is EINVAL; `cqe + 1` rounded up to a
    /// power of two the size the CQ has changes nothing; else a new ring, the kernel's
    /// resize (its bounds, and the device's refusal of a size below the CQEs not yet
    /// read, are EINVAL), and the unread CQEs move over.
    pub(crate) fn resize_cq(&mut self, low: &mut Lower<'_>, cq: &Cq, cqe: u32) -> Result<Cq> {
        let op = Op::ResizeCq;
        let c = self.cqs.get(cq.handle, op)?;
        let (dev, cqn, cur, cqe_size) = (c.dev, c.cqn, c.ring.ring.wqe_cnt, c.ring.ring.stride);
        if u64::from(cqe) * 64 > i32::MAX as u64 {
            return Err(Error::new(op, EINVAL, format!("{cqe} CQEs of 64 bytes pass INT_MAX")));
        }
        let ncqe = roundup_pow2(u64::from(cqe) + 1);
        if ncqe == u64::from(cur) {
            return Ok(Cq { handle: cq.handle, cqe: cur - 1 });
        }
        let ncqe = ncqe as u32;
        // The command reaches the device after the work rung before it, which a device
        // runs in far less time than a command takes: let it run first.
        low.run_now();
        // libmlx5 keeps the CQE size ("currently we don't change cqe size").
        let ring = CqRing::map_ring(low.host, ncqe, cqe_size, op)?;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        if let Err(e) = low.kernel.resize_cq(d, low.host, dev, cqn, ncqe - 1, (ring.addr, cqe_size)) {
            low.host.unmap(ring.addr);
            return Err(e);
        }
        let c = self.cqs.get_mut(cq.handle, op)?;
        // libmlx5 logs a ring it cannot copy and goes on with the new one; so does this.
        let _ = c.ring.resize_into(low.host, ring);
        // libmlx5 leaves the doorbell record to the next poll; the simulated device counts
        // unread CQEs from it, so it learns at once that the RESIZE_CQ CQE is consumed.
        c.ring.update_cons_index(low.host);
        Ok(Cq { handle: cq.handle, cqe: ncqe - 1 })
    }
}

/// libmlx5's checks of `struct mlx5dv_cq_init_attr`, in `create_cq`'s order: a comp_mask bit
/// it does not know; a CQE size other than 64 or 128 (`get_cqe_size`); compression without
/// `cqe_comp_caps.max_num` or in none of its formats; an unknown flag; padding without the
/// device's 128-byte padding or on 64-byte CQEs. Each is EINVAL. The result: the CQE size,
/// the compression format and padding to hand the kernel.
fn vendor_attrs(a: &DvCqAttr, caps: crate::kernel::CqCaps, op: Op) -> Result<(u32, Option<u8>, bool)> {
    let known = dv_cq::MASK_COMPRESSED_CQE | dv_cq::MASK_FLAGS | dv_cq::MASK_CQE_SIZE;
    if a.comp_mask & !known != 0 {
        return Err(Error::new(op, EINVAL, format!("vendor comp_mask 0x{:x}", a.comp_mask)));
    }
    let size = if a.comp_mask & dv_cq::MASK_CQE_SIZE != 0 { u32::from(a.cqe_size) } else { 64 };
    if size != 64 && size != 128 {
        return Err(Error::new(op, EINVAL, format!("CQE size {size}")));
    }
    let mut compress = None;
    if a.comp_mask & dv_cq::MASK_COMPRESSED_CQE != 0 {
        let comp = caps.comp_caps();
        if comp.max_num == 0 || u32::from(a.cqe_comp_res_format) & comp.supported_format == 0 {
            let why = format!("CQE compression format 0x{:x} is not offered", a.cqe_comp_res_format);
            return Err(Error::new(op, EINVAL, why));
        }
        compress = Some(a.cqe_comp_res_format);
    }
    let mut pad = false;
    if a.comp_mask & dv_cq::MASK_FLAGS != 0 {
        if a.flags & !(dv_cq::FLAGS_RESERVED - 1) != 0 {
            return Err(Error::new(op, EINVAL, format!("vendor flags 0x{:x}", a.flags)));
        }
        if a.flags & dv_cq::FLAGS_CQE_PAD != 0 {
            if !caps.pad_128 || size != 128 {
                return Err(Error::new(op, EINVAL, format!("no CQE padding for {size}-byte CQEs")));
            }
            pad = true;
        }
    }
    Ok((size, compress, pad))
}
