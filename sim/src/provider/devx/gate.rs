//! The kernel's DEVX gate (mlx5_ib's `devx.c`): which command each method takes, which
//! object a query or modify names, and the `*_umem_valid` bits it forces on what it passes
//! to the firmware. VFIO contexts have no such gate beyond the create list.

use mlx5_dv::prm::{self, Field, opcode};

use crate::device::firmware::{port_op, raw_op};

/// `general_obj_in_cmd_hdr.vhca_tunnel_id`.
const VHCA_TUNNEL_ID: Field = Field::new("vhca_tunnel_id", 0x20, 16);

/// `MLX5_CMD_OP_GENERAL_START` .. `MLX5_CMD_OP_GENERAL_END`: commands that work on no object.
const GENERAL_RANGE: std::ops::Range<u16> = 0xb00..0xd00;

/// `devx_is_general_cmd`'s list (`mlx5dv_devx_general_cmd`).
const GENERAL_CMDS: [u16; 16] = [
    opcode::QUERY_HCA_CAP,
    0x752, // QUERY_ESW_VPORT_CONTEXT
    0x750, // QUERY_VPORT_STATE
    0x101, // QUERY_ADAPTER
    0x10a, // QUERY_ISSI
    0x754, // QUERY_NIC_VPORT_CONTEXT
    opcode::QUERY_ROCE_ADDRESS,
    0x76f, // QUERY_VNIC_ENV
    0x770, // QUERY_VPORT_COUNTER
    0x80a, // GET_DROPPED_PACKET_LOG
    opcode::NOP,
    0x822, // QUERY_CONG_STATUS
    0x824, // QUERY_CONG_PARAMS
    0x826, // QUERY_CONG_STATISTICS
    0x842, // QUERY_LAG
    port_op::QUERY_HCA_VPORT_CONTEXT,
];

/// `devx_is_obj_query_cmd`.
const QUERY_CMDS: [u16; 25] = [
    opcode::QUERY_GENERAL_OBJECT,
    opcode::QUERY_MKEY,
    opcode::QUERY_CQ,
    0x90f, // QUERY_RMP
    0x907, // QUERY_SQ
    0x90b, // QUERY_RQ
    0x919, // QUERY_RQT
    0x903, // QUERY_TIR
    0x915, // QUERY_TIS
    0x773, // QUERY_Q_COUNTER
    0x932, // QUERY_FLOW_TABLE
    0x935, // QUERY_FLOW_GROUP
    0x937, // QUERY_FLOW_TABLE_ENTRY
    0x93b, // QUERY_FLOW_COUNTER
    0x942, // QUERY_MODIFY_HEADER_CONTEXT
    0x784, // QUERY_SCHEDULING_ELEMENT
    0x82a, // QUERY_L2_TABLE_ENTRY
    opcode::QUERY_QP,
    0x702, // QUERY_SRQ
    0x707, // QUERY_XRC_SRQ
    0x713, // QUERY_DCT
    0x719, // QUERY_XRQ
    0x725, // QUERY_XRQ_DC_PARAMS_ENTRY
    0x727, // QUERY_XRQ_ERROR_PARAMS
    0x93f, // QUERY_PACKET_REFORMAT_CONTEXT
];

/// `devx_is_obj_modify_cmd` (SET_FLOW_TABLE_ENTRY with op_mod 1 aside).
const MODIFY_CMDS: [u16; 27] = [
    opcode::MODIFY_GENERAL_OBJECT,
    raw_op::MODIFY_CQ,
    0x90d, // MODIFY_RMP
    0x905, // MODIFY_SQ
    0x909, // MODIFY_RQ
    0x917, // MODIFY_RQT
    0x901, // MODIFY_TIR
    0x913, // MODIFY_TIS
    0x93c, // MODIFY_FLOW_TABLE
    0x785, // MODIFY_SCHEDULING_ELEMENT
    0x827, // ADD_VXLAN_UDP_DPORT
    0x829, // SET_L2_TABLE_ENTRY
    opcode::RST2INIT_QP,
    opcode::INIT2RTR_QP,
    raw_op::INIT2INIT_QP,
    opcode::RTR2RTS_QP,
    opcode::RTS2RTS_QP,
    raw_op::SQERR2RTS_QP,
    opcode::QP_2ERR,
    opcode::QP_2RST,
    0x708, // ARM_XRC_SRQ
    0x703, // ARM_RQ
    0x714, // ARM_DCT_FOR_KEY_VIOLATION
    0x71a, // ARM_XRQ
    0x726, // SET_XRQ_DC_PARAMS_ENTRY
    0x729, // RELEASE_XRQ_ERROR
    0x72a, // MODIFY_XRQ
];

/// SET_FLOW_TABLE_ENTRY: a create with op_mod 0, a modify with op_mod 1.
const SET_FTE: u16 = 0x936;

fn op_of(input: &[u8]) -> u16 {
    prm::mbox_in::OPCODE.get(input).unwrap_or(0) as u16
}

fn op_mod_of(input: &[u8]) -> u64 {
    prm::mbox_in::OP_MOD.get(input).unwrap_or(u64::MAX)
}

