//! Command mailboxes: headers, opcodes, status codes and the per-command fields.

use super::{Field, View, ViewMut};

/// Command opcodes.
pub mod opcode {
    /// QUERY_HCA_CAP.
    pub const QUERY_HCA_CAP: u16 = 0x100;
    /// CREATE_MKEY.
    pub const CREATE_MKEY: u16 = 0x200;
    /// QUERY_MKEY.
    pub const QUERY_MKEY: u16 = 0x201;
    /// DESTROY_MKEY.
    pub const DESTROY_MKEY: u16 = 0x202;
    /// CREATE_EQ.
    pub const CREATE_EQ: u16 = 0x301;
    /// DESTROY_EQ.
    pub const DESTROY_EQ: u16 = 0x302;
    /// CREATE_PSV.
    pub const CREATE_PSV: u16 = 0x600;
    /// DESTROY_PSV.
    pub const DESTROY_PSV: u16 = 0x601;
    /// ALLOC_PD.
    pub const ALLOC_PD: u16 = 0x800;
    /// DEALLOC_PD.
    pub const DEALLOC_PD: u16 = 0x801;
    /// CREATE_GENERAL_OBJECT.
    pub const CREATE_GENERAL_OBJECT: u16 = 0xa00;
    /// MODIFY_GENERAL_OBJECT.
    pub const MODIFY_GENERAL_OBJECT: u16 = 0xa01;
    /// QUERY_GENERAL_OBJECT.
    pub const QUERY_GENERAL_OBJECT: u16 = 0xa02;
    /// DESTROY_GENERAL_OBJECT.
    pub const DESTROY_GENERAL_OBJECT: u16 = 0xa03;

    /// QUERY_EQ.
    pub const QUERY_EQ: u16 = 0x303;
    /// GEN_EQE.
    pub const GEN_EQE: u16 = 0x304;
    /// CREATE_CQ.
    pub const CREATE_CQ: u16 = 0x400;
    /// DESTROY_CQ.
    pub const DESTROY_CQ: u16 = 0x401;
    /// QUERY_CQ.
    pub const QUERY_CQ: u16 = 0x402;
    /// ALLOC_UAR.
    pub const ALLOC_UAR: u16 = 0x802;
    /// DEALLOC_UAR.
    pub const DEALLOC_UAR: u16 = 0x803;
    /// NOP.
    pub const NOP: u16 = 0x80d;
    /// CREATE_UMEM.
    pub const CREATE_UMEM: u16 = 0xa08;
    /// DESTROY_UMEM.
    pub const DESTROY_UMEM: u16 = 0xa0a;

    /// CREATE_QP.
    pub const CREATE_QP: u16 = 0x500;
    /// QUERY_ROCE_ADDRESS: GID `roce_address_index` of a port, at output byte 16.
    pub const QUERY_ROCE_ADDRESS: u16 = 0x760;
    /// DESTROY_QP.
    pub const DESTROY_QP: u16 = 0x501;
    /// RST2INIT_QP.
    pub const RST2INIT_QP: u16 = 0x502;
    /// INIT2RTR_QP.
    pub const INIT2RTR_QP: u16 = 0x503;
    /// RTR2RTS_QP.
    pub const RTR2RTS_QP: u16 = 0x504;
    /// RTS2RTS_QP.
    pub const RTS2RTS_QP: u16 = 0x505;
    /// QP_2ERR.
    pub const QP_2ERR: u16 = 0x507;
    /// QP_2RST.
    pub const QP_2RST: u16 = 0x50a;
    /// QUERY_QP.
    pub const QUERY_QP: u16 = 0x50b;
    /// MLX5_CMD_OP_SQERR2RTS_QP.
    pub const SQERR2RTS_QP: u16 = 0x506;
    /// MLX5_CMD_OP_SQD_RTS_QP.
    pub const SQD_RTS_QP: u16 = 0x50c;
    /// MLX5_CMD_OP_INIT2INIT_QP.
    pub const INIT2INIT_QP: u16 = 0x50e;

