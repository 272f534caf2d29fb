//! A wrapper point: a [`Layer`] sees every [`Call`] on its way into a backend and every
//! [`Reply`] on its way out, and may change either or answer a call itself.
//!
//! [`Wrapped`] implements every family once over any layer and backend, so recorders, fault
//! wrappers and mutants write only what they change and forward nothing by hand.
//!
//! ```
//! use mlx5_dv::{Backend, Call, Layer, Reply, Wrapped};
//!
//! /// Counts the calls that failed.
//! #[derive(Default)]
//! struct Failures(u32);
//!
//! impl Layer for Failures {
//!     fn after(&mut self, _call: &Call, reply: &mut Reply) {
//!         if reply.error().is_some() {
//!             self.0 += 1;
//!         }
//!     }
//! }
//!
//! fn count_failures<B: Backend>(inner: B) -> Wrapped<Failures, B> {
//!     Wrapped::new(Failures::default(), inner)
//! }
//! ```

mod steering;

use crate::api::context::{AsyncEvent, ContextAttr, Contexts, DeviceDesc, DvContext, PortAttr};
use crate::api::crypto::{
    Crypto, CryptoLoginAttr, CryptoLoginAttrEx, CryptoLoginQueryAttr, CryptoLoginState, DekAttr, DekInitAttr,
};
use crate::api::devx::{Devx, DevxEq, DevxObj, DevxUar, DevxUmem, MsiVector, PpEntry, Var};
use crate::api::memory::{AccessFlags, Buf, Dm, DmaBuf, Memory, Mr, Mw};
use crate::api::mkey::{Mkey, MkeyErr, MkeyInitAttr, Mkeys};
use crate::api::queue::{Cq, Qp, QpInitAttr, QpModify, QpState, Queues, Wc};
use crate::api::srq::{Srq, SrqAttr, SrqInitAttr, SrqOpWr, Srqs};
use crate::api::wq::{RwqIndTable, RwqIndTableInitAttr, Wq, WqAttr, WqInitAttr};
use crate::api::wr::{MwBind, RecvWr, SendWr, WrOp};
use crate::api::xrc::{QpOpenAttr, Xrcd, XrcdInitAttr};
use crate::backend::{Backend, BackendInfo};
use crate::call::{Call, Reply};
use crate::caps::Caps;
use crate::errno::{EINVAL, EOPNOTSUPP};
use crate::error::{Error, Op, Result};
use crate::handle::{ContextHandle, CryptoLoginHandle, DekHandle, DevxObjHandle, PdHandle, QpHandle};
use crate::sim_control::{CommandRecord, ControlAction, FaultRule, SimControl, WqeRecord};

/// What a wrapper does to the calls passing through it. Every method has a default that
/// changes nothing.
pub trait Layer {
    /// Called before `call` reaches the inner backend; may change it, or answer it by
    /// returning a reply (the inner backend then never sees it).
    fn before(&mut self, call: &mut Call) -> Option<Reply> {
        let _ = call;
        None
    }

    /// Called with the reply on its way out; may change it.
    fn after(&mut self, call: &Call, reply: &mut Reply) {
        let _ = (call, reply);
    }

    /// The caps the wrapped backend reports, given the inner backend's.
    fn caps(&self, inner: Caps) -> Caps {
        inner
    }

    /// The info the wrapped backend reports, given the inner backend's.
    fn info(&self, inner: BackendInfo) -> BackendInfo {
        inner
    }

    /// Whether the inner backend's simulator control is passed through.
    fn pass_sim_control(&self) -> bool {
        true
    }

    /// Called with the WQE records [`SimControl::take_wqes`] returns; may change them.
    fn wqes(&mut self, wqes: &mut Vec<WqeRecord>) {
        let _ = wqes;
    }

    /// Called with each [`SimControl`] action before it reaches the inner backend; may answer
    /// it by returning its result (the inner backend then never sees it).
    fn answer_control(&mut self, action: &ControlAction) -> Option<Result<()>> {
        let _ = action;
        None
    }

