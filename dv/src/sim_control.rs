//! [`SimControl`]: what only a simulator offers — fault injection, the firmware command log
//! and the WQE log — and the records and rules it deals in.

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// A [`SimControl`] call, as a [`crate::Layer`] sees it go through a wrapped backend (traces
/// record the ones that change behaviour).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "control", rename_all = "snake_case")]
pub enum ControlAction {
    /// [`SimControl::add_fault`].
    AddFault {
        /// The rule.
        rule: FaultRule,
    },
    /// [`SimControl::clear_faults`].
    ClearFaults,
    /// [`SimControl::record_commands`].
    RecordCommands {
        /// On or off.
        on: bool,
    },
    /// [`SimControl::record_wqes`].
    RecordWqes {
        /// On or off.
        on: bool,
    },
    /// [`SimControl::set_port_state`].
    SetPortState {
        /// The device's name.
        device: String,
        /// The port.
        port: u8,
        /// The new state.
        state: u32,
    },
}

impl ControlAction {
    /// Perform the action on `c`.
    pub fn apply(&self, c: &mut dyn SimControl) -> Result<()> {
        match self {
            ControlAction::AddFault { rule } => c.add_fault(*rule),
            ControlAction::ClearFaults => {
                c.clear_faults();
                Ok(())
            }
            ControlAction::RecordCommands { on } => {
                c.record_commands(*on);
                Ok(())
            }
            ControlAction::RecordWqes { on } => {
                c.record_wqes(*on);
                Ok(())
            }
            ControlAction::SetPortState { device, port, state } => c.set_port_state(device, *port, *state),
        }
    }
}

/// One device command as the simulated firmware saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandRecord {
    /// `mbox_in.opcode`.
    pub opcode: u16,
    /// `mbox_in.op_mod`.
    pub op_mod: u16,
    /// `mbox_in.uid`.
    pub uid: u16,
    /// The whole input mailbox.
    pub input: Vec<u8>,
    /// `mbox_out.status`.
    pub status: u8,
    /// `mbox_out.syndrome`.
    pub syndrome: u32,
    /// The whole output mailbox.
    pub output: Vec<u8>,
}

/// One send WQE as the provider wrote it into the send queue (simulator only): its bytes,
/// and what they say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WqeRecord {
    /// The QP it was posted on.
    pub qp_num: u32,
    /// `MLX5_OPCODE_*` (0x08 RDMA_WRITE, 0x0a SEND, 0x10 RDMA_READ, 0x25 UMR, …).
    pub opcode: u8,
    /// The ctrl segment carries `MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE`.
    pub small_fence: bool,
    /// The ctrl segment asks for a CQE.
    pub signaled: bool,
    /// For SET_PSV: the transient signature written into the PSV.
    pub transient_signature: Option<u64>,
    /// The WQE's basic blocks as they stand in the ring (linearised across its end).
    pub bytes: Vec<u8>,
}

impl WqeRecord {
    /// Read a WQE's bytes (starting at its control segment).
    pub fn decode(qp_num: u32, bytes: Vec<u8>) -> std::result::Result<Self, crate::prm::FieldError> {
        use crate::prm::wqe::compose::{SendWqe, WqeBody};
        use crate::prm::wqe::ctrl;
        let w = SendWqe::decode(&bytes)?;
        let transient_signature = match &w.body {
            WqeBody::SetPsv(p) => Some(p.transient_signature),
            _ => None,
        };
        Ok(WqeRecord {
            qp_num,
            opcode: w.ctrl.opcode,
            small_fence: w.ctrl.fm == ctrl::fence::INITIATOR_SMALL,
            signaled: w.ctrl.ce == ctrl::CE_CQ_UPDATE,
            transient_signature,
            bytes,
        })
    }

    /// The WQE, decoded.
    pub fn wqe(&self) -> std::result::Result<crate::prm::wqe::compose::SendWqe, crate::prm::FieldError> {
        crate::prm::wqe::compose::SendWqe::decode(&self.bytes)
    }
}

/// A fault to inject: what it matches paired with what it does. The one fault hook of the
/// simulator; rules are checked in install order and the first that matches acts.
///
/// Each rule lets `skip` matching events through, then acts `times` times, then is spent.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum FaultRule {
    /// A firmware command with `opcode` answers with `status` and `syndrome`.
    CommandStatus {
        /// `mbox_in.opcode` to match.
        opcode: u16,
        /// The status to answer with (non-zero).
        status: u8,
        /// The syndrome to answer with.
        syndrome: u32,
        /// Matching commands let through first.
        skip: u32,
        /// How many times the rule acts.
        times: u32,
    },
    /// A send WQE with `wqe_opcode` (`MLX5_OPCODE_*`) completes with an error CQE.
    Completion {
        /// The send WQE opcode to match.
        wqe_opcode: u8,
        /// The `ibv_wc_status` of the completion (non-zero).
        status: u32,
        /// The `vendor_err` of the completion.
        vendor_err: u32,
        /// Matching WQEs let through first.
        skip: u32,
        /// How many times the rule acts.
        times: u32,
    },
    /// The payload a send WQE with `wqe_opcode` moves has byte `offset` XORed with `xor` on
    /// the wire (after the source's signature checks, before the target's).
    Corrupt {
        /// The send WQE opcode to match.
        wqe_opcode: u8,
        /// Offset of the corrupted byte within the message.
        offset: u64,
        /// The bits to flip (non-zero).
        xor: u8,
        /// Matching WQEs let through first.
        skip: u32,
        /// How many times the rule acts.
        times: u32,
    },
    /// A CREATE_GENERAL_OBJECT or QUERY_GENERAL_OBJECT (`opcode`) of a general object of
    /// `obj_type` runs as usual, but the object it makes or reads is left in `state` first: a
    /// login revoked (1, INVALID), a DEK in ERROR (1), or a value the provider does not know.
    ObjectState {
        /// `CREATE_GENERAL_OBJECT` (0xa00) or `QUERY_GENERAL_OBJECT` (0xa02).
        opcode: u16,
        /// The general object type (`DEK` 0x0c, `CRYPTO_LOGIN` 0x1f).
        obj_type: u16,
        /// The object's new `state` field.
        state: u8,
        /// Matching commands let through first.
        skip: u32,
        /// How many times the rule acts.
        times: u32,
    },
    /// The RoCE v2 packets port 1 of device `device` (its index in the device list) sends
    /// are dropped, duplicated, reordered, delayed or corrupted as `rule` says. A simulator
    /// whose devices are not on a network carries their traffic as packets in memory from
    /// then on, in simulated time.
    Network {
        /// The device's index.
        device: u32,
        /// The rule.
        rule: crate::net_fault::NetFault,
    },
}

