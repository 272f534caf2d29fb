//! One simulated NIC. Its two interfaces are the command mailboxes of the [`firmware`] and
//! the doorbells and queues the [`engine`] runs; device events leave through one queue
//! ([`Device::take_events`]) that the kernel drains.

use std::collections::VecDeque;

use mlx5_dv::profile::VendorErrSection;
use mlx5_dv::{CommandRecord, QpState};

pub mod clock;
pub mod contract;
pub mod dr;
pub mod engine;
pub mod firmware;
pub mod fte_match;
pub mod rss;
pub mod steering;
pub mod translation;

use firmware::{CommandFault, Firmware};

use crate::fabric::Fabric;
use crate::host::{Dma, Host};
use crate::profile::Profile;
use crate::signature::Crcs;

/// An asynchronous event as the device raises it, before the kernel routes it to a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceEvent {
    /// `IBV_EVENT_*`.
    pub event_type: u32,
    /// The QP it concerns.
    pub qpn: Option<u32>,
    /// The CQ it concerns.
    pub cqn: Option<u32>,
    /// The SRQ it concerns.
    pub srqn: Option<u32>,
}

/// A data-path fault rule, installed through [`mlx5_dv::SimControl::add_fault`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WqeFault {
    /// A matched send WQE completes with this error CQE, and its QP goes to ERR.
    Completion {
        /// The CQE syndrome.
        syndrome: u8,
        /// The vendor syndrome.
        vendor_err: u8,
    },
    /// The payload byte at `offset` is XORed with `xor` on the wire.
    Corrupt {
        /// Offset in the message.
        offset: u64,
        /// Bits flipped.
        xor: u8,
    },
}

#[derive(Debug, Clone)]
struct WqeRule {
    wqe_opcode: u8,
    fault: WqeFault,
    skip: u32,
    times: u32,
    seen: u32,
    acted: u32,
}

/// One NIC: its firmware (object tables, commands) and the engine's per-device state.
#[derive(Debug, Clone)]
pub struct Device {
    fw: Firmware,
    vendor_err: VendorErrSection,
    crcs: Crcs,
    events: VecDeque<DeviceEvent>,
    wqe_faults: Vec<WqeRule>,
    /// Reused transfer buffers: a fresh megabyte per transfer costs page faults.
    scratch: Vec<Vec<u8>>,
    /// What the engine's direct path last found, kept for the next run.
    direct: engine::Kept,
    /// What the engine's direct path last found as a responder, kept for the next packet.
    rx_direct: engine::RxKept,
    /// The port's largest message.
    max_msg_sz: u32,
    /// The error CQE of a crypto failure: (syndrome, vendor syndrome).
    crypto_err: (u8, u8),
    /// Messages on the network, in flight and arriving.
    net: engine::NetState,
    /// The free-running clock completion timestamps read.
    clock: clock::DeviceClock,
    /// The ODP caps the kernel reports for this device (the profile's `[odp]`).
    odp: mlx5_dv::OdpCaps,
    /// The multicast groups its UD QPs joined (`ibv_attach_mcast`): the QPs of each GID.
    mcast: std::collections::BTreeMap<[u8; 16], std::collections::BTreeSet<u32>>,
    /// The verbs flow steering rules of the port, in the order they were made.
    flows: Vec<steering::FlowRule>,
    /// The number the next rule takes.
    next_flow: u32,
    /// The RSS QPs (TIRs over RQ tables), by QP number.
    rss: std::collections::BTreeMap<u32, rss::RssTir>,
    /// Software steering's tables, matchers and rules (`mlx5dv_dr`).
    pub dr: dr::Dr,
}

impl Device {
    /// A device of `profile`.
    pub fn new(profile: &Profile) -> Result<Self, mlx5_dv::prm::FieldError> {
        Ok(Device {
            fw: Firmware::new(profile)?,
            vendor_err: profile.datapath.vendor_err.clone(),
            crcs: Crcs::new(&profile.signature),
            events: VecDeque::new(),
            wqe_faults: Vec::new(),
            scratch: Vec::new(),
            direct: engine::Kept::default(),
            rx_direct: engine::RxKept::default(),
            flows: Vec::new(),
            next_flow: 1,
            rss: Default::default(),
            dr: dr::Dr::default(),
            max_msg_sz: profile.datapath.max_msg_sz,
            crypto_err: (profile.crypto.error.syndrome, profile.crypto.error.vendor_err),
            net: engine::NetState::default(),
            clock: clock::DeviceClock::new(profile.device.hca_core_clock_khz, profile.device.completion_timestamp_mask),
            odp: profile.odp.caps(),
            mcast: Default::default(),
        })
    }