    /// Called with each [`SimControl`] call that goes through the wrapper, and its result.
    fn control(&mut self, action: &ControlAction, result: &Result<()>) {
        let _ = (action, result);
    }

    /// Called with the command records [`SimControl::take_commands`] returns; may change them.
    fn commands(&mut self, commands: &mut Vec<CommandRecord>) {
        let _ = commands;
    }
}

/// A backend seen through a layer.
#[derive(Debug, Clone)]
pub struct Wrapped<L, B> {
    /// The layer.
    pub layer: L,
    /// The backend behind it.
    pub inner: B,
}

impl<L: Layer, B: Backend> Wrapped<L, B> {
    /// Wrap `inner` in `layer`.
    pub fn new(layer: L, inner: B) -> Self {
        Wrapped { layer, inner }
    }

    /// Send one call through the layer to the inner backend and back.
    pub fn dispatch(&mut self, mut call: Call) -> Reply {
        let mut reply = match self.layer.before(&mut call) {
            Some(r) => r,
            None => call.apply(&mut self.inner),
        };
        self.layer.after(&call, &mut reply);
        reply
    }
}

fn mismatch<T>(call: &Call, reply: &Reply) -> Result<T> {
    Err(Error::new(call.op(), EINVAL, format!("a layer answered {call:?} with a reply of another call: {reply:?}")))
}

/// Dispatch a call and take the payload of the matching reply variant.
macro_rules! through {
    ($self:ident, $call:expr, $variant:ident) => {{
        let call = $call;
        match $self.dispatch(call.clone()) {
            Reply::$variant(r) => r,
            other => mismatch(&call, &other),
        }
    }};
}

impl<L: Layer, B: Backend> Contexts for Wrapped<L, B> {
    fn device_list(&mut self) -> Result<Vec<DeviceDesc>> {
        through!(self, Call::DeviceList, DeviceList)
    }
    fn open_device(&mut self, device: &str, attr: Option<&ContextAttr>) -> Result<ContextHandle> {
        through!(self, Call::OpenDevice { device: device.into(), attr: attr.copied() }, OpenDevice)
    }
    fn open_ibv_device(&mut self, device: &str) -> Result<ContextHandle> {
        through!(self, Call::OpenIbvDevice { device: device.into() }, OpenIbvDevice)
    }
    fn close_device(&mut self, ctx: ContextHandle) -> Result<()> {
        through!(self, Call::CloseDevice { ctx }, CloseDevice)
    }
    fn query_device(&mut self, ctx: ContextHandle, comp_mask: u64) -> Result<DvContext> {
        through!(self, Call::QueryDevice { ctx, comp_mask }, QueryDevice)
    }
    fn query_port(&mut self, ctx: ContextHandle, port_num: u8) -> Result<PortAttr> {
        through!(self, Call::QueryPort { ctx, port_num }, QueryPort)
    }
    fn alloc_pd(&mut self, ctx: ContextHandle) -> Result<PdHandle> {
        through!(self, Call::AllocPd { ctx }, AllocPd)
    }
    fn dealloc_pd(&mut self, pd: PdHandle) -> Result<()> {
        through!(self, Call::DeallocPd { pd }, DeallocPd)
    }
    fn get_async_event(&mut self, ctx: ContextHandle) -> Result<Option<AsyncEvent>> {
        through!(self, Call::GetAsyncEvent { ctx }, GetAsyncEvent)
    }
}

impl<L: Layer, B: Backend> Mkeys for Wrapped<L, B> {
    fn create_mkey(&mut self, attr: &MkeyInitAttr) -> Result<Mkey> {
        through!(self, Call::CreateMkey { attr: *attr }, CreateMkey)
    }
    fn destroy_mkey(&mut self, mkey: &Mkey) -> Result<()> {
        through!(self, Call::DestroyMkey { mkey: *mkey }, DestroyMkey)
    }
    fn mkey_check(&mut self, mkey: &Mkey) -> Result<MkeyErr> {
        through!(self, Call::MkeyCheck { mkey: *mkey }, MkeyCheck)
    }
}

