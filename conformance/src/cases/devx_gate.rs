//! DEVX through the kernel's gate and the firmware's own commands: the general list and the
//! attribute sizes (71), raw CQs and QPs queried and modified by their objects and the forced
//! umem bits (100), the NC UAR singleton and umem access flags (101), the capability pages
//! (102), the port's administrative state (103), and mailbox ranges that wrap (104).

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP, EREMOTEIO};
use mlx5_dv::prm::{self, Field, eq as e, opcode, queues as q, status};
use mlx5_dv::{
    AccessFlags as A, Backend, ContextHandle, DevxObj, MLX5DV_UAR_ALLOC_TYPE_BF, MLX5DV_UAR_ALLOC_TYPE_NC, link_layer,
    uar_offset,
};

use super::devx::{be32, cmd, devx_ctx, eq_input, eqe_at, eqn_of, init_owner_bits, raw_qp_input, uar_and_vector, vfio};
use super::{ctl, with_opcode};
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "devx.general_cmd_list_and_attribute_sizes",
        covers: &[71],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: general_list,
    },
    Case {
        name: "devx.raw_cq_and_qp_by_their_objects",
        covers: &[109],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: raw_objects,
    },
    Case {
        name: "devx.kernel_forces_umem_valid",
        covers: &[109],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SimControl],
        run: forced_umem_valid,
    },
    Case {
        name: "devx.nc_uar_is_the_context_singleton",
        covers: &[110],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: nc_singleton,
    },
    Case {
        name: "devx.umem_reg_access_flags",
        covers: &[110],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: umem_access,
    },
    Case {
        name: "devx.query_hca_cap_max_current_and_short",
        covers: &[111],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: hca_cap_pages,
    },
    Case { name: "devx.paos_sets_the_port_admin_state", covers: &[112], needs: &[Need::VfioDevice], run: paos },
    Case {
        name: "devx.mailbox_addresses_that_wrap",
        covers: &[113],
        needs: &[Need::VfioDevice],
        run: wrapping_addresses,
    },
];

/// ACCESS_REG, MAD_IFC, QUERY_HCA_VPORT_CONTEXT, QUERY_HCA_VPORT_GID, MODIFY_CQ,
/// INIT2INIT_QP, SQERR2RTS_QP.
const ACCESS_REG: u16 = 0x805;
const MAD_IFC: u16 = 0x50d;
const QUERY_HCA_VPORT_CONTEXT: u16 = 0x762;
const QUERY_HCA_VPORT_GID: u16 = 0x764;
const MODIFY_CQ: u16 = 0x403;
const INIT2INIT_QP: u16 = 0x50e;
const SQERR2RTS_QP: u16 = 0x506;

/// `cmd_hca_cap.port_type` in a QUERY_HCA_CAP output (the page at byte 16).
const OUT_PORT_TYPE: Field = Field::new("port_type", 0x80 + 0x1b6, 2);

