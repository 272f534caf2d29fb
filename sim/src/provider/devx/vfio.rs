//! The VFIO provider's own parts: the command interface without the kernel, the driver's
//! async EQ on vector 0 and its UAR, MSI-X vectors with eventfds, and `mlx5dv_devx_create_eq`
//! with the ring the driver allocates (IOVA = host address here).

use std::collections::BTreeMap;

use mlx5_dv::errno::{EINVAL, ENOMEM, ENOSPC, EOPNOTSUPP, EREMOTEIO};
use mlx5_dv::prm::{self, eq as e, opcode, status};
use mlx5_dv::{Buf, ContextHandle, DevxEq, EqHandle, Error, HandleTable, MsiVector, MsiVectorHandle, Op, Result};

use super::super::{Lower, Provider};
use crate::device::Device;
use crate::device::firmware::named_input;
use crate::host::{Dma as _, EventFd};
use crate::kernel;

/// `MLX5_NUM_CMD_EQE + MLX5_NUM_SPARE_EQE`, rounded up: the async EQ's 256 entries.
const ASYNC_EQ_LOG_SIZE: u8 = 8;

/// `eqc.intr` as rdma-core's `mlx5_ifc.h` has it: 8 bits (the low byte of the 12-bit field
/// of newer layouts), which `vfio_devx_create_eq` compares with the command vector 0.
const INTR_8: prm::Field = prm::Field::new("eqc.intr", 0x138, 8);

/// `cmd_hca_cap.log_max_eq_sz` in a QUERY_HCA_CAP output (the page at byte 16).
const OUT_LOG_MAX_EQ_SZ: prm::Field = prm::Field::new("log_max_eq_sz", 0x80 + 0xe0, 8);

/// What a VFIO context's driver set up at open.
#[derive(Debug, Clone)]
pub(crate) struct VfioState {
    /// `ctx->eqs_uar`: the UAR of the driver's EQs, the one `alloc_uar(NC)` hands out.
    eqs_uar: u32,
    async_eqn: u32,
    /// The async EQ's ring: host memory of the driver's, no buffer of the application's.
    async_ring: u64,
    /// `msix_fds`: the eventfd bound to each vector; vector 0 is the async EQ's.
    msix: Vec<Option<EventFd>>,
    /// `log_max_eq_sz` of the function's general capabilities, as the driver read them.
    log_max_eq_sz: u8,
}

#[derive(Debug, Clone)]
pub(super) struct MsiRec {
    ctx: ContextHandle,
    vector: u16,
}

#[derive(Debug, Clone)]
pub(super) struct EqRec {
    ctx: ContextHandle,
    dev: usize,
    eqn: u32,
    ring: Buf,
}

/// The VFIO contexts' state, vectors and EQs.
#[derive(Debug, Clone)]
pub(super) struct VfioObjects {
    states: BTreeMap<u32, VfioState>,
    msis: HandleTable<MsiVectorHandle, MsiRec>,
    eqs: HandleTable<EqHandle, EqRec>,
}

impl VfioObjects {
    pub(super) fn new(backend: mlx5_dv::BackendId) -> Self {
        VfioObjects { states: BTreeMap::new(), msis: HandleTable::new(backend), eqs: HandleTable::new(backend) }
    }

    fn state(&self, ctx: ContextHandle, op: Op) -> Result<&VfioState> {
        self.states.get(&ctx.id()).ok_or_else(|| Error::new(op, EOPNOTSUPP, "only a VFIO context has this op"))
    }

    pub(super) fn async_eqn(&self, ctx: ContextHandle, op: Op) -> Result<u32> {
        Ok(self.state(ctx, op)?.async_eqn)
    }

    pub(super) fn eqs_uar(&self, ctx: ContextHandle, op: Op) -> Result<u32> {
        Ok(self.state(ctx, op)?.eqs_uar)
    }
}

/// `mlx5_vfio_cmd_do`: a bad status is EREMOTEIO, the output holding it.
pub(super) fn cmd_do(d: &mut Device, input: &[u8], out: &mut [u8]) -> std::result::Result<(), i32> {
    d.exec(input, out);
    if prm::read_status(out).0 == status::OK { Ok(()) } else { Err(EREMOTEIO) }
}

fn vfio_only(op: Op) -> Error {
    Error::new(op, EOPNOTSUPP, "only the VFIO provider implements this (mlx5_vfio_dv_ctx_ops)")
}

