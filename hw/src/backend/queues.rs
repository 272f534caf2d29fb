//! [`Queues`] of the hw backend: CQs, QPs and their work through libibverbs and libmlx5.

use mlx5_dv::errno::EOPNOTSUPP;
use mlx5_dv::{ContextHandle, Error, Op, Queues, Result};

use super::HwBackend;

impl Queues for HwBackend {
    fn bind_mw(&mut self, qp: &mlx5_dv::Qp, mw: &mlx5_dv::Mw, bind: &mlx5_dv::MwBind) -> Result<u32> {
        self.hw_bind_mw(qp, mw, bind)
    }

    fn create_cq_on_vector(&mut self, ctx: ContextHandle, cqe: u32, comp_vector: u32) -> Result<mlx5_dv::Cq> {
        self.hw_create_cq(ctx, cqe, comp_vector)
    }

    fn create_dv_cq(
        &mut self,
        ctx: ContextHandle,
        cqe: u32,
        comp_vector: u32,
        attr: &mlx5_dv::DvCqAttr,
    ) -> Result<mlx5_dv::Cq> {
        self.hw_create_dv_cq(ctx, cqe, comp_vector, attr)
    }

    fn create_cq_ex(&mut self, ctx: ContextHandle, attr: &mlx5_dv::CqInitAttrEx) -> Result<mlx5_dv::Cq> {
        self.hw_create_cq_ex(ctx, attr)
    }

    fn cq_entry(&mut self, cq: &mlx5_dv::Cq, index: u32) -> Result<mlx5_dv::CqEntry> {
        self.cq_entry_bytes(cq, index)
    }

    fn destroy_cq(&mut self, cq: &mlx5_dv::Cq) -> Result<()> {
        self.hw_destroy_cq(cq)
    }

    fn modify_qp_udp_sport(&mut self, qp: &mlx5_dv::Qp, udp_sport: u16) -> Result<()> {
        self.hw_modify_qp_udp_sport(qp, udp_sport)
    }

    fn dci_stream_id_reset(&mut self, qp: &mlx5_dv::Qp, stream_id: u16) -> Result<()> {
        self.hw_dci_stream_id_reset(qp, stream_id)
    }

    fn modify_qp_sched_elem(&mut self, _qp: &mlx5_dv::Qp, _requestor: u32, _responder: u32) -> Result<()> {
        // libmlx5 takes the leaves it made in mlx5dv_sched_leaf_create, which this backend
        // does not make: a case that needs it skips on a card.
        Err(Error::new(
            Op::ModifyQpSchedElem,
            mlx5_dv::errno::EOPNOTSUPP,
            "mlx5dv_modify_qp_sched_elem takes libmlx5's sched leaves; not forwarded",
        ))
    }

    fn map_ah_to_qp(&mut self, _ctx: ContextHandle, _ah: &mlx5_dv::UdDest, _qp_num: u32) -> Result<()> {
        // The AH would need a PD of the context, which the call does not name; the backend
        // makes AHs only for the WRs that use them.
        Err(Error::new(mlx5_dv::Op::MapAhToQp, EOPNOTSUPP, "mlx5dv_map_ah_to_qp is not forwarded by the hw backend"))
    }

    fn create_flow(&mut self, qp: &mlx5_dv::Qp, attr: &mlx5_dv::FlowAttr) -> Result<mlx5_dv::Flow> {
        self.hw_create_flow(qp, attr)
    }

    fn destroy_flow(&mut self, flow: &mlx5_dv::Flow) -> Result<()> {
        self.hw_destroy_flow(flow)
    }

    fn create_flow_matcher(
        &mut self,
        _ctx: mlx5_dv::ContextHandle,
        _attr: &mlx5_dv::FlowMatcherAttr,
    ) -> Result<mlx5_dv::FlowMatcher> {
        Err(Error::new(Op::CreateFlowMatcher, EOPNOTSUPP, "mlx5dv flow matchers are not passed to the card"))
    }

    fn destroy_flow_matcher(&mut self, _matcher: &mlx5_dv::FlowMatcher) -> Result<()> {
        Err(Error::new(Op::DestroyFlowMatcher, EOPNOTSUPP, "mlx5dv flow matchers are not passed to the card"))
    }

    fn create_matcher_flow(
        &mut self,
        _matcher: &mlx5_dv::FlowMatcher,
        _value: &[u8],
        _actions: &[mlx5_dv::MatcherAction],
    ) -> Result<mlx5_dv::Flow> {
        Err(Error::new(Op::CreateMatcherFlow, EOPNOTSUPP, "mlx5dv flow matchers are not passed to the card"))
    }

    fn resize_cq(&mut self, cq: &mlx5_dv::Cq, cqe: u32) -> Result<mlx5_dv::Cq> {
        self.hw_resize_cq(cq, cqe)
    }

    fn poll_cq(&mut self, cq: &mlx5_dv::Cq, max: usize) -> Result<Vec<mlx5_dv::Wc>> {
        self.hw_poll_cq(cq, max)
    }

    fn create_qp(&mut self, attr: &mlx5_dv::QpInitAttr) -> Result<mlx5_dv::Qp> {
        self.hw_create_qp(attr)
    }

    fn modify_qp(&mut self, qp: &mlx5_dv::Qp, attr: &mlx5_dv::QpModify) -> Result<()> {
        self.hw_modify_qp(qp, attr)
    }

    fn query_qp_state(&mut self, qp: &mlx5_dv::Qp) -> Result<mlx5_dv::QpState> {
        self.hw_query_qp_state(qp)
    }

    fn sq_wqe(&mut self, qp: &mlx5_dv::Qp, index: u32) -> Result<Vec<u8>> {
        self.sq_wqe_bytes(qp, index)
    }

    fn destroy_qp(&mut self, qp: &mlx5_dv::Qp) -> Result<()> {
        self.hw_destroy_qp(qp)
    }

    fn post_send(&mut self, qp: &mlx5_dv::Qp, ops: &[mlx5_dv::WrOp]) -> Result<()> {
        self.hw_post_send(qp, ops)
    }

    fn post_send_wr(&mut self, qp: &mlx5_dv::Qp, wrs: &[mlx5_dv::SendWr]) -> Result<()> {
        self.hw_post_send_wr(qp, wrs)
    }

    fn post_recv(&mut self, qp: &mlx5_dv::Qp, wrs: &[mlx5_dv::RecvWr]) -> Result<()> {
        self.hw_post_recv(qp, wrs)
    }

    fn cancel_posted_send_wrs(&mut self, qp: &mlx5_dv::Qp, wr_id: u64) -> Result<u32> {
        self.hw_cancel_posted_send_wrs(qp, wr_id)
    }
}