    /// Attach QP `qpn` to multicast group `mgid`: false when the device has no such QP.
    /// Attaching again is no error (mlx5's ATTACH_TO_MCG keeps one entry).
    pub fn attach_multicast(&mut self, qpn: u32, mgid: mlx5_dv::Gid) -> bool {
        if self.fw.qp(qpn).is_none() {
            return false;
        }
        self.mcast.entry(mgid.0).or_default().insert(qpn);
        true
    }

    /// Detach QP `qpn` from group `mgid`: false when it is not attached.
    pub fn detach_multicast(&mut self, qpn: u32, mgid: mlx5_dv::Gid) -> bool {
        let Some(qps) = self.mcast.get_mut(&mgid.0) else { return false };
        let was = qps.remove(&qpn);
        if qps.is_empty() {
            self.mcast.remove(&mgid.0);
        }
        was
    }

    /// Whether QP `qpn` is attached to some group.
    pub fn in_a_group(&self, qpn: u32) -> bool {
        self.mcast.values().any(|qps| qps.contains(&qpn))
    }

    /// Detach QP `qpn` from every group it is attached to.
    pub fn detach_from_all_groups(&mut self, qpn: u32) {
        self.mcast.retain(|_, qps| {
            qps.remove(&qpn);
            !qps.is_empty()
        });
    }

    /// The QPs attached to group `mgid`.
    pub fn multicast_members(&self, mgid: &mlx5_dv::Gid) -> Vec<u32> {
        self.mcast.get(&mgid.0).map(|q| q.iter().copied().collect()).unwrap_or_default()
    }

    /// The groups some QP of the device is attached to.
    pub fn multicast_groups(&self) -> Vec<mlx5_dv::Gid> {
        self.mcast.keys().map(|g| mlx5_dv::Gid(*g)).collect()
    }

    /// The port's flow steering rules.
    pub fn flows(&self) -> &[steering::FlowRule] {
        &self.flows
    }

    /// Add a rule steering to `qpn`; its number.
    pub(crate) fn add_flow(&mut self, qpn: u32, priority: u16, specs: Vec<steering::FlowSpec>) -> u32 {
        let id = self.next_flow;
        self.next_flow = self.next_flow.wrapping_add(1).max(1);
        self.flows.push(steering::FlowRule { id, qpn, priority, specs, fte: None });
        id
    }

    /// Add an `mlx5dv_create_flow` rule (`qpn` unused when it drops); its number.
    pub(crate) fn add_fte_flow(&mut self, qpn: u32, priority: u16, fte: steering::FteRule) -> u32 {
        let id = self.add_flow(qpn, priority, Vec::new());
        if let Some(r) = self.flows.last_mut() {
            r.fte = Some(fte);
        }
        id
    }

    /// Count one frame of `bytes` on flow counter `id` (a rule's count action).
    pub(crate) fn count_flow(&mut self, id: u32, bytes: u64) {
        self.fw.count_flow(id, bytes);
    }

    /// Remove rule `id`; whether it was there.
    pub(crate) fn remove_flow(&mut self, id: u32) -> bool {
        let before = self.flows.len();
        self.flows.retain(|r| r.id != id);
        self.flows.len() != before
    }

    /// The RQ TIR `tirn` delivers to.
    pub fn tir_rq(&self, tirn: u32) -> Option<u32> {
        self.fw.tir_rq(tirn)
    }

    /// Make QP `qpn` an RSS QP spreading frames over `tir`'s table.
    pub(crate) fn set_rss(&mut self, qpn: u32, tir: rss::RssTir) {
        self.rss.insert(qpn, tir);
    }

    /// QP `qpn` is no RSS QP any more.
    pub(crate) fn remove_rss(&mut self, qpn: u32) {
        self.rss.remove(&qpn);
    }

    /// The flow tag the verbs rules give `frame` on its way to QP `qpn` (0: none).
    pub fn flow_tag(&self, qpn: u32, frame: &[u8]) -> u32 {
        steering::tag_for(&self.flows, frame, qpn)
    }