impl Provider {
    /// `mlx5_vfio_alloc_context`: the driver allocates its EQ UAR and creates the async EQ
    /// on vector 0 (CMD and PAGE_REQUEST events).
    pub(crate) fn init_vfio(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        dev: usize,
        vectors: u16,
    ) -> Result<()> {
        let op = Op::IbvOpenDevice;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        // mlx5_vfio_get_caps: the general page, for the EQ size limit.
        let mut caps = vec![0u8; prm::query_hca_cap::OUT_SIZE];
        let query = prm::new_input(16, opcode::QUERY_HCA_CAP, 0, prm::query_hca_cap::OP_MOD_GENERAL_CUR);
        kernel::kernel_cmd(d, &query, &mut caps).map_err(|x| kernel::cmd_error(op, x, &caps, "QUERY_HCA_CAP"))?;
        let log_max_eq_sz = OUT_LOG_MAX_EQ_SZ.get(&caps).unwrap_or(0) as u8;
        let mut out = [0u8; 16];
        kernel::kernel_cmd(d, &prm::new_input(16, opcode::ALLOC_UAR, 0, 0), &mut out)
            .map_err(|x| kernel::cmd_error(op, x, &out, "ALLOC_UAR"))?;
        let eqs_uar = e::uar::UAR.get(&out).unwrap_or(0) as u32;
        let size = (1usize << ASYNC_EQ_LOG_SIZE) * e::eqe::SIZE;
        let ring = low.host.alloc(size).ok_or_else(|| Error::new(op, ENOMEM, "no host memory for the async EQ"))?;
        low.host.write(ring, &owner_bits(size));
        let size = size as u64;
        let mut input = prm::new_input(e::create_eq::IN_SIZE + 8, opcode::CREATE_EQ, 0, 0);
        let mask = 1u64 << e::event::CMD | 1u64 << 0x0b;
        let fields = [
            (e::create_eq::LOG_EQ_SIZE, u64::from(ASYNC_EQ_LOG_SIZE)),
            (e::create_eq::UAR_PAGE, u64::from(eqs_uar)),
            (e::create_eq::LOG_PAGE_SIZE, u64::from(log_page_size(size))),
            (e::create_eq::EVENT_BITMASK_0, mask),
        ];
        for (f, v) in fields {
            f.set(&mut input, v).map_err(|x| kernel::internal(op, x))?;
        }
        input[e::create_eq::PAS_BYTE..].copy_from_slice(&ring.to_be_bytes());
        let created = match low.devices.get_mut(dev) {
            Some(d) => kernel::kernel_cmd(d, &input, &mut out).map_err(|x| kernel::cmd_error(op, x, &out, "CREATE_EQ")),
            None => Err(Error::new(op, EINVAL, "no such device")),
        };
        if let Err(e) = created {
            low.host.unmap(ring);
            return Err(e);
        }
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let async_eqn = e::create_eq::OUT_EQ_NUMBER.get(&out).unwrap_or(0) as u32;
        d.eq_doorbell(eqs_uar, async_eqn << 24, true);
        let mut msix = vec![None; usize::from(vectors.max(1))];
        // The async EQ's vector has the driver's own eventfd.
        if let Ok(fd) = EventFd::new() {
            low.host.irqs.bind(dev, 0, fd.clone());
            msix[0] = Some(fd);
        }
        let state = VfioState { eqs_uar, async_eqn, async_ring: ring, msix, log_max_eq_sz };
        self.devx.vfio.states.insert(ctx.id(), state);
        Ok(())
    }

    /// Close a VFIO context: its EQs, vectors, the async EQ and the EQ UAR go.
    pub(super) fn close_vfio_of(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) {
        let op = Op::CloseDevice;
        for h in self.devx.vfio.eqs.handles_where(|q| q.ctx == ctx) {
            if let Ok(q) = self.devx.vfio.eqs.take(h, op) {
                destroy_eq_cmd(low, q.dev, q.eqn);
                self.free_driver_buf(low, &q.ring);
            }
        }
        for h in self.devx.vfio.msis.handles_where(|m| m.ctx == ctx) {
            let _ = self.devx.vfio.msis.take(h, op);
        }
        let dev = self.contexts.get(ctx, op).map_or(0, |c| c.dev);
        if let Some(s) = self.devx.vfio.states.remove(&ctx.id()) {
            destroy_eq_cmd(low, dev, s.async_eqn);
            low.host.unmap(s.async_ring);
            for v in 0..s.msix.len() {
                low.host.irqs.unbind(dev, v as u16);
            }
            if let Some(d) = low.devices.get_mut(dev) {
                let mut out = [0u8; 16];
                let _ = kernel::kernel_cmd(d, &named_input(opcode::DEALLOC_UAR, e::uar::UAR, s.eqs_uar), &mut out);
            }
        }
    }