/// `devx_is_general_cmd` (the device has no `vhca_tunnel_commands`).
pub(super) fn is_general_cmd(input: &[u8]) -> bool {
    let op = op_of(input);
    GENERAL_RANGE.contains(&op) || GENERAL_CMDS.contains(&op)
}

/// A create, query or modify names a `vhca_tunnel_id`: the kernel refuses it.
pub(super) fn has_tunnel_id(input: &[u8]) -> bool {
    VHCA_TUNNEL_ID.get(input).unwrap_or(0) != 0
}

/// `devx_is_obj_create_cmd` (the kernel's and the VFIO provider's list).
pub(super) fn is_obj_create_cmd(input: &[u8]) -> bool {
    match op_of(input) {
        0xa00 | 0x200 | 0x400 | 0x800 | 0x816 | 0x90c | 0x904 | 0x908 | 0x916 | 0x900 | 0x912 | 0x771 | 0x930
        | 0x933 | 0x939 | 0x93d | 0x940 | 0x782 | 0x827 | 0x829 | 0x500 | 0x700 | 0x705 | 0x710 | 0x717 | 0x806
        | 0x80e => true,
        SET_FTE => op_mod_of(input) == 0,
        opcode::CREATE_PSV => prm::create_psv::NUM_PSV.get(input).unwrap_or(0) == 1,
        _ => false,
    }
}

/// `devx_is_obj_query_cmd`.
pub(super) fn is_obj_query_cmd(input: &[u8]) -> bool {
    QUERY_CMDS.contains(&op_of(input))
}

/// `devx_is_obj_modify_cmd`.
pub(super) fn is_obj_modify_cmd(input: &[u8]) -> bool {
    let op = op_of(input);
    MODIFY_CMDS.contains(&op) || (op == SET_FTE && op_mod_of(input) == 1)
}

/// An object as `devx_get_obj_id` encodes it: the opcode that created it (with the general
/// object type) and its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ObjId {
    /// The creating opcode.
    pub(super) create: u16,
    /// The general object type (0 for other objects).
    pub(super) obj_type: u16,
    /// The object's number.
    pub(super) id: u32,
}

/// `devx_get_obj_id` for the objects this firmware makes (general objects, mkeys, CQs and
/// QPs); `None` for every other command, which can name none of them.
pub(super) fn obj_id_of(input: &[u8]) -> Option<ObjId> {
    let get = |f: Field| f.get(input).ok().map(|v| v as u32);
    let (create, obj_type, id) = match op_of(input) {
        opcode::QUERY_GENERAL_OBJECT | opcode::MODIFY_GENERAL_OBJECT => (
            opcode::CREATE_GENERAL_OBJECT,
            prm::general_obj_in::OBJ_TYPE.get(input).ok()? as u16,
            get(prm::general_obj_in::OBJ_ID)?,
        ),
        opcode::QUERY_MKEY => (opcode::CREATE_MKEY, 0, get(prm::destroy_mkey::MKEY_INDEX)?),
        opcode::QUERY_CQ | raw_op::MODIFY_CQ => (opcode::CREATE_CQ, 0, get(prm::queues::create_cq::CQN)?),
        opcode::QUERY_QP
        | opcode::RST2INIT_QP
        | raw_op::INIT2INIT_QP
        | opcode::INIT2RTR_QP
        | opcode::RTR2RTS_QP
        | opcode::RTS2RTS_QP
        | raw_op::SQERR2RTS_QP
        | opcode::QP_2ERR
        | opcode::QP_2RST => (opcode::CREATE_QP, 0, get(prm::queues::qp::QPN)?),
        prm::queues::srq::QUERY_SRQ | prm::queues::srq::ARM_RQ => {
            (prm::queues::srq::CREATE_SRQ, 0, get(prm::queues::srq::SRQN)?)
        }
        prm::flow_counter::QUERY => (prm::flow_counter::ALLOC, 0, get(prm::flow_counter::QUERY_ID)?),
        _ => return None,
    };
    Some(ObjId { create, obj_type, id })
}

/// `devx_is_valid_obj_id` for a DEVX object: the command names `this` object, or for a
/// QUERY_FLOW_COUNTER on a bulk of `bulk` counters, any id of the bulk.
pub(super) fn names(input: &[u8], this: ObjId, bulk: u32) -> bool {
    match obj_id_of(input) {
        Some(o) if op_of(input) == prm::flow_counter::QUERY && bulk != 0 => {
            o.create == this.create
                && o.obj_type == this.obj_type
                && this.id <= o.id
                && u64::from(o.id) < u64::from(this.id) + u64::from(bulk)
        }
        o => o == Some(this),
    }
}

/// The `flow_counter_bulk_size` the kernel keeps of an ALLOC_FLOW_COUNTER: `1 << log_size`,
/// else 128 times `flow_counter_bulk` (0 for one counter, or any other command).
pub(super) fn flow_counter_bulk(input: &[u8]) -> u32 {
    use prm::flow_counter as fc;
    if op_of(input) != fc::ALLOC {
        return 0;
    }
    match fc::BULK_LOG_SIZE.get(input).unwrap_or(0) {
        0 => 128 * fc::BULK.get(input).unwrap_or(0) as u32,
        log => 1 << log,
    }
}

