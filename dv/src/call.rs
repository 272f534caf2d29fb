//! The API as data: [`Call`] has one variant per family method, [`Reply`] one per result.
//!
//! `call.apply(backend)` performs the call; a [`crate::Layer`] sees every call and reply on its
//! way through a wrapped backend. Traces, replay, the reference model, fuzzing and mutants
//! are built on these two enums.

use serde::{Deserialize, Serialize};

mod dispatch;
mod steering;
pub use steering::{DrCall, DrReply};

use crate::api::context::{AsyncEvent, ContextAttr, DeviceDesc, DvContext, PortAttr};
use crate::api::crypto::{
    CryptoLoginAttr, CryptoLoginAttrEx, CryptoLoginQueryAttr, CryptoLoginState, DekAttr, DekInitAttr,
};
use crate::api::devx::{DevxEq, DevxObj, DevxUar, DevxUmem, MsiVector, PpEntry, Var};
use crate::api::memory::{AccessFlags, Buf, Dm, DmaBuf, Mr, Mw};
use crate::api::mkey::{Mkey, MkeyErr, MkeyInitAttr};
use crate::api::queue::{Cq, Qp, QpInitAttr, QpModify, QpState, Wc};
use crate::api::srq::{Srq, SrqAttr, SrqInitAttr, SrqOpWr};
use crate::api::wq::{RwqIndTable, RwqIndTableInitAttr, Wq, WqAttr, WqInitAttr};
use crate::api::wr::{MwBind, RecvWr, SendWr, WrOp};
use crate::api::xrc::{QpOpenAttr, Xrcd, XrcdInitAttr};
use crate::error::{Error, Result};
use crate::handle::{ContextHandle, CryptoLoginHandle, DekHandle, DevxObjHandle, PdHandle, QpHandle};

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// One call of the API, with its arguments owned.
#[allow(missing_docs)] // the fields are the method's parameters, documented on the traits
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum Call {
    /// [`crate::Contexts::device_list`].
    DeviceList,
    /// [`crate::Contexts::open_device`].
    OpenDevice { device: String, attr: Option<ContextAttr> },
    /// [`crate::Contexts::open_ibv_device`].
    OpenIbvDevice { device: String },
    /// [`crate::Contexts::close_device`].
    CloseDevice { ctx: ContextHandle },
    /// [`crate::Contexts::query_device`].
    QueryDevice { ctx: ContextHandle, comp_mask: u64 },
    /// [`crate::Contexts::query_port`].
    QueryPort { ctx: ContextHandle, port_num: u8 },
    /// [`crate::Contexts::alloc_pd`].
    AllocPd { ctx: ContextHandle },
    /// [`crate::Contexts::dealloc_pd`].
    DeallocPd { pd: PdHandle },
    /// [`crate::Contexts::get_async_event`].
    GetAsyncEvent { ctx: ContextHandle },
    /// [`crate::Mkeys::create_mkey`].
    CreateMkey { attr: MkeyInitAttr },
    /// [`crate::Mkeys::destroy_mkey`].
    DestroyMkey { mkey: Mkey },
    /// [`crate::Mkeys::mkey_check`].
    MkeyCheck { mkey: Mkey },
    /// [`crate::Memory::alloc_buf`].
    AllocBuf { len: usize },
    /// [`crate::Memory::free_buf`].
    FreeBuf { buf: Buf },
    /// [`crate::Memory::write_buf`].
    WriteBuf { buf: Buf, offset: usize, data: Vec<u8> },
    /// [`crate::Memory::read_buf`].
    ReadBuf { buf: Buf, offset: usize, len: usize },
    /// [`crate::Memory::reg_mr`].
    RegMr { pd: PdHandle, addr: u64, length: u64, access: AccessFlags },
    /// [`crate::Memory::dereg_mr`].
    DeregMr { mr: Mr },
    /// [`crate::Memory::advise_mr`].
    AdviseMr { pd: PdHandle, advice: u32, flags: u32, sges: Vec<crate::Sge> },
    /// [`crate::Memory::alloc_dmabuf`].
    AllocDmabuf { len: usize },
    /// [`crate::Memory::free_dmabuf`].
    FreeDmabuf { dmabuf: DmaBuf },
    /// [`crate::Memory::reg_dmabuf_mr`].
    RegDmabufMr { pd: PdHandle, offset: u64, length: u64, iova: u64, fd: i32, access: AccessFlags },
    /// [`crate::Memory::dv_reg_dmabuf_mr`].
    DvRegDmabufMr { pd: PdHandle, offset: u64, length: u64, iova: u64, fd: i32, access: AccessFlags, mlx5_access: u32 },
    /// [`crate::Memory::get_data_direct_sysfs_path`].
    GetDataDirectSysfsPath { ctx: ContextHandle, buf_len: usize },
    /// [`crate::Queues::create_cq_on_vector`] (and [`crate::Queues::create_cq`], vector 0).
    CreateCq {
        ctx: ContextHandle,
        cqe: u32,
        #[serde(default, skip_serializing_if = "is_zero")]
        comp_vector: u32,
    },
    /// [`crate::Queues::create_dv_cq`].
    CreateDvCq { ctx: ContextHandle, cqe: u32, comp_vector: u32, attr: crate::DvCqAttr },
    /// [`crate::Queues::create_cq_ex`].
    CreateCqEx { ctx: ContextHandle, attr: crate::CqInitAttrEx },
    /// [`crate::Queues::cq_entry`].
    CqEntry { cq: Cq, index: u32 },
    /// [`crate::Queues::destroy_cq`].
    DestroyCq { cq: Cq },
    /// [`crate::Queues::resize_cq`].
    ResizeCq { cq: Cq, cqe: u32 },
    /// [`crate::Queues::modify_qp_udp_sport`].
    ModifyQpUdpSport { qp: Qp, udp_sport: u16 },
    /// [`crate::Queues::dci_stream_id_reset`].
    DciStreamIdReset { qp: Qp, stream_id: u16 },
    /// [`crate::Queues::modify_qp_sched_elem`].
    ModifyQpSchedElem { qp: Qp, requestor: u32, responder: u32 },
    /// [`crate::Queues::map_ah_to_qp`].
    MapAhToQp { ctx: ContextHandle, ah: crate::UdDest, qp_num: u32 },
    /// [`crate::Queues::create_flow`].
    CreateFlow { qp: Qp, attr: crate::FlowAttr },
    /// [`crate::Queues::destroy_flow`].
    DestroyFlow { flow: crate::Flow },
    /// [`crate::Queues::create_flow_matcher`].
    CreateFlowMatcher { ctx: crate::ContextHandle, attr: crate::FlowMatcherAttr },
    /// [`crate::Queues::destroy_flow_matcher`].
    DestroyFlowMatcher { matcher: crate::FlowMatcher },
    /// [`crate::Queues::create_matcher_flow`].
    CreateMatcherFlow { matcher: crate::FlowMatcher, value: Vec<u8>, actions: Vec<crate::MatcherAction> },
    /// [`crate::Queues::poll_cq`].
    PollCq { cq: Cq, max: usize },
    /// [`crate::Queues::create_qp`].
    CreateQp { attr: QpInitAttr },
    /// [`crate::Queues::modify_qp`].
    ModifyQp { qp: Qp, attr: QpModify },
    /// [`crate::Queues::query_qp_state`].
    QueryQpState { qp: Qp },
    /// [`crate::Queues::sq_wqe`].
    SqWqe { qp: Qp, index: u32 },
    /// [`crate::Queues::destroy_qp`].
    DestroyQp { qp: Qp },
    /// [`crate::Queues::post_send`].
    PostSend { qp: Qp, ops: Vec<WrOp> },
    /// [`crate::Queues::post_send_wr`].
    PostSendWr { qp: Qp, wrs: Vec<SendWr> },
    /// [`crate::Queues::post_recv`].
    PostRecv { qp: Qp, wrs: Vec<RecvWr> },
    /// [`crate::Queues::cancel_posted_send_wrs`].
    CancelPostedSendWrs { qp: Qp, wr_id: u64 },
    /// [`crate::Srqs::create_srq`].
    CreateSrq { attr: SrqInitAttr },
    /// [`crate::Srqs::modify_srq`].
    ModifySrq { srq: Srq, attr: SrqAttr, mask: u32 },
    /// [`crate::Srqs::query_srq`].
    QuerySrq { srq: Srq },
    /// [`crate::Srqs::destroy_srq`].
    DestroySrq { srq: Srq },
    /// [`crate::Srqs::post_srq_recv`].
    PostSrqRecv { srq: Srq, wrs: Vec<RecvWr> },
    /// [`crate::Srqs::post_srq_ops`].
    PostSrqOps { srq: Srq, ops: Vec<SrqOpWr> },
    /// [`crate::Srqs::open_xrcd`].
    OpenXrcd { attr: XrcdInitAttr },
    /// [`crate::Srqs::close_xrcd`].
    CloseXrcd { xrcd: Xrcd },
    /// [`crate::Srqs::open_qp`].
    OpenQp { attr: QpOpenAttr },
    /// [`crate::Srqs::create_wq`].
    CreateWq { attr: WqInitAttr },
    /// [`crate::Srqs::modify_wq`].
    ModifyWq { wq: Wq, attr: WqAttr },
    /// [`crate::Srqs::destroy_wq`].
    DestroyWq { wq: Wq },
    /// [`crate::Srqs::post_wq_recv`].
    PostWqRecv { wq: Wq, wrs: Vec<RecvWr> },
    /// [`crate::Srqs::create_rwq_ind_table`].
    CreateRwqIndTable { attr: RwqIndTableInitAttr },
    /// [`crate::Srqs::destroy_rwq_ind_table`].
    DestroyRwqIndTable { table: RwqIndTable },
    /// [`crate::Crypto::crypto_login`].
    CryptoLogin { ctx: ContextHandle, attr: CryptoLoginAttr },
    /// [`crate::Crypto::crypto_login_query_state`].
    CryptoLoginQueryState { ctx: ContextHandle },
    /// [`crate::Crypto::crypto_logout`].
    CryptoLogout { ctx: ContextHandle },
    /// [`crate::Crypto::crypto_login_create`].
    CryptoLoginCreate { ctx: ContextHandle, attr: CryptoLoginAttrEx },
    /// [`crate::Crypto::crypto_login_query`].
    CryptoLoginQuery { login: CryptoLoginHandle, comp_mask: u64 },
    /// [`crate::Crypto::crypto_login_destroy`].
    CryptoLoginDestroy { login: CryptoLoginHandle },
    /// [`crate::Crypto::dek_create`].
    DekCreate { ctx: ContextHandle, attr: DekInitAttr },
    /// [`crate::Crypto::dek_query`].
    DekQuery { dek: DekHandle, comp_mask: u64 },
    /// [`crate::Crypto::dek_destroy`].
    DekDestroy { dek: DekHandle },
    /// [`crate::Devx::devx_general_cmd`].
    DevxGeneralCmd { ctx: ContextHandle, input: Vec<u8>, out_len: usize },
    /// [`crate::Devx::devx_obj_create`].
    DevxObjCreate { ctx: ContextHandle, input: Vec<u8>, out_len: usize },
    /// [`crate::Devx::devx_obj_query`].
    DevxObjQuery { obj: DevxObjHandle, input: Vec<u8>, out_len: usize },
    /// [`crate::Devx::devx_obj_modify`].
    DevxObjModify { obj: DevxObjHandle, input: Vec<u8>, out_len: usize },
    /// [`crate::Devx::devx_obj_destroy`].
    DevxObjDestroy { obj: DevxObjHandle },
    /// [`crate::Devx::devx_pd_number`].
    DevxPdNumber { pd: PdHandle },
    /// [`crate::Devx::devx_query_eqn`].
    DevxQueryEqn { ctx: ContextHandle, vector: u32 },
    /// [`crate::Devx::reserved_qpn_alloc`].
    ReservedQpnAlloc { ctx: ContextHandle },
    /// [`crate::Devx::reserved_qpn_dealloc`].
    ReservedQpnDealloc { ctx: ContextHandle, qpn: u32 },
    /// [`crate::Devx::pp_alloc`].
    PpAlloc { ctx: ContextHandle, pp_context: Vec<u8>, flags: u32 },
    /// [`crate::Devx::pp_free`].
    PpFree { pp: PpEntry },
    /// [`crate::Devx::alloc_var`].
    AllocVar { ctx: ContextHandle, flags: u32 },
    /// [`crate::Devx::free_var`].
    FreeVar { var: Var },
    /// [`crate::Devx::query_qp_lag_port`].
    QueryQpLagPort { qp: QpHandle },
    /// [`crate::Devx::modify_qp_lag_port`].
    ModifyQpLagPort { qp: QpHandle, port: u8 },
    /// [`crate::Devx::devx_alloc_uar`].
    DevxAllocUar { ctx: ContextHandle, flags: u32 },
    /// [`crate::Devx::devx_free_uar`].
    DevxFreeUar { uar: DevxUar },
    /// [`crate::Devx::devx_uar_write`].
    DevxUarWrite { uar: DevxUar, offset: u32, value: Vec<u8> },
    /// [`crate::Devx::devx_umem_reg`].
    DevxUmemReg { ctx: ContextHandle, addr: u64, size: u64, access: AccessFlags },
    /// [`crate::Devx::devx_umem_dereg`].
    DevxUmemDereg { umem: DevxUmem },
    /// [`crate::Devx::devx_alloc_msi_vector`].
    DevxAllocMsiVector { ctx: ContextHandle },
    /// [`crate::Devx::devx_free_msi_vector`].
    DevxFreeMsiVector { msi: MsiVector },
    /// [`crate::Devx::devx_msi_vector_read`].
    DevxMsiVectorRead { msi: MsiVector },
    /// [`crate::Devx::devx_create_eq`].
    DevxCreateEq { ctx: ContextHandle, input: Vec<u8>, out_len: usize },
    /// [`crate::Devx::devx_destroy_eq`].
    DevxDestroyEq { eq: DevxEq },
    /// [`crate::Memory::rereg_mr`].
    ReregMr { mr: Mr, flags: u32, pd: Option<PdHandle>, addr: u64, length: u64, access: AccessFlags },
    /// [`crate::Memory::alloc_mw`].
    AllocMw { pd: PdHandle, mw_type: u32 },
    /// [`crate::Memory::dealloc_mw`].
    DeallocMw { mw: Mw },
    /// [`crate::Memory::bind_mw`].
    BindMw { qp: Qp, mw: Mw, bind: MwBind },
    /// [`crate::Memory::alloc_dm`].
    AllocDm { ctx: ContextHandle, length: u64, log_align_req: u32 },
    /// [`crate::Memory::free_dm`].
    FreeDm { dm: Dm },
    /// [`crate::Memory::memcpy_to_dm`].
    MemcpyToDm { dm: Dm, offset: u64, data: Vec<u8> },
    /// [`crate::Memory::memcpy_from_dm`].
    MemcpyFromDm { dm: Dm, offset: u64, len: usize },
    /// [`crate::Memory::reg_dm_mr`].
    RegDmMr { pd: PdHandle, dm: Dm, offset: u64, length: u64, access: AccessFlags },
    /// A call of [`crate::Steering`].
    Dr(DrCall),
}