    /// Where a frame steered to QP `qpn` goes: the WQ its hash picks for an RSS QP, else
    /// `qpn` itself.
    pub fn rss_target(&self, qpn: u32, frame: &[u8]) -> u32 {
        self.rss.get(&qpn).and_then(|t| t.pick(frame)).unwrap_or(qpn)
    }

    /// The ODP caps `ibv_query_device_ex` reports, which also gate ODP registrations.
    pub fn odp_caps(&self) -> mlx5_dv::OdpCaps {
        self.odp
    }

    /// The device's clock now, in `hca_core_clock` ticks (module [`clock`]).
    pub fn clock(&self) -> u64 {
        self.clock.now()
    }

    /// The clock runs from the wall clock from now on (a free-running device).
    pub fn use_wall_clock(&mut self) {
        self.clock.use_wall_clock();
    }

    /// Completion timestamps in the CQEs of CQ `cqn`, what the kernel's
    /// `IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION` asks for; false if there is no such CQ.
    pub fn set_cq_timestamps(&mut self, cqn: u32) -> bool {
        self.fw.cq_mut(cqn).map(|c| c.timestamps = true).is_some()
    }

    /// The bytes of each entry of CQ `cqn`'s ring (64 or 128), if there is such a CQ.
    pub fn cq_entry_size(&mut self, cqn: u32) -> Option<u32> {
        self.fw.cq_mut(cqn).map(|c| c.ring.stride)
    }

    // --- the command interface ---

    /// Execute one command mailbox (see [`Firmware::exec`]).
    pub fn exec(&mut self, input: &[u8], out: &mut [u8]) {
        self.fw.exec(input, out);
        self.after_command(input);
    }

    /// Execute one command mailbox that may need host memory (see
    /// [`Firmware::exec_with_host`]).
    pub fn exec_with_host(&mut self, host: &mut Host, input: &[u8], out: &mut [u8]) {
        self.fw.exec_with_host(host, input, out);
        self.after_command(input);
    }

    /// After a DESTROY_QP or a 2RST: what the network side kept of QPs that are gone or
    /// reset goes too (messages in flight, a partial message, a held ACK), so that a new QP
    /// given a number again, or the reset one, starts afresh.
    fn after_command(&mut self, input: &[u8]) {
        use mlx5_dv::prm::{mbox_in, opcode as op};
        let opcode = mbox_in::OPCODE.get(input).unwrap_or(0) as u16;
        if opcode == op::DESTROY_QP || opcode == op::QP_2RST {
            let fw = &self.fw;
            self.net.retain_qps(|qpn| fw.qp(qpn).is_some_and(|q| q.state != QpState::Reset));
        }
    }

    /// The firmware, read-only (the kernel's cleanup and test views).
    pub fn firmware(&self) -> &Firmware {
        &self.fw
    }

    /// Execute the CREATE_CQ or CREATE_QP of a verbs CQ or QP (see
    /// [`Firmware::exec_verbs`]).
    pub fn exec_verbs(&mut self, order: u64, input: &[u8], out: &mut [u8]) {
        self.fw.exec_verbs(order, input, out);
    }

    /// Where CREATE_QP starts looking for a free QP number.
    pub fn set_first_qpn(&mut self, qpn: u32) {
        self.fw.set_first_qpn(qpn);
    }

    /// The GID and LID of the device's port, as QUERY_ROCE_ADDRESS, PortInfo and the vport
    /// context report them.
    pub fn set_port_address(&mut self, gid: mlx5_dv::Gid, lid: u16) {
        self.fw.set_port_gid(gid);
        self.fw.set_port_lid(lid);
    }

    /// A store to the CQ doorbell (UAR + 0x20): `hi` is `sn << 28 | cmd | ci`, `lo` the CQN.
    pub fn cq_doorbell(&mut self, host: &Host, hi: u32, lo: u32) {
        self.fw.cq_doorbell(host, hi, lo);
    }

    /// Install a data-path fault rule for WQEs with `wqe_opcode`.
    pub fn add_wqe_fault(&mut self, wqe_opcode: u8, fault: WqeFault, skip: u32, times: u32) {
        self.wqe_faults.push(WqeRule { wqe_opcode, fault, skip, times, seen: 0, acted: 0 });
    }