impl<L: Layer, B: Backend> Memory for Wrapped<L, B> {
    fn alloc_buf(&mut self, len: usize) -> Result<Buf> {
        through!(self, Call::AllocBuf { len }, AllocBuf)
    }
    fn free_buf(&mut self, buf: &Buf) -> Result<()> {
        through!(self, Call::FreeBuf { buf: *buf }, FreeBuf)
    }
    fn write_buf(&mut self, buf: &Buf, offset: usize, data: &[u8]) -> Result<()> {
        through!(self, Call::WriteBuf { buf: *buf, offset, data: data.to_vec() }, WriteBuf)
    }
    fn read_buf(&mut self, buf: &Buf, offset: usize, len: usize) -> Result<Vec<u8>> {
        through!(self, Call::ReadBuf { buf: *buf, offset, len }, ReadBuf)
    }
    fn reg_mr(&mut self, pd: PdHandle, addr: u64, length: u64, access: AccessFlags) -> Result<Mr> {
        through!(self, Call::RegMr { pd, addr, length, access }, RegMr)
    }
    fn dereg_mr(&mut self, mr: &Mr) -> Result<()> {
        through!(self, Call::DeregMr { mr: *mr }, DeregMr)
    }
    fn advise_mr(&mut self, pd: PdHandle, advice: u32, flags: u32, sges: &[crate::Sge]) -> Result<()> {
        through!(self, Call::AdviseMr { pd, advice, flags, sges: sges.to_vec() }, AdviseMr)
    }
    fn rereg_mr(
        &mut self,
        mr: &Mr,
        flags: u32,
        pd: Option<PdHandle>,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        through!(self, Call::ReregMr { mr: *mr, flags, pd, addr, length, access }, ReregMr)
    }
    fn alloc_mw(&mut self, pd: PdHandle, mw_type: u32) -> Result<Mw> {
        through!(self, Call::AllocMw { pd, mw_type }, AllocMw)
    }
    fn dealloc_mw(&mut self, mw: &Mw) -> Result<()> {
        through!(self, Call::DeallocMw { mw: *mw }, DeallocMw)
    }
    fn alloc_dm(&mut self, ctx: ContextHandle, length: u64, log_align_req: u32) -> Result<Dm> {
        through!(self, Call::AllocDm { ctx, length, log_align_req }, AllocDm)
    }
    fn free_dm(&mut self, dm: &Dm) -> Result<()> {
        through!(self, Call::FreeDm { dm: *dm }, FreeDm)
    }
    fn memcpy_to_dm(&mut self, dm: &Dm, offset: u64, data: &[u8]) -> Result<()> {
        through!(self, Call::MemcpyToDm { dm: *dm, offset, data: data.to_vec() }, MemcpyToDm)
    }
    fn memcpy_from_dm(&mut self, dm: &Dm, offset: u64, len: usize) -> Result<Vec<u8>> {
        through!(self, Call::MemcpyFromDm { dm: *dm, offset, len }, MemcpyFromDm)
    }
    fn reg_dm_mr(&mut self, pd: PdHandle, dm: &Dm, offset: u64, length: u64, access: AccessFlags) -> Result<Mr> {
        through!(self, Call::RegDmMr { pd, dm: *dm, offset, length, access }, RegDmMr)
    }
    fn alloc_dmabuf(&mut self, len: usize) -> Result<DmaBuf> {
        through!(self, Call::AllocDmabuf { len }, AllocDmabuf)
    }
    fn free_dmabuf(&mut self, dmabuf: &DmaBuf) -> Result<()> {
        through!(self, Call::FreeDmabuf { dmabuf: *dmabuf }, FreeDmabuf)
    }
    fn reg_dmabuf_mr(
        &mut self,
        pd: PdHandle,
        offset: u64,
        length: u64,
        iova: u64,
        fd: i32,
        access: AccessFlags,
    ) -> Result<Mr> {
        through!(self, Call::RegDmabufMr { pd, offset, length, iova, fd, access }, RegDmabufMr)
    }
    fn dv_reg_dmabuf_mr(
        &mut self,
        pd: PdHandle,
        offset: u64,
        length: u64,
        iova: u64,
        fd: i32,
        access: AccessFlags,
        mlx5_access: u32,
    ) -> Result<Mr> {
        through!(self, Call::DvRegDmabufMr { pd, offset, length, iova, fd, access, mlx5_access }, DvRegDmabufMr)
    }
    fn get_data_direct_sysfs_path(&mut self, ctx: ContextHandle, buf_len: usize) -> Result<String> {
        through!(self, Call::GetDataDirectSysfsPath { ctx, buf_len }, GetDataDirectSysfsPath)
    }
}