/// The result of one [`Call`]: the variant names the call, the payload is what it returned.
#[allow(missing_docs)] // each variant is the result of the call of the same name
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", content = "result", rename_all = "snake_case")]
pub enum Reply {
    DeviceList(Result<Vec<DeviceDesc>>),
    OpenDevice(Result<ContextHandle>),
    OpenIbvDevice(Result<ContextHandle>),
    CloseDevice(Result<()>),
    QueryDevice(Result<DvContext>),
    QueryPort(Result<PortAttr>),
    AllocPd(Result<PdHandle>),
    DeallocPd(Result<()>),
    GetAsyncEvent(Result<Option<AsyncEvent>>),
    CreateMkey(Result<Mkey>),
    DestroyMkey(Result<()>),
    MkeyCheck(Result<MkeyErr>),
    AllocBuf(Result<Buf>),
    FreeBuf(Result<()>),
    WriteBuf(Result<()>),
    ReadBuf(Result<Vec<u8>>),
    RegMr(Result<Mr>),
    DeregMr(Result<()>),
    AdviseMr(Result<()>),
    AllocDmabuf(Result<DmaBuf>),
    FreeDmabuf(Result<()>),
    RegDmabufMr(Result<Mr>),
    DvRegDmabufMr(Result<Mr>),
    GetDataDirectSysfsPath(Result<String>),
    CreateCq(Result<Cq>),
    CreateDvCq(Result<Cq>),
    CreateCqEx(Result<Cq>),
    CqEntry(Result<crate::CqEntry>),
    DestroyCq(Result<()>),
    ResizeCq(Result<Cq>),
    ModifyQpUdpSport(Result<()>),
    DciStreamIdReset(Result<()>),
    ModifyQpSchedElem(Result<()>),
    MapAhToQp(Result<()>),
    CreateFlow(Result<crate::Flow>),
    DestroyFlow(Result<()>),
    CreateFlowMatcher(Result<crate::FlowMatcher>),
    DestroyFlowMatcher(Result<()>),
    CreateMatcherFlow(Result<crate::Flow>),
    PollCq(Result<Vec<Wc>>),
    CreateQp(Result<Qp>),
    ModifyQp(Result<()>),
    QueryQpState(Result<QpState>),
    /// Of [`Call::SqWqe`].
    SqWqe(Result<Vec<u8>>),
    DestroyQp(Result<()>),
    PostSend(Result<()>),
    /// Of [`Call::PostSendWr`].
    PostSendWr(Result<()>),
    PostRecv(Result<()>),
    CancelPostedSendWrs(Result<u32>),
    CreateSrq(Result<Srq>),
    ModifySrq(Result<()>),
    QuerySrq(Result<SrqAttr>),
    DestroySrq(Result<()>),
    PostSrqRecv(Result<()>),
    PostSrqOps(Result<Vec<u32>>),
    OpenXrcd(Result<Xrcd>),
    CloseXrcd(Result<()>),
    OpenQp(Result<Qp>),
    CreateWq(Result<Wq>),
    ModifyWq(Result<()>),
    DestroyWq(Result<()>),
    PostWqRecv(Result<()>),
    CreateRwqIndTable(Result<RwqIndTable>),
    DestroyRwqIndTable(Result<()>),
    CryptoLogin(Result<()>),
    CryptoLoginQueryState(Result<CryptoLoginState>),
    CryptoLogout(Result<()>),
    CryptoLoginCreate(Result<CryptoLoginHandle>),
    CryptoLoginQuery(Result<CryptoLoginQueryAttr>),
    CryptoLoginDestroy(Result<()>),
    DekCreate(Result<DekHandle>),
    DekQuery(Result<DekAttr>),
    DekDestroy(Result<()>),
    DevxGeneralCmd(Result<Vec<u8>>),
    DevxObjCreate(Result<DevxObj>),
    DevxObjQuery(Result<Vec<u8>>),
    DevxObjModify(Result<Vec<u8>>),
    DevxObjDestroy(Result<()>),
    DevxPdNumber(Result<u32>),
    DevxQueryEqn(Result<u32>),
    ReservedQpnAlloc(Result<u32>),
    ReservedQpnDealloc(Result<()>),
    PpAlloc(Result<PpEntry>),
    PpFree(Result<()>),
    AllocVar(Result<Var>),
    FreeVar(Result<()>),
    QueryQpLagPort(Result<(u8, u8)>),
    ModifyQpLagPort(Result<()>),
    DevxAllocUar(Result<DevxUar>),
    DevxFreeUar(Result<()>),
    DevxUarWrite(Result<()>),
    DevxUmemReg(Result<DevxUmem>),
    DevxUmemDereg(Result<()>),
    DevxAllocMsiVector(Result<MsiVector>),
    DevxFreeMsiVector(Result<()>),
    DevxMsiVectorRead(Result<u64>),
    DevxCreateEq(Result<DevxEq>),
    DevxDestroyEq(Result<()>),
    ReregMr(Result<Mr>),
    AllocMw(Result<Mw>),
    DeallocMw(Result<()>),
    BindMw(Result<u32>),
    AllocDm(Result<Dm>),
    FreeDm(Result<()>),
    MemcpyToDm(Result<()>),
    MemcpyFromDm(Result<Vec<u8>>),
    RegDmMr(Result<Mr>),
    /// Of [`Call::Dr`].
    Dr(DrReply),
}