fn general_list(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    // The kernel lets it through; the firmware's answer (an Ethernet port's may be a bad
    // status) is its own.
    let vport = prm::new_input(16, QUERY_HCA_VPORT_CONTEXT, 0, 0);
    match b.devx_general_cmd(ctx, &vport, 16 + 512) {
        Ok(_) => {}
        Err(e) if e.errno() == EREMOTEIO => {}
        Err(e) => return Err(Verdict::fail("QUERY_HCA_VPORT_CONTEXT: a general command", "through the kernel", e)),
    }
    expect_ok("NOP: a general command", b.devx_general_cmd(ctx, &prm::new_input(16, opcode::NOP, 0, 0), 16))?;
    for (what, op) in [("QUERY_HCA_VPORT_GID", QUERY_HCA_VPORT_GID), ("ACCESS_REG", ACCESS_REG), ("MAD_IFC", MAD_IFC)] {
        let input = prm::new_input(272, op, 0, 0);
        expect_errno(&format!("{what}: not on the kernel's list"), b.devx_general_cmd(ctx, &input, 272), EINVAL)?;
    }
    let cap = prm::new_input(16, opcode::QUERY_HCA_CAP, 0, prm::query_hca_cap::OP_MOD_GENERAL_CUR);
    expect_ok("an output of 65535 bytes", b.devx_general_cmd(ctx, &cap, 65535))?;
    expect_errno(
        "an output of 65536 bytes: more than an ioctl attribute",
        b.devx_general_cmd(ctx, &cap, 65536),
        EINVAL,
    )?;
    let mut long = cap.clone();
    long.resize(65536, 0);
    expect_errno("an input of 65536 bytes", b.devx_general_cmd(ctx, &long, 0x1010), EINVAL)?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

/// What a raw CQ and QP of a kernel context stand on.
struct Raw {
    ctx: ContextHandle,
    buf: mlx5_dv::Buf,
    umem: mlx5_dv::DevxUmem,
    uar: mlx5_dv::DevxUar,
    pdn: u32,
    eqn: u32,
}

fn raw_base(b: &mut dyn Backend, env: &Env) -> Check<Raw> {
    let ctx = devx_ctx(b, env)?;
    let pd = expect_ok("ibv_alloc_pd", b.alloc_pd(ctx))?;
    let pdn = expect_ok("mlx5dv_init_obj(PD)", b.devx_pd_number(pd))?;
    let buf = expect_ok("a buffer", b.alloc_buf(0x4000))?;
    let umem = expect_ok("umem_reg", b.devx_umem_reg(ctx, buf.addr, 0x4000, A::LOCAL_WRITE | A::REMOTE_WRITE))?;
    let uar = expect_ok("alloc_uar(NC)", b.devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC))?;
    let eqn = expect_ok("query_eqn(0)", b.devx_query_eqn(ctx, 0))?;
    Ok(Raw { ctx, buf, umem, uar, pdn, eqn })
}

/// CREATE_CQ of 64 entries at offset 0 of the umem, its doorbell record at 0x3000; the
/// umem bits as `valid` says.
fn cq_in(r: &Raw, valid: u64) -> Vec<u8> {
    use q::create_cq as c;
    let umem = u64::from(r.umem.umem_id);
    cmd(
        opcode::CREATE_CQ,
        c::IN_SIZE,
        &[
            (c::LOG_CQ_SIZE, 6),
            (c::UAR_PAGE, u64::from(r.uar.page_id)),
            (c::C_EQN, u64::from(r.eqn)),
            (c::CQ_UMEM_VALID, valid),
            (c::CQ_UMEM_ID, umem),
            (c::DBR_UMEM_VALID, valid),
            (c::DBR_UMEM_ID, umem),
            (c::DB_RECORD_ADDR, 0x3000),
        ],
    )
}

/// CREATE_QP of 64 send blocks at 0x1000 of the umem, no receive queue.
fn qp_in(r: &Raw, cqn: u32, valid: u64) -> Vec<u8> {
    raw_qp_input(r.pdn, r.uar.page_id, cqn, r.umem.umem_id, (0x1000, 0x3040), valid)
}

fn raw_teardown(b: &mut dyn Backend, r: Raw, objs: &[&DevxObj]) -> Check {
    for o in objs {
        expect_ok("destroy the object", b.devx_obj_destroy(o.handle))?;
    }
    expect_ok("umem_dereg", b.devx_umem_dereg(&r.umem))?;
    expect_ok("free_uar", b.devx_free_uar(&r.uar))?;
    expect_ok("ibv_close_device", b.close_device(r.ctx))?;
    let _ = r.buf;
    Ok(())
}