impl<L: Layer, B: Backend> Queues for Wrapped<L, B> {
    fn bind_mw(&mut self, qp: &Qp, mw: &Mw, bind: &MwBind) -> Result<u32> {
        through!(self, Call::BindMw { qp: *qp, mw: *mw, bind: *bind }, BindMw)
    }
    fn create_cq_on_vector(&mut self, ctx: ContextHandle, cqe: u32, comp_vector: u32) -> Result<Cq> {
        through!(self, Call::CreateCq { ctx, cqe, comp_vector }, CreateCq)
    }
    fn create_dv_cq(&mut self, ctx: ContextHandle, cqe: u32, comp_vector: u32, attr: &crate::DvCqAttr) -> Result<Cq> {
        through!(self, Call::CreateDvCq { ctx, cqe, comp_vector, attr: *attr }, CreateDvCq)
    }
    fn create_cq_ex(&mut self, ctx: ContextHandle, attr: &crate::CqInitAttrEx) -> Result<Cq> {
        through!(self, Call::CreateCqEx { ctx, attr: *attr }, CreateCqEx)
    }
    fn cq_entry(&mut self, cq: &Cq, index: u32) -> Result<crate::CqEntry> {
        through!(self, Call::CqEntry { cq: *cq, index }, CqEntry)
    }
    fn destroy_cq(&mut self, cq: &Cq) -> Result<()> {
        through!(self, Call::DestroyCq { cq: *cq }, DestroyCq)
    }
    fn resize_cq(&mut self, cq: &Cq, cqe: u32) -> Result<Cq> {
        through!(self, Call::ResizeCq { cq: *cq, cqe }, ResizeCq)
    }
    fn poll_cq(&mut self, cq: &Cq, max: usize) -> Result<Vec<Wc>> {
        through!(self, Call::PollCq { cq: *cq, max }, PollCq)
    }
    fn create_qp(&mut self, attr: &QpInitAttr) -> Result<Qp> {
        through!(self, Call::CreateQp { attr: *attr }, CreateQp)
    }
    fn modify_qp(&mut self, qp: &Qp, attr: &QpModify) -> Result<()> {
        through!(self, Call::ModifyQp { qp: *qp, attr: *attr }, ModifyQp)
    }
    fn create_flow(&mut self, qp: &Qp, attr: &crate::FlowAttr) -> Result<crate::Flow> {
        through!(self, Call::CreateFlow { qp: *qp, attr: attr.clone() }, CreateFlow)
    }
    fn destroy_flow(&mut self, flow: &crate::Flow) -> Result<()> {
        through!(self, Call::DestroyFlow { flow: *flow }, DestroyFlow)
    }
    fn create_flow_matcher(&mut self, ctx: ContextHandle, attr: &crate::FlowMatcherAttr) -> Result<crate::FlowMatcher> {
        through!(self, Call::CreateFlowMatcher { ctx, attr: attr.clone() }, CreateFlowMatcher)
    }
    fn destroy_flow_matcher(&mut self, matcher: &crate::FlowMatcher) -> Result<()> {
        through!(self, Call::DestroyFlowMatcher { matcher: *matcher }, DestroyFlowMatcher)
    }
    fn create_matcher_flow(
        &mut self,
        matcher: &crate::FlowMatcher,
        value: &[u8],
        actions: &[crate::MatcherAction],
    ) -> Result<crate::Flow> {
        let call = Call::CreateMatcherFlow { matcher: *matcher, value: value.to_vec(), actions: actions.to_vec() };
        through!(self, call, CreateMatcherFlow)
    }
    fn modify_qp_udp_sport(&mut self, qp: &Qp, udp_sport: u16) -> Result<()> {
        through!(self, Call::ModifyQpUdpSport { qp: *qp, udp_sport }, ModifyQpUdpSport)
    }
    fn dci_stream_id_reset(&mut self, qp: &Qp, stream_id: u16) -> Result<()> {
        through!(self, Call::DciStreamIdReset { qp: *qp, stream_id }, DciStreamIdReset)
    }
    fn modify_qp_sched_elem(&mut self, qp: &Qp, requestor: u32, responder: u32) -> Result<()> {
        through!(self, Call::ModifyQpSchedElem { qp: *qp, requestor, responder }, ModifyQpSchedElem)
    }
    fn map_ah_to_qp(&mut self, ctx: ContextHandle, ah: &crate::UdDest, qp_num: u32) -> Result<()> {
        through!(self, Call::MapAhToQp { ctx, ah: *ah, qp_num }, MapAhToQp)
    }
    fn query_qp_state(&mut self, qp: &Qp) -> Result<QpState> {
        through!(self, Call::QueryQpState { qp: *qp }, QueryQpState)
    }
    fn sq_wqe(&mut self, qp: &Qp, index: u32) -> Result<Vec<u8>> {
        through!(self, Call::SqWqe { qp: *qp, index }, SqWqe)
    }
    fn destroy_qp(&mut self, qp: &Qp) -> Result<()> {
        through!(self, Call::DestroyQp { qp: *qp }, DestroyQp)
    }
    fn post_send(&mut self, qp: &Qp, ops: &[WrOp]) -> Result<()> {
        through!(self, Call::PostSend { qp: *qp, ops: ops.to_vec() }, PostSend)
    }
    fn post_send_wr(&mut self, qp: &Qp, wrs: &[SendWr]) -> Result<()> {
        through!(self, Call::PostSendWr { qp: *qp, wrs: wrs.to_vec() }, PostSendWr)
    }
    fn post_recv(&mut self, qp: &Qp, wrs: &[RecvWr]) -> Result<()> {
        through!(self, Call::PostRecv { qp: *qp, wrs: wrs.to_vec() }, PostRecv)
    }
    fn cancel_posted_send_wrs(&mut self, qp: &Qp, wr_id: u64) -> Result<u32> {
        through!(self, Call::CancelPostedSendWrs { qp: *qp, wr_id }, CancelPostedSendWrs)
    }
}

