//! One simulated NIC. Its two interfaces are the command mailboxes of the [`firmware`] and
//! the doorbells and queues the [`engine`] runs; device events leave through one queue
//! ([`Device::take_events`]) that the kernel drains.

use std::collections::VecDeque;

use mlx5_dv::profile::VendorErrSection;
use mlx5_dv::{AccessFlags, CommandRecord, QpState, RecvWr};

pub mod engine;
pub mod firmware;
pub mod wqe;

use firmware::{CommandFault, Firmware, Posted, QpCreate};
use wqe::{Cqe, Wqe, WqeKind};

use crate::fabric::Fabric;
use crate::host::Host;
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
}

/// A data-path fault rule, installed through [`mlx5_dv::SimControl::add_fault`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WqeFault {
    /// A matched send WQE completes with this error CQE, and its QP goes to ERR.
    Completion {
        /// The `ibv_wc_status`.
        status: u32,
        /// The `vendor_err`.
        vendor_err: u32,
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
    /// The port's largest message.
    max_msg_sz: u32,
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
            max_msg_sz: profile.datapath.max_msg_sz,
        })
    }

    // --- the command interface ---

    /// Execute one command mailbox (see [`Firmware::exec`]).
    pub fn exec(&mut self, input: &[u8], out: &mut [u8]) {
        self.fw.exec(input, out);
    }

    /// The firmware, read-only (the kernel's cleanup and test views).
    pub fn firmware(&self) -> &Firmware {
        &self.fw
    }

    /// CREATE_QP (see [`Firmware::create_qp`]).
    pub fn create_qp(&mut self, c: QpCreate) -> Option<u32> {
        self.fw.create_qp(c)
    }

    /// DESTROY_QP.
    pub fn destroy_qp(&mut self, qpn: u32) -> bool {
        self.fw.destroy_qp(qpn)
    }

    /// CREATE_CQ.
    pub fn create_cq(&mut self, cqe: u32) -> Option<u32> {
        self.fw.create_cq(cqe)
    }

    /// DESTROY_CQ.
    pub fn destroy_cq(&mut self, cqn: u32) -> bool {
        self.fw.destroy_cq(cqn)
    }

    /// MODIFY_QP to `state`: RESET empties both queues and forgets the path, INIT takes the
    /// access flags, RTR the path, ERR flushes both queues.
    pub fn modify_qp(&mut self, qpn: u32, state: QpState, access: AccessFlags, remote: Option<mlx5_dv::QpDest>) {
        let Some(q) = self.fw.qp_mut(qpn) else { return };
        q.state = state;
        match state {
            QpState::Reset => {
                q.sq.clear();
                q.rq.clear();
                q.remote = None;
            }
            QpState::Init => q.access = access,
            QpState::Rtr => q.remote = remote,
            QpState::Err => self.flush_qp(qpn),
            _ => {}
        }
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

    /// The QP's state, if it exists.
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.fw.qp(qpn).map(|q| q.state)
    }

    /// Receive WQEs posted and not yet consumed.
    pub fn rq_len(&self, qpn: u32) -> usize {
        self.fw.qp(qpn).map_or(0, |q| q.rq.len())
    }

    /// Ring the send doorbell with `wqes`; a QP in ERR flushes them at once.
    pub fn ring_sq(&mut self, qpn: u32, wqes: impl IntoIterator<Item = Wqe>) {
        if self.fw.qp(qpn).is_none() {
            return;
        }
        let posted: Vec<Posted> = wqes
            .into_iter()
            .map(|wqe| {
                let fault = self.match_wqe_fault(wqe.kind.opcode());
                Posted { wqe, fault }
            })
            .collect();
        let Some(q) = self.fw.qp_mut(qpn) else { return };
        q.sq.extend(posted);
        if q.state == QpState::Err {
            self.flush_qp(qpn);
        }
    }

    /// Ring the receive doorbell with one receive WQE.
    pub fn ring_rq(&mut self, qpn: u32, wr: RecvWr) {
        if let Some(q) = self.fw.qp_mut(qpn) {
            q.rq.push_back(wr);
        }
    }

    /// A QP in ERR flushes what it holds (after receives are posted to it).
    pub fn flush_if_err(&mut self, qpn: u32) {
        if self.qp_state(qpn) == Some(QpState::Err) {
            self.flush_qp(qpn);
        }
    }

    /// Turn the held WQEs with `wr_id` into NOPs; how many.
    pub fn cancel_wqes(&mut self, qpn: u32, wr_id: u64) -> u32 {
        let Some(q) = self.fw.qp_mut(qpn) else { return 0 };
        let mut n = 0;
        for p in q.sq.iter_mut().filter(|p| p.wqe.wr_id == wr_id) {
            p.wqe.kind = WqeKind::Nop;
            n += 1;
        }
        n
    }

    /// The oldest CQE of a CQ.
    pub fn poll(&mut self, cqn: u32) -> Option<Cqe> {
        self.fw.cq_mut(cqn).and_then(|c| c.entries.pop_front())
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