impl Reply {
    /// The backend instance that issued the handle a successful reply carries, if it carries
    /// one: what a replayer adopts the handles of a trace into.
    pub fn issuer(&self) -> Option<crate::handle::BackendId> {
        match self {
            Reply::OpenDevice(Ok(h)) | Reply::OpenIbvDevice(Ok(h)) => Some(h.backend()),
            Reply::AllocPd(Ok(h)) => Some(h.backend()),
            Reply::AllocBuf(Ok(b)) => Some(b.handle.backend()),
            Reply::AllocDmabuf(Ok(d)) => Some(d.buf.handle.backend()),
            Reply::CreateMkey(Ok(m)) => Some(m.handle.backend()),
            Reply::RegMr(Ok(m)) | Reply::RegDmabufMr(Ok(m)) | Reply::DvRegDmabufMr(Ok(m)) => Some(m.handle.backend()),
            Reply::CreateCq(Ok(c)) | Reply::CreateDvCq(Ok(c)) | Reply::CreateCqEx(Ok(c)) => Some(c.handle.backend()),
            Reply::CreateQp(Ok(q)) => Some(q.handle.backend()),
            Reply::CreateSrq(Ok(s)) => Some(s.handle.backend()),
            Reply::OpenXrcd(Ok(x)) => Some(x.handle.backend()),
            Reply::OpenQp(Ok(q)) => Some(q.handle.backend()),
            Reply::CreateWq(Ok(w)) => Some(w.handle.backend()),
            Reply::CreateRwqIndTable(Ok(t)) => Some(t.handle.backend()),
            Reply::CryptoLoginCreate(Ok(h)) => Some(h.backend()),
            Reply::DekCreate(Ok(h)) => Some(h.backend()),
            Reply::DevxObjCreate(Ok(o)) => Some(o.handle.backend()),
            Reply::DevxAllocUar(Ok(u)) => Some(u.handle.backend()),
            Reply::DevxUmemReg(Ok(u)) => Some(u.handle.backend()),
            Reply::DevxAllocMsiVector(Ok(m)) => Some(m.handle.backend()),
            Reply::DevxCreateEq(Ok(q)) => Some(q.handle.backend()),
            _ => None,
        }
    }