impl<L: Layer, B: Backend> Srqs for Wrapped<L, B> {
    fn create_srq(&mut self, attr: &SrqInitAttr) -> Result<Srq> {
        through!(self, Call::CreateSrq { attr: *attr }, CreateSrq)
    }
    fn modify_srq(&mut self, srq: &Srq, attr: &SrqAttr, mask: u32) -> Result<()> {
        through!(self, Call::ModifySrq { srq: *srq, attr: *attr, mask }, ModifySrq)
    }
    fn query_srq(&mut self, srq: &Srq) -> Result<SrqAttr> {
        through!(self, Call::QuerySrq { srq: *srq }, QuerySrq)
    }
    fn destroy_srq(&mut self, srq: &Srq) -> Result<()> {
        through!(self, Call::DestroySrq { srq: *srq }, DestroySrq)
    }
    fn post_srq_recv(&mut self, srq: &Srq, wrs: &[RecvWr]) -> Result<()> {
        through!(self, Call::PostSrqRecv { srq: *srq, wrs: wrs.to_vec() }, PostSrqRecv)
    }
    fn post_srq_ops(&mut self, srq: &Srq, ops: &[SrqOpWr]) -> Result<Vec<u32>> {
        through!(self, Call::PostSrqOps { srq: *srq, ops: ops.to_vec() }, PostSrqOps)
    }
    fn open_xrcd(&mut self, attr: &XrcdInitAttr) -> Result<Xrcd> {
        through!(self, Call::OpenXrcd { attr: *attr }, OpenXrcd)
    }
    fn close_xrcd(&mut self, xrcd: &Xrcd) -> Result<()> {
        through!(self, Call::CloseXrcd { xrcd: *xrcd }, CloseXrcd)
    }
    fn open_qp(&mut self, attr: &QpOpenAttr) -> Result<Qp> {
        through!(self, Call::OpenQp { attr: *attr }, OpenQp)
    }
    fn create_wq(&mut self, attr: &WqInitAttr) -> Result<Wq> {
        through!(self, Call::CreateWq { attr: *attr }, CreateWq)
    }
    fn modify_wq(&mut self, wq: &Wq, attr: &WqAttr) -> Result<()> {
        through!(self, Call::ModifyWq { wq: *wq, attr: *attr }, ModifyWq)
    }
    fn destroy_wq(&mut self, wq: &Wq) -> Result<()> {
        through!(self, Call::DestroyWq { wq: *wq }, DestroyWq)
    }
    fn post_wq_recv(&mut self, wq: &Wq, wrs: &[RecvWr]) -> Result<()> {
        through!(self, Call::PostWqRecv { wq: *wq, wrs: wrs.to_vec() }, PostWqRecv)
    }
    fn create_rwq_ind_table(&mut self, attr: &RwqIndTableInitAttr) -> Result<RwqIndTable> {
        through!(self, Call::CreateRwqIndTable { attr: attr.clone() }, CreateRwqIndTable)
    }
    fn destroy_rwq_ind_table(&mut self, table: &RwqIndTable) -> Result<()> {
        through!(self, Call::DestroyRwqIndTable { table: *table }, DestroyRwqIndTable)
    }
}

