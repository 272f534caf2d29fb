//! The device firmware: executes PRM commands from byte mailboxes and answers with a status
//! and a syndrome, as the command interface of a real device does.
//!
//! Field layouts come from [`mlx5_dv::prm`]. Syndromes the firmware invents for its own
//! rejections are the simulator's (real firmware uses undocumented vendor values); injected
//! faults answer with whatever status and syndrome the rule names.

use mlx5_dv::prm::{self, Field, FieldError, opcode, status};
use mlx5_dv::{CommandRecord, FaultRule};

use crate::device::translation::Translation;
use crate::profile::Profile;

mod caps;
mod counters;
mod crypto;
mod dc_replay;
mod dct_streams;
mod eq;
mod memic;
mod objects;
mod port;
mod qos;
mod raw;
mod reserved;
mod sched;
mod srq;
mod tir;
pub mod tm;
pub mod xrc;

pub use crypto::{FwDek, crypto_syndrome};
pub use dc_replay::{DcReplay, DciId};
pub use dct_streams::{Admit, DCT_STREAMS, DctStreams};
pub use eq::EQ_STATUS_WRITE_FAILURE;
pub(crate) use eq::{Event, named_input};
pub(in crate::device) use objects::FwPsv;
pub(in crate::device) use objects::SendQueueMut;
pub use objects::{AtomicReplay, FwMkey, PSN_MASK, QpTransport};
use objects::{CqCreate, DciStreams, Numbers, QpCreate, QpTable, Table};
pub(crate) use objects::{FwCq, FwQp};
pub(crate) use port::op as port_op;
pub(crate) use raw::cq_or_qp_input;
pub(crate) use raw::op as raw_op;

/// Syndromes this firmware reports for its own rejections.
pub mod syndrome {
    /// The input mailbox is shorter than the command's layout.
    pub const INPUT_TOO_SHORT: u32 = 0x5100_0001;
    /// The output mailbox is shorter than the command's layout.
    pub const OUTPUT_TOO_SHORT: u32 = 0x5100_0002;
    /// The opcode is unknown to this firmware.
    pub const UNKNOWN_OPCODE: u32 = 0x5100_0003;
    /// A field holds a value the command does not accept.
    pub const BAD_FIELD: u32 = 0x5100_0004;
    /// The command names a PD, mkey or PSV that does not exist.
    pub const NO_SUCH_OBJECT: u32 = 0x5100_0005;
    /// The object table is full.
    pub const OUT_OF_OBJECTS: u32 = 0x5100_0006;
    /// An address plus the size behind it, or a count times a size, passes what 64 bits
    /// (or the mailbox) can hold.
    pub const OUT_OF_RANGE: u32 = 0x5100_0007;
}

/// `MLX5_MKC_ACCESS_MODE_MEMIC`: the mkey's addresses are MEMIC addresses.
const ACCESS_MODE_MEMIC: u64 = 5;

pub use memic::{LOG_MAX_ALIGNMENT as LOG_MAX_MEMIC_ALIGNMENT, MEMIC_BAR_START, cap as memic_cap, cmd as memic_cmd};

/// A command rejected with a status and a syndrome.
struct Reject(u8, u32);

impl From<FieldError> for Reject {
    fn from(_: FieldError) -> Self {
        Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT)
    }
}

#[derive(Debug, Clone)]
struct ActiveRule {
    rule: CommandFault,
    seen: u32,
    acted: u32,
}

/// A firmware command fault: fail `opcode` with `status` and `syndrome` after `skip` matches,
/// `times` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandFault {
    /// `mbox_in.opcode` to match.
    pub opcode: u16,
    /// Matching commands let through first.
    pub skip: u32,
    /// How many times it acts.
    pub times: u32,
    /// The status answered.
    pub status: u8,
    /// The syndrome answered.
    pub syndrome: u32,
    /// For a general-object state rule: the command runs, and the object it makes or reads
    /// is left in this state (`status` and `syndrome` are then unused).
    pub object_state: Option<ObjectState>,
}

/// The object an object-state fault rule acts on, and the state it leaves it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectState {
    /// The general object type.
    pub obj_type: u16,
    /// The object's new `state` field.
    pub state: u8,
}

