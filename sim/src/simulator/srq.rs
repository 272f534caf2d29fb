//! [`mlx5_dv::Srqs`] of the simulator: SRQs, XRC domains and `ibv_open_qp`, down to the
//! provider.

use mlx5_dv::{RecvWr, Result};

use super::Simulator;

impl mlx5_dv::Srqs for Simulator {
    fn create_srq(&mut self, attr: &mlx5_dv::SrqInitAttr) -> Result<mlx5_dv::Srq> {
        down!(self.create_srq(attr))
    }

    fn modify_srq(&mut self, srq: &mlx5_dv::Srq, attr: &mlx5_dv::SrqAttr, mask: u32) -> Result<()> {
        down!(self.modify_srq(srq, attr, mask))
    }

    fn query_srq(&mut self, srq: &mlx5_dv::Srq) -> Result<mlx5_dv::SrqAttr> {
        down!(self.query_srq(srq))
    }

    fn destroy_srq(&mut self, srq: &mlx5_dv::Srq) -> Result<()> {
        down!(self.destroy_srq(srq))
    }

    fn post_srq_recv(&mut self, srq: &mlx5_dv::Srq, wrs: &[RecvWr]) -> Result<()> {
        down!(self.post_srq_recv(srq, wrs))
    }

    fn post_srq_ops(&mut self, srq: &mlx5_dv::Srq, ops: &[mlx5_dv::SrqOpWr]) -> Result<Vec<u32>> {
        down!(self.post_srq_ops(srq, ops))
    }

    fn open_xrcd(&mut self, attr: &mlx5_dv::XrcdInitAttr) -> Result<mlx5_dv::Xrcd> {
        down!(self.open_xrcd(attr))
    }

    fn close_xrcd(&mut self, xrcd: &mlx5_dv::Xrcd) -> Result<()> {
        down!(self.close_xrcd(xrcd))
    }

    fn open_qp(&mut self, attr: &mlx5_dv::QpOpenAttr) -> Result<mlx5_dv::Qp> {
        down!(self.open_qp(attr))
    }
}