    /// The PRM name of an opcode, for reports.
    pub fn name(op: u16) -> &'static str {
        match op {
            QUERY_HCA_CAP => "QUERY_HCA_CAP",
            CREATE_MKEY => "CREATE_MKEY",
            QUERY_MKEY => "QUERY_MKEY",
            DESTROY_MKEY => "DESTROY_MKEY",
            CREATE_EQ => "CREATE_EQ",
            DESTROY_EQ => "DESTROY_EQ",
            CREATE_PSV => "CREATE_PSV",
            DESTROY_PSV => "DESTROY_PSV",
            ALLOC_PD => "ALLOC_PD",
            DEALLOC_PD => "DEALLOC_PD",
            CREATE_GENERAL_OBJECT => "CREATE_GENERAL_OBJECT",
            MODIFY_GENERAL_OBJECT => "MODIFY_GENERAL_OBJECT",
            QUERY_GENERAL_OBJECT => "QUERY_GENERAL_OBJECT",
            DESTROY_GENERAL_OBJECT => "DESTROY_GENERAL_OBJECT",
            QUERY_EQ => "QUERY_EQ",
            GEN_EQE => "GEN_EQE",
            CREATE_CQ => "CREATE_CQ",
            DESTROY_CQ => "DESTROY_CQ",
            QUERY_CQ => "QUERY_CQ",
            ALLOC_UAR => "ALLOC_UAR",
            DEALLOC_UAR => "DEALLOC_UAR",
            NOP => "NOP",
            CREATE_UMEM => "CREATE_UMEM",
            DESTROY_UMEM => "DESTROY_UMEM",
            CREATE_QP => "CREATE_QP",
            QUERY_ROCE_ADDRESS => "QUERY_ROCE_ADDRESS",
            DESTROY_QP => "DESTROY_QP",
            RST2INIT_QP => "RST2INIT_QP",
            INIT2RTR_QP => "INIT2RTR_QP",
            RTR2RTS_QP => "RTR2RTS_QP",
            RTS2RTS_QP => "RTS2RTS_QP",
            QP_2ERR => "QP_2ERR",
            QP_2RST => "QP_2RST",
            QUERY_QP => "QUERY_QP",
            SQERR2RTS_QP => "SQERR2RTS_QP",
            SQD_RTS_QP => "SQD_RTS_QP",
            INIT2INIT_QP => "INIT2INIT_QP",
            0x939 => "ALLOC_FLOW_COUNTER",
            0x93a => "DEALLOC_FLOW_COUNTER",
            0x93b => "QUERY_FLOW_COUNTER",
            _ => "UNKNOWN",
        }
    }
}

/// Command status codes (`out.status`).
pub mod status {
    /// OK.
    pub const OK: u8 = 0x00;
    /// INT_ERR.
    pub const INT_ERR: u8 = 0x01;
    /// BAD_OP_ERR.
    pub const BAD_OP_ERR: u8 = 0x02;
    /// BAD_PARAM_ERR.
    pub const BAD_PARAM_ERR: u8 = 0x03;
    /// BAD_SYS_STATE_ERR.
    pub const BAD_SYS_STATE_ERR: u8 = 0x04;
    /// BAD_RES_ERR.
    pub const BAD_RES_ERR: u8 = 0x05;
    /// RES_BUSY.
    pub const RES_BUSY: u8 = 0x06;
    /// LIM_ERR.
    pub const LIM_ERR: u8 = 0x08;
    /// BAD_RES_STATE_ERR.
    pub const BAD_RES_STATE_ERR: u8 = 0x09;
    /// IX_ERR.
    pub const IX_ERR: u8 = 0x0a;
    /// NO_RES_ERR.
    pub const NO_RES_ERR: u8 = 0x0f;
    /// BAD_QP_STATE_ERR.
    pub const BAD_QP_STATE_ERR: u8 = 0x10;
    /// BAD_PKT_ERR.
    pub const BAD_PKT_ERR: u8 = 0x30;
    /// BAD_SIZE_OUTS_CQES_ERR.
    pub const BAD_SIZE_OUTS_CQES_ERR: u8 = 0x40;
    /// BAD_INP_LEN_ERR.
    pub const BAD_INP_LEN_ERR: u8 = 0x50;
    /// BAD_OUTP_LEN_ERR.
    pub const BAD_OUTP_LEN_ERR: u8 = 0x51;

    /// The errno the provider reports for a command status (`mlx5_cmd_status_to_err`).
    pub fn to_errno(status: u8) -> i32 {
        use crate::errno::*;
        match status {
            OK => 0,
            BAD_OP_ERR
            | BAD_PARAM_ERR
            | BAD_RES_ERR
            | BAD_RES_STATE_ERR
            | IX_ERR
            | BAD_QP_STATE_ERR
            | BAD_PKT_ERR
            | BAD_SIZE_OUTS_CQES_ERR => EINVAL,
            RES_BUSY => EBUSY,
            LIM_ERR => ENOMEM,
            NO_RES_ERR => EAGAIN,
            _ => EIO,
        }
    }
}

