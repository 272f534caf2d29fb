//! [`Simulator`]: the layers of one simulated host, and the `mlx5_dv` families implemented on
//! them by delegation to the provider.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags, AsyncEvent, Backend, BackendId, BackendInfo, Buf, CommandRecord, ContextAttr, ContextHandle, Contexts,
    Cq, DeviceDesc, DeviceKind, DmaBuf, DvContext, Error, FaultRule, KernelFacts, Memory, Mkey, MkeyErr, MkeyInitAttr,
    Mkeys, Mr, Op, PdHandle, PortAttr, Qp, QpInitAttr, QpModify, QpState, Queues, RecvWr, Result, SendWr, SimControl,
    Wc, WqeRecord, WrOp,
};
use mlx5_dv::{
    Crypto, CryptoLoginAttr, CryptoLoginAttrEx, CryptoLoginHandle, CryptoLoginQueryAttr, CryptoLoginState, DekAttr,
    DekHandle, DekInitAttr,
};
use mlx5_dv::{Devx, DevxEq, DevxObj, DevxObjHandle, DevxUar, DevxUmem, MsiVector, PpEntry, QpHandle, Var};

mod dm;

use crate::device::firmware::CommandFault;
use crate::device::{Device, WqeFault};
use crate::fabric::Fabric;
use crate::host::Host;
use crate::kernel::Kernel;
use crate::profile::{Profile, ShippedProfiles};
use crate::provider::{DmabufReg, Lower, Provider};
use crate::wake::Wake;

/// The first QP number of device `dev` of host `host`: 0x100 on host 0; elsewhere spread over
/// the 24-bit space by host, so that programs on two hosts see different numbers.
fn first_qpn(host: u32, dev: usize) -> u32 {
    const FIRST: u32 = 0x100;
    const SPAN: u32 = 0xff_ffff - FIRST;
    let spread = host.wrapping_mul(0x9e37).wrapping_add(dev as u32 * 0x1000);
    if host == 0 { FIRST } else { FIRST + spread % SPAN }
}

/// The simulated host behind the [`Backend`] trait: host memory, the provider (libmlx5), the
/// kernel, the devices and the fabric between them.
///
/// Deterministic: the same calls on the same profile give the same keys, numbers and bytes.
#[derive(Debug, Clone)]
pub struct Simulator {
    profile: Profile,
    host: Host,
    provider: Provider,
    kernel: Kernel,
    devices: Vec<Device>,
    fabric: Fabric,
    /// What [`Backend::caps`] reports, probed once at construction.
    caps: mlx5_dv::Caps,
    /// The device thread's doorbell when free-running ([`Simulator::free_running`]).
    wake: Option<Wake>,
}

impl Simulator {
    /// A simulator of `profile`, host number 0: the profile's GUIDs and GIDs, QP numbers
    /// from 0x100.
    pub fn new(profile: Profile) -> Result<Self> {
        Simulator::with_host(profile, 0)
    }