    /// Install a command fault rule.
    pub fn add_command_fault(&mut self, rule: CommandFault) {
        self.fw.add_fault(rule);
    }

    /// Remove every fault rule.
    pub fn clear_faults(&mut self) {
        self.fw.clear_faults();
        self.wqe_faults.clear();
    }

    /// Start or stop recording commands.
    pub fn record_commands(&mut self, on: bool) {
        self.fw.record_commands(on);
    }

    /// The recorded commands, oldest first.
    pub fn take_commands(&mut self) -> Vec<CommandRecord> {
        self.fw.take_commands()
    }

    // --- doorbells and queues ---

    /// The QP's transport state: PSNs, timers, retry counts.
    pub fn qp_transport(&self, qpn: u32) -> Option<firmware::QpTransport> {
        self.fw.qp(qpn).map(|q| q.transport)
    }

    /// The QP's state, if it exists.
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.fw.qp(qpn).map(|q| q.state)
    }

    /// Give DCT `qpn` its access key (mlx5_ib puts it in CREATE_DCT's `dctc`).
    pub fn set_dct_key(&mut self, qpn: u32, key: u64) {
        if let Some(t) = self.fw.transport_mut(qpn) {
            t.dc_key = key;
        }
    }

    /// QUERY_QP's `hw_sq_wqebb_counter`: the basic block the send queue stopped at.
    pub fn sq_consumer(&self, qpn: u32) -> Option<u32> {
        self.fw.qp(qpn).map(|q| q.sq_cc)
    }

    /// The send doorbell: read the producer counter from the QP's doorbell record and match
    /// the WQEs it adds against the fault rules.
    pub fn ring_sq(&mut self, host: &Host, qpn: u32) {
        // Without a live rule no WQE can match: the walk would only read.
        let no_rule = self.wqe_faults.iter().all(|r| r.acted >= r.times);
        let Some(q) = self.fw.send_queue_mut(qpn) else { return };
        let (sq, old) = (q.sq, *q.sq_pc);
        let Some(db) = read_be32(host, q.dbrec.wrapping_add(contract::SND_DBR)) else { return };
        let new = old.wrapping_add(u32::from((db as u16).wrapping_sub(old as u16)));
        if no_rule {
            // The QP is still at hand: one lookup per doorbell.
            *q.sq_pc = new;
            return;
        }
        self.match_doorbell(host, qpn, sq, old, new);
    }

    /// [`Device::ring_sq`] with live fault rules: match each WQE from `old` to `new` against
    /// them, then move the producer counter.
    #[cold]
    #[inline(never)]
    fn match_doorbell(&mut self, host: &Host, qpn: u32, sq: contract::QueueBuf, old: u32, new: u32) {
        let (mut at, mut left) = (old, new.wrapping_sub(old));
        let mut matched = Vec::new();
        while left > 0 && !sq.is_empty() {
            let Some(c) = host.read(sq.slot(at), mlx5_dv::prm::wqe::ctrl::SIZE) else { break };
            let c = mlx5_dv::prm::wqe::ctrl::CtrlSeg::decode(c).unwrap_or_default();
            if let Some(f) = self.match_wqe_fault(c.opcode) {
                matched.push((at, f));
            }
            // A WQE never reaches past the producer counter, whatever its ds says.
            let step = u32::try_from(c.wqebbs()).unwrap_or(u32::MAX).clamp(1, left);
            (at, left) = (at.wrapping_add(step), left - step);
        }
        if let Some(q) = self.fw.send_queue_mut(qpn) {
            *q.sq_pc = new;
            q.faults.extend(matched);
        }
    }

    /// The receive doorbell: read the producer counter from the QP's doorbell record.
    pub fn ring_rq(&mut self, host: &Host, qpn: u32) {
        let Some(q) = self.fw.qp_mut(qpn) else { return };
        let Some(db) = read_be32(host, q.dbrec.wrapping_add(contract::RCV_DBR)) else { return };
        q.rq_pc = q.rq_pc.wrapping_add(u32::from((db as u16).wrapping_sub(q.rq_pc as u16)));
    }

    /// The SRQ doorbell: read the counter of posted WQEs from the SRQ's doorbell record.
    pub fn ring_srq(&mut self, host: &Host, srqn: u32) {
        if let Some(s) = self.fw.srq_mut(srqn) {
            s.ring(host);
        }
    }

    /// Whether QP `qpn` has a receive WQE to take: in its receive queue, or in its SRQ (whose
    /// doorbell record the device reads when it needs a WQE).
    pub(in crate::device) fn has_recv(&mut self, host: &Host, qpn: u32) -> bool {
        let Some(q) = self.fw.qp(qpn) else { return false };
        match q.srqn {
            None => q.rq_cc != q.rq_pc,
            Some(n) => self.fw.srq_mut(n).is_some_and(|s| {
                s.ring(host);
                s.posted() > 0
            }),
        }
    }

    /// Take the next WQE of SRQ `srqn`; the limit event fires when the take drops the WQEs
    /// posted below an armed limit.
    pub(in crate::device) fn take_srq(&mut self, host: &Host, srqn: u32) -> Option<contract::RecvWqe> {
        let s = self.fw.srq_mut(srqn)?;
        s.ring(host);
        let (r, hit) = s.take(host)?;
        if hit {
            self.raise(DeviceEvent {
                event_type: mlx5_dv::event_type::SRQ_LIMIT_REACHED,
                qpn: None,
                cqn: None,
                srqn: Some(srqn),
            });
        }
        Some(r)
    }

    /// Raise an asynchronous event: the kernel routes it to the owner's context, and each EQ
    /// whose `event_bitmask` has its type gets an EQE.
    pub(in crate::device) fn raise(&mut self, ev: DeviceEvent) {
        use mlx5_dv::event_type as t;
        use mlx5_dv::prm::eq::{eqe, event};
        let mut data = [0u8; 28];
        let (ty, at, n) = match (ev.event_type, ev.qpn, ev.cqn) {
            (t::CQ_ERR, _, Some(cqn)) => {
                data[eqe::CQ_ERR_SYNDROME - eqe::DATA] = 1; // CQ overrun
                (event::CQ_ERROR, eqe::CQ_ERR_CQN, cqn)
            }
            (t::QP_FATAL, Some(q), _) => (event::WQ_CATAS_ERROR, eqe::QPN, q),
            (t::QP_REQ_ERR, Some(q), _) => (event::WQ_INVAL_REQ_ERROR, eqe::QPN, q),
            (t::QP_ACCESS_ERR, Some(q), _) => (event::WQ_ACCESS_ERROR, eqe::QPN, q),
            (t::SQ_DRAINED, Some(q), _) => (event::SQ_DRAINED, eqe::QPN, q),
            (t::QP_LAST_WQE_REACHED, Some(q), _) => (event::LAST_WQE, eqe::QPN, q),
            (t::SRQ_LIMIT_REACHED, _, _) if ev.srqn.is_some() => {
                // mlx5_eqe_qp_srq: the SRQ number where a QP's would be, type 1 (an RQ/SRQ).
                data[eqe::QPN - eqe::DATA - 4] = 1;
                (event::SRQ_LIMIT, eqe::QPN, ev.srqn.unwrap_or(0))
            }
            _ => {
                self.events.push_back(ev);
                return;
            }
        };
        let at = at - eqe::DATA;
        data[at..at + 4].copy_from_slice(&(n & 0xff_ffff).to_be_bytes());
        self.fw.post_event(firmware::Event { event_type: ty, sub_type: 0, data, eqn: None });
        self.events.push_back(ev);
    }

    /// The port's link went up or down (a cable): with the port administratively up, a
    /// PORT_STATE_CHANGE EQE with the new state as its sub-type and `port << 4` in its data
    /// (see [`Firmware::link_changed`]).
    pub fn port_changed(&mut self, port: u8, active: bool) {
        self.fw.link_changed(port, active);
    }

    /// The operational states the port entered since the last call (a cable, or an
    /// ACCESS_REG of PAOS), oldest first.
    pub fn take_port_changes(&mut self) -> Vec<bool> {
        self.fw.take_port_changes()
    }

    /// Whether the port is operationally up.
    pub fn port_active(&self) -> bool {
        self.fw.port_active()
    }

    /// A store to an EQ doorbell of UAR page `uar` (arm at +0x40, update at +0x48).
    pub fn eq_doorbell(&mut self, uar: u32, value: u32, arm: bool) {
        self.fw.eq_doorbell(uar, value, arm);
    }

    /// Whether events wait to be written as EQEs ([`Device::write_eqes`]).
    pub fn eqes_pending(&self) -> bool {
        self.fw.eqes_pending()
    }

    /// Write pending EQEs into host memory; the MSI-X vectors they raised, in order.
    pub fn write_eqes(&mut self, host: &mut Host) -> Vec<u16> {
        if !self.fw.eqes_pending() {
            return Vec::new();
        }
        self.fw.write_eqes(host);
        self.fw.take_interrupts()
    }

    /// Whether events wait for the kernel ([`Device::take_events`]).
    pub fn has_events(&self) -> bool {
        !self.events.is_empty() || self.fw.has_cq_events()
    }

    /// The verbs CQs whose completion event fired since the last call, in order.
    pub fn take_cq_events(&mut self) -> Vec<u32> {
        self.fw.take_cq_events()
    }

    /// Read every QP's doorbell record, send and receive words: what a free-running device
    /// does to notice WQEs a program posted with stores of its own. True if a producer moved.
    pub fn ring_all(&mut self, host: &Host) -> bool {
        let qps: Vec<(u32, u32, u32)> = self.fw.qps().map(|(n, q)| (n, q.sq_pc, q.rq_pc)).collect();
        let mut moved = false;
        for (qpn, sq, rq) in qps {
            self.ring_sq(host, qpn);
            self.ring_rq(host, qpn);
            moved |= self.fw.qp(qpn).is_some_and(|q| (q.sq_pc, q.rq_pc) != (sq, rq));
        }
        for srqn in self.fw.srq_numbers() {
            let before = self.fw.srq(srqn).map(|s| s.pc);
            self.ring_srq(host, srqn);
            moved |= self.fw.srq(srqn).map(|s| s.pc) != before;
        }
        moved
    }

    /// The doorbell records of the device's QPs: the words a program moves to post.
    pub fn doorbell_records(&self) -> Vec<u64> {
        let srqs = self.fw.srq_numbers().into_iter().filter_map(|n| self.fw.srq(n).map(|s| s.dbrec));
        self.fw.qps().map(|(_, q)| q.dbrec).chain(srqs).filter(|a| *a != 0).collect()
    }

    /// A number that grows with every CQE and EQE the device writes: a free-running device's
    /// sign of progress.
    pub fn progress(&self) -> u64 {
        self.fw.progress()
    }

    /// Read every QP's receive doorbell record: a raw QP's receives are posted by the record
    /// alone, which this device reads when a send doorbell of the function rings.
    pub fn ring_rq_all(&mut self, host: &Host) {
        let qpns: Vec<u32> = self.fw.qps().map(|(n, _)| n).collect();
        for qpn in qpns {
            self.ring_rq(host, qpn);
        }
    }

    /// The events raised since the last call, oldest first.
    pub fn take_events(&mut self) -> VecDeque<DeviceEvent> {
        std::mem::take(&mut self.events)
    }

    fn take_scratch(&mut self) -> Vec<u8> {
        self.scratch.pop().unwrap_or_default()
    }

    fn give_scratch(&mut self, mut v: Vec<u8>) {
        if self.scratch.len() < 4 {
            v.clear();
            self.scratch.push(v);
        }
    }

    /// Match a send WQE against the fault rules as its doorbell rings: the first rule for
    /// its opcode that is not spent counts it, and acts once its skips are used up.
    fn match_wqe_fault(&mut self, opcode: u8) -> Option<WqeFault> {
        let rule = self.wqe_faults.iter_mut().find(|r| r.wqe_opcode == opcode && r.acted < r.times)?;
        rule.seen = rule.seen.saturating_add(1);
        if rule.seen <= rule.skip {
            return None;
        }
        rule.acted += 1;
        Some(rule.fault)
    }
}