    /// `mlx5dv_devx_alloc_msi_vector`.
    pub(crate) fn devx_alloc_msi_vector(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) -> Result<MsiVector> {
        let op = Op::DevxAllocMsiVector;
        let dev = self.contexts.get(ctx, op)?.dev;
        let s = self.devx.vfio.states.get_mut(&ctx.id()).ok_or_else(|| vfio_only(op))?;
        let Some(vector) = s.msix.iter().position(Option::is_none) else {
            return Err(Error::new(op, ENOSPC, format!("all {} MSI-X vectors are taken", s.msix.len())));
        };
        let fd = EventFd::new().map_err(|x| Error::new(op, x, "eventfd failed"))?;
        let raw = fd.raw();
        low.host.irqs.bind(dev, vector as u16, fd.clone());
        s.msix[vector] = Some(fd);
        let handle = self.devx.vfio.msis.insert(op, MsiRec { ctx, vector: vector as u16 })?;
        Ok(MsiVector { handle, vector: vector as i32, fd: raw })
    }

    /// `mlx5dv_devx_free_msi_vector`: the vector and fd the caller passes are checked.
    pub(crate) fn devx_free_msi_vector(&mut self, low: &mut Lower<'_>, msi: &MsiVector) -> Result<()> {
        let op = Op::DevxFreeMsiVector;
        let rec = self.devx.vfio.msis.get(msi.handle, op)?.clone();
        let dev = self.contexts.get(rec.ctx, op)?.dev;
        let s = self.devx.vfio.states.get_mut(&rec.ctx.id()).ok_or_else(|| vfio_only(op))?;
        let slot = usize::try_from(msi.vector).ok().filter(|v| *v < s.msix.len() && *v != 0);
        let Some(v) = slot.filter(|v| s.msix[*v].as_ref().map(EventFd::raw) == Some(msi.fd)) else {
            return Err(Error::new(op, EINVAL, "vector out of range, vector 0, or not the vector's eventfd"));
        };
        // libmlx5 would free the other vector and leave this one bound; refuse instead.
        if v != usize::from(rec.vector) {
            return Err(Error::new(op, EINVAL, "the vector and fd of another MSI vector"));
        }
        s.msix[v] = None;
        low.host.irqs.unbind(dev, v as u16);
        self.devx.vfio.msis.take(msi.handle, op)?;
        Ok(())
    }

    /// `read()` of a vector's eventfd.
    pub(crate) fn devx_msi_vector_read(&mut self, msi: &MsiVector) -> Result<u64> {
        let op = Op::DevxMsiVectorRead;
        let rec = self.devx.vfio.msis.get(msi.handle, op)?;
        let s = self.devx.vfio.state(rec.ctx, op)?;
        let fd = s.msix.get(usize::from(rec.vector)).cloned().flatten();
        let fd = fd.ok_or_else(|| Error::new(op, EINVAL, "the vector has no eventfd"))?;
        if fd.raw() != msi.fd {
            return Err(Error::new(op, mlx5_dv::errno::EBADF, "not the vector's eventfd"));
        }
        fd.read().map_err(|x| Error::new(op, x, "nothing to read: no interrupt since the last read"))
    }