fn raw_objects(b: &mut dyn Backend, env: &Env) -> Check {
    use q::{create_cq as c, qp as f};
    let r = raw_base(b, env)?;
    let cq = expect_ok("obj_create(CREATE_CQ)", b.devx_obj_create(r.ctx, &cq_in(&r, 1), c::SIZE))?;
    let cqn = c::CQN.get(&cq.out).unwrap_or(0);
    let query_cq = cmd(opcode::QUERY_CQ, 16, &[(c::CQN, cqn)]);
    let out = expect_ok("obj_query(QUERY_CQ) of the CQ", b.devx_obj_query(cq.handle, &query_cq, 272))?;
    check_eq("cqc.log_cq_size", c::LOG_CQ_SIZE.get(&out).ok(), Some(6))?;
    let moderate = cmd(MODIFY_CQ, 272, &[(c::CQN, cqn), (Field::new("modify_field_select", 0x60, 32), 0b11)]);
    expect_ok("obj_modify(MODIFY_CQ) of the CQ", b.devx_obj_modify(cq.handle, &moderate, 16))?;
    let other = cmd(opcode::QUERY_CQ, 16, &[(c::CQN, cqn + 1)]);
    expect_errno("QUERY_CQ of another CQ", b.devx_obj_query(cq.handle, &other, 272), EINVAL)?;
    expect_errno("MODIFY_CQ through obj_query", b.devx_obj_query(cq.handle, &moderate, 16), EINVAL)?;
    let qp = expect_ok("obj_create(CREATE_QP)", b.devx_obj_create(r.ctx, &qp_in(&r, cqn as u32, 1), f::SMALL))?;
    let qpn = f::QPN.get(&qp.out).unwrap_or(0);
    let query_qp = cmd(opcode::QUERY_QP, 16, &[(f::QPN, qpn)]);
    expect_errno("QUERY_QP through the CQ's object", b.devx_obj_query(cq.handle, &query_qp, f::SIZE), EINVAL)?;
    expect_errno("QUERY_QP as a modify", b.devx_obj_modify(qp.handle, &query_qp, f::SIZE), EINVAL)?;
    let step = |op: u16| cmd(op, f::SIZE, &[(f::QPN, qpn)]);
    expect_errno("RST2INIT_QP as a query", b.devx_obj_query(qp.handle, &step(opcode::RST2INIT_QP), 16), EINVAL)?;
    let mut tunnel = step(opcode::RST2INIT_QP);
    let _ = Field::new("vhca_tunnel_id", 0x20, 16).set(&mut tunnel, 1);
    expect_errno("a vhca_tunnel_id", b.devx_obj_modify(qp.handle, &tunnel, 16), EINVAL)?;
    let sqerr = b.devx_obj_modify(qp.handle, &step(SQERR2RTS_QP), 16);
    let st = sqerr.as_ref().err().and_then(|x| x.cmd_status()).map(|c| c.status);
    expect_errno("SQERR2RTS_QP from RST: the firmware's answer", sqerr, EREMOTEIO)?;
    check_eq("its status", st, Some(status::BAD_QP_STATE_ERR))?;
    let roce = cmd(opcode::QUERY_ROCE_ADDRESS, 16, &[(Field::new("vhca_port_num", 0x5c, 4), 1)]);
    let gid = expect_ok("QUERY_ROCE_ADDRESS 0", b.devx_general_cmd(r.ctx, &roce, 48))?[16..32].to_vec();
    let mut rtr = cmd(
        opcode::INIT2RTR_QP,
        f::SIZE,
        &[(f::QPN, qpn), (f::REMOTE_QPN, qpn), (f::GRH, 1), (f::MTU, 3), (f::HOP_LIMIT, 64), (f::VHCA_PORT_NUM, 1)],
    );
    rtr[f::RGID_BYTE..f::RGID_BYTE + 16].copy_from_slice(&gid);
    let init = cmd(opcode::RST2INIT_QP, f::SIZE, &[(f::QPN, qpn), (f::VHCA_PORT_NUM, 1)]);
    let steps = [
        ("RST2INIT_QP", init),
        ("INIT2INIT_QP", step(INIT2INIT_QP)),
        ("INIT2RTR_QP", rtr),
        ("RTR2RTS_QP", step(opcode::RTR2RTS_QP)),
        ("RTS2RTS_QP", step(opcode::RTS2RTS_QP)),
        ("2ERR_QP", step(opcode::QP_2ERR)),
        ("2RST_QP", step(opcode::QP_2RST)),
    ];
    for (what, input) in steps {
        expect_ok(&format!("obj_modify({what})"), b.devx_obj_modify(qp.handle, &input, 16))?;
    }
    let out = expect_ok("obj_query(QUERY_QP)", b.devx_obj_query(qp.handle, &query_qp, f::SIZE))?;
    check_eq("qpc.state after 2RST", f::STATE.get(&out).ok(), Some(u64::from(q::qp_state::RST)))?;
    raw_teardown(b, r, &[&qp, &cq])
}