/// Run every QP's send queue, on every device, as far as it goes; requests cross `fabric`.
pub fn run(devices: &mut [Device], host: &mut Host, fabric: &Fabric) {
    engine::Engine::new(devices, host, fabric).progress();
}

/// Take what waits at the networked ports of `fabric` (at most `budget` datagrams), each by
/// the device whose port it reached; then run the engine, for the requesters answered. The
/// datagrams taken.
pub fn receive_network(devices: &mut [Device], host: &mut Host, fabric: &Fabric, budget: usize) -> usize {
    thread_local! {
        // One receive buffer per thread: a device pass runs on every empty poll of a program
        // on the network, and most find nothing.
        static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; crate::fabric::net::MAX_DATAGRAM]);
    }
    BUF.with(|b| {
        let mut fresh = Vec::new();
        let mut held = b.try_borrow_mut();
        let buf = match held.as_deref_mut() {
            Ok(buf) => buf,
            // Re-entered on this thread (never expected): a buffer of its own.
            Err(_) => {
                fresh.resize(crate::fabric::net::MAX_DATAGRAM, 0);
                &mut fresh
            }
        };
        let mut engine = engine::Engine::new(devices, host, fabric);
        let mut taken = 0;
        for (dev, port) in fabric.net_ports().iter().enumerate() {
            while taken < budget {
                let Some((n, from)) = port.recv(buf) else { break };
                engine.rx_datagram(dev, from, buf.get(..n).unwrap_or(&[]));
                taken += 1;
            }
        }
        taken
    })
}