    /// The error inside the reply, if the call failed.
    pub fn error(&self) -> Option<&Error> {
        match self {
            Reply::DeviceList(r) => r.as_ref().err(),
            Reply::OpenDevice(r) | Reply::OpenIbvDevice(r) => r.as_ref().err(),
            Reply::AllocPd(r) => r.as_ref().err(),
            Reply::CreateFlow(r) | Reply::CreateMatcherFlow(r) => r.as_ref().err(),
            Reply::CreateFlowMatcher(r) => r.as_ref().err(),
            Reply::CloseDevice(r)
            | Reply::DeallocPd(r)
            | Reply::DestroyMkey(r)
            | Reply::FreeBuf(r)
            | Reply::WriteBuf(r)
            | Reply::DeregMr(r)
            | Reply::AdviseMr(r)
            | Reply::FreeDmabuf(r)
            | Reply::DestroyCq(r)
            | Reply::ModifyQp(r)
            | Reply::ModifyQpUdpSport(r)
            | Reply::DciStreamIdReset(r)
            | Reply::ModifyQpSchedElem(r)
            | Reply::MapAhToQp(r)
            | Reply::DestroyFlow(r)
            | Reply::DestroyFlowMatcher(r)
            | Reply::DestroyQp(r)
            | Reply::PostSend(r)
            | Reply::PostSendWr(r)
            | Reply::PostRecv(r)
            | Reply::ModifySrq(r)
            | Reply::DestroySrq(r)
            | Reply::PostSrqRecv(r)
            | Reply::CloseXrcd(r)
            | Reply::ModifyWq(r)
            | Reply::DestroyWq(r)
            | Reply::PostWqRecv(r)
            | Reply::DestroyRwqIndTable(r)
            | Reply::CryptoLogin(r)
            | Reply::CryptoLogout(r)
            | Reply::CryptoLoginDestroy(r)
            | Reply::DekDestroy(r) => r.as_ref().err(),
            Reply::CryptoLoginQueryState(r) => r.as_ref().err(),
            Reply::CryptoLoginCreate(r) => r.as_ref().err(),
            Reply::CryptoLoginQuery(r) => r.as_ref().err(),
            Reply::DekCreate(r) => r.as_ref().err(),
            Reply::DekQuery(r) => r.as_ref().err(),
            Reply::QueryDevice(r) => r.as_ref().err(),
            Reply::QueryPort(r) => r.as_ref().err(),
            Reply::GetAsyncEvent(r) => r.as_ref().err(),
            Reply::CreateMkey(r) => r.as_ref().err(),
            Reply::MkeyCheck(r) => r.as_ref().err(),
            Reply::AllocBuf(r) => r.as_ref().err(),
            Reply::ReadBuf(r) => r.as_ref().err(),
            Reply::RegMr(r) | Reply::RegDmabufMr(r) | Reply::DvRegDmabufMr(r) => r.as_ref().err(),
            Reply::AllocDmabuf(r) => r.as_ref().err(),
            Reply::GetDataDirectSysfsPath(r) => r.as_ref().err(),
            Reply::CreateCq(r) | Reply::CreateDvCq(r) | Reply::CreateCqEx(r) | Reply::ResizeCq(r) => r.as_ref().err(),
            Reply::CqEntry(r) => r.as_ref().err(),
            Reply::PollCq(r) => r.as_ref().err(),
            Reply::CreateQp(r) => r.as_ref().err(),
            Reply::QueryQpState(r) => r.as_ref().err(),
            Reply::SqWqe(r) => r.as_ref().err(),
            Reply::CancelPostedSendWrs(r) => r.as_ref().err(),
            Reply::CreateSrq(r) => r.as_ref().err(),
            Reply::QuerySrq(r) => r.as_ref().err(),
            Reply::PostSrqOps(r) => r.as_ref().err(),
            Reply::OpenXrcd(r) => r.as_ref().err(),
            Reply::OpenQp(r) => r.as_ref().err(),
            Reply::CreateWq(r) => r.as_ref().err(),
            Reply::CreateRwqIndTable(r) => r.as_ref().err(),
            Reply::DevxGeneralCmd(r) => r.as_ref().err(),
            Reply::DevxObjCreate(r) => r.as_ref().err(),
            Reply::DevxObjQuery(r) => r.as_ref().err(),
            Reply::DevxObjModify(r) => r.as_ref().err(),
            Reply::DevxObjDestroy(r) => r.as_ref().err(),
            Reply::DevxPdNumber(r) => r.as_ref().err(),
            Reply::DevxQueryEqn(r) => r.as_ref().err(),
            Reply::ReservedQpnAlloc(r) => r.as_ref().err(),
            Reply::ReservedQpnDealloc(r) => r.as_ref().err(),
            Reply::PpAlloc(r) => r.as_ref().err(),
            Reply::PpFree(r) => r.as_ref().err(),
            Reply::AllocVar(r) => r.as_ref().err(),
            Reply::FreeVar(r) => r.as_ref().err(),
            Reply::QueryQpLagPort(r) => r.as_ref().err(),
            Reply::ModifyQpLagPort(r) => r.as_ref().err(),
            Reply::DevxAllocUar(r) => r.as_ref().err(),
            Reply::DevxFreeUar(r) => r.as_ref().err(),
            Reply::DevxUarWrite(r) => r.as_ref().err(),
            Reply::DevxUmemReg(r) => r.as_ref().err(),
            Reply::DevxUmemDereg(r) => r.as_ref().err(),
            Reply::DevxAllocMsiVector(r) => r.as_ref().err(),
            Reply::DevxFreeMsiVector(r) => r.as_ref().err(),
            Reply::DevxMsiVectorRead(r) => r.as_ref().err(),
            Reply::DevxCreateEq(r) => r.as_ref().err(),
            Reply::DevxDestroyEq(r) => r.as_ref().err(),
            Reply::ReregMr(r) => r.as_ref().err(),
            Reply::AllocMw(r) => r.as_ref().err(),
            Reply::DeallocMw(r) => r.as_ref().err(),
            Reply::BindMw(r) => r.as_ref().err(),
            Reply::AllocDm(r) => r.as_ref().err(),
            Reply::FreeDm(r) => r.as_ref().err(),
            Reply::MemcpyToDm(r) => r.as_ref().err(),
            Reply::MemcpyFromDm(r) => r.as_ref().err(),
            Reply::RegDmMr(r) => r.as_ref().err(),
            Reply::Dr(r) => r.error(),
        }
    }