impl CommandFault {
    /// The command part of a fault rule, if it is one.
    pub fn from_rule(rule: &FaultRule) -> Option<Self> {
        match *rule {
            FaultRule::CommandStatus { opcode, status, syndrome, skip, times } => {
                Some(CommandFault { opcode, skip, times, status, syndrome, object_state: None })
            }
            FaultRule::ObjectState { opcode, obj_type, state, skip, times } => Some(CommandFault {
                opcode,
                skip,
                times,
                status: status::OK,
                syndrome: 0,
                object_state: Some(ObjectState { obj_type, state }),
            }),
            _ => None,
        }
    }
}

/// The simulated firmware and its object tables.
#[derive(Debug, Clone)]
pub struct Firmware {
    general_caps: caps::Page,
    /// The NIC flow table page.
    nic_flow_caps: caps::Page,
    crypto_caps: Option<caps::Page>,
    /// The port is Ethernet (RoCE): paths name their responder by GID, whatever `grh` says.
    eth: bool,
    /// `rts2rts_qp_udp_sport`: RTS2RTS takes a UDP source port.
    rts2rts_qp_udp_sport: bool,
    /// `log_max_dci_stream_channels` and `log_max_dci_errored_streams`.
    dci_stream_caps: (u8, u8),
    /// The largest `log_cq_size` of a raw CREATE_CQ.
    log_max_cq_sz: u8,
    /// `cq_oi`: CREATE_CQ takes `cqc.oi`.
    cq_oi: bool,
    port: port::PortState,
    pd_numbers: Numbers,
    pds: Table<u16>,
    mkey_numbers: Numbers,
    mkeys: Table<FwMkey>,
    psv_numbers: Numbers,
    psvs: Table<FwPsv>,
    next_qpn: u32,
    qps: QpTable,
    cq_numbers: Numbers,
    /// By number: CQ numbers are dense, so a lookup (one per CQE) is an index.
    cqs: Table<FwCq>,
    faults: Vec<ActiveRule>,
    log: Option<Vec<CommandRecord>>,
    crypto: crypto::FwCrypto,
    eq: eq::EqTables,
    /// Raw QPs made so far (their scheduling order).
    raw_qps: u32,
    /// What raw CREATE_CQ set of each raw CQ, for QUERY_CQ and MODIFY_CQ.
    raw_cqs: raw::RawCqs,
    /// GID 0 of the port (QUERY_ROCE_ADDRESS).
    port_gid: [u8; 16],
    /// Counts the changes to QPs and mkeys (see [`Firmware::epoch`]).
    epoch: u64,
    /// While [`Firmware::exec_verbs`] runs: the engine order of the verbs QP it may create.
    verbs: Option<u64>,
    /// Verbs CQs (no EQ of their own) whose completion event fired, for the kernel.
    cq_events: Vec<u32>,
    /// Shared receive queues.
    srqs: srq::SrqTable,
    /// XRC domains.
    xrcds: xrc::XrcdTable,
    /// Device memory: its allocations and host window.
    memic: memic::Memic,
    /// The DEVICE_MEMORY capability page.
    memic_caps: caps::Page,
    /// The ODP capability page.
    odp_caps: caps::Page,
    /// RESERVED_QPN blocks and the second general page.
    reserved: reserved::ReservedQpns,
    /// The QoS page and the packet pacing rate table.
    qos: qos::Qos,
    /// VAR doorbell pages (0 without virtio emulation).
    var_pages: u32,
    /// Flow counters.
    counters: counters::FlowCounters,
    /// TIRs made through DEVX.
    tirs: tir::Tirs,
    /// Scheduling elements.
    sched: sched::SchedElems,
}

