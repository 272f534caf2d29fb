//! Small device objects of libmlx5 beyond reserved QP numbers: packet pacing entries
//! (`mlx5dv_pp_alloc` / `_free`), VARs (`mlx5dv_alloc_var` / `_free_var`) and the LAG port of
//! a QP (`mlx5dv_query_qp_lag_port` / `mlx5dv_modify_qp_lag_port`).

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    ContextHandle, Error, MLX5DV_PP_ALLOC_FLAGS_DEDICATED_INDEX, MLX5DV_VAR_ALLOC_FLAG_TLP, Op, PpEntry, QpHandle,
    Result, Var, qp_type,
};

use super::crypto::kernel_ctx;
use super::{Lower, Provider};

impl Provider {
    /// `_mlx5dv_pp_alloc`: EOPNOTSUPP for flags past DEDICATED_INDEX (and on a context whose
    /// provider has no such op), then the kernel's method.
    pub(crate) fn pp_alloc(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        pp_context: &[u8],
        flags: u32,
    ) -> Result<PpEntry> {
        let op = Op::PpAlloc;
        let (uid, dev) = kernel_ctx(self, ctx, op)?;
        if flags & !MLX5DV_PP_ALLOC_FLAGS_DEDICATED_INDEX != 0 {
            return Err(Error::new(op, EOPNOTSUPP, format!("flags 0x{flags:x}")));
        }
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let dedicated = flags & MLX5DV_PP_ALLOC_FLAGS_DEDICATED_INDEX != 0;
        let (handle, index) = low.kernel.pp_alloc(d, dev, (ctx.id(), uid), pp_context, dedicated)?;
        Ok(PpEntry { ctx, handle, index })
    }

    /// `_mlx5dv_pp_free`.
    pub(crate) fn pp_free(&mut self, low: &mut Lower<'_>, pp: &PpEntry) -> Result<()> {
        kernel_ctx(self, pp.ctx, Op::PpFree)?;
        low.kernel.pp_free(low.devices, pp.ctx.id(), pp.handle)
    }

    /// `_mlx5dv_alloc_var`: EOPNOTSUPP for flags past TLP, then the kernel's method.
    pub(crate) fn alloc_var(&mut self, low: &mut Lower<'_>, ctx: ContextHandle, flags: u32) -> Result<Var> {
        let op = Op::AllocVar;
        let (_, dev) = kernel_ctx(self, ctx, op)?;
        if flags & !MLX5DV_VAR_ALLOC_FLAG_TLP != 0 {
            return Err(Error::new(op, EOPNOTSUPP, format!("flags 0x{flags:x}")));
        }
        let d = low.devices.get(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let tlp = flags & MLX5DV_VAR_ALLOC_FLAG_TLP != 0;
        let (handle, page_id, length, mmap_off) = low.kernel.alloc_var(d, dev, ctx.id(), tlp)?;
        Ok(Var { ctx, handle, page_id, length, mmap_off })
    }

    /// `_mlx5dv_free_var`.
    pub(crate) fn free_var(&mut self, low: &mut Lower<'_>, var: &Var) -> Result<()> {
        kernel_ctx(self, var.ctx, Op::FreeVar)?;
        low.kernel.free_var(var.ctx.id(), var.handle)
    }

    /// `lag_operation_supported`: EOPNOTSUPP unless the device has more than one LAG port and
    /// the QP is of a type with a transmit port (RC, UD, UC, raw packet, XRC send, DCI).
    fn lag_supported(&self, qp: QpHandle, op: Op) -> Result<()> {
        let q = self.qps.get(qp, op)?;
        let c = self.contexts.get(q.ctx, op)?;
        kernel_ctx(self, q.ctx, op)?;
        if c.caps.num_lag_ports <= 1 {
            return Err(Error::new(op, EOPNOTSUPP, "the device has no LAG (num_lag_ports <= 1)"));
        }
        let typed =
            matches!(q.qp_type, qp_type::RC | qp_type::UD | qp_type::UC | qp_type::RAW_PACKET | qp_type::XRC_SEND)
                || q.dci;
        if !typed {
            return Err(Error::new(op, EOPNOTSUPP, "the QP type has no LAG port"));
        }
        // The simulated devices are single-port; a profile with LAG would go on to QUERY_LAG.
        Err(Error::new(op, EOPNOTSUPP, "LAG is not simulated"))
    }

    /// `_mlx5dv_query_qp_lag_port`.
    pub(crate) fn query_qp_lag_port(&mut self, qp: QpHandle) -> Result<(u8, u8)> {
        self.lag_supported(qp, Op::QueryQpLagPort).map(|()| (0, 0))
    }

    /// `_mlx5dv_modify_qp_lag_port`: queries first, so a device without LAG answers as the
    /// query does.
    pub(crate) fn modify_qp_lag_port(&mut self, qp: QpHandle, _port: u8) -> Result<()> {
        self.lag_supported(qp, Op::ModifyQpLagPort)
    }
}