fn forced_umem_valid(b: &mut dyn Backend, env: &Env) -> Check {
    use q::{create_cq as c, qp as f};
    let r = raw_base(b, env)?;
    ctl(b)?.record_commands(true);
    // The umem ids are named, the valid bits left clear: the kernel sets them.
    let cq = expect_ok("CREATE_CQ with the umem bits clear", b.devx_obj_create(r.ctx, &cq_in(&r, 0), c::SIZE))?;
    let cqn = c::CQN.get(&cq.out).unwrap_or(0);
    let qp = expect_ok("CREATE_QP with the umem bits clear", b.devx_obj_create(r.ctx, &qp_in(&r, cqn as u32, 0), 16))?;
    let modify = cmd(MODIFY_CQ, 272, &[(c::CQN, cqn)]);
    expect_ok("MODIFY_CQ", b.devx_obj_modify(cq.handle, &modify, 16))?;
    let cmds = ctl(b)?.take_commands();
    ctl(b)?.record_commands(false);
    let bits = |op: u16, fields: &[Field]| -> Vec<Option<u64>> {
        let Some(c) = with_opcode(&cmds, op).first().copied() else { return vec![None] };
        fields.iter().map(|f| f.get(&c.input).ok()).collect()
    };
    check_eq(
        "CREATE_CQ: cq_umem_valid, dbr_umem_valid",
        bits(opcode::CREATE_CQ, &[c::CQ_UMEM_VALID, c::DBR_UMEM_VALID]),
        vec![Some(1); 2],
    )?;
    check_eq(
        "CREATE_QP: wq_umem_valid, dbr_umem_valid",
        bits(opcode::CREATE_QP, &[f::WQ_UMEM_VALID, f::DBR_UMEM_VALID]),
        vec![Some(1); 2],
    )?;
    check_eq("MODIFY_CQ: cq_umem_valid", bits(MODIFY_CQ, &[c::CQ_UMEM_VALID]), vec![Some(1)])?;
    let mk = prm::new_input(79, opcode::CREATE_MKEY, 0, 0);
    expect_errno(
        "CREATE_MKEY shorter than its mkey context",
        b.devx_obj_create(r.ctx, &mk, 16).map(|o| o.handle),
        EINVAL,
    )?;
    raw_teardown(b, r, &[&qp, &cq])
}

fn nc_singleton(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let a = expect_ok("alloc_uar(NC)", b.devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC))?;
    let again = expect_ok("alloc_uar(NC) again", b.devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC))?;
    check_eq("the same NC page", again.page_id, a.page_id)?;
    expect_ok("free_uar of the NC page", b.devx_free_uar(&a))?;
    let after = expect_ok("alloc_uar(NC) after a free", b.devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC))?;
    check_eq("still the context's NC page", after.page_id, a.page_id)?;
    let bf = expect_ok("alloc_uar(BF)", b.devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_BF))?;
    check("a BF UAR is a page of its own", bf.page_id != a.page_id, "another page", bf.page_id)?;
    expect_ok("free_uar(BF)", b.devx_free_uar(&bf))?;
    expect_ok("ibv_close_device", b.close_device(ctx))?;
    let Some(dev) = env.vfio_device.as_deref() else { return Ok(()) };
    let v = expect_ok("ibv_open_device(VFIO)", b.open_ibv_device(dev))?;
    let x = expect_ok("VFIO alloc_uar(NC)", b.devx_alloc_uar(v, MLX5DV_UAR_ALLOC_TYPE_NC))?;
    let y = expect_ok("VFIO alloc_uar(NC) again", b.devx_alloc_uar(v, MLX5DV_UAR_ALLOC_TYPE_NC))?;
    check_eq("the driver's EQ page both times", y.page_id, x.page_id)?;
    expect_errno("VFIO alloc_uar(BF)", b.devx_alloc_uar(v, MLX5DV_UAR_ALLOC_TYPE_BF), EOPNOTSUPP)?;
    expect_ok("ibv_close_device", b.close_device(v))
}