    /// A simulator of `profile` as host number `host` (24 bits; see [`Fabric::new`]): its
    /// ports' GUIDs and GIDs, and the first QP number of each device, are the host's own, so
    /// that two simulated hosts never name each other's QPs as their own. Host 0 is
    /// [`Simulator::new`].
    pub fn with_host(profile: Profile, host: u32) -> Result<Self> {
        // The kernel's mlx5 devices, then the VFIO function if the host has one.
        let count = profile.device_names().len() + usize::from(profile.device.vfio_pci_name.is_some());
        let devices = (0..count)
            .map(|_| Device::new(&profile))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| crate::kernel::internal(Op::Backend, e))?;
        let mut kernel = Kernel::new(&profile.kernel, crate::kernel::QpLimits::of(&profile.datapath), count);
        kernel.data_direct = profile.device.data_direct_sysfs_path.clone();
        let fabric = Fabric::new(&profile, host);
        let mut devices = devices;
        for (i, d) in devices.iter_mut().enumerate() {
            if let Some(p) = fabric.port(i) {
                d.set_port_address(p.gid, p.lid);
            }
            d.set_first_qpn(first_qpn(host, i));
        }
        let sim = Simulator {
            provider: Provider::new(BackendId::fresh(), &profile),
            kernel,
            fabric,
            host: Host::with_memory_limit(profile.datapath.host_memory_limit),
            devices,
            caps: mlx5_dv::Caps::default(),
            profile,
            wake: None,
        };
        Ok(sim.with_probed_caps())
    }

    /// Fill `caps` as a program would learn them: the kernel's features from the profile, the
    /// device caps through `ibv_open_device` and `mlx5dv_query_device` on a throwaway copy, so
    /// this simulator's ids and logs stay as they were.
    fn with_probed_caps(mut self) -> Self {
        let mut probe = self.clone();
        let mut caps = mlx5_dv::Caps::default();
        let k = &self.profile.kernel;
        caps.kernel =
            KernelFacts { devx: Some(k.devx), mkey_update_tag: Some(k.mkey_update_tag), sqd2rts: Some(k.sqd2rts) };
        caps.device.general_obj_types = Some(
            self.profile
                .hca_cap
                .general_obj_types
                .iter()
                .fold(0u64, |m, t| m | 1u64.checked_shl(u32::from(t.number())).unwrap_or(0)),
        );
        caps.device.max_qp_wr = Some(self.profile.datapath.max_qp_wr);
        caps.device.max_srq_wr = Some((1u32 << self.profile.datapath.log_max_srq_sz) - 1);
        let h = &self.profile.hca_cap;
        caps.device.tm = mlx5_dv::TmCaps::of_hca(
            h.tag_matching,
            h.rndv_offload_rc,
            h.log_tag_matching_list_sz,
            self.profile.datapath.max_qp_wr,
        );
        caps.device.log_max_cq_sz = Some(self.profile.datapath.log_max_cq_sz);
        caps.device.dma_mmo = Some(self.profile.datapath.dma_mmo);
        caps.device.ooo_dp = Some(self.profile.datapath.ooo_dp);
        caps.device.raw_packet = Some(
            self.profile.datapath.raw_packet && self.profile.device.link_layer == crate::profile::LinkLayer::Ethernet,
        );
        caps.library.rdma_core = Some(format!("{}.0", self.profile.datapath.rdma_core_release));
        caps.library.wc_flow_tag = Some(true);
        caps.sim_control = true;
        if let Some(dev) = probe.device_list().ok().into_iter().flatten().find(|d| d.kind == DeviceKind::Mlx5)
            && let Ok(ctx) = probe.open_ibv_device(&dev.name)
        {
            let mask = mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD;
            if let Ok(q) = probe.query_device(ctx, mask) {
                caps.device.sig = q.sig_caps;
                caps.device.crypto = q.crypto_caps;
            }
            caps.device.max_dm_size = probe.max_dm_size(ctx).ok();
            caps.device.odp = Some(self.profile.odp.caps());
        }
        self.caps = caps;
        self
    }

    /// A simulator of the shipped profile `name`.
    pub fn with_profile(name: &str) -> std::result::Result<Self, crate::ProfileError> {
        let p = Profile::builtin(name)?;
        Simulator::new(p).map_err(|e| crate::ProfileError { origin: name.into(), message: e.to_string() })
    }

    /// The profile this simulator imitates.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// `ibv_req_notify_cq`: arm `cq` (for solicited and error completions only with
    /// `solicited_only`). The device raises the CQ's completion event at its next such CQE,
    /// or at once if one waits unpolled; [`Simulator::take_cq_events`] collects it.
    pub fn arm_cq(&mut self, cq: &Cq, solicited_only: bool) -> Result<()> {
        let (p, mut low) = self.split();
        p.arm_cq(&mut low, cq, solicited_only)
    }

    /// A program's own store to the CQ doorbell of context `ctx`'s UAR page (`hi` =
    /// `sn << 28 | cmd | ci`, then the CQ number), as `mlx5_arm_cq` makes it: the CQ of that
    /// context is armed as by [`Simulator::arm_cq`]. A store naming no CQ of the context is
    /// dropped, as the device drops it.
    pub fn cq_doorbell(&mut self, ctx: mlx5_dv::ContextHandle, hi: u32, cqn: u32) {
        let (p, mut low) = self.split();
        p.cq_doorbell_store(&mut low, ctx, hi, cqn);
    }

    /// `ibv_get_cq_event` read an event of `cq` (`mlx5_cq_event`): its next arm carries the
    /// next sequence number.
    pub fn cq_event(&mut self, cq: &Cq) -> Result<()> {
        self.provider.cq_event(cq)
    }

    /// The CQs whose completion event the devices raised since the last call, oldest first
    /// (what a completion channel's fd reports).
    pub fn take_cq_events(&mut self) -> Vec<mlx5_dv::CqHandle> {
        self.kernel.deliver_events(&mut self.devices);
        self.kernel.take_cq_events()
    }

    /// A buffer over an application's own memory, at its own address: RDMA reads and writes
    /// it in place once an MR covers it. EINVAL for a null or empty range, one that wraps the
    /// address space, or one that overlaps the backend's own buffers; a range may overlap
    /// earlier registrations (an MR over part of another's bytes). `free_buf` ends the
    /// registration.
    ///
    /// # Safety
    ///
    /// `[ptr, ptr + len)` must be valid for reads and writes, and nothing else may read or
    /// write it, until `free_buf` on the returned buffer succeeds (or the simulator is
    /// dropped). A clone of the simulator shares the registration.
    pub unsafe fn register_memory(&mut self, ptr: *mut u8, len: usize) -> Result<Buf> {
        let (provider, mut low) = self.split();
        // SAFETY: the caller's contract.
        unsafe { provider.register_buf(&mut low, ptr, len) }
    }

    fn split(&mut self) -> (&mut Provider, Lower<'_>) {
        let low = Lower {
            kernel: &mut self.kernel,
            devices: &mut self.devices,
            host: &mut self.host,
            fabric: &self.fabric,
            wake: self.wake.as_ref(),
        };
        (&mut self.provider, low)
    }

    /// Capture the fabric's traffic from now on to a new pcap file at `path` (Ethernet
    /// frames; Wireshark and tshark read it): each request as the RoCE v2 packets of its
    /// path MTU, then its ACK, NAK or READ response. The file is flushed after each exchange
    /// and is complete whenever none is under way; a clone of this simulator writes to it
    /// too. Ports of an InfiniBand link layer have no IP address: their traffic is not
    /// written. See docs/wire.md.
    pub fn capture_to(&mut self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        let capture = crate::fabric::Capture::create(path.as_ref())?;
        self.fabric.set_capture(Some(capture));
        Ok(())
    }

    /// Hand the devices to a device thread (free-running): from now on a doorbell rung through
    /// the API wakes `wake` instead of running the engine inside the call, and the thread runs
    /// the devices with [`Simulator::tick`]. Rings, doorbell records and UAR pages allocated
    /// after this come from the process, at their own addresses, so that a program may drive
    /// them with stores of its own ([`Simulator::qp_memory`], [`Simulator::cq_memory`]).
    pub fn free_running(&mut self, wake: Wake) {
        self.wake = Some(wake);
        self.fabric.use_wall_clock();
        for d in &mut self.devices {
            d.use_wall_clock();
        }
        self.host.allocate_in_process();
    }

    /// The clock of a kernel context's device now, in `hca_core_clock` ticks: what
    /// `ibv_query_rt_values_ex` reads (`mlx5_read_clock`). Stepped, it counts the CQEs the
    /// device wrote; free-running, it follows the wall clock (`crate::device::clock`).
    /// EOPNOTSUPP for a VFIO context.
    pub fn device_clock(&self, ctx: mlx5_dv::ContextHandle) -> Result<u64> {
        let dev = self.provider.kernel_ctx_device(ctx)?;
        Ok(self.devices.get(dev).map_or(0, Device::clock))
    }

    /// Completion timestamps in the good CQEs of `cq` from now on (the CQE's `timestamp`,
    /// [`mlx5_dv::Wc::timestamp`] when polled): what creating it with
    /// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP` does.
    pub fn enable_cq_timestamps(&mut self, cq: &Cq) -> Result<()> {
        let (dev, cqn) = self.provider.cq_device(cq)?;
        if self.devices.get_mut(dev).is_some_and(|d| d.set_cq_timestamps(cqn)) {
            Ok(())
        } else {
            Err(mlx5_dv::Error::new(Op::CreateCq, mlx5_dv::errno::EINVAL, "the device has no such CQ"))
        }
    }

    /// Where a QP's queues and doorbell record are in host memory (`mlx5dv_init_obj`).
    pub fn qp_memory(&self, qp: &Qp) -> Result<crate::QpMemory> {
        self.provider.qp_memory(qp)
    }

    /// Where an SRQ's WQEs and doorbell record are in host memory (`mlx5dv_init_obj`).
    pub fn srq_memory(&self, srq: &mlx5_dv::Srq) -> Result<crate::SrqMemory> {
        self.provider.srq_memory(srq)
    }

    /// Where a CQ's ring and doorbell record are in host memory (`mlx5dv_init_obj`).
    pub fn cq_memory(&self, cq: &Cq) -> Result<crate::CqMemory> {
        self.provider.cq_memory(cq)
    }

    /// From now on rings, doorbell records and other buffers come from the process, at their
    /// own addresses (what [`Simulator::free_running`] also does), for a stepped simulator
    /// whose program drives its queues with pointers.
    pub fn allocate_in_process(&mut self) {
        self.host.allocate_in_process();
    }

    /// Let `alloc` answer for the buffers of the queues made from now on (QP queues, CQ rings,
    /// SRQs, their doorbell records), until set to `None`: a parent domain's allocators while
    /// its queue is made. Given memory must be the process's own (after
    /// [`Simulator::allocate_in_process`] or [`Simulator::free_running`]).
    pub fn set_queue_allocator(&mut self, alloc: Option<crate::host::QueueAllocator>) {
        self.host.set_queue_allocator(alloc);
    }

    /// True once [`Simulator::free_running`] handed the devices to a thread.
    pub fn is_free_running(&self) -> bool {
        self.wake.is_some()
    }

    /// The doorbell records of every QP of every device (8 bytes each: the receive word, then
    /// the send word): what a device thread watches for a program's own posts. They stay
    /// valid until the QP is destroyed or its context closed.
    pub fn doorbell_records(&self) -> Vec<u64> {
        self.devices.iter().flat_map(Device::doorbell_records).collect()
    }

    #[cfg(feature = "test-utils")]
    pub(crate) fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The devices, to break one on purpose (feature `test-utils`).
    #[cfg(feature = "test-utils")]
    pub(crate) fn devices_mut(&mut self) -> &mut [Device] {
        &mut self.devices
    }

    #[cfg(feature = "test-utils")]
    pub(crate) fn provider_mut(&mut self) -> &mut Provider {
        &mut self.provider
    }
}