/// Send the ACKs the devices' responders hold back (one per responder QP: the newest).
pub fn flush_acks(devices: &mut [Device], host: &mut Host, fabric: &Fabric) {
    if !devices.iter().any(|d| d.net.holds_acks()) {
        return;
    }
    let mut engine = engine::Engine::new(devices, host, fabric);
    for dev in 0..fabric.net_ports().len() {
        engine.flush_acks(dev);
    }
}

/// One datagram arriving at device `dev`'s networked port from `from` (see
/// [`receive_network`]); false if dropped or the port is not networked.
pub fn receive_one(
    devices: &mut [Device],
    host: &mut Host,
    fabric: &Fabric,
    dev: usize,
    from: std::net::SocketAddrV4,
    bytes: &[u8],
) -> bool {
    fabric.net_port(dev).is_some() && engine::Engine::new(devices, host, fabric).rx_datagram(dev, from, bytes)
}

impl Device {
    /// Whether a responder QP of this device holds an ACK back for the next pass.
    pub fn holds_acks(&self) -> bool {
        self.net.holds_acks()
    }

    /// Break this device's responder on purpose (tests only): it executes a retransmitted
    /// SEND or WRITE again instead of acknowledging the duplicate.
    #[cfg(feature = "test-utils")]
    pub(crate) fn replay_duplicates(&mut self, on: bool) {
        self.net.replay_duplicates = on;
    }

