//! [`mlx5_dv::Srqs`] of the simulator: SRQs, XRC domains, `ibv_open_qp`, receive WQs and
//! their indirection tables, down to the provider.

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

    fn create_wq(&mut self, attr: &mlx5_dv::WqInitAttr) -> Result<mlx5_dv::Wq> {
        down!(self.create_wq(attr))
    }

    fn modify_wq(&mut self, wq: &mlx5_dv::Wq, attr: &mlx5_dv::WqAttr) -> Result<()> {
        down!(self.modify_wq(wq, attr))
    }

    fn destroy_wq(&mut self, wq: &mlx5_dv::Wq) -> Result<()> {
        down!(self.destroy_wq(wq))
    }

    fn post_wq_recv(&mut self, wq: &mlx5_dv::Wq, wrs: &[RecvWr]) -> Result<()> {
        down!(self.post_wq_recv(wq, wrs))
    }

    fn create_rwq_ind_table(&mut self, attr: &mlx5_dv::RwqIndTableInitAttr) -> Result<mlx5_dv::RwqIndTable> {
        down!(self.create_rwq_ind_table(attr))
    }

    fn destroy_rwq_ind_table(&mut self, table: &mlx5_dv::RwqIndTable) -> Result<()> {
        down!(self.destroy_rwq_ind_table(table))
    }
}