/// Delegate a family method to the provider with the layers below it.
macro_rules! down {
    ($self:ident . $m:ident ( $($a:expr),* )) => {{
        let (p, mut low) = $self.split();
        p.$m(&mut low, $($a),*)
    }};
}

// After the macro, which they use.
mod control;
mod memory;
mod network;
mod srq;
mod steering;

impl Contexts for Simulator {
    fn device_list(&mut self) -> Result<Vec<DeviceDesc>> {
        Ok(self.provider.device_list())
    }

    fn open_device(&mut self, device: &str, attr: Option<&ContextAttr>) -> Result<ContextHandle> {
        down!(self.open_device(device, attr))
    }

    fn open_ibv_device(&mut self, device: &str) -> Result<ContextHandle> {
        down!(self.open_ibv_device(device))
    }

    fn close_device(&mut self, ctx: ContextHandle) -> Result<()> {
        self.send_held_acks();
        let r = down!(self.close_device(ctx));
        // Its QPs' groups went with them: the ports leave what no QP holds any more.
        self.sync_multicast_groups();
        r
    }

    fn query_device(&mut self, ctx: ContextHandle, comp_mask: u64) -> Result<DvContext> {
        self.provider.query_device(ctx, comp_mask)
    }

    fn query_port(&mut self, ctx: ContextHandle, port_num: u8) -> Result<PortAttr> {
        let (p, low) = self.split();
        p.query_port(&low, ctx, port_num)
    }