impl FaultRule {
    /// Fail the next command with `opcode`, once.
    pub fn fail_next(opcode: u16, status: u8, syndrome: u32) -> Self {
        FaultRule::CommandStatus { opcode, status, syndrome, skip: 0, times: 1 }
    }

    /// Let `n` matching events through first.
    pub fn after(mut self, n: u32) -> Self {
        match &mut self {
            FaultRule::CommandStatus { skip, .. }
            | FaultRule::Completion { skip, .. }
            | FaultRule::Corrupt { skip, .. }
            | FaultRule::ObjectState { skip, .. } => *skip = n,
            FaultRule::Network { rule, .. } => rule.skip = n,
        }
        self
    }

    /// Act `n` times.
    pub fn times(mut self, n: u32) -> Self {
        match &mut self {
            FaultRule::CommandStatus { times, .. }
            | FaultRule::Completion { times, .. }
            | FaultRule::Corrupt { times, .. }
            | FaultRule::ObjectState { times, .. } => *times = n,
            FaultRule::Network { rule, .. } => rule.times = n,
        }
        self
    }

    /// `(skip, times)` of the rule.
    pub fn budget(&self) -> (u32, u32) {
        match *self {
            FaultRule::CommandStatus { skip, times, .. }
            | FaultRule::Completion { skip, times, .. }
            | FaultRule::Corrupt { skip, times, .. }
            | FaultRule::ObjectState { skip, times, .. } => (skip, times),
            FaultRule::Network { rule, .. } => (rule.skip, rule.times),
        }
    }
}

/// What a device's reliable transport met on the network, counted as an mlx5 port's
/// `hw_counters` of the same names count it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportCounters {
    /// `local_ack_timeout_err`: a requester's ACK timers that ran out (each a retry, or the
    /// last).
    pub local_ack_timeout_err: u64,
    /// `packet_seq_err`: sequence-error NAKs a requester received.
    pub packet_seq_err: u64,
    /// `implied_nak_seq_err`: answers (or sequence-error NAKs) for a later PSN that showed a
    /// requester a READ's or an atomic's answer lost, each sending it again at once.
    pub implied_nak_seq_err: u64,
    /// `out_of_sequence`: requests a responder got with a PSN past the expected one (the
    /// first of each gap NAKed, the rest dropped).
    pub out_of_sequence: u64,
    /// `duplicate_request`: requests a responder got again (acknowledged, served or replayed
    /// again, never executed twice).
    pub duplicate_request: u64,
}

/// Device-level access that only a simulator offers: fault injection, the command log, and
/// a view of the WQEs the provider builds.
/// Conformance cases that need it are skipped on hardware with that reason.
pub trait SimControl {
    /// Install a fault rule; rules are checked in install order and the first that matches acts.
    /// EOPNOTSUPP for a kind of rule this simulator cannot apply, EINVAL for a rule that can never act.
    fn add_fault(&mut self, rule: FaultRule) -> Result<()>;
    /// Remove every fault rule.
    fn clear_faults(&mut self);
    /// Start or stop recording firmware commands.
    fn record_commands(&mut self, on: bool);
    /// Return the recorded commands, oldest first, and forget them.
    fn take_commands(&mut self) -> Vec<CommandRecord>;
    /// Start or stop recording the send WQEs the provider posts.
    fn record_wqes(&mut self, on: bool);
    /// Return the recorded WQEs, oldest first, and forget them.
    fn take_wqes(&mut self) -> Vec<WqeRecord>;
    /// Move port `port` of the device named `device` (an mlx5 device or the VFIO function) to
    /// `state` ([`crate::port_state`] DOWN or ACTIVE), as a cable pulled or plugged would:
    /// `ibv_query_port` shows it, kernel contexts get `IBV_EVENT_PORT_ERR` /
    /// `IBV_EVENT_PORT_ACTIVE`, and EQs asking for it get a PORT_STATE_CHANGE EQE.
    fn set_port_state(&mut self, device: &str, port: u8, state: u32) -> Result<()>;
    /// What the reliable transport of the `device`th device (in [`crate::Backend::device_list`]
    /// order) met on the network so far. EINVAL for no such device.
    fn transport_counters(&mut self, device: u32) -> Result<TransportCounters>;
}