/// `cq_umem_valid` of `modify_cq_in` (and `create_cq_in`).
const CQ_UMEM_VALID: Field = prm::queues::create_cq::CQ_UMEM_VALID;

/// The bits `devx_set_umem_valid` and `devx_handle_mkey_create` force: a CQ's and a QP's
/// queues and doorbell records are always in umems, and so is an MTT mkey's translation.
/// Fields past the end of a short input are left to the firmware's length check.
pub(super) fn force_umem_valid(input: &mut [u8]) {
    use prm::queues::{create_cq as c, qp as q};
    let set: &[Field] = match op_of(input) {
        opcode::CREATE_CQ => &[CQ_UMEM_VALID, c::DBR_UMEM_VALID],
        opcode::CREATE_QP => &[q::DBR_UMEM_VALID, q::WQ_UMEM_VALID],
        raw_op::MODIFY_CQ => &[CQ_UMEM_VALID],
        opcode::CREATE_MKEY if !indirect_mkey(input) => &[prm::create_mkey::MKEY_UMEM_VALID],
        _ => &[],
    };
    for f in set {
        let _ = f.set(input, 1);
    }
}

/// Bytes a CREATE_MKEY input needs for the kernel to read its access mode: the header and
/// the 64-byte mkey context.
pub(super) const MKEY_MIN_IN: usize = 16 + prm::mkc::SIZE;

/// KLMS (2) or KSM (3): an indirect mkey, whose translation the kernel leaves alone.
fn indirect_mkey(input: &[u8]) -> bool {
    let at = (prm::create_mkey::MKC_BIT / 8) as usize;
    let Some(mkc) = input.get(at..at + prm::mkc::SIZE) else { return true };
    let low = prm::mkc::ACCESS_MODE_1_0.get(mkc).unwrap_or(0);
    let high = prm::mkc::ACCESS_MODE_4_2.get(mkc).unwrap_or(0);
    matches!(low | high << 2, 2 | 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(op: u16, op_mod: u16) -> Vec<u8> {
        prm::new_input(prm::queues::qp::SIZE, op, 0, op_mod)
    }

    #[test]
    fn the_general_list_and_range() {
        for op in [0x100, 0x752, 0x76f, 0x80a, 0x80d, 0x842, 0x762, 0xb00, 0xcff] {
            assert!(is_general_cmd(&cmd(op, 0)), "{op:#x}");
        }
        for op in [0x764, 0x765, 0x773, 0x800, 0xd00, 0x805, 0x50d] {
            assert!(!is_general_cmd(&cmd(op, 0)), "{op:#x}");
        }
    }

    #[test]
    fn object_ids_of_cq_and_qp_commands() {
        let mut q = cmd(raw_op::SQERR2RTS_QP, 0);
        let _ = prm::queues::qp::QPN.set(&mut q, 0x123);
        assert_eq!(obj_id_of(&q), Some(ObjId { create: opcode::CREATE_QP, obj_type: 0, id: 0x123 }));
        assert!(is_obj_modify_cmd(&q) && !is_obj_query_cmd(&q));
        let mut c = cmd(opcode::QUERY_CQ, 0);
        let _ = prm::queues::create_cq::CQN.set(&mut c, 7);
        assert_eq!(obj_id_of(&c), Some(ObjId { create: opcode::CREATE_CQ, obj_type: 0, id: 7 }));
        assert!(is_obj_modify_cmd(&cmd(SET_FTE, 1)) && !is_obj_modify_cmd(&cmd(SET_FTE, 0)));
    }

    #[test]
    fn forced_umem_bits() {
        let mut cq = cmd(opcode::CREATE_CQ, 0);
        force_umem_valid(&mut cq);
        assert_eq!(CQ_UMEM_VALID.get(&cq).ok(), Some(1));
        assert_eq!(prm::queues::create_cq::DBR_UMEM_VALID.get(&cq).ok(), Some(1));
        let mut mk = prm::new_input(prm::create_mkey::IN_SIZE, opcode::CREATE_MKEY, 0, 0);
        force_umem_valid(&mut mk);
        assert_eq!(prm::create_mkey::MKEY_UMEM_VALID.get(&mk).ok(), Some(1), "an MTT mkey");
        let mut klm = prm::new_input(prm::create_mkey::IN_SIZE, opcode::CREATE_MKEY, 0, 0);
        let at = (prm::create_mkey::MKC_BIT / 8) as usize;
        let _ = prm::mkc::ACCESS_MODE_1_0.set(&mut klm[at..at + prm::mkc::SIZE], prm::mkc::ACCESS_MODE_KLMS);
        force_umem_valid(&mut klm);
        assert_eq!(prm::create_mkey::MKEY_UMEM_VALID.get(&klm).ok(), Some(0), "a KLM mkey");
    }
}