    fn alloc_pd(&mut self, ctx: ContextHandle) -> Result<PdHandle> {
        down!(self.alloc_pd(ctx))
    }

    fn dealloc_pd(&mut self, pd: PdHandle) -> Result<()> {
        down!(self.dealloc_pd(pd))
    }

    fn get_async_event(&mut self, ctx: ContextHandle) -> Result<Option<AsyncEvent>> {
        down!(self.get_async_event(ctx))
    }
}

impl Mkeys for Simulator {
    fn create_mkey(&mut self, attr: &MkeyInitAttr) -> Result<Mkey> {
        down!(self.create_mkey(attr))
    }

    fn destroy_mkey(&mut self, mkey: &Mkey) -> Result<()> {
        down!(self.destroy_mkey(mkey))
    }

    fn mkey_check(&mut self, mkey: &Mkey) -> Result<MkeyErr> {
        self.provider.mkey_check(mkey)
    }
}

impl Queues for Simulator {
    fn bind_mw(&mut self, qp: &mlx5_dv::Qp, mw: &mlx5_dv::Mw, bind: &mlx5_dv::MwBind) -> Result<u32> {
        down!(self.bind_mw(qp, mw, bind))
    }

    fn create_cq_on_vector(&mut self, ctx: ContextHandle, cqe: u32, comp_vector: u32) -> Result<Cq> {
        down!(self.create_cq(ctx, cqe, comp_vector))
    }