/// `mbox_in`: the header every input mailbox starts with.
pub mod mbox_in {
    use crate::prm::view::layout;
    /// Header size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// The input header; bytes 8..16 belong to the command.
        struct MboxIn = "mbox_in", SIZE;
        /// opcode.
        OPCODE => opcode / set_opcode: u16 = (0x00, 16);
        /// uid.
        UID => uid / set_uid: u16 = (0x10, 16);
        /// op_mod.
        OP_MOD => op_mod / set_op_mod: u16 = (0x30, 16);
    }
}

/// `mbox_out`: the header every output mailbox starts with.
pub mod mbox_out {
    use crate::prm::view::layout;
    /// Header size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// The output header; bytes 8..16 belong to the command.
        struct MboxOut = "mbox_out", SIZE;
        /// status.
        STATUS => status / set_status: u8 = (0x00, 8);
        /// syndrome.
        SYNDROME => syndrome / set_syndrome: u32 = (0x20, 32);
    }
}

/// `general_obj_in_cmd_hdr`: the input header of CREATE/MODIFY/QUERY/DESTROY_GENERAL_OBJECT.
pub mod general_obj_in {
    use crate::prm::view::layout;
    /// Header size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// The general object input header; the object follows it.
        struct GeneralObjIn = "general_obj_in_cmd_hdr", SIZE;
        /// opcode.
        OPCODE => opcode / set_opcode: u16 = (0x00, 16);
        /// uid.
        UID => uid / set_uid: u16 = (0x10, 16);
        /// obj_type (see [`obj_type`](crate::prm::obj_type)); it sits where `op_mod` does in
        /// `mbox_in`.
        OBJ_TYPE => obj_type / set_obj_type: u16 = (0x30, 16);
        /// obj_id: the object a MODIFY, QUERY or DESTROY names.
        OBJ_ID => obj_id / set_obj_id: u32 = (0x40, 32);
        /// log_obj_range: a bulk allocation of `1 << log_obj_range` objects.
        LOG_OBJ_RANGE => log_obj_range / set_log_obj_range: u8 = (0x63, 5);
    }
}

/// `general_obj_out_cmd_hdr`: the output header of the general object commands.
pub mod general_obj_out {
    use crate::prm::view::layout;
    /// Header size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// The general object output header.
        struct GeneralObjOut = "general_obj_out_cmd_hdr", SIZE;
        /// status.
        STATUS => status / set_status: u8 = (0x00, 8);
        /// syndrome.
        SYNDROME => syndrome / set_syndrome: u32 = (0x20, 32);
        /// obj_id: the object CREATE made.
        OBJ_ID => obj_id / set_obj_id: u32 = (0x40, 32);
    }
}

/// `query_hca_cap_in` / `query_hca_cap_out`.
pub mod query_hca_cap {
    /// op_mod for the current general capabilities: `GENERAL(0) << 1 | GET_CUR(1)`.
    #[allow(clippy::identity_op)] // spelled out to mirror the PRM encoding
    pub const OP_MOD_GENERAL_CUR: u16 = 0x0 << 1 | 1;
    /// op_mod for the current crypto capabilities: `CRYPTO(0x1a) << 1 | GET_CUR(1)`.
    pub const OP_MOD_CRYPTO_CUR: u16 = 0x1a << 1 | 1;
    /// op_mod for the current second general page: `GENERAL_DEVICE_CAP_2(0x20) << 1 | GET_CUR(1)`.
    pub const OP_MOD_GENERAL_2_CUR: u16 = 0x20 << 1 | 1;
    /// op_mod for the current QoS page: `QOS(0xc) << 1 | GET_CUR(1)`.
    pub const OP_MOD_QOS_CUR: u16 = 0xc << 1 | 1;
    /// op_mod for the current ODP page: `ODP(0x2) << 1 | GET_CUR(1)`.
    pub const OP_MOD_ODP_CUR: u16 = 0x2 << 1 | 1;
    /// Input size in bytes.
    pub const IN_SIZE: usize = 16;
    /// Byte offset of the capability page in the output.
    pub const CAPABILITY_BYTE: usize = 16;
    /// Capability page size in bytes.
    pub const CAPABILITY_SIZE: usize = 4096;
    /// Output size in bytes.
    pub const OUT_SIZE: usize = CAPABILITY_BYTE + CAPABILITY_SIZE;
}