fn umem_access(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let buf = expect_ok("a buffer", b.alloc_buf(4096))?;
    for (what, access) in [
        ("REMOTE_ATOMIC", A::LOCAL_WRITE | A::REMOTE_ATOMIC),
        ("MW_BIND", A::LOCAL_WRITE | A::MW_BIND),
        ("ON_DEMAND", A::LOCAL_WRITE | A::ON_DEMAND),
        ("REMOTE_WRITE without LOCAL_WRITE", A::REMOTE_WRITE),
    ] {
        expect_errno(&format!("umem_reg with {what}"), b.devx_umem_reg(ctx, buf.addr, 4096, access), EINVAL)?;
    }
    let u = expect_ok(
        "umem_reg(LOCAL_WRITE | REMOTE_READ)",
        b.devx_umem_reg(ctx, buf.addr, 4096, A::LOCAL_WRITE | A::REMOTE_READ),
    )?;
    expect_ok("umem_dereg", b.devx_umem_dereg(&u))?;
    expect_ok("ibv_close_device", b.close_device(ctx))?;
    let Some(dev) = env.vfio_device.as_deref() else { return Ok(()) };
    let v = expect_ok("ibv_open_device(VFIO)", b.open_ibv_device(dev))?;
    let r = b.devx_umem_reg(v, buf.addr, 4096, A::LOCAL_WRITE | A::REMOTE_ATOMIC);
    expect_errno("VFIO umem_reg with REMOTE_ATOMIC", r, EOPNOTSUPP)?;
    expect_ok("ibv_close_device", b.close_device(v))
}