    /// Datagrams this device's port dropped: a bad ICRC or header, a packet out of sequence,
    /// an answer no QP waits for.
    pub fn network_drops(&self) -> u64 {
        self.net.dropped
    }

    /// What this device's requesters met on the network: ACK timeouts, sequence-error NAKs,
    /// implied NAKs.
    pub fn transport_counters(&self) -> engine::TransportCounters {
        self.net.counters
    }
}

/// Rounds of delivery one settle of a fabric in memory takes at most (a bound, not a budget:
/// each round moves a datagram or a timer).
const SETTLE_ROUNDS: usize = 1 << 16;
/// Timers one settle runs out at most: more than `retry_cnt` or `rnr_retry` can ask (7), so
/// that only an RNR wait without end (`rnr_retry` 7) or a peer that keeps NAKing is left for
/// the next call.
const SETTLE_TIMERS: usize = 64;

/// Run a fabric of packets in memory in simulated time until nothing moves: deliver what
/// waits at each port and run the engine; when nothing waits, move the clock to the next
/// timer (an ACK timeout, an RNR wait, a datagram a fault rule delayed) and run again.
pub fn settle_in_memory(devices: &mut [Device], host: &mut Host, fabric: &Fabric) {
    let mut timers = 0;
    for _ in 0..SETTLE_ROUNDS {
        let moved = fabric.release_delayed() + receive_network(devices, host, fabric, 4096);
        if moved == 0 {
            let next = devices.iter().filter_map(|d| d.net.next_timer()).chain(fabric.next_delayed()).min();
            let Some(at) = next.filter(|_| timers < SETTLE_TIMERS) else { return };
            fabric.advance_clock(at);
            timers += 1;
        }
        run(devices, host, fabric);
    }
}

/// A big-endian dword of host memory (doorbell records).
fn read_be32(host: &Host, addr: u64) -> Option<u32> {
    Some(u32::from_be_bytes(*host.read(addr, 4)?.first_chunk()?))
}