/// General object type numbers (bit positions in `general_obj_types`).
pub mod obj_type {
    /// DEK (data encryption key).
    pub const DEK: u16 = 0x000c;
    /// CRYPTO_LOGIN.
    pub const CRYPTO_LOGIN: u16 = 0x001f;
    /// RESERVED_QPN: a block of `1 << log_obj_range` QP numbers no QP takes; its object id
    /// is the first of them.
    pub const RESERVED_QPN: u16 = 0x002c;
    /// `MLX5_OBJ_TYPE_AV_QP_MAPPING`.
    pub const AV_QP_MAPPING: u16 = 0x003a;
    /// `MLX5_OBJ_TYPE_SCHEDULING_ELEMENT`: a node or leaf of the NIC's scheduling tree.
    pub const SCHEDULING_ELEMENT: u16 = 0x0026;
}

/// `create_mkey_in` / `create_mkey_out`.
pub mod create_mkey {
    use super::Field;
    /// Bit offset of the `mkc` inside `create_mkey_in`.
    pub const MKC_BIT: u32 = 0x80;
    /// pg_access.
    pub const PG_ACCESS: Field = Field::new("pg_access", 0x60, 1);
    /// mkey_umem_valid.
    pub const MKEY_UMEM_VALID: Field = Field::new("mkey_umem_valid", 0x61, 1);
    /// translations_octword_actual_size.
    pub const TRANSLATIONS_OCTWORD_ACTUAL_SIZE: Field = Field::new("translations_octword_actual_size", 0x300, 32);
    /// Input size in bytes, without translation entries.
    pub const IN_SIZE: usize = 272;
    /// `create_mkey_out.mkey_index`.
    pub const OUT_MKEY_INDEX: Field = Field::new("mkey_index", 0x48, 24);
    /// Output size in bytes.
    pub const OUT_SIZE: usize = 16;
}

/// `destroy_mkey_in` (the output is a bare `mbox_out`).
pub mod destroy_mkey {
    use super::Field;
    /// mkey_index.
    pub const MKEY_INDEX: Field = Field::new("mkey_index", 0x48, 24);
    /// Input size in bytes.
    pub const IN_SIZE: usize = 16;
}

/// `create_psv_in` / `create_psv_out`.
pub mod create_psv {
    use super::Field;
    /// num_psv.
    pub const NUM_PSV: Field = Field::new("num_psv", 0x40, 4);
    /// pd.
    pub const PD: Field = Field::new("pd", 0x48, 24);
    /// Input size in bytes.
    pub const IN_SIZE: usize = 16;
    /// `create_psv_out.psv0_index`..`psv3_index`.
    pub const OUT_PSV_INDEX: [Field; 4] = [
        Field::new("psv0_index", 0x88, 24),
        Field::new("psv1_index", 0xa8, 24),
        Field::new("psv2_index", 0xc8, 24),
        Field::new("psv3_index", 0xe8, 24),
    ];
    /// Output size in bytes.
    pub const OUT_SIZE: usize = 32;
}

/// `destroy_psv_in` (the output is a bare `mbox_out`).
pub mod destroy_psv {
    use super::Field;
    /// psvn.
    pub const PSVN: Field = Field::new("psvn", 0x48, 24);
    /// Input size in bytes.
    pub const IN_SIZE: usize = 16;
}

/// `alloc_pd_out` and `dealloc_pd_in` (the other halves are bare headers).
pub mod pd {
    use super::Field;
    /// `alloc_pd_out.pd` and `dealloc_pd_in.pd`.
    pub const PD: Field = Field::new("pd", 0x48, 24);
    /// Size of each mailbox in bytes.
    pub const SIZE: usize = 16;
}

/// Build an input mailbox of `len` bytes with `opcode`, `uid` and `op_mod` set.
pub fn new_input(len: usize, opcode: u16, uid: u16, op_mod: u16) -> Vec<u8> {
    let mut buf = vec![0u8; len.max(mbox_in::SIZE)];
    write_header(&mut buf, opcode, uid, op_mod);
    buf
}

/// Write the `mbox_in` header into `buf` (at least 16 bytes; a shorter buffer is left alone).
#[inline]
pub fn write_header(buf: &mut [u8], opcode: u16, uid: u16, op_mod: u16) {
    if let Ok(mut h) = ViewMut::<mbox_in::MboxIn>::new(buf) {
        // Each value is as wide as its 16-bit field: none can be refused.
        let _ = (h.set_opcode(opcode), h.set_uid(uid), h.set_op_mod(op_mod));
    }
}

/// Read `(status, syndrome)` from an output mailbox; a mailbox shorter than the header reads
/// as BAD_OUTP_LEN_ERR.
#[inline]
pub fn read_status(out: &[u8]) -> (u8, u32) {
    match View::<mbox_out::MboxOut>::new(out) {
        Ok(h) => (h.status(), h.syndrome()),
        Err(_) => (status::BAD_OUTP_LEN_ERR, 0),
    }
}