impl Firmware {
    /// Build the firmware of a profile, with its capability pages filled in.
    pub fn new(profile: &Profile) -> Result<Self, FieldError> {
        let h = &profile.hca_cap;
        Ok(Firmware {
            general_caps: caps::general_page(profile)?,
            nic_flow_caps: caps::nic_flow_table_page(profile)?,
            crypto_caps: caps::crypto_page(profile)?,
            eth: profile.device.link_layer == crate::profile::LinkLayer::Ethernet,
            rts2rts_qp_udp_sport: profile.hca_cap.rts2rts_qp_udp_sport,
            dci_stream_caps: (h.log_max_dci_stream_channels, h.log_max_dci_errored_streams),
            log_max_cq_sz: profile.datapath.log_max_cq_sz.min(caps::LOG_MAX_EQ_SZ),
            cq_oi: h.cq_oi,
            port: port::PortState::default(),
            pd_numbers: Numbers::new(1, 1 << 24),
            pds: Table::new(),
            // Index 1 would make key 0x100, MLX5_INVALID_LKEY, which ends a receive WQE.
            // Index 4 with tag 0 would be the key 0x400, which a UMR list cannot name: a
            // repeat block's op word (0x400) sits where a list's first entry has its key.
            mkey_numbers: Numbers::without(2, 1u32 << h.log_max_mkey.min(24), 4),
            mkeys: Table::new(),
            psv_numbers: Numbers::new(1, 1 << 24),
            psvs: Table::new(),
            next_qpn: 0x100,
            qps: QpTable::default(),
            cq_numbers: Numbers::new(1, 1 << 24),
            cqs: Table::new(),
            faults: Vec::new(),
            log: None,
            crypto: crypto::FwCrypto::new(profile),
            eq: eq::EqTables::new(),
            raw_qps: 0,
            raw_cqs: raw::RawCqs::new(),
            port_gid: [0; 16],
            epoch: 0,
            verbs: None,
            cq_events: Vec::new(),
            srqs: srq::SrqTable::new(
                profile.datapath.log_max_srq,
                h.tag_matching.then_some(h.log_tag_matching_list_sz),
            ),
            xrcds: xrc::XrcdTable::default(),
            memic: memic::Memic::new(profile),
            memic_caps: memic::Memic::new(profile).page()?,
            odp_caps: caps::odp_page(profile)?,
            reserved: reserved::ReservedQpns::new(profile)?,
            qos: qos::Qos::new(profile)?,
            var_pages: if h.general_obj_types.contains(&crate::profile::GeneralObjType::VirtioNetQ) {
                h.var_doorbell_pages
            } else {
                0
            },
            counters: counters::FlowCounters::new(profile),
            tirs: tir::Tirs::default(),
            sched: sched::SchedElems::default(),
        })
    }

    /// Execute one command: read `input`, write the answer (status, syndrome, data) to `out`.
    pub fn exec(&mut self, input: &[u8], out: &mut [u8]) {
        self.exec_by(input, out, |fw, out| fw.run(input, out));
    }

    /// Execute one command that may need host memory: MODIFY_CQ's resize (op_mod 1) reads
    /// the CQ's consumer index from its doorbell record and writes the RESIZE_CQ CQE into
    /// the old ring; anything else as [`Firmware::exec`].
    pub fn exec_with_host(&mut self, host: &mut crate::host::Host, input: &[u8], out: &mut [u8]) {
        let resize = read(prm::mbox_in::OPCODE, input) == u64::from(raw::op::MODIFY_CQ)
            && read(prm::mbox_in::OP_MOD, input) == raw::RESIZE_OP_MOD;
        if resize {
            self.exec_by(input, out, |fw, _| fw.resize_cq(host, input));
        } else {
            self.exec(input, out);
        }
    }

    /// [`Firmware::exec`] with `run` for the command itself: fault rules first, the status
    /// into `out`, the command log after.
    fn exec_by(&mut self, input: &[u8], out: &mut [u8], run: impl FnOnce(&mut Self, &mut [u8]) -> Result<(), Reject>) {
        out.fill(0);
        let result = match self.injected_fault(input) {
            Some(r) => Err(r),
            None => run(self, out),
        };
        if let Err(Reject(st, syn)) = result {
            out.fill(0);
            if out.len() >= prm::mbox_out::SIZE {
                out[0] = st;
                out[4..8].copy_from_slice(&syn.to_be_bytes());
            }
        }
        if let Some(log) = &mut self.log {
            let (st, syn) = prm::read_status(out);
            log.push(CommandRecord {
                opcode: read(prm::mbox_in::OPCODE, input) as u16,
                op_mod: read(prm::mbox_in::OP_MOD, input) as u16,
                uid: read(prm::mbox_in::UID, input) as u16,
                input: input.to_vec(),
                status: st,
                syndrome: syn,
                output: out.to_vec(),
            });
        }
    }

    /// Execute the CREATE_CQ or CREATE_QP the kernel issues for `ibv_create_cq` or
    /// `ibv_create_qp`: as [`Firmware::exec`] (fault rules and the command log see it), with
    /// what the simulator keeps beside the PRM fields: the QP runs at `order` in the engine's
    /// order across devices, and the CQ reports completion events through the kernel rather
    /// than an EQ of its own. The kernel's other commands for verbs objects go through
    /// [`Firmware::exec`].
    pub fn exec_verbs(&mut self, order: u64, input: &[u8], out: &mut [u8]) {
        self.verbs = Some(order);
        self.exec(input, out);
        self.verbs = None;
    }