    fn create_dv_cq(&mut self, ctx: ContextHandle, cqe: u32, comp_vector: u32, attr: &mlx5_dv::DvCqAttr) -> Result<Cq> {
        down!(self.create_dv_cq(ctx, cqe, comp_vector, attr))
    }

    fn create_cq_ex(&mut self, ctx: ContextHandle, attr: &mlx5_dv::CqInitAttrEx) -> Result<Cq> {
        down!(self.create_cq_with(ctx, attr))
    }

    fn cq_entry(&mut self, cq: &Cq, index: u32) -> Result<mlx5_dv::CqEntry> {
        let (p, low) = self.split();
        p.cq_entry(&low, cq, index)
    }

    fn destroy_cq(&mut self, cq: &Cq) -> Result<()> {
        down!(self.destroy_cq(cq))
    }

    fn resize_cq(&mut self, cq: &Cq, cqe: u32) -> Result<Cq> {
        down!(self.resize_cq(cq, cqe))
    }

    fn create_flow(&mut self, qp: &Qp, attr: &mlx5_dv::FlowAttr) -> Result<mlx5_dv::Flow> {
        let (provider, mut low) = self.split();
        provider.create_flow(&mut low, qp, attr)
    }

    fn destroy_flow(&mut self, flow: &mlx5_dv::Flow) -> Result<()> {
        let (provider, mut low) = self.split();
        provider.destroy_flow(&mut low, flow)
    }

    fn create_flow_matcher(
        &mut self,
        ctx: ContextHandle,
        attr: &mlx5_dv::FlowMatcherAttr,
    ) -> Result<mlx5_dv::FlowMatcher> {
        let (provider, mut low) = self.split();
        provider.create_flow_matcher(&mut low, ctx, attr)
    }

    fn destroy_flow_matcher(&mut self, matcher: &mlx5_dv::FlowMatcher) -> Result<()> {
        let (provider, mut low) = self.split();
        provider.destroy_flow_matcher(&mut low, matcher)
    }

    fn create_matcher_flow(
        &mut self,
        matcher: &mlx5_dv::FlowMatcher,
        value: &[u8],
        actions: &[mlx5_dv::MatcherAction],
    ) -> Result<mlx5_dv::Flow> {
        let (provider, mut low) = self.split();
        provider.create_matcher_flow(&mut low, matcher, value, actions)
    }

    fn modify_qp_udp_sport(&mut self, qp: &Qp, udp_sport: u16) -> Result<()> {
        down!(self.modify_qp_udp_sport(qp, udp_sport))
    }
    fn dci_stream_id_reset(&mut self, qp: &Qp, stream_id: u16) -> Result<()> {
        down!(self.dci_stream_id_reset(qp, stream_id))
    }

    fn modify_qp_sched_elem(&mut self, qp: &Qp, requestor: u32, responder: u32) -> Result<()> {
        down!(self.modify_qp_sched_elem(qp, requestor, responder))
    }
    fn map_ah_to_qp(&mut self, ctx: ContextHandle, ah: &mlx5_dv::UdDest, qp_num: u32) -> Result<()> {
        self.provider.map_ah_to_qp(ctx, ah, qp_num)
    }