    /// A failed reply of the right variant for `call`, carrying `err`.
    pub fn failed(call: &Call, err: Error) -> Reply {
        match call {
            Call::DeviceList => Reply::DeviceList(Err(err)),
            Call::OpenDevice { .. } => Reply::OpenDevice(Err(err)),
            Call::OpenIbvDevice { .. } => Reply::OpenIbvDevice(Err(err)),
            Call::CloseDevice { .. } => Reply::CloseDevice(Err(err)),
            Call::QueryDevice { .. } => Reply::QueryDevice(Err(err)),
            Call::QueryPort { .. } => Reply::QueryPort(Err(err)),
            Call::AllocPd { .. } => Reply::AllocPd(Err(err)),
            Call::DeallocPd { .. } => Reply::DeallocPd(Err(err)),
            Call::GetAsyncEvent { .. } => Reply::GetAsyncEvent(Err(err)),
            Call::CreateMkey { .. } => Reply::CreateMkey(Err(err)),
            Call::DestroyMkey { .. } => Reply::DestroyMkey(Err(err)),
            Call::MkeyCheck { .. } => Reply::MkeyCheck(Err(err)),
            Call::AllocBuf { .. } => Reply::AllocBuf(Err(err)),
            Call::FreeBuf { .. } => Reply::FreeBuf(Err(err)),
            Call::WriteBuf { .. } => Reply::WriteBuf(Err(err)),
            Call::ReadBuf { .. } => Reply::ReadBuf(Err(err)),
            Call::RegMr { .. } => Reply::RegMr(Err(err)),
            Call::DeregMr { .. } => Reply::DeregMr(Err(err)),
            Call::AdviseMr { .. } => Reply::AdviseMr(Err(err)),
            Call::AllocDmabuf { .. } => Reply::AllocDmabuf(Err(err)),
            Call::FreeDmabuf { .. } => Reply::FreeDmabuf(Err(err)),
            Call::RegDmabufMr { .. } => Reply::RegDmabufMr(Err(err)),
            Call::DvRegDmabufMr { .. } => Reply::DvRegDmabufMr(Err(err)),
            Call::GetDataDirectSysfsPath { .. } => Reply::GetDataDirectSysfsPath(Err(err)),
            Call::CreateCq { .. } => Reply::CreateCq(Err(err)),
            Call::CreateDvCq { .. } => Reply::CreateDvCq(Err(err)),
            Call::CreateCqEx { .. } => Reply::CreateCqEx(Err(err)),
            Call::CqEntry { .. } => Reply::CqEntry(Err(err)),
            Call::DestroyCq { .. } => Reply::DestroyCq(Err(err)),
            Call::ResizeCq { .. } => Reply::ResizeCq(Err(err)),
            Call::ModifyQpUdpSport { .. } => Reply::ModifyQpUdpSport(Err(err)),
            Call::DciStreamIdReset { .. } => Reply::DciStreamIdReset(Err(err)),
            Call::ModifyQpSchedElem { .. } => Reply::ModifyQpSchedElem(Err(err)),
            Call::MapAhToQp { .. } => Reply::MapAhToQp(Err(err)),
            Call::CreateFlow { .. } => Reply::CreateFlow(Err(err)),
            Call::DestroyFlow { .. } => Reply::DestroyFlow(Err(err)),
            Call::CreateFlowMatcher { .. } => Reply::CreateFlowMatcher(Err(err)),
            Call::DestroyFlowMatcher { .. } => Reply::DestroyFlowMatcher(Err(err)),
            Call::CreateMatcherFlow { .. } => Reply::CreateMatcherFlow(Err(err)),
            Call::PollCq { .. } => Reply::PollCq(Err(err)),
            Call::CreateQp { .. } => Reply::CreateQp(Err(err)),
            Call::ModifyQp { .. } => Reply::ModifyQp(Err(err)),
            Call::QueryQpState { .. } => Reply::QueryQpState(Err(err)),
            Call::SqWqe { .. } => Reply::SqWqe(Err(err)),
            Call::DestroyQp { .. } => Reply::DestroyQp(Err(err)),
            Call::PostSend { .. } => Reply::PostSend(Err(err)),
            Call::PostSendWr { .. } => Reply::PostSendWr(Err(err)),
            Call::PostRecv { .. } => Reply::PostRecv(Err(err)),
            Call::CancelPostedSendWrs { .. } => Reply::CancelPostedSendWrs(Err(err)),
            Call::CreateSrq { .. } => Reply::CreateSrq(Err(err)),
            Call::ModifySrq { .. } => Reply::ModifySrq(Err(err)),
            Call::QuerySrq { .. } => Reply::QuerySrq(Err(err)),
            Call::DestroySrq { .. } => Reply::DestroySrq(Err(err)),
            Call::PostSrqRecv { .. } => Reply::PostSrqRecv(Err(err)),
            Call::PostSrqOps { .. } => Reply::PostSrqOps(Err(err)),
            Call::OpenXrcd { .. } => Reply::OpenXrcd(Err(err)),
            Call::CloseXrcd { .. } => Reply::CloseXrcd(Err(err)),
            Call::OpenQp { .. } => Reply::OpenQp(Err(err)),
            Call::CreateWq { .. } => Reply::CreateWq(Err(err)),
            Call::ModifyWq { .. } => Reply::ModifyWq(Err(err)),
            Call::DestroyWq { .. } => Reply::DestroyWq(Err(err)),
            Call::PostWqRecv { .. } => Reply::PostWqRecv(Err(err)),
            Call::CreateRwqIndTable { .. } => Reply::CreateRwqIndTable(Err(err)),
            Call::DestroyRwqIndTable { .. } => Reply::DestroyRwqIndTable(Err(err)),
            Call::CryptoLogin { .. } => Reply::CryptoLogin(Err(err)),
            Call::CryptoLoginQueryState { .. } => Reply::CryptoLoginQueryState(Err(err)),
            Call::CryptoLogout { .. } => Reply::CryptoLogout(Err(err)),
            Call::CryptoLoginCreate { .. } => Reply::CryptoLoginCreate(Err(err)),
            Call::CryptoLoginQuery { .. } => Reply::CryptoLoginQuery(Err(err)),
            Call::CryptoLoginDestroy { .. } => Reply::CryptoLoginDestroy(Err(err)),
            Call::DekCreate { .. } => Reply::DekCreate(Err(err)),
            Call::DekQuery { .. } => Reply::DekQuery(Err(err)),
            Call::DekDestroy { .. } => Reply::DekDestroy(Err(err)),
            Call::DevxGeneralCmd { .. } => Reply::DevxGeneralCmd(Err(err)),
            Call::DevxObjCreate { .. } => Reply::DevxObjCreate(Err(err)),
            Call::DevxObjQuery { .. } => Reply::DevxObjQuery(Err(err)),
            Call::DevxObjModify { .. } => Reply::DevxObjModify(Err(err)),
            Call::DevxObjDestroy { .. } => Reply::DevxObjDestroy(Err(err)),
            Call::DevxPdNumber { .. } => Reply::DevxPdNumber(Err(err)),
            Call::DevxQueryEqn { .. } => Reply::DevxQueryEqn(Err(err)),
            Call::ReservedQpnAlloc { .. } => Reply::ReservedQpnAlloc(Err(err)),
            Call::ReservedQpnDealloc { .. } => Reply::ReservedQpnDealloc(Err(err)),
            Call::PpAlloc { .. } => Reply::PpAlloc(Err(err)),
            Call::PpFree { .. } => Reply::PpFree(Err(err)),
            Call::AllocVar { .. } => Reply::AllocVar(Err(err)),
            Call::FreeVar { .. } => Reply::FreeVar(Err(err)),
            Call::QueryQpLagPort { .. } => Reply::QueryQpLagPort(Err(err)),
            Call::ModifyQpLagPort { .. } => Reply::ModifyQpLagPort(Err(err)),
            Call::DevxAllocUar { .. } => Reply::DevxAllocUar(Err(err)),
            Call::DevxFreeUar { .. } => Reply::DevxFreeUar(Err(err)),
            Call::DevxUarWrite { .. } => Reply::DevxUarWrite(Err(err)),
            Call::DevxUmemReg { .. } => Reply::DevxUmemReg(Err(err)),
            Call::DevxUmemDereg { .. } => Reply::DevxUmemDereg(Err(err)),
            Call::DevxAllocMsiVector { .. } => Reply::DevxAllocMsiVector(Err(err)),
            Call::DevxFreeMsiVector { .. } => Reply::DevxFreeMsiVector(Err(err)),
            Call::DevxMsiVectorRead { .. } => Reply::DevxMsiVectorRead(Err(err)),
            Call::DevxCreateEq { .. } => Reply::DevxCreateEq(Err(err)),
            Call::DevxDestroyEq { .. } => Reply::DevxDestroyEq(Err(err)),
            Call::ReregMr { .. } => Reply::ReregMr(Err(err)),
            Call::AllocMw { .. } => Reply::AllocMw(Err(err)),
            Call::DeallocMw { .. } => Reply::DeallocMw(Err(err)),
            Call::BindMw { .. } => Reply::BindMw(Err(err)),
            Call::AllocDm { .. } => Reply::AllocDm(Err(err)),
            Call::FreeDm { .. } => Reply::FreeDm(Err(err)),
            Call::MemcpyToDm { .. } => Reply::MemcpyToDm(Err(err)),
            Call::MemcpyFromDm { .. } => Reply::MemcpyFromDm(Err(err)),
            Call::RegDmMr { .. } => Reply::RegDmMr(Err(err)),
            Call::Dr(c) => Reply::Dr(c.failed(err)),
        }
    }
}