    fn injected_fault(&mut self, input: &[u8]) -> Option<Reject> {
        // The common case: no rules, so no opcode to read.
        if self.faults.is_empty() {
            return None;
        }
        let op = read(prm::mbox_in::OPCODE, input) as u16;
        for r in &mut self.faults {
            if r.rule.opcode != op || r.acted >= r.rule.times || r.rule.object_state.is_some() {
                continue;
            }
            r.seen += 1;
            if r.seen > r.rule.skip {
                r.acted += 1;
                return Some(Reject(r.rule.status, r.rule.syndrome));
            }
        }
        None
    }

    fn run(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        if input.len() < prm::mbox_in::SIZE {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        }
        if out.len() < prm::mbox_out::SIZE {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        let uid = prm::mbox_in::UID.get(input)? as u16;
        match prm::mbox_in::OPCODE.get(input)? as u16 {
            opcode::QUERY_HCA_CAP => self.query_hca_cap(input, out),
            opcode::ALLOC_PD => self.alloc_pd(uid, out),
            opcode::DEALLOC_PD => self.dealloc_pd(input),
            opcode::CREATE_MKEY => self.create_mkey(uid, input, out),
            opcode::DESTROY_MKEY => self.destroy_mkey(input),
            opcode::CREATE_PSV => self.create_psv(uid, input, out),
            opcode::DESTROY_PSV => self.destroy_psv(input),
            opcode::CREATE_GENERAL_OBJECT => self.create_general_obj(uid, input, out),
            opcode::QUERY_GENERAL_OBJECT => self.query_general_obj(uid, input, out),
            opcode::DESTROY_GENERAL_OBJECT => self.destroy_general_obj(uid, input),
            opcode::MODIFY_GENERAL_OBJECT => self.modify_general_obj(uid, input),
            opcode::CREATE_EQ => self.create_eq(uid, input, out),
            opcode::DESTROY_EQ => self.destroy_eq(input),
            opcode::QUERY_EQ => self.query_eq(input, out),
            opcode::GEN_EQE => self.gen_eqe(input),
            opcode::ALLOC_UAR => self.alloc_uar(uid, out),
            opcode::DEALLOC_UAR => self.dealloc_uar(input),
            opcode::CREATE_UMEM => self.create_umem(uid, input, out),
            opcode::DESTROY_UMEM => self.destroy_umem(input),
            opcode::NOP => Ok(()),
            prm::pp::SET_PP_RATE_LIMIT => self.set_pp_rate_limit(uid, input),
            prm::queues::srq::CREATE_SRQ => self.create_srq(input, out),
            prm::queues::srq::DESTROY_SRQ => self.destroy_srq(input),
            prm::queues::srq::QUERY_SRQ => self.query_srq(input, out),
            prm::queues::srq::ARM_RQ => self.arm_rq(input),
            xrc::ALLOC_XRCD => self.alloc_xrcd(out),
            xrc::DEALLOC_XRCD => self.dealloc_xrcd(input),
            memic::cmd::ALLOC_MEMIC => self.alloc_memic(input, out),
            memic::cmd::DEALLOC_MEMIC => self.dealloc_memic(input),
            opcode::QUERY_ROCE_ADDRESS => self.query_roce_address(input, out),
            port::op::ACCESS_REG => self.access_reg(input, out),
            port::op::MAD_IFC => self.mad_ifc(input, out),
            port::op::QUERY_HCA_VPORT_CONTEXT => self.query_hca_vport_context(input, out),
            op => self.run_raw(op, input, out).unwrap_or(Err(Reject(status::BAD_OP_ERR, syndrome::UNKNOWN_OPCODE))),
        }
    }

    fn alloc_pd(&mut self, uid: u16, out: &mut [u8]) -> Result<(), Reject> {
        let pdn = self.pd_numbers.take().ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        self.pds.insert(pdn, uid);
        prm::pd::PD.set(out, u64::from(pdn))?;
        Ok(())
    }

    fn dealloc_pd(&mut self, input: &[u8]) -> Result<(), Reject> {
        let pdn = prm::pd::PD.get(input)? as u32;
        if !self.pds.remove(pdn) {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT));
        }
        self.pd_numbers.give_back(pdn);
        Ok(())
    }

    fn create_mkey(&mut self, uid: u16, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use prm::create_mkey as cm;
        if input.len() < cm::IN_SIZE {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        }
        let mkc_at = (cm::MKC_BIT / 8) as usize;
        let mut mkc = [0u8; prm::mkc::SIZE];
        mkc.copy_from_slice(&input[mkc_at..mkc_at + prm::mkc::SIZE]);
        let pdn = prm::mkc::PD.get(&mkc)? as u32;
        if !self.pds.contains_key(pdn) {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT));
        }
        let mode = prm::mkc::ACCESS_MODE_1_0.get(&mkc)? | prm::mkc::ACCESS_MODE_4_2.get(&mkc)? << 2;
        let xlat = match mode {
            prm::mkc::ACCESS_MODE_MTT => Translation::Mtt,
            prm::mkc::ACCESS_MODE_KLMS => Translation::None,
            ACCESS_MODE_MEMIC if self.memic_size() > 0 => Translation::Memic,
            _ => return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD)),
        };
        let pages = mtt_pages(input, &xlat)?;
        let index = self.mkey_numbers.take().ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        self.changed();
        self.mkeys.insert(index, FwMkey { mkc, uid, xlat, sig: None, pages, crypto: None });
        cm::OUT_MKEY_INDEX.set(out, u64::from(index))?;
        Ok(())
    }

    fn destroy_mkey(&mut self, input: &[u8]) -> Result<(), Reject> {
        let index = prm::destroy_mkey::MKEY_INDEX.get(input)? as u32;
        self.changed();
        if !self.mkeys.remove(index) {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT));
        }
        self.mkey_numbers.give_back(index);
        Ok(())
    }

    fn create_psv(&mut self, uid: u16, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use prm::create_psv as cp;
        if out.len() < cp::OUT_SIZE {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        let num = cp::NUM_PSV.get(input)? as usize;
        let pdn = cp::PD.get(input)? as u32;
        if !(1..=4).contains(&num) {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD));
        }
        if !self.pds.contains_key(pdn) {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT));
        }
        // At most four numbers: on the stack, not a Vec per command.
        let mut taken = [0u32; 4];
        for got in 0..num {
            let Some(n) = self.psv_numbers.take() else {
                taken.iter().take(got).for_each(|&n| self.psv_numbers.give_back(n));
                return Err(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS));
            };
            if let Some(t) = taken.get_mut(got) {
                *t = n;
            }
        }
        for (slot, &n) in taken.iter().take(num).enumerate() {
            self.psvs.insert(n, FwPsv { uid, armed: false });
            cp::OUT_PSV_INDEX[slot].set(out, u64::from(n))?;
        }
        Ok(())
    }

    fn destroy_psv(&mut self, input: &[u8]) -> Result<(), Reject> {
        let n = prm::destroy_psv::PSVN.get(input)? as u32;
        if !self.psvs.remove(n) {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT));
        }
        self.psv_numbers.give_back(n);
        Ok(())
    }

    /// The mkey with this index, as the firmware holds it.
    pub(crate) fn mkey(&self, index: u32) -> Option<&FwMkey> {
        self.mkeys.get(index)
    }

    /// The mkey with this index, for the data path (UMR, invalidation).
    pub(in crate::device) fn mkey_mut(&mut self, index: u32) -> Option<&mut FwMkey> {
        self.changed();
        self.mkeys.get_mut(index)
    }

    /// Whether every PSV of the signature mkey `index` is armed; `None` without a signature
    /// BSF.
    pub fn sig_armed(&self, index: u32) -> Option<bool> {
        let psvs = self.sig_psvs(index)?;
        Some(psvs.iter().flatten().all(|p| self.psvs.get(*p).is_some_and(|p| p.armed)))
    }

    /// Arm or disarm every PSV of the signature mkey `index`.
    pub(in crate::device) fn set_sig_armed(&mut self, index: u32, armed: bool) {
        for p in self.sig_psvs(index).into_iter().flatten().flatten() {
            if let Some(p) = self.psvs.get_mut(p) {
                p.armed = armed;
            }
        }
    }

    /// The PSVs the signature BSF of mkey `index` names: memory, then wire.
    fn sig_psvs(&self, index: u32) -> Option<[Option<u32>; 2]> {
        let b = self.mkeys.get(index)?.sig?;
        Some([b.cfg.mem.map(|_| b.mem_psv), b.cfg.wire.map(|_| b.wire_psv)])
    }

    /// The PSV with this number, for SET_PSV and signature errors.
    pub(in crate::device) fn psv_mut(&mut self, n: u32) -> Option<&mut FwPsv> {
        self.psvs.get_mut(n)
    }

    /// A new QP with the next free QP number of this device (24 bits, counting up from 0x100
    /// and starting over there, so 0 and 1 are never used; reserved blocks skipped); `None`
    /// when every number is taken.
    fn create_qp(&mut self, c: QpCreate) -> Option<u32> {
        let qpn = self.free_qpn()?;
        self.next_qpn = if qpn >= reserved::LAST_QPN { reserved::FIRST_QPN } else { qpn + 1 };
        let qp = FwQp {
            order: c.order,
            pdn: c.pdn,
            st: c.st,
            send_cqn: c.send_cqn,
            recv_cqn: c.recv_cqn,
            state: mlx5_dv::QpState::Reset,
            access: mlx5_dv::AccessFlags::empty(),
            remote: None,
            scatter_to_cqe: c.scatter_to_cqe,
            drain_sigerr: c.drain_sigerr,
            sq: c.sq,
            sq_pc: 0,
            sq_cc: 0,
            rq: c.rq,
            rq_pc: 0,
            rq_cc: 0,
            srqn: c.srqn,
            xrcd: c.xrcd,
            last_wqe: false,
            dbrec: c.dbrec,
            faults: Default::default(),
            transport: Default::default(),
            dci_streams: c.dci_streams.map(|(c, e)| DciStreams {
                log_concurrent: c,
                log_errored: e,
                ..Default::default()
            }),
            responder_failed: None,
            dct_replay: Default::default(),
            dct_streams: Default::default(),
        };
        self.changed();
        self.qps.insert(qpn, qp);
        Some(qpn)
    }

    /// Drop a QP; false if there was none.
    fn destroy_qp(&mut self, qpn: u32) -> bool {
        self.changed();
        self.qps.remove(qpn)
    }

    /// A new CQ with room for `c.cqe` CQEs in the ring `c` names; `None` when the table is
    /// full.
    fn create_cq(&mut self, c: CqCreate) -> Option<u32> {
        let cqn = self.cq_numbers.take()?;
        let ring =
            crate::device::contract::QueueBuf { addr: c.ring, wqe_cnt: c.cqe.saturating_add(1), stride: c.stride };
        self.cqs.insert(
            cqn,
            FwCq {
                cqe: c.cqe,
                ring,
                dbrec: c.dbrec,
                pi: 0,
                overrun: false,
                oi: c.oi,
                eqn: None,
                armed: false,
                solicited_only: false,
                timestamps: false,
            },
        );
        Some(cqn)
    }

    /// Drop a CQ; false if there was none.
    fn destroy_cq(&mut self, cqn: u32) -> bool {
        let gone = self.cqs.remove(cqn);
        if gone {
            self.cq_numbers.give_back(cqn);
        }
        gone
    }

    /// Set GID 0 of the port.
    pub(crate) fn set_port_gid(&mut self, gid: mlx5_dv::Gid) {
        self.port_gid = gid.0;
    }

    /// QUERY_ROCE_ADDRESS: the GID at `roce_address_index` 0 (the only one simulated).
    fn query_roce_address(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        let index = Field::new("roce_address_index", 0x40, 16).get(input)?;
        if out.len() < 48 {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        if index != 0 {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD));
        }
        out[16..32].copy_from_slice(&self.port_gid);
        Ok(())
    }

    /// The UDP source port RTS2RTS gave QP `qpn`, if it gave one.
    pub(crate) fn qp_udp_sport(&self, qpn: u32) -> Option<u16> {
        self.qp(qpn).map(|q| q.transport.udp_sport).filter(|p| *p != 0)
    }

    /// Whether PD `pdn` exists.
    pub(crate) fn has_pd(&self, pdn: u32) -> bool {
        self.pds.contains_key(pdn)
    }

    /// Where the search for a free QP number starts.
    pub(crate) fn set_first_qpn(&mut self, qpn: u32) {
        self.next_qpn = qpn;
    }

    /// The QP with this number.
    pub(crate) fn qp(&self, qpn: u32) -> Option<&FwQp> {
        self.qps.get(qpn)
    }

    /// The QP with this number, mutably.
    pub(in crate::device) fn qp_mut(&mut self, qpn: u32) -> Option<&mut FwQp> {
        self.changed();
        self.qps.get_mut(qpn)
    }

    /// The send queue of the QP with this number, to move its counters and fault rules.
    pub(in crate::device) fn send_queue_mut(&mut self, qpn: u32) -> Option<SendQueueMut<'_>> {
        self.qps.get_mut(qpn).map(FwQp::send_queue_mut)
    }

    /// A QP's PSNs and timers, to move as its messages go: the epoch stays, since nothing the
    /// engine derives from QPs depends on them.
    #[inline]
    pub(in crate::device) fn transport_mut(&mut self, qpn: u32) -> Option<&mut QpTransport> {
        self.qps.get_mut(qpn).map(|q| &mut q.transport)
    }

    /// A number that changes whenever a QP or an mkey is created, changed (through
    /// [`Firmware::qp_mut`], [`Firmware::mkey_mut`] or a command) or destroyed: what the
    /// engine derived from them at one epoch holds while the epoch stays. Moving a send
    /// queue's counters ([`Firmware::send_queue_mut`]) leaves it.
    pub(in crate::device) fn epoch(&self) -> u64 {
        self.epoch
    }

    fn changed(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// CQEs and EQEs written so far, all queues together (it only grows, modulo 2^64).
    pub(crate) fn progress(&self) -> u64 {
        let cqes = self.cqs.iter().fold(0u64, |n, (_, c)| n.wrapping_add(u64::from(c.pi)));
        cqes.wrapping_add(self.eq.written())
    }

    /// The QPs: number and object, by number.
    pub(in crate::device) fn qps(&self) -> impl Iterator<Item = (u32, &FwQp)> {
        self.qps.iter()
    }

    /// The CQ with this number, mutably.
    pub(in crate::device) fn cq_mut(&mut self, cqn: u32) -> Option<&mut FwCq> {
        self.cqs.get_mut(cqn)
    }

    /// The mkey indexes and PSV numbers created under `uid`, for the kernel's cleanup of a
    /// closed context.
    pub fn objects_of_uid(&self, uid: u16) -> (Vec<u32>, Vec<u32>) {
        let mkeys = self.mkeys.iter().filter(|(_, m)| m.uid == uid).map(|(i, _)| i).collect();
        let psvs = self.psvs.iter().filter(|(_, p)| p.uid == uid).map(|(i, _)| i).collect();
        (mkeys, psvs)
    }

    /// Number of live mkeys, PSVs and PDs.
    pub fn object_counts(&self) -> (usize, usize, usize) {
        (self.mkeys.len(), self.psvs.len(), self.pds.len())
    }

    /// Install a fault rule.
    pub fn add_fault(&mut self, rule: CommandFault) {
        self.faults.push(ActiveRule { rule, seen: 0, acted: 0 });
    }

    /// Remove every fault rule.
    pub fn clear_faults(&mut self) {
        self.faults.clear();
    }

    /// Start or stop recording commands.
    pub fn record_commands(&mut self, on: bool) {
        match (on, self.log.is_some()) {
            (true, false) => self.log = Some(Vec::new()),
            (false, true) => self.log = None,
            _ => {}
        }
    }

    /// Return the recorded commands and forget them.
    pub fn take_commands(&mut self) -> Vec<CommandRecord> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }
}

fn read(f: Field, buf: &[u8]) -> u64 {
    f.get(buf).unwrap_or(0)
}

/// The page list of an MTT CREATE_MKEY: `translations_octword_actual_size` octwords of
/// big-endian page addresses (two per octword) after the 272-byte input. None without one.
fn mtt_pages(input: &[u8], xlat: &Translation) -> Result<Option<Vec<u64>>, Reject> {
    use prm::create_mkey as cm;
    let octwords = cm::TRANSLATIONS_OCTWORD_ACTUAL_SIZE.get(input)?;
    if octwords == 0 || *xlat != Translation::Mtt {
        return Ok(None);
    }
    let bytes = usize::try_from(octwords).ok().and_then(|o| o.checked_mul(16));
    let end = bytes.and_then(|b| b.checked_add(cm::IN_SIZE));
    let Some(payload) = end.and_then(|e| input.get(cm::IN_SIZE..e)) else {
        return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
    };
    let pages = payload.chunks_exact(8).map(|c| c.iter().fold(0u64, |v, b| v << 8 | u64::from(*b)) & !0xfff).collect();
    Ok(Some(pages))
}

#[cfg(test)]
mod tests;