impl<L: Layer, B: Backend> Crypto for Wrapped<L, B> {
    fn crypto_login(&mut self, ctx: ContextHandle, attr: &CryptoLoginAttr) -> Result<()> {
        through!(self, Call::CryptoLogin { ctx, attr: *attr }, CryptoLogin)
    }
    fn crypto_login_query_state(&mut self, ctx: ContextHandle) -> Result<CryptoLoginState> {
        through!(self, Call::CryptoLoginQueryState { ctx }, CryptoLoginQueryState)
    }
    fn crypto_logout(&mut self, ctx: ContextHandle) -> Result<()> {
        through!(self, Call::CryptoLogout { ctx }, CryptoLogout)
    }
    fn crypto_login_create(&mut self, ctx: ContextHandle, attr: &CryptoLoginAttrEx) -> Result<CryptoLoginHandle> {
        through!(self, Call::CryptoLoginCreate { ctx, attr: attr.clone() }, CryptoLoginCreate)
    }
    fn crypto_login_query(&mut self, login: CryptoLoginHandle, comp_mask: u64) -> Result<CryptoLoginQueryAttr> {
        through!(self, Call::CryptoLoginQuery { login, comp_mask }, CryptoLoginQuery)
    }
    fn crypto_login_destroy(&mut self, login: CryptoLoginHandle) -> Result<()> {
        through!(self, Call::CryptoLoginDestroy { login }, CryptoLoginDestroy)
    }
    fn dek_create(&mut self, ctx: ContextHandle, attr: &DekInitAttr) -> Result<DekHandle> {
        through!(self, Call::DekCreate { ctx, attr: *attr }, DekCreate)
    }
    fn dek_query(&mut self, dek: DekHandle, comp_mask: u64) -> Result<DekAttr> {
        through!(self, Call::DekQuery { dek, comp_mask }, DekQuery)
    }
    fn dek_destroy(&mut self, dek: DekHandle) -> Result<()> {
        through!(self, Call::DekDestroy { dek }, DekDestroy)
    }
}