    fn poll_cq(&mut self, cq: &Cq, max: usize) -> Result<Vec<Wc>> {
        down!(self.poll_cq(cq, max))
    }

    fn poll_cq_into(&mut self, cq: &Cq, wc: &mut [Wc]) -> Result<usize> {
        down!(self.poll_cq_into(cq, wc))
    }

    fn create_qp(&mut self, attr: &QpInitAttr) -> Result<Qp> {
        down!(self.create_qp(attr))
    }

    fn modify_qp(&mut self, qp: &Qp, attr: &QpModify) -> Result<()> {
        self.send_held_acks();
        down!(self.modify_qp(qp, attr))
    }

    fn query_qp_state(&mut self, qp: &Qp) -> Result<QpState> {
        let (p, low) = self.split();
        p.query_qp_state(&low, qp)
    }

    fn sq_wqe(&mut self, qp: &Qp, index: u32) -> Result<Vec<u8>> {
        let (p, low) = self.split();
        p.sq_wqe(&low, qp, index)
    }

    fn destroy_qp(&mut self, qp: &Qp) -> Result<()> {
        self.send_held_acks();
        down!(self.destroy_qp(qp))
    }

    fn post_send(&mut self, qp: &Qp, ops: &[WrOp]) -> Result<()> {
        down!(self.post_send(qp, ops))
    }

    fn post_send_wr(&mut self, qp: &Qp, wrs: &[SendWr]) -> Result<()> {
        down!(self.post_send_wr(qp, wrs))
    }

    fn post_recv(&mut self, qp: &Qp, wrs: &[RecvWr]) -> Result<()> {
        down!(self.post_recv(qp, wrs))
    }

    fn cancel_posted_send_wrs(&mut self, qp: &Qp, wr_id: u64) -> Result<u32> {
        down!(self.cancel_posted_send_wrs(qp, wr_id))
    }
}

impl Crypto for Simulator {
    fn crypto_login(&mut self, ctx: ContextHandle, attr: &CryptoLoginAttr) -> Result<()> {
        down!(self.crypto_login(ctx, attr))
    }

    fn crypto_login_query_state(&mut self, ctx: ContextHandle) -> Result<CryptoLoginState> {
        down!(self.crypto_login_query_state(ctx))
    }

    fn crypto_logout(&mut self, ctx: ContextHandle) -> Result<()> {
        down!(self.crypto_logout(ctx))
    }

    fn crypto_login_create(&mut self, ctx: ContextHandle, attr: &CryptoLoginAttrEx) -> Result<CryptoLoginHandle> {
        down!(self.crypto_login_create(ctx, attr))
    }

    fn crypto_login_query(&mut self, login: CryptoLoginHandle, comp_mask: u64) -> Result<CryptoLoginQueryAttr> {
        down!(self.crypto_login_query(login, comp_mask))
    }

    fn crypto_login_destroy(&mut self, login: CryptoLoginHandle) -> Result<()> {
        down!(self.crypto_login_destroy(login))
    }

    fn dek_create(&mut self, ctx: ContextHandle, attr: &DekInitAttr) -> Result<DekHandle> {
        down!(self.dek_create(ctx, attr))
    }

    fn dek_query(&mut self, dek: DekHandle, comp_mask: u64) -> Result<DekAttr> {
        down!(self.dek_query(dek, comp_mask))
    }

    fn dek_destroy(&mut self, dek: DekHandle) -> Result<()> {
        down!(self.dek_destroy(dek))
    }
}