fn hca_cap_pages(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let query = |op_mod: u16| prm::new_input(16, opcode::QUERY_HCA_CAP, 0, op_mod);
    let cur = expect_ok("general caps, current", b.devx_general_cmd(ctx, &query(1), 0x1010))?;
    expect_ok("general caps, maximum (op_mod bit 0 clear)", b.devx_general_cmd(ctx, &query(0), 0x1010))?;
    let short = expect_ok("general caps into 0x810 bytes", b.devx_general_cmd(ctx, &query(1), 0x810))?;
    check_eq("the short answer is the long one's start", &short[..], &cur[..0x810])?;
    for (what, cap_type) in [("NIC flow table", 0x7u16), ("device memory", 0xf)] {
        expect_ok(&format!("{what} caps"), b.devx_general_cmd(ctx, &query(cap_type << 1 | 1), 0x1010))?;
    }
    let port = expect_ok("ibv_query_port", b.query_port(ctx, 1))?;
    let eth = u64::from(port.link_layer == link_layer::ETHERNET);
    check_eq("port_type (1: Ethernet) as the port's link layer says", OUT_PORT_TYPE.get(&cur).ok(), Some(eth))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

/// PAOS: `local_port` 1, `admin_status`, `ase`; the register at byte 16 of ACCESS_REG.
fn paos_in(op_mod: u16, admin: u64, ase: u64) -> Vec<u8> {
    let mut input = cmd(
        ACCESS_REG,
        32,
        &[
            (Field::new("register_id", 0x50, 16), 0x5006),
            (Field::new("local_port", 0x88, 8), 1),
            (Field::new("admin_status", 0x94, 4), admin),
            (Field::new("ase", 0xa0, 1), ase),
        ],
    );
    let _ = prm::mbox_in::OP_MOD.set(&mut input, u64::from(op_mod));
    input
}

/// (admin_status, oper_status) as a PAOS read answers.
fn paos_read(b: &mut dyn Backend, ctx: ContextHandle) -> Check<(u64, u64)> {
    let out = expect_ok("read PAOS", b.devx_general_cmd(ctx, &paos_in(1, 0, 0), 32))?;
    let get = |bit: u32| Field::new("status", bit, 4).get(&out).unwrap_or(0);
    Ok((get(0x94), get(0x9c)))
}

/// The port state of a PortInfo SMP through MAD_IFC.
fn port_info_state(b: &mut dyn Backend, ctx: ContextHandle) -> Check<u8> {
    let mut input = cmd(MAD_IFC, 16 + 256, &[(Field::new("port", 0x58, 8), 1)]);
    input[16..20].copy_from_slice(&[1, 1, 1, 1]); // base version, LID-routed SMP, class 1, Get
    input[16 + 16..16 + 18].copy_from_slice(&0x15u16.to_be_bytes()); // PortInfo
    let out = expect_ok("MAD_IFC PortInfo", b.devx_general_cmd(ctx, &input, 16 + 256))?;
    Ok(out[16 + 64 + 32] & 0xf)
}

fn paos(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = vfio(b, env)?;
    let (uar, msi) = uar_and_vector(b, ctx)?;
    let eq = expect_ok(
        "create_eq for port changes",
        b.devx_create_eq(ctx, &eq_input(uar.page_id, msi.vector as u64, 1 << e::event::PORT_STATE_CHANGE), 16),
    )?;
    init_owner_bits(b, &eq)?;
    expect_ok("arm the EQ", b.devx_uar_write(&uar, uar_offset::EQ_ARM, &be32(eqn_of(&eq) << 24)))?;
    check_eq("admin and oper status at first: up", paos_read(b, ctx)?, (1, 1))?;
    expect_ok("PAOS: admin down", b.devx_general_cmd(ctx, &paos_in(0, 2, 1), 32))?;
    check_eq("the vector fired", b.devx_msi_vector_read(&msi).ok(), Some(1))?;
    let down = eqe_at(b, &eq, 0)?.ok_or_else(|| Verdict::fail("an EQE at ci 0", "software-owned", "hardware-owned"))?;
    check_eq(
        "PORT_STATE_CHANGE, DOWN",
        (down[e::eqe::TYPE], down[e::eqe::SUB_TYPE]),
        (e::event::PORT_STATE_CHANGE, 1),
    )?;
    check_eq("admin and oper status: down", paos_read(b, ctx)?, (2, 2))?;
    check_eq("PortInfo: DOWN", port_info_state(b, ctx)?, 1)?;
    expect_ok("PAOS: admin up without ase", b.devx_general_cmd(ctx, &paos_in(0, 1, 0), 32))?;
    check_eq("nothing changes without ase", paos_read(b, ctx)?, (2, 2))?;
    expect_ok("PAOS: admin up", b.devx_general_cmd(ctx, &paos_in(0, 1, 1), 32))?;
    let up = eqe_at(b, &eq, 1)?.ok_or_else(|| Verdict::fail("an EQE at ci 1", "software-owned", "hardware-owned"))?;
    check_eq("sub-type ACTIVE", up[e::eqe::SUB_TYPE], 4)?;
    check_eq("admin and oper status: up", paos_read(b, ctx)?, (1, 1))?;
    check_eq("PortInfo: ACTIVE", port_info_state(b, ctx)?, 4)?;
    expect_ok("destroy_eq", b.devx_destroy_eq(&eq))?;
    expect_ok("free_msi_vector", b.devx_free_msi_vector(&msi))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

/// A command the firmware must refuse with BAD_PARAM.
fn bad_param(b: &mut dyn Backend, ctx: ContextHandle, what: &str, input: &[u8]) -> Check {
    let r = b.devx_general_cmd(ctx, input, 16);
    let st = r.as_ref().err().and_then(|x| x.cmd_status()).map(|c| c.status);
    expect_errno(what, r, EREMOTEIO)?;
    check_eq(&format!("{what}: the status"), st, Some(status::BAD_PARAM_ERR))
}

fn wrapping_addresses(b: &mut dyn Backend, env: &Env) -> Check {
    use e::umem as u;
    let ctx = vfio(b, env)?;
    let top: u64 = 0xffff_ffff_ffff_f000;
    let mut um = cmd(opcode::CREATE_UMEM, u::IN_SIZE + 8, &[(u::NUM_OF_MTT, 2)]);
    um.resize(u::IN_SIZE + 16, 0);
    um[u::MTT_BYTE..u::MTT_BYTE + 8].copy_from_slice(&(top | 0b11).to_be_bytes());
    bad_param(b, ctx, "CREATE_UMEM of two pages from the last page", &um)?;
    let eqn = u64::from(expect_ok("query_eqn(0)", b.devx_query_eqn(ctx, 0))?);
    let c = q::create_cq::IN_SIZE;
    let mut cq = cmd(opcode::CREATE_CQ, c + 8, &[(q::create_cq::LOG_CQ_SIZE, 6), (q::create_cq::C_EQN, eqn)]);
    cq[c..].copy_from_slice(&top.to_be_bytes());
    bad_param(b, ctx, "CREATE_CQ whose ring passes 2^64", &cq)?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}