impl<L: Layer, B: Backend> Devx for Wrapped<L, B> {
    fn devx_general_cmd(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>> {
        through!(self, Call::DevxGeneralCmd { ctx, input: input.to_vec(), out_len }, DevxGeneralCmd)
    }
    fn devx_obj_create(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<DevxObj> {
        through!(self, Call::DevxObjCreate { ctx, input: input.to_vec(), out_len }, DevxObjCreate)
    }
    fn devx_obj_query(&mut self, obj: DevxObjHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>> {
        through!(self, Call::DevxObjQuery { obj, input: input.to_vec(), out_len }, DevxObjQuery)
    }
    fn devx_obj_modify(&mut self, obj: DevxObjHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>> {
        through!(self, Call::DevxObjModify { obj, input: input.to_vec(), out_len }, DevxObjModify)
    }
    fn devx_obj_destroy(&mut self, obj: DevxObjHandle) -> Result<()> {
        through!(self, Call::DevxObjDestroy { obj }, DevxObjDestroy)
    }
    fn devx_pd_number(&mut self, pd: PdHandle) -> Result<u32> {
        through!(self, Call::DevxPdNumber { pd }, DevxPdNumber)
    }
    fn devx_query_eqn(&mut self, ctx: ContextHandle, vector: u32) -> Result<u32> {
        through!(self, Call::DevxQueryEqn { ctx, vector }, DevxQueryEqn)
    }
    fn reserved_qpn_alloc(&mut self, ctx: ContextHandle) -> Result<u32> {
        through!(self, Call::ReservedQpnAlloc { ctx }, ReservedQpnAlloc)
    }
    fn reserved_qpn_dealloc(&mut self, ctx: ContextHandle, qpn: u32) -> Result<()> {
        through!(self, Call::ReservedQpnDealloc { ctx, qpn }, ReservedQpnDealloc)
    }
    fn pp_alloc(&mut self, ctx: ContextHandle, pp_context: &[u8], flags: u32) -> Result<PpEntry> {
        through!(self, Call::PpAlloc { ctx, pp_context: pp_context.to_vec(), flags }, PpAlloc)
    }
    fn pp_free(&mut self, pp: &PpEntry) -> Result<()> {
        through!(self, Call::PpFree { pp: *pp }, PpFree)
    }
    fn alloc_var(&mut self, ctx: ContextHandle, flags: u32) -> Result<Var> {
        through!(self, Call::AllocVar { ctx, flags }, AllocVar)
    }
    fn free_var(&mut self, var: &Var) -> Result<()> {
        through!(self, Call::FreeVar { var: *var }, FreeVar)
    }
    fn query_qp_lag_port(&mut self, qp: QpHandle) -> Result<(u8, u8)> {
        through!(self, Call::QueryQpLagPort { qp }, QueryQpLagPort)
    }
    fn modify_qp_lag_port(&mut self, qp: QpHandle, port: u8) -> Result<()> {
        through!(self, Call::ModifyQpLagPort { qp, port }, ModifyQpLagPort)
    }
    fn devx_alloc_uar(&mut self, ctx: ContextHandle, flags: u32) -> Result<DevxUar> {
        through!(self, Call::DevxAllocUar { ctx, flags }, DevxAllocUar)
    }
    fn devx_free_uar(&mut self, uar: &DevxUar) -> Result<()> {
        through!(self, Call::DevxFreeUar { uar: *uar }, DevxFreeUar)
    }
    fn devx_uar_write(&mut self, uar: &DevxUar, offset: u32, value: &[u8]) -> Result<()> {
        through!(self, Call::DevxUarWrite { uar: *uar, offset, value: value.to_vec() }, DevxUarWrite)
    }
    fn devx_umem_reg(&mut self, ctx: ContextHandle, addr: u64, size: u64, access: AccessFlags) -> Result<DevxUmem> {
        through!(self, Call::DevxUmemReg { ctx, addr, size, access }, DevxUmemReg)
    }
    fn devx_umem_dereg(&mut self, umem: &DevxUmem) -> Result<()> {
        through!(self, Call::DevxUmemDereg { umem: *umem }, DevxUmemDereg)
    }
    fn devx_alloc_msi_vector(&mut self, ctx: ContextHandle) -> Result<MsiVector> {
        through!(self, Call::DevxAllocMsiVector { ctx }, DevxAllocMsiVector)
    }
    fn devx_free_msi_vector(&mut self, msi: &MsiVector) -> Result<()> {
        through!(self, Call::DevxFreeMsiVector { msi: *msi }, DevxFreeMsiVector)
    }
    fn devx_msi_vector_read(&mut self, msi: &MsiVector) -> Result<u64> {
        through!(self, Call::DevxMsiVectorRead { msi: *msi }, DevxMsiVectorRead)
    }
    fn devx_create_eq(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<DevxEq> {
        through!(self, Call::DevxCreateEq { ctx, input: input.to_vec(), out_len }, DevxCreateEq)
    }
    fn devx_destroy_eq(&mut self, eq: &DevxEq) -> Result<()> {
        through!(self, Call::DevxDestroyEq { eq: eq.clone() }, DevxDestroyEq)
    }
}

impl<L: Layer, B: Backend> Backend for Wrapped<L, B> {
    fn info(&self) -> BackendInfo {
        self.layer.info(self.inner.info())
    }

    fn caps(&self) -> Caps {
        let mut caps = self.layer.caps(self.inner.caps());
        if !self.layer.pass_sim_control() {
            caps.sim_control = false;
        }
        caps
    }

    fn sim_control(&mut self) -> Option<&mut dyn SimControl> {
        if self.layer.pass_sim_control() && self.inner.sim_control().is_some() { Some(self) } else { None }
    }
}

impl<L: Layer, B: Backend> Wrapped<L, B> {
    fn control(&mut self) -> Result<&mut dyn SimControl> {
        self.inner
            .sim_control()
            .ok_or_else(|| Error::new(Op::Backend, EOPNOTSUPP, "the wrapped backend has no simulator control"))
    }
}

/// Reached only through [`Backend::sim_control`], which offers it when the inner backend has one.
impl<L: Layer, B: Backend> Wrapped<L, B> {
    fn act(&mut self, action: ControlAction) -> Result<()> {
        let r = match self.layer.answer_control(&action) {
            Some(r) => r,
            None => self.control().and_then(|c| action.apply(c)),
        };
        self.layer.control(&action, &r);
        r
    }
}

impl<L: Layer, B: Backend> SimControl for Wrapped<L, B> {
    fn add_fault(&mut self, rule: FaultRule) -> Result<()> {
        self.act(ControlAction::AddFault { rule })
    }
    fn clear_faults(&mut self) {
        let _ = self.act(ControlAction::ClearFaults);
    }
    fn record_commands(&mut self, on: bool) {
        let _ = self.act(ControlAction::RecordCommands { on });
    }
    fn take_commands(&mut self) -> Vec<CommandRecord> {
        let mut commands = self.control().map(|c| c.take_commands()).unwrap_or_default();
        self.layer.commands(&mut commands);
        commands
    }
    fn record_wqes(&mut self, on: bool) {
        let _ = self.act(ControlAction::RecordWqes { on });
    }
    fn take_wqes(&mut self) -> Vec<WqeRecord> {
        let mut wqes = self.control().map(|c| c.take_wqes()).unwrap_or_default();
        self.layer.wqes(&mut wqes);
        wqes
    }
    fn set_port_state(&mut self, device: &str, port: u8, state: u32) -> Result<()> {
        self.act(ControlAction::SetPortState { device: device.into(), port, state })
    }
    fn transport_counters(&mut self, device: u32) -> Result<crate::TransportCounters> {
        self.control()?.transport_counters(device)
    }
}
