//! The send queue's bytes as libmlx5 wrote them, for comparing with the WQEs the simulator's
//! provider builds.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::wqe::SEND_WQE_BB;
use mlx5_dv::prm::wqe::compose::linearise;
use mlx5_dv::{Error, Op, PdHandle, Qp, Result};

use crate::backend::HwBackend;
use crate::call::c_call;
use crate::sys::mlx5dv::{mlx5dv_cq, mlx5dv_obj, mlx5dv_obj_type, mlx5dv_pd, mlx5dv_qp};

impl HwBackend {
    /// The send WQE that starts at basic block `index` (modulo the ring) of `qp`'s send queue,
    /// read from the buffer `mlx5dv_init_obj` reports and followed across the ring's end.
    pub fn sq_wqe_bytes(&mut self, qp: &Qp, index: u32) -> Result<Vec<u8>> {
        let op = Op::InitObj;
        let ptr = self.objs.qps.get(qp.handle, op)?.ptr;
        // SAFETY: plain data; zero is the C default.
        let mut out: mlx5dv_qp = unsafe { std::mem::zeroed() };
        // SAFETY: plain data.
        let mut obj: mlx5dv_obj = unsafe { std::mem::zeroed() };
        obj.qp.in_ = ptr;
        obj.qp.out = &mut out;
        // SAFETY: the QP is live; obj.qp.out points at `out` for the call.
        unsafe { self.init_obj(op, &mut obj, mlx5dv_obj_type::MLX5DV_OBJ_QP) }?;
        let (count, stride) = (out.sq.wqe_cnt as usize, out.sq.stride as usize);
        if out.sq.buf.is_null() || count == 0 || stride != SEND_WQE_BB {
            return Err(Error::new(op, EINVAL, format!("the QP has no readable send queue ({count} x {stride})")));
        }
        let len = count.checked_mul(stride).ok_or_else(|| Error::new(op, EINVAL, "send queue size overflows"))?;
        // SAFETY: libmlx5 reports a send queue of wqe_cnt * stride bytes at sq.buf, alive with the QP.
        let ring = unsafe { std::slice::from_raw_parts(out.sq.buf.cast::<u8>(), len) }.to_vec();
        linearise(&ring, index as usize % count)
            .ok_or_else(|| Error::new(op, EINVAL, format!("no WQE at basic block {index}")))
    }

    /// Entry `index` (modulo the ring) of `cq`'s ring, read from the buffer
    /// `mlx5dv_init_obj(MLX5DV_OBJ_CQ)` reports, with its `cqe_size` and `cqe_cnt`.
    pub fn cq_entry_bytes(&mut self, cq: &mlx5_dv::Cq, index: u32) -> Result<mlx5_dv::CqEntry> {
        let op = Op::InitObj;
        let ptr = self.objs.cqs.get(cq.handle, op)?.ptr;
        // SAFETY: plain data; zero is the C default.
        let mut out: mlx5dv_cq = unsafe { std::mem::zeroed() };
        // SAFETY: plain data.
        let mut obj: mlx5dv_obj = unsafe { std::mem::zeroed() };
        obj.cq.in_ = ptr;
        obj.cq.out = &mut out;
        // SAFETY: the CQ is live; obj.cq.out points at `out` for the call.
        unsafe { self.init_obj(op, &mut obj, mlx5dv_obj_type::MLX5DV_OBJ_CQ) }?;
        let (count, size) = (out.cqe_cnt, out.cqe_size);
        if out.buf.is_null() || count == 0 || size == 0 {
            return Err(Error::new(op, EINVAL, format!("the CQ has no readable ring ({count} x {size})")));
        }
        let at = (index % count) as usize * size as usize;
        // SAFETY: libmlx5 reports a ring of cqe_cnt * cqe_size bytes at buf, alive with the CQ.
        let bytes = unsafe { std::slice::from_raw_parts(out.buf.cast::<u8>().add(at), size as usize) }.to_vec();
        Ok(mlx5_dv::CqEntry { cqe_size: size, cqe_cnt: count, bytes })
    }

    /// `mlx5dv_init_obj(MLX5DV_OBJ_PD)`: the PD's number.
    pub fn pd_number(&mut self, pd: PdHandle) -> Result<u32> {
        let op = Op::InitObj;
        let ptr = self.objs.pds.get(pd, op)?.ptr;
        // SAFETY: plain data; zero is the C default.
        let mut out: mlx5dv_pd = unsafe { std::mem::zeroed() };
        // SAFETY: plain data.
        let mut obj: mlx5dv_obj = unsafe { std::mem::zeroed() };
        obj.pd.in_ = ptr;
        obj.pd.out = &mut out;
        // SAFETY: the PD is live; obj.pd.out points at `out` for the call.
        unsafe { self.init_obj(op, &mut obj, mlx5dv_obj_type::MLX5DV_OBJ_PD) }?;
        Ok(out.pdn)
    }

    /// `mlx5dv_init_obj(obj, ty)`.
    ///
    /// # Safety
    ///
    /// `obj`'s member for `ty` names a live object and an output struct valid for writes.
    unsafe fn init_obj(&self, op: Op, obj: &mut mlx5dv_obj, ty: mlx5dv_obj_type::Type) -> Result<()> {
        let init = self
            .lib()
            .dv
            .mlx5dv_init_obj
            .as_ref()
            .map_err(|_| Error::new(op, EOPNOTSUPP, "the installed libmlx5 has no mlx5dv_init_obj"))?;
        // SAFETY: the caller's contract.
        c_call(op, unsafe { init(obj, u64::from(ty)) }, "mlx5dv_init_obj")
    }
}