    /// `mlx5dv_devx_create_eq` (`vfio_devx_create_eq`): EINVAL for a short input, another
    /// opcode or `intr` 0 (8 bits); then the driver's ring, one page of
    /// max(roundup_pow_of_two(2^log_eq_size * 64), 4 KiB), named by `pas[0]`.
    ///
    /// Two rules are the simulator's own: the output holds at least the 16-byte header (the
    /// provider reads the EQ number from it) and at most 1 MiB; and a ring larger than the
    /// function's `log_max_eq_sz` allows is not allocated (the firmware refuses the command
    /// either way, so the answer is the same EREMOTEIO and BAD_PARAM).
    pub(crate) fn devx_create_eq(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        input: &[u8],
        out_len: usize,
    ) -> Result<DevxEq> {
        let op = Op::DevxCreateEq;
        let dev = self.contexts.get(ctx, op)?.dev;
        let log_max_eq_sz = self.devx.vfio.state(ctx, op).map_err(|_| vfio_only(op))?.log_max_eq_sz;
        let c = e::create_eq::IN_SIZE;
        let code = prm::mbox_in::OPCODE.get(input).unwrap_or(0) as u16;
        let intr = INTR_8.get(input).unwrap_or(0);
        if input.len() < c || code != opcode::CREATE_EQ || intr == 0 {
            return Err(Error::new(op, EINVAL, "inlen < 272, an opcode other than CREATE_EQ, or intr 0"));
        }
        if !(prm::mbox_out::SIZE..=super::VFIO_MAX_OUT).contains(&out_len) {
            return Err(Error::new(op, EINVAL, format!("an output of {out_len} bytes")));
        }
        let log_size = e::create_eq::LOG_EQ_SIZE.get(input).unwrap_or(0);
        // log_eq_size is a 5-bit field: 64 << 31 fits in 64 bits.
        let size = (64u64 << log_size).next_power_of_two().max(4096);
        let ring = if log_size <= u64::from(log_max_eq_sz) {
            let len = usize::try_from(size).map_err(|_| Error::new(op, mlx5_dv::errno::ENOMEM, "ring size"))?;
            Some(self.driver_buf(low, len, op)?)
        } else {
            None
        };
        let mut with_pas = input.to_vec();
        with_pas.splice(c..c, ring.as_ref().map_or(0, |r| r.addr).to_be_bytes());
        let _ = e::create_eq::LOG_PAGE_SIZE.set(&mut with_pas, u64::from(log_page_size(size)));
        let mut out = vec![0u8; out_len];
        let r = match low.devices.get_mut(dev) {
            Some(d) => cmd_do(d, &with_pas, &mut out),
            None => Err(EINVAL),
        };
        let ring = match (r, ring) {
            (Ok(()), Some(ring)) => ring,
            (r, ring) => {
                if let Some(ring) = ring {
                    self.free_driver_buf(low, &ring);
                }
                let errno = r.err().unwrap_or(EREMOTEIO);
                return Err(kernel::cmd_error(op, errno, &out, "CREATE_EQ"));
            }
        };
        let eqn = e::create_eq::OUT_EQ_NUMBER.get(&out).unwrap_or(0) as u32;
        let handle = self.devx.vfio.eqs.insert(op, EqRec { ctx, dev, eqn, ring })?;
        Ok(DevxEq { handle, ring, out })
    }

    /// `mlx5dv_devx_destroy_eq`: DESTROY_EQ through `mlx5_vfio_cmd_exec`, so a bad status
    /// comes back as its errno.
    pub(crate) fn devx_destroy_eq(&mut self, low: &mut Lower<'_>, eq: &DevxEq) -> Result<()> {
        let op = Op::DevxDestroyEq;
        let q = self.devx.vfio.eqs.get(eq.handle, op)?.clone();
        let d = low.devices.get_mut(q.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let mut out = [0u8; 16];
        let input = named_input(opcode::DESTROY_EQ, e::destroy_eq::EQ_NUMBER, q.eqn);
        if let Err(errno) = kernel::kernel_cmd(d, &input, &mut out) {
            return Err(kernel::cmd_error(op, errno, &out, "DESTROY_EQ"));
        }
        self.devx.vfio.eqs.take(eq.handle, op)?;
        self.free_driver_buf(low, &q.ring);
        Ok(())
    }
}

fn destroy_eq_cmd(low: &mut Lower<'_>, dev: usize, eqn: u32) {
    if let Some(d) = low.devices.get_mut(dev) {
        let mut out = [0u8; 16];
        let _ = kernel::kernel_cmd(d, &named_input(opcode::DESTROY_EQ, e::destroy_eq::EQ_NUMBER, eqn), &mut out);
    }
}

/// `ilog32(size - 1) - MLX5_ADAPTER_PAGE_SHIFT`: the whole ring as one page.
fn log_page_size(size: u64) -> u8 {
    let bits = u64::BITS - size.saturating_sub(1).leading_zeros();
    bits.saturating_sub(12) as u8
}

/// A ring of EQEs with every owner bit set, as the driver initialises its own EQs.
fn owner_bits(size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    v.iter_mut().skip(e::eqe::OWNER).step_by(e::eqe::SIZE).for_each(|b| *b = 1);
    v
}