impl Devx for Simulator {
    fn devx_general_cmd(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>> {
        down!(self.devx_general_cmd(ctx, input, out_len))
    }

    fn devx_obj_create(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<DevxObj> {
        down!(self.devx_obj_create(ctx, input, out_len))
    }

    fn devx_obj_query(&mut self, obj: DevxObjHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>> {
        down!(self.devx_obj_cmd(obj, input, out_len, false))
    }

    fn devx_obj_modify(&mut self, obj: DevxObjHandle, input: &[u8], out_len: usize) -> Result<Vec<u8>> {
        down!(self.devx_obj_cmd(obj, input, out_len, true))
    }

    fn devx_obj_destroy(&mut self, obj: DevxObjHandle) -> Result<()> {
        down!(self.devx_obj_destroy(obj))
    }

    fn devx_pd_number(&mut self, pd: PdHandle) -> Result<u32> {
        self.provider.pd_number(pd)
    }

    fn devx_query_eqn(&mut self, ctx: ContextHandle, vector: u32) -> Result<u32> {
        down!(self.devx_query_eqn(ctx, vector))
    }
    fn reserved_qpn_alloc(&mut self, ctx: ContextHandle) -> Result<u32> {
        down!(self.reserved_qpn_alloc(ctx))
    }
    fn reserved_qpn_dealloc(&mut self, ctx: ContextHandle, qpn: u32) -> Result<()> {
        down!(self.reserved_qpn_dealloc(ctx, qpn))
    }

    fn pp_alloc(&mut self, ctx: ContextHandle, pp_context: &[u8], flags: u32) -> Result<PpEntry> {
        down!(self.pp_alloc(ctx, pp_context, flags))
    }
    fn pp_free(&mut self, pp: &PpEntry) -> Result<()> {
        down!(self.pp_free(pp))
    }
    fn alloc_var(&mut self, ctx: ContextHandle, flags: u32) -> Result<Var> {
        down!(self.alloc_var(ctx, flags))
    }
    fn free_var(&mut self, var: &Var) -> Result<()> {
        down!(self.free_var(var))
    }
    fn query_qp_lag_port(&mut self, qp: QpHandle) -> Result<(u8, u8)> {
        self.provider.query_qp_lag_port(qp)
    }
    fn modify_qp_lag_port(&mut self, qp: QpHandle, port: u8) -> Result<()> {
        self.provider.modify_qp_lag_port(qp, port)
    }

    fn devx_alloc_uar(&mut self, ctx: ContextHandle, flags: u32) -> Result<DevxUar> {
        down!(self.devx_alloc_uar(ctx, flags))
    }

    fn devx_free_uar(&mut self, uar: &DevxUar) -> Result<()> {
        down!(self.devx_free_uar(uar))
    }

    fn devx_uar_write(&mut self, uar: &DevxUar, offset: u32, value: &[u8]) -> Result<()> {
        down!(self.devx_uar_write(uar, offset, value))
    }

    fn devx_umem_reg(&mut self, ctx: ContextHandle, addr: u64, size: u64, access: AccessFlags) -> Result<DevxUmem> {
        down!(self.devx_umem_reg(ctx, addr, size, access))
    }

    fn devx_umem_dereg(&mut self, umem: &DevxUmem) -> Result<()> {
        down!(self.devx_umem_dereg(umem))
    }

    fn devx_alloc_msi_vector(&mut self, ctx: ContextHandle) -> Result<MsiVector> {
        down!(self.devx_alloc_msi_vector(ctx))
    }

    fn devx_free_msi_vector(&mut self, msi: &MsiVector) -> Result<()> {
        down!(self.devx_free_msi_vector(msi))
    }

    fn devx_msi_vector_read(&mut self, msi: &MsiVector) -> Result<u64> {
        self.provider.devx_msi_vector_read(msi)
    }

    fn devx_create_eq(&mut self, ctx: ContextHandle, input: &[u8], out_len: usize) -> Result<DevxEq> {
        down!(self.devx_create_eq(ctx, input, out_len))
    }

    fn devx_destroy_eq(&mut self, eq: &DevxEq) -> Result<()> {
        down!(self.devx_destroy_eq(eq))
    }
}

impl Backend for Simulator {
    fn info(&self) -> BackendInfo {
        let d = &self.profile.device;
        let facts = [
            ("device", d.name.clone()),
            ("fw_ver", d.fw_ver.clone()),
            ("board_id", d.board_id.clone()),
            ("vendor_part_id", d.vendor_part_id.to_string()),
            ("simulator", env!("CARGO_PKG_VERSION").to_string()),
        ];
        let mut facts: std::collections::BTreeMap<String, String> =
            facts.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        if self.fabric.host() != 0 {
            facts.insert("host".into(), self.fabric.host().to_string());
        }
        BackendInfo { backend: "sim".into(), profile: Some(self.profile.name.clone()), facts }
    }

    fn caps(&self) -> mlx5_dv::Caps {
        self.caps.clone()
    }

    fn sim_control(&mut self) -> Option<&mut dyn SimControl> {
        Some(self)
    }
}
