//! Performing a [`Call`] on a backend, and naming it as an [`Op`].

use super::{Call, Reply};
use crate::backend::Backend;
use crate::error::Op;

impl Call {
    /// Perform the call on `b` and wrap its result.
    pub fn apply(&self, b: &mut dyn Backend) -> Reply {
        match self {
            Call::DeviceList => Reply::DeviceList(b.device_list()),
            Call::OpenDevice { device, attr } => Reply::OpenDevice(b.open_device(device, attr.as_ref())),
            Call::OpenIbvDevice { device } => Reply::OpenIbvDevice(b.open_ibv_device(device)),
            Call::CloseDevice { ctx } => Reply::CloseDevice(b.close_device(*ctx)),
            Call::QueryDevice { ctx, comp_mask } => Reply::QueryDevice(b.query_device(*ctx, *comp_mask)),
            Call::QueryPort { ctx, port_num } => Reply::QueryPort(b.query_port(*ctx, *port_num)),
            Call::AllocPd { ctx } => Reply::AllocPd(b.alloc_pd(*ctx)),
            Call::DeallocPd { pd } => Reply::DeallocPd(b.dealloc_pd(*pd)),
            Call::GetAsyncEvent { ctx } => Reply::GetAsyncEvent(b.get_async_event(*ctx)),
            Call::CreateMkey { attr } => Reply::CreateMkey(b.create_mkey(attr)),
            Call::DestroyMkey { mkey } => Reply::DestroyMkey(b.destroy_mkey(mkey)),
            Call::MkeyCheck { mkey } => Reply::MkeyCheck(b.mkey_check(mkey)),
            Call::AllocBuf { len } => Reply::AllocBuf(b.alloc_buf(*len)),
            Call::FreeBuf { buf } => Reply::FreeBuf(b.free_buf(buf)),
            Call::WriteBuf { buf, offset, data } => Reply::WriteBuf(b.write_buf(buf, *offset, data)),
            Call::ReadBuf { buf, offset, len } => Reply::ReadBuf(b.read_buf(buf, *offset, *len)),
            Call::RegMr { pd, addr, length, access } => Reply::RegMr(b.reg_mr(*pd, *addr, *length, *access)),
            Call::DeregMr { mr } => Reply::DeregMr(b.dereg_mr(mr)),
            Call::AdviseMr { pd, advice, flags, sges } => Reply::AdviseMr(b.advise_mr(*pd, *advice, *flags, sges)),
            Call::AllocDmabuf { len } => Reply::AllocDmabuf(b.alloc_dmabuf(*len)),
            Call::FreeDmabuf { dmabuf } => Reply::FreeDmabuf(b.free_dmabuf(dmabuf)),
            Call::RegDmabufMr { pd, offset, length, iova, fd, access } => {
                Reply::RegDmabufMr(b.reg_dmabuf_mr(*pd, *offset, *length, *iova, *fd, *access))
            }
            Call::DvRegDmabufMr { pd, offset, length, iova, fd, access, mlx5_access } => {
                Reply::DvRegDmabufMr(b.dv_reg_dmabuf_mr(*pd, *offset, *length, *iova, *fd, *access, *mlx5_access))
            }
            Call::GetDataDirectSysfsPath { ctx, buf_len } => {
                Reply::GetDataDirectSysfsPath(b.get_data_direct_sysfs_path(*ctx, *buf_len))
            }
            Call::CreateCq { ctx, cqe, comp_vector } => {
                Reply::CreateCq(b.create_cq_on_vector(*ctx, *cqe, *comp_vector))
            }
            Call::CreateCqEx { ctx, attr } => Reply::CreateCqEx(b.create_cq_ex(*ctx, attr)),
            Call::CqEntry { cq, index } => Reply::CqEntry(b.cq_entry(cq, *index)),
            Call::DestroyCq { cq } => Reply::DestroyCq(b.destroy_cq(cq)),
            Call::ResizeCq { cq, cqe } => Reply::ResizeCq(b.resize_cq(cq, *cqe)),
            Call::ModifyQpUdpSport { qp, udp_sport } => Reply::ModifyQpUdpSport(b.modify_qp_udp_sport(qp, *udp_sport)),
            Call::CreateDvCq { ctx, cqe, comp_vector, attr } => {
                Reply::CreateDvCq(b.create_dv_cq(*ctx, *cqe, *comp_vector, attr))
            }
            Call::DciStreamIdReset { qp, stream_id } => Reply::DciStreamIdReset(b.dci_stream_id_reset(qp, *stream_id)),
            Call::ModifyQpSchedElem { qp, requestor, responder } => {
                Reply::ModifyQpSchedElem(b.modify_qp_sched_elem(qp, *requestor, *responder))
            }
            Call::MapAhToQp { ctx, ah, qp_num } => Reply::MapAhToQp(b.map_ah_to_qp(*ctx, ah, *qp_num)),
            Call::CreateFlow { qp, attr } => Reply::CreateFlow(b.create_flow(qp, attr)),
            Call::DestroyFlow { flow } => Reply::DestroyFlow(b.destroy_flow(flow)),
            Call::CreateFlowMatcher { ctx, attr } => Reply::CreateFlowMatcher(b.create_flow_matcher(*ctx, attr)),
            Call::DestroyFlowMatcher { matcher } => Reply::DestroyFlowMatcher(b.destroy_flow_matcher(matcher)),
            Call::CreateMatcherFlow { matcher, value, actions } => {
                Reply::CreateMatcherFlow(b.create_matcher_flow(matcher, value, actions))
            }
            Call::PollCq { cq, max } => Reply::PollCq(b.poll_cq(cq, *max)),
            Call::CreateQp { attr } => Reply::CreateQp(b.create_qp(attr)),
            Call::ModifyQp { qp, attr } => Reply::ModifyQp(b.modify_qp(qp, attr)),
            Call::QueryQpState { qp } => Reply::QueryQpState(b.query_qp_state(qp)),
            Call::SqWqe { qp, index } => Reply::SqWqe(b.sq_wqe(qp, *index)),
            Call::DestroyQp { qp } => Reply::DestroyQp(b.destroy_qp(qp)),
            Call::PostSend { qp, ops } => Reply::PostSend(b.post_send(qp, ops)),
            Call::PostSendWr { qp, wrs } => Reply::PostSendWr(b.post_send_wr(qp, wrs)),
            Call::PostRecv { qp, wrs } => Reply::PostRecv(b.post_recv(qp, wrs)),
            Call::CancelPostedSendWrs { qp, wr_id } => Reply::CancelPostedSendWrs(b.cancel_posted_send_wrs(qp, *wr_id)),
            Call::CreateSrq { attr } => Reply::CreateSrq(b.create_srq(attr)),
            Call::ModifySrq { srq, attr, mask } => Reply::ModifySrq(b.modify_srq(srq, attr, *mask)),
            Call::QuerySrq { srq } => Reply::QuerySrq(b.query_srq(srq)),
            Call::DestroySrq { srq } => Reply::DestroySrq(b.destroy_srq(srq)),
            Call::PostSrqRecv { srq, wrs } => Reply::PostSrqRecv(b.post_srq_recv(srq, wrs)),
            Call::PostSrqOps { srq, ops } => Reply::PostSrqOps(b.post_srq_ops(srq, ops)),
            Call::OpenXrcd { attr } => Reply::OpenXrcd(b.open_xrcd(attr)),
            Call::CloseXrcd { xrcd } => Reply::CloseXrcd(b.close_xrcd(xrcd)),
            Call::OpenQp { attr } => Reply::OpenQp(b.open_qp(attr)),
            Call::CreateWq { attr } => Reply::CreateWq(b.create_wq(attr)),
            Call::ModifyWq { wq, attr } => Reply::ModifyWq(b.modify_wq(wq, attr)),
            Call::DestroyWq { wq } => Reply::DestroyWq(b.destroy_wq(wq)),
            Call::PostWqRecv { wq, wrs } => Reply::PostWqRecv(b.post_wq_recv(wq, wrs)),
            Call::CreateRwqIndTable { attr } => Reply::CreateRwqIndTable(b.create_rwq_ind_table(attr)),
            Call::DestroyRwqIndTable { table } => Reply::DestroyRwqIndTable(b.destroy_rwq_ind_table(table)),
            Call::CryptoLogin { ctx, attr } => Reply::CryptoLogin(b.crypto_login(*ctx, attr)),
            Call::CryptoLoginQueryState { ctx } => Reply::CryptoLoginQueryState(b.crypto_login_query_state(*ctx)),
            Call::CryptoLogout { ctx } => Reply::CryptoLogout(b.crypto_logout(*ctx)),
            Call::CryptoLoginCreate { ctx, attr } => Reply::CryptoLoginCreate(b.crypto_login_create(*ctx, attr)),
            Call::CryptoLoginQuery { login, comp_mask } => {
                Reply::CryptoLoginQuery(b.crypto_login_query(*login, *comp_mask))
            }
            Call::CryptoLoginDestroy { login } => Reply::CryptoLoginDestroy(b.crypto_login_destroy(*login)),
            Call::DekCreate { ctx, attr } => Reply::DekCreate(b.dek_create(*ctx, attr)),
            Call::DekQuery { dek, comp_mask } => Reply::DekQuery(b.dek_query(*dek, *comp_mask)),
            Call::DekDestroy { dek } => Reply::DekDestroy(b.dek_destroy(*dek)),
            Call::DevxGeneralCmd { ctx, input, out_len } => {
                Reply::DevxGeneralCmd(b.devx_general_cmd(*ctx, input, *out_len))
            }
            Call::DevxObjCreate { ctx, input, out_len } => {
                Reply::DevxObjCreate(b.devx_obj_create(*ctx, input, *out_len))
            }
            Call::DevxObjQuery { obj, input, out_len } => Reply::DevxObjQuery(b.devx_obj_query(*obj, input, *out_len)),
            Call::DevxObjModify { obj, input, out_len } => {
                Reply::DevxObjModify(b.devx_obj_modify(*obj, input, *out_len))
            }
            Call::DevxObjDestroy { obj } => Reply::DevxObjDestroy(b.devx_obj_destroy(*obj)),
            Call::DevxPdNumber { pd } => Reply::DevxPdNumber(b.devx_pd_number(*pd)),
            Call::DevxQueryEqn { ctx, vector } => Reply::DevxQueryEqn(b.devx_query_eqn(*ctx, *vector)),
            Call::ReservedQpnAlloc { ctx } => Reply::ReservedQpnAlloc(b.reserved_qpn_alloc(*ctx)),
            Call::ReservedQpnDealloc { ctx, qpn } => Reply::ReservedQpnDealloc(b.reserved_qpn_dealloc(*ctx, *qpn)),
            Call::PpAlloc { ctx, pp_context, flags } => Reply::PpAlloc(b.pp_alloc(*ctx, pp_context, *flags)),
            Call::PpFree { pp } => Reply::PpFree(b.pp_free(pp)),
            Call::AllocVar { ctx, flags } => Reply::AllocVar(b.alloc_var(*ctx, *flags)),
            Call::FreeVar { var } => Reply::FreeVar(b.free_var(var)),
            Call::QueryQpLagPort { qp } => Reply::QueryQpLagPort(b.query_qp_lag_port(*qp)),
            Call::ModifyQpLagPort { qp, port } => Reply::ModifyQpLagPort(b.modify_qp_lag_port(*qp, *port)),
            Call::DevxAllocUar { ctx, flags } => Reply::DevxAllocUar(b.devx_alloc_uar(*ctx, *flags)),
            Call::DevxFreeUar { uar } => Reply::DevxFreeUar(b.devx_free_uar(uar)),
            Call::DevxUarWrite { uar, offset, value } => Reply::DevxUarWrite(b.devx_uar_write(uar, *offset, value)),
            Call::DevxUmemReg { ctx, addr, size, access } => {
                Reply::DevxUmemReg(b.devx_umem_reg(*ctx, *addr, *size, *access))
            }
            Call::DevxUmemDereg { umem } => Reply::DevxUmemDereg(b.devx_umem_dereg(umem)),
            Call::DevxAllocMsiVector { ctx } => Reply::DevxAllocMsiVector(b.devx_alloc_msi_vector(*ctx)),
            Call::DevxFreeMsiVector { msi } => Reply::DevxFreeMsiVector(b.devx_free_msi_vector(msi)),
            Call::DevxMsiVectorRead { msi } => Reply::DevxMsiVectorRead(b.devx_msi_vector_read(msi)),
            Call::DevxCreateEq { ctx, input, out_len } => Reply::DevxCreateEq(b.devx_create_eq(*ctx, input, *out_len)),
            Call::DevxDestroyEq { eq } => Reply::DevxDestroyEq(b.devx_destroy_eq(eq)),
            Call::ReregMr { mr, flags, pd, addr, length, access } => {
                Reply::ReregMr(b.rereg_mr(mr, *flags, *pd, *addr, *length, *access))
            }
            Call::AllocMw { pd, mw_type } => Reply::AllocMw(b.alloc_mw(*pd, *mw_type)),
            Call::DeallocMw { mw } => Reply::DeallocMw(b.dealloc_mw(mw)),
            Call::BindMw { qp, mw, bind } => Reply::BindMw(b.bind_mw(qp, mw, bind)),
            Call::AllocDm { ctx, length, log_align_req } => Reply::AllocDm(b.alloc_dm(*ctx, *length, *log_align_req)),
            Call::FreeDm { dm } => Reply::FreeDm(b.free_dm(dm)),
            Call::MemcpyToDm { dm, offset, data } => Reply::MemcpyToDm(b.memcpy_to_dm(dm, *offset, data)),
            Call::MemcpyFromDm { dm, offset, len } => Reply::MemcpyFromDm(b.memcpy_from_dm(dm, *offset, *len)),
            Call::RegDmMr { pd, dm, offset, length, access } => {
                Reply::RegDmMr(b.reg_dm_mr(*pd, dm, *offset, *length, *access))
            }
            Call::Dr(c) => Reply::Dr(c.apply(b)),
        }
    }

    /// The operation this call performs, as errors name it.
    pub fn op(&self) -> Op {
        match self {
            Call::DeviceList => Op::GetDeviceList,
            Call::OpenDevice { .. } => Op::OpenDevice,
            Call::OpenIbvDevice { .. } => Op::IbvOpenDevice,
            Call::CloseDevice { .. } => Op::CloseDevice,
            Call::QueryDevice { .. } => Op::QueryDevice,
            Call::QueryPort { .. } => Op::QueryPort,
            Call::AllocPd { .. } => Op::AllocPd,
            Call::DeallocPd { .. } => Op::DeallocPd,
            Call::GetAsyncEvent { .. } => Op::GetAsyncEvent,
            Call::CreateMkey { .. } => Op::CreateMkey,
            Call::DestroyMkey { .. } => Op::DestroyMkey,
            Call::MkeyCheck { .. } => Op::MkeyCheck,
            Call::AllocBuf { .. } => Op::AllocBuf,
            Call::FreeBuf { .. } => Op::FreeBuf,
            Call::WriteBuf { .. } => Op::WriteBuf,
            Call::ReadBuf { .. } => Op::ReadBuf,
            Call::RegMr { .. } => Op::RegMr,
            Call::DeregMr { .. } => Op::DeregMr,
            Call::AdviseMr { .. } => Op::AdviseMr,
            Call::AllocDmabuf { .. } => Op::AllocDmabuf,
            Call::FreeDmabuf { .. } => Op::FreeDmabuf,
            Call::RegDmabufMr { .. } => Op::RegDmabufMr,
            Call::DvRegDmabufMr { .. } => Op::DvRegDmabufMr,
            Call::GetDataDirectSysfsPath { .. } => Op::GetDataDirectSysfsPath,
            Call::CreateCq { .. } => Op::CreateCq,
            Call::CreateDvCq { .. } => Op::CreateDvCq,
            Call::CreateCqEx { attr, .. } => {
                if attr.dv.is_some() {
                    Op::CreateDvCq
                } else {
                    Op::CreateCq
                }
            }
            Call::CqEntry { .. } => Op::InitObj,
            Call::DestroyCq { .. } => Op::DestroyCq,
            Call::ResizeCq { .. } => Op::ResizeCq,
            Call::ModifyQpUdpSport { .. } => Op::ModifyQpUdpSport,
            Call::DciStreamIdReset { .. } => Op::DciStreamIdReset,
            Call::ModifyQpSchedElem { .. } => Op::ModifyQpSchedElem,
            Call::MapAhToQp { .. } => Op::MapAhToQp,
            Call::CreateFlow { .. } => Op::CreateFlow,
            Call::DestroyFlow { .. } => Op::DestroyFlow,
            Call::CreateFlowMatcher { .. } => Op::CreateFlowMatcher,
            Call::DestroyFlowMatcher { .. } => Op::DestroyFlowMatcher,
            Call::CreateMatcherFlow { .. } => Op::CreateMatcherFlow,
            Call::PollCq { .. } => Op::PollCq,
            Call::CreateQp { .. } => Op::CreateQp,
            Call::ModifyQp { .. } => Op::ModifyQp,
            Call::QueryQpState { .. } => Op::QueryQp,
            Call::SqWqe { .. } => Op::InitObj,
            Call::DestroyQp { .. } => Op::DestroyQp,
            Call::PostSend { .. } => Op::PostSend,
            Call::PostSendWr { .. } => Op::PostSendWr,
            Call::PostRecv { .. } => Op::PostRecv,
            Call::CancelPostedSendWrs { .. } => Op::CancelPostedSendWrs,
            Call::CreateSrq { .. } => Op::CreateSrq,
            Call::ModifySrq { .. } => Op::ModifySrq,
            Call::QuerySrq { .. } => Op::QuerySrq,
            Call::DestroySrq { .. } => Op::DestroySrq,
            Call::PostSrqRecv { .. } => Op::PostSrqRecv,
            Call::PostSrqOps { .. } => Op::PostSrqOps,
            Call::OpenXrcd { .. } => Op::OpenXrcd,
            Call::CloseXrcd { .. } => Op::CloseXrcd,
            Call::OpenQp { .. } => Op::OpenQp,
            Call::CreateWq { .. } => Op::CreateWq,
            Call::ModifyWq { .. } => Op::ModifyWq,
            Call::DestroyWq { .. } => Op::DestroyWq,
            Call::PostWqRecv { .. } => Op::PostWqRecv,
            Call::CreateRwqIndTable { .. } => Op::CreateRwqIndTable,
            Call::DestroyRwqIndTable { .. } => Op::DestroyRwqIndTable,
            Call::CryptoLogin { .. } => Op::CryptoLogin,
            Call::CryptoLoginQueryState { .. } => Op::CryptoLoginQueryState,
            Call::CryptoLogout { .. } => Op::CryptoLogout,
            Call::CryptoLoginCreate { .. } => Op::CryptoLoginCreate,
            Call::CryptoLoginQuery { .. } => Op::CryptoLoginQuery,
            Call::CryptoLoginDestroy { .. } => Op::CryptoLoginDestroy,
            Call::DekCreate { .. } => Op::DekCreate,
            Call::DekQuery { .. } => Op::DekQuery,
            Call::DekDestroy { .. } => Op::DekDestroy,
            Call::DevxGeneralCmd { .. } => Op::DevxGeneralCmd,
            Call::DevxObjCreate { .. } => Op::DevxObjCreate,
            Call::DevxObjQuery { .. } => Op::DevxObjQuery,
            Call::DevxObjModify { .. } => Op::DevxObjModify,
            Call::DevxObjDestroy { .. } => Op::DevxObjDestroy,
            Call::DevxPdNumber { .. } => Op::InitObj,
            Call::DevxQueryEqn { .. } => Op::DevxQueryEqn,
            Call::ReservedQpnAlloc { .. } => Op::ReservedQpnAlloc,
            Call::ReservedQpnDealloc { .. } => Op::ReservedQpnDealloc,
            Call::PpAlloc { .. } => Op::PpAlloc,
            Call::PpFree { .. } => Op::PpFree,
            Call::AllocVar { .. } => Op::AllocVar,
            Call::FreeVar { .. } => Op::FreeVar,
            Call::QueryQpLagPort { .. } => Op::QueryQpLagPort,
            Call::ModifyQpLagPort { .. } => Op::ModifyQpLagPort,
            Call::DevxAllocUar { .. } => Op::DevxAllocUar,
            Call::DevxFreeUar { .. } => Op::DevxFreeUar,
            Call::DevxUarWrite { .. } => Op::DevxUarWrite,
            Call::DevxUmemReg { .. } => Op::DevxUmemReg,
            Call::DevxUmemDereg { .. } => Op::DevxUmemDereg,
            Call::DevxAllocMsiVector { .. } => Op::DevxAllocMsiVector,
            Call::DevxFreeMsiVector { .. } => Op::DevxFreeMsiVector,
            Call::DevxMsiVectorRead { .. } => Op::DevxMsiVectorRead,
            Call::DevxCreateEq { .. } => Op::DevxCreateEq,
            Call::DevxDestroyEq { .. } => Op::DevxDestroyEq,
            Call::ReregMr { .. } => Op::ReregMr,
            Call::AllocMw { .. } => Op::AllocMw,
            Call::DeallocMw { .. } => Op::DeallocMw,
            Call::BindMw { .. } => Op::BindMw,
            Call::AllocDm { .. } => Op::AllocDm,
            Call::FreeDm { .. } => Op::FreeDm,
            Call::MemcpyToDm { .. } => Op::MemcpyToDm,
            Call::MemcpyFromDm { .. } => Op::MemcpyFromDm,
            Call::RegDmMr { .. } => Op::RegDmMr,
            Call::Dr(c) => c.op(),
        }
    }
}
