//! DEVX raw commands, MSI-X vectors and EQs: items 65–71, and the VFIO EQ scenario of
//! rdma-core's `test_mlx5_vfio.py` (a port change arrives as an EQE and fires the vector).

use mlx5_dv::errno::{EAGAIN, EINVAL, ENOMEM, ENOSPC, EOPNOTSUPP, EREMOTEIO};
use mlx5_dv::prm::{self, eq as e, opcode, status};
use mlx5_dv::{Backend, ContextHandle, DevxEq, DevxUar, FaultRule, MLX5DV_UAR_ALLOC_TYPE_NC, port_state, uar_offset};

use super::ctl;
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "devx.kernel_context_has_no_vfio_ops",
        covers: &[65],
        needs: &[Need::Mlx5Device],
        run: kernel_no_vfio_ops,
    },
    Case {
        name: "devx.msi_vectors_first_free_then_enospc",
        covers: &[66],
        needs: &[Need::VfioDevice],
        run: msi_first_free,
    },
    Case { name: "devx.free_msi_vector_checks", covers: &[67], needs: &[Need::VfioDevice], run: msi_free_checks },
    Case { name: "devx.create_eq_checks", covers: &[68], needs: &[Need::VfioDevice], run: create_eq_checks },
    Case {
        name: "devx.create_eq_driver_fills_page_size_and_pas",
        covers: &[68],
        needs: &[Need::VfioDevice, Need::SimControl],
        run: create_eq_driver_fields,
    },
    Case {
        name: "devx.destroy_eq_maps_the_status",
        covers: &[69],
        needs: &[Need::VfioDevice, Need::SimControl],
        run: destroy_eq_status,
    },
    Case { name: "devx.query_eqn_vectors", covers: &[70], needs: &[Need::Mlx5Device, Need::Devx], run: query_eqn },
    Case {
        name: "devx.general_cmd_bad_status_is_eremoteio",
        covers: &[71],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: general_cmd_status,
    },
    Case {
        name: "devx.commands_the_kernel_refuses",
        covers: &[71],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: kernel_refuses,
    },
    Case {
        name: "devx.no_uid_only_whitelisted_commands",
        covers: &[71],
        needs: &[Need::Mlx5Device, Need::NoDevx],
        run: no_uid_whitelist,
    },
    Case {
        name: "devx.obj_create_pd_and_mkey",
        covers: &[71],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: obj_pd_and_mkey,
    },
    Case {
        name: "devx.completion_eqe_after_raw_qp_traffic",
        covers: &[68, 71],
        needs: &[Need::VfioDevice],
        run: completion_eqe,
    },
    Case {
        name: "devx.qp_error_eqe_after_a_bad_rkey",
        covers: &[68, 71],
        needs: &[Need::VfioDevice],
        run: qp_error_eqe,
    },
    Case {
        name: "devx.eq_delivers_port_state_change",
        covers: &[66, 68],
        needs: &[Need::VfioDevice, Need::SimControl],
        run: eq_port_change,
    },
];

/// `log_eq_size` of the EQs here: 256 entries, as the VFIO test's 0x80 + 0x80 spare.
const LOG_EQ: u8 = 8;

pub(super) fn vfio(b: &mut dyn Backend, env: &Env) -> Check<ContextHandle> {
    let dev = env.vfio_device.as_deref().ok_or_else(|| Verdict::skip("no VFIO device"))?;
    expect_ok("ibv_open_device(VFIO)", b.open_ibv_device(dev))
}

pub(super) fn devx_ctx(b: &mut dyn Backend, env: &Env) -> Check<ContextHandle> {
    expect_ok("mlx5dv_open_device(DEVX)", b.open_device(env.dev()?, Some(&mlx5_dv::ContextAttr::devx())))
}

/// A CREATE_EQ input (272 bytes, no PAS) for `events` on `uar`, signalling `intr`.
pub(super) fn eq_input(uar: u32, intr: u64, events: u64) -> Vec<u8> {
    use e::create_eq as c;
    let mut input = prm::new_input(c::IN_SIZE, opcode::CREATE_EQ, 0, 0);
    for (f, v) in [(c::LOG_EQ_SIZE, u64::from(LOG_EQ)), (c::UAR_PAGE, u64::from(uar)), (c::INTR, intr)] {
        let _ = f.set(&mut input, v);
    }
    let _ = c::EVENT_BITMASK_0.set(&mut input, events);
    input
}

pub(super) fn eqn_of(eq: &DevxEq) -> u32 {
    e::create_eq::OUT_EQ_NUMBER.get(&eq.out).unwrap_or(u64::MAX) as u32
}

pub(super) fn be32(v: u32) -> [u8; 4] {
    v.to_be_bytes()
}

/// Set every EQE's owner bit, as the caller of `mlx5dv_devx_create_eq` must.
pub(super) fn init_owner_bits(b: &mut dyn Backend, eq: &DevxEq) -> Check {
    let mut v = vec![0u8; eq.ring.len];
    v.iter_mut().skip(e::eqe::OWNER).step_by(e::eqe::SIZE).for_each(|x| *x = 1);
    expect_ok("initialise the EQ's owner bits", b.write_buf(&eq.ring, 0, &v))
}

fn kernel_no_vfio_ops(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(env.dev()?))?;
    expect_errno("mlx5dv_devx_alloc_msi_vector on a kernel context", b.devx_alloc_msi_vector(ctx), EOPNOTSUPP)?;
    let input = eq_input(1, 1, 1 << e::event::PORT_STATE_CHANGE);
    expect_errno("mlx5dv_devx_create_eq on a kernel context", b.devx_create_eq(ctx, &input, 16), EOPNOTSUPP)?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn msi_first_free(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = vfio(b, env)?;
    let mut got = Vec::new();
    let full = loop {
        match b.devx_alloc_msi_vector(ctx) {
            Ok(m) => got.push(m),
            Err(err) => break err,
        }
        if got.len() > 2048 {
            return Err(Verdict::fail("ENOSPC after at most 2048 vectors", "ENOSPC", format!("{} vectors", got.len())));
        }
    };
    check_eq("the error when every vector is taken", full.errno(), ENOSPC)?;
    let vectors: Vec<i32> = got.iter().map(|m| m.vector).collect();
    let expected: Vec<i32> = (1..=got.len() as i32).collect();
    check_eq("vectors from 1 up, vector 0 being the driver's", vectors, expected)?;
    let fds: std::collections::BTreeSet<i32> = got.iter().map(|m| m.fd).collect();
    check("each vector has its own eventfd", fds.len() == got.len() && !fds.contains(&-1), "distinct fds", &fds)?;
    if got.len() >= 2 {
        expect_ok("free vector 1", b.devx_free_msi_vector(&got[0]))?;
        let again = expect_ok("allocate again", b.devx_alloc_msi_vector(ctx))?;
        check_eq("the first free vector is taken again", again.vector, 1)?;
    }
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn msi_free_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = vfio(b, env)?;
    let m = expect_ok("mlx5dv_devx_alloc_msi_vector", b.devx_alloc_msi_vector(ctx))?;
    let wrong = [("vector 0", 0, m.fd), ("a vector out of range", 1 << 20, m.fd), ("another fd", m.vector, m.fd + 977)];
    for (what, vector, fd) in wrong {
        let forged = mlx5_dv::MsiVector { vector, fd, ..m };
        expect_errno(&format!("free_msi_vector with {what}"), b.devx_free_msi_vector(&forged), EINVAL)?;
    }
    expect_errno("read with no interrupt yet", b.devx_msi_vector_read(&m), EAGAIN)?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

/// A VFIO context's NC UAR and a fresh vector.
pub(super) fn uar_and_vector(b: &mut dyn Backend, ctx: ContextHandle) -> Check<(DevxUar, mlx5_dv::MsiVector)> {
    let uar = expect_ok("mlx5dv_devx_alloc_uar(NC)", b.devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC))?;
    let msi = expect_ok("mlx5dv_devx_alloc_msi_vector", b.devx_alloc_msi_vector(ctx))?;
    Ok((uar, msi))
}

fn create_eq_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = vfio(b, env)?;
    let (uar, msi) = uar_and_vector(b, ctx)?;
    let good = eq_input(uar.page_id, msi.vector as u64, 1 << e::event::PORT_STATE_CHANGE);
    expect_errno("create_eq with inlen 271", b.devx_create_eq(ctx, &good[..271], 16), EINVAL)?;
    let mut bad_op = good.clone();
    let _ = prm::mbox_in::OPCODE.set(&mut bad_op, u64::from(opcode::DESTROY_EQ));
    expect_errno("create_eq with opcode DESTROY_EQ", b.devx_create_eq(ctx, &bad_op, 16), EINVAL)?;
    let zero = eq_input(uar.page_id, 0, 1 << e::event::PORT_STATE_CHANGE);
    expect_errno("create_eq with intr 0 (the command EQ's vector)", b.devx_create_eq(ctx, &zero, 16), EINVAL)?;
    // rdma-core reads intr as 8 bits: 0x100 is vector 0 to it.
    let wide = eq_input(uar.page_id, 0x100, 1 << e::event::PORT_STATE_CHANGE);
    expect_errno("create_eq with intr 0x100 (8 bits: 0)", b.devx_create_eq(ctx, &wide, 16), EINVAL)?;
    // The largest log_eq_size: the driver's ring is no limit of its own; the firmware refuses.
    let mut huge = good.clone();
    let _ = e::create_eq::LOG_EQ_SIZE.set(&mut huge, 31);
    let r = b.devx_create_eq(ctx, &huge, 16);
    let st = r.as_ref().err().and_then(|x| x.cmd_status()).map(|c| c.status);
    expect_errno("create_eq with log_eq_size 31", r, EREMOTEIO)?;
    check_eq("its status", st, Some(status::BAD_PARAM_ERR))?;
    let eq = expect_ok("create_eq", b.devx_create_eq(ctx, &good, 16))?;
    check_eq("the ring: max(roundup_pow2(2^log_eq_size * 64), 4096) bytes", eq.ring.len, 64 << LOG_EQ)?;
    check("the ring is 4 KiB aligned", eq.ring.addr % 4096 == 0, "aligned", eq.ring.addr)?;
    let async_eqn = expect_ok("query_eqn(0)", b.devx_query_eqn(ctx, 0))?;
    check("the EQ has its own number", eqn_of(&eq) != async_eqn, "not the async EQ's", eqn_of(&eq))?;
    expect_ok("destroy_eq", b.devx_destroy_eq(&eq))?;
    expect_ok("free_msi_vector", b.devx_free_msi_vector(&msi))?;
    expect_ok("free_uar", b.devx_free_uar(&uar))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn create_eq_driver_fields(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = vfio(b, env)?;
    let (uar, msi) = uar_and_vector(b, ctx)?;
    let mut input = eq_input(uar.page_id, msi.vector as u64, 1 << e::event::PORT_STATE_CHANGE);
    // The caller's page size and PAS are replaced.
    let _ = e::create_eq::LOG_PAGE_SIZE.set(&mut input, 7);
    ctl(b)?.record_commands(true);
    let eq = expect_ok("create_eq", b.devx_create_eq(ctx, &input, 16))?;
    let cmds = ctl(b)?.take_commands();
    ctl(b)?.record_commands(false);
    let c = cmds
        .iter()
        .find(|c| c.opcode == opcode::CREATE_EQ)
        .ok_or_else(|| Verdict::fail("the CREATE_EQ the driver ran", "one", "none"))?;
    check_eq("the command's length: inlen + one PAS entry", c.input.len(), e::create_eq::IN_SIZE + 8)?;
    let pas = u64::from_be_bytes(c.input[272..280].try_into().unwrap_or_default());
    check_eq("pas[0]: the ring the driver allocated", pas, eq.ring.addr)?;
    let lps = e::create_eq::LOG_PAGE_SIZE.get(&c.input).unwrap_or(99);
    check_eq("log_page_size = ilog2(size) - 12: one page holds the ring", lps, 2)?;
    ctl(b)?
        .add_fault(FaultRule::CommandStatus {
            opcode: opcode::CREATE_EQ,
            status: status::BAD_PARAM_ERR,
            syndrome: 0x1234,
            skip: 0,
            times: 1,
        })
        .map_err(|x| Verdict::fail("a CREATE_EQ fault", "installed", x.to_string()))?;
    let r = b.devx_create_eq(ctx, &input, 16);
    let cmd = r.as_ref().err().and_then(|x| x.cmd_status());
    expect_errno("create_eq the device refuses", r, EREMOTEIO)?;
    check_eq(
        "out.status and out.syndrome",
        cmd.map(|c| (c.status, c.syndrome)),
        Some((status::BAD_PARAM_ERR, 0x1234)),
    )?;
    expect_ok("destroy_eq", b.devx_destroy_eq(&eq))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn destroy_eq_status(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = vfio(b, env)?;
    let (uar, msi) = uar_and_vector(b, ctx)?;
    let input = eq_input(uar.page_id, msi.vector as u64, 1 << e::event::PORT_STATE_CHANGE);
    let eq = expect_ok("create_eq", b.devx_create_eq(ctx, &input, 16))?;
    let rule = FaultRule::CommandStatus {
        opcode: opcode::DESTROY_EQ,
        status: status::LIM_ERR,
        syndrome: 7,
        skip: 0,
        times: 1,
    };
    ctl(b)?.add_fault(rule).map_err(|x| Verdict::fail("a DESTROY_EQ fault", "installed", x.to_string()))?;
    expect_errno("destroy_eq refused with LIM_ERR: the mapped errno, not EREMOTEIO", b.devx_destroy_eq(&eq), ENOMEM)?;
    expect_ok("destroy_eq again", b.devx_destroy_eq(&eq))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn query_eqn(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    expect_ok("query_eqn(0) on a kernel context", b.devx_query_eqn(ctx, 0))?;
    expect_errno("query_eqn of a vector beyond num_comp_vectors", b.devx_query_eqn(ctx, 1 << 20), EINVAL)?;
    expect_ok("ibv_close_device", b.close_device(ctx))?;
    let Some(dev) = env.vfio_device.as_deref() else { return Ok(()) };
    let v = expect_ok("ibv_open_device(VFIO)", b.open_ibv_device(dev))?;
    expect_ok("query_eqn(0) on VFIO: the async EQ", b.devx_query_eqn(v, 0))?;
    expect_errno("query_eqn(1) on VFIO", b.devx_query_eqn(v, 1), EINVAL)?;
    expect_ok("ibv_close_device", b.close_device(v))
}

fn general_cmd_status(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let good = prm::new_input(16, opcode::QUERY_HCA_CAP, 0, prm::query_hca_cap::OP_MOD_GENERAL_CUR);
    let out = expect_ok("QUERY_HCA_CAP", b.devx_general_cmd(ctx, &good, prm::query_hca_cap::OUT_SIZE))?;
    check_eq("out.status of a good command", out.first().copied(), Some(status::OK))?;
    // op_mod 0x7e: a capability type no device has.
    let bad = prm::new_input(16, opcode::QUERY_HCA_CAP, 0, 0x7e << 1 | 1);
    let r = b.devx_general_cmd(ctx, &bad, prm::query_hca_cap::OUT_SIZE);
    let cmd = r.as_ref().err().and_then(|x| x.cmd_status());
    expect_errno("QUERY_HCA_CAP of an unknown capability type", r, EREMOTEIO)?;
    check("out.status is valid: not OK", cmd.is_some_and(|c| c.status != status::OK), "a bad status", cmd)?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn kernel_refuses(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let pd = prm::new_input(16, opcode::ALLOC_PD, 0, 0);
    expect_errno("general_cmd with a create command", b.devx_general_cmd(ctx, &pd, 16), EINVAL)?;
    let q = prm::new_input(16, opcode::QUERY_HCA_CAP, 0, 1);
    expect_errno("obj_create with a query command", b.devx_obj_create(ctx, &q, 16).map(|o| o.handle), EINVAL)?;
    expect_errno("general_cmd with a 4-byte input", b.devx_general_cmd(ctx, &q[..4], 16), EINVAL)?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn no_uid_whitelist(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = expect_ok("ibv_open_device without DEVX", b.open_ibv_device(env.dev()?))?;
    let pd = prm::new_input(16, opcode::ALLOC_PD, 0, 0);
    expect_errno("ALLOC_PD without a DEVX uid", b.devx_general_cmd(ctx, &pd, 16), EINVAL)?;
    // The whitelist: QUERY_HCA_CAP, QUERY_HCA_VPORT_CONTEXT and QUERY_ESW_VPORT_CONTEXT run
    // under the device's whitelist uid; what the firmware then answers is its business.
    for (what, op) in [("QUERY_HCA_VPORT_CONTEXT", 0x762), ("QUERY_ESW_VPORT_CONTEXT", 0x752)] {
        match b.devx_general_cmd(ctx, &prm::new_input(16, op, 0, 0), 16 + 512) {
            Ok(_) => {}
            Err(e) if e.errno() == EREMOTEIO => {}
            Err(e) => return Err(Verdict::fail(format!("{what} without a DEVX uid"), "the firmware's answer", e)),
        }
    }
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn obj_pd_and_mkey(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let pd =
        expect_ok("obj_create(ALLOC_PD)", b.devx_obj_create(ctx, &prm::new_input(16, opcode::ALLOC_PD, 0, 0), 16))?;
    let pdn = prm::pd::PD.get(&pd.out).unwrap_or(0);
    let mut mk = prm::new_input(prm::create_mkey::IN_SIZE, opcode::CREATE_MKEY, 0, 0);
    let at = (prm::create_mkey::MKC_BIT / 8) as usize;
    let _ = prm::mkc::PD.set(&mut mk[at..at + prm::mkc::SIZE], pdn);
    let _ = prm::mkc::ACCESS_MODE_1_0.set(&mut mk[at..at + prm::mkc::SIZE], prm::mkc::ACCESS_MODE_KLMS);
    let _ = prm::mkc::FREE.set(&mut mk[at..at + prm::mkc::SIZE], 1);
    let mkey = expect_ok("obj_create(CREATE_MKEY) on the raw PD", b.devx_obj_create(ctx, &mk, 16))?;
    let index = prm::create_mkey::OUT_MKEY_INDEX.get(&mkey.out).unwrap_or(0);
    check("the mkey has an index", index > 0, "non-zero", index)?;
    expect_errno(
        "query with another object's command",
        b.devx_obj_query(mkey.handle, &prm::new_input(16, opcode::QUERY_HCA_CAP, 0, 1), 16),
        EINVAL,
    )?;
    expect_ok("destroy the mkey", b.devx_obj_destroy(mkey.handle))?;
    expect_ok("destroy the PD", b.devx_obj_destroy(pd.handle))?;
    expect_errno("destroy it twice", b.devx_obj_destroy(pd.handle), EINVAL)?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

/// The EQE at consumer index `ci`, if software owns it.
pub(super) fn eqe_at(b: &mut dyn Backend, eq: &DevxEq, ci: u32) -> Check<Option<Vec<u8>>> {
    let nent = 1u32 << LOG_EQ;
    let at = (ci & (nent - 1)) as usize * e::eqe::SIZE;
    let bytes = expect_ok("read the EQE", b.read_buf(&eq.ring, at, e::eqe::SIZE))?;
    let sw_owned = (bytes[e::eqe::OWNER] & 1 == 1) == (ci & nent != 0);
    Ok(sw_owned.then_some(bytes))
}

fn eq_port_change(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = vfio(b, env)?;
    let dev = env.vfio_device.clone().unwrap_or_default();
    let (uar, msi) = uar_and_vector(b, ctx)?;
    let input = eq_input(uar.page_id, msi.vector as u64, 1 << e::event::PORT_STATE_CHANGE);
    let eq = expect_ok("create_eq for port state changes", b.devx_create_eq(ctx, &input, 16))?;
    init_owner_bits(b, &eq)?;
    let eqn = eqn_of(&eq);
    expect_ok("arm the EQ (UAR + 0x40)", b.devx_uar_write(&uar, uar_offset::EQ_ARM, &be32(eqn << 24)))?;
    check_eq("no EQE before an event", eqe_at(b, &eq, 0)?, None)?;
    expect_ok("port down", ctl(b)?.set_port_state(&dev, 1, port_state::DOWN))?;
    check_eq("the eventfd fired once", b.devx_msi_vector_read(&msi).ok(), Some(1))?;
    let first =
        eqe_at(b, &eq, 0)?.ok_or_else(|| Verdict::fail("an EQE at ci 0", "software-owned", "hardware-owned"))?;
    check_eq("type and sub-type", (first[e::eqe::TYPE], first[e::eqe::SUB_TYPE]), (e::event::PORT_STATE_CHANGE, 1))?;
    check_eq("the port, << 4", first[e::eqe::PORT], 1 << 4)?;
    check_eq("owner bit of the first pass", first[e::eqe::OWNER] & 1, 0)?;
    // Not re-armed: the next event is written but does not interrupt.
    expect_ok("port up", ctl(b)?.set_port_state(&dev, 1, port_state::ACTIVE))?;
    expect_errno("no interrupt while not armed", b.devx_msi_vector_read(&msi), EAGAIN)?;
    let second =
        eqe_at(b, &eq, 1)?.ok_or_else(|| Verdict::fail("an EQE at ci 1", "software-owned", "hardware-owned"))?;
    check_eq("sub-type ACTIVE", second[e::eqe::SUB_TYPE], 4)?;
    // Arming with EQEs past the consumer index fires at once; consuming them and arming does not.
    expect_ok("update ci to 2 and arm", b.devx_uar_write(&uar, uar_offset::EQ_ARM, &be32(eqn << 24 | 2)))?;
    expect_errno("nothing pending, no interrupt", b.devx_msi_vector_read(&msi), EAGAIN)?;
    expect_ok("destroy_eq", b.devx_destroy_eq(&eq))?;
    expect_ok("free_msi_vector", b.devx_free_msi_vector(&msi))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

/// Where the pieces of [`completion_eqe`]'s buffer go.
mod lay {
    pub const CQ: u64 = 0; // 64 CQEs
    pub const DBR: u64 = 0x1000; // CQ +0, QP A +0x40, QP B +0x80
    pub const SQ_A: u64 = 0x2000; // 64 basic blocks each
    pub const SQ_B: u64 = 0x3000;
    pub const SRC: u64 = 0x4000;
    pub const DST: u64 = 0x5000;
    pub const LEN: usize = 0x6000;
}

/// Set `fields` in a fresh input of `len` bytes with `opcode`.
pub(super) fn cmd(opcode: u16, len: usize, fields: &[(prm::Field, u64)]) -> Vec<u8> {
    let mut input = prm::new_input(len, opcode, 0, 0);
    for (f, v) in fields {
        let _ = f.set(&mut input, *v);
    }
    input
}

/// CREATE_QP of an RC QP of 64 send blocks and no receive queue, its send queue at `sq` and
/// its doorbell record at `dbr` of `umem`, the umem bits as `valid` says.
pub(super) fn raw_qp_input(pdn: u32, uar: u32, cqn: u32, umem: u32, (sq, dbr): (u64, u64), valid: u64) -> Vec<u8> {
    use prm::queues::qp as f;
    cmd(
        opcode::CREATE_QP,
        f::SIZE,
        &[
            (f::PD, u64::from(pdn)),
            (f::LOG_SQ_SIZE, 6),
            (f::RQ_TYPE, 3),
            (f::UAR_PAGE, u64::from(uar)),
            (f::CQN_SND, u64::from(cqn)),
            (f::CQN_RCV, u64::from(cqn)),
            (f::WQ_UMEM_VALID, valid),
            (f::WQ_UMEM_ID, u64::from(umem)),
            (f::WQ_UMEM_OFFSET, sq),
            (f::DBR_UMEM_VALID, valid),
            (f::DBR_UMEM_ID, u64::from(umem)),
            (f::DBR_ADDR, dbr),
        ],
    )
}

/// A raw RC QP of 64 send blocks and no receive queue, in `umem` at `sq`.
fn raw_qp(b: &mut dyn Backend, ctx: ContextHandle, s: &RawSetup, sq: u64, dbr: u64) -> Check<(mlx5_dv::DevxObj, u32)> {
    use prm::queues::qp as f;
    let input = raw_qp_input(s.pdn, s.uar.page_id, s.cqn, s.umem, (sq, dbr), 1);
    let qp = expect_ok("obj_create(CREATE_QP)", b.devx_obj_create(ctx, &input, f::SMALL))?;
    let qpn = f::QPN.get(&qp.out).unwrap_or(0) as u32;
    Ok((qp, qpn))
}

struct RawSetup {
    uar: DevxUar,
    pdn: u32,
    umem: u32,
    cqn: u32,
}

/// RST → INIT → RTR → RTS towards `remote` at `gid`, by raw commands.
fn raw_connect(b: &mut dyn Backend, qp: &mlx5_dv::DevxObj, qpn: u32, remote: u32, gid: &[u8]) -> Check {
    use prm::queues::qp as f;
    let init =
        cmd(opcode::RST2INIT_QP, f::SIZE, &[(f::QPN, u64::from(qpn)), (f::RWE, 1), (f::RRE, 1), (f::VHCA_PORT_NUM, 1)]);
    expect_ok("RST2INIT_QP", b.devx_obj_modify(qp.handle, &init, f::SMALL))?;
    let mut rtr = cmd(
        opcode::INIT2RTR_QP,
        f::SIZE,
        &[
            (f::QPN, u64::from(qpn)),
            (f::REMOTE_QPN, u64::from(remote)),
            (f::GRH, 1),
            (f::MTU, 3),
            (f::HOP_LIMIT, 64),
            (f::VHCA_PORT_NUM, 1),
        ],
    );
    rtr[f::RGID_BYTE..f::RGID_BYTE + 16].copy_from_slice(gid);
    expect_ok("INIT2RTR_QP", b.devx_obj_modify(qp.handle, &rtr, f::SMALL))?;
    let rts = cmd(opcode::RTR2RTS_QP, f::SIZE, &[(f::QPN, u64::from(qpn))]);
    expect_ok("RTR2RTS_QP", b.devx_obj_modify(qp.handle, &rts, f::SMALL))?;
    let query = cmd(opcode::QUERY_QP, f::SMALL, &[(f::QPN, u64::from(qpn))]);
    let out = expect_ok("QUERY_QP", b.devx_obj_query(qp.handle, &query, f::SIZE))?;
    check_eq("qpc.state after RTR2RTS", f::STATE.get(&out).ok(), Some(u64::from(prm::queues::qp_state::RTS)))?;
    let again = cmd(opcode::RTR2RTS_QP, f::SIZE, &[(f::QPN, u64::from(qpn))]);
    let r = b.devx_obj_modify(qp.handle, &again, f::SMALL);
    let st = r.as_ref().err().and_then(|e| e.cmd_status()).map(|c| c.status);
    expect_errno("RTR2RTS_QP from RTS", r, EREMOTEIO)?;
    check_eq("its status", st, Some(status::BAD_QP_STATE_ERR))
}

/// Two raw RC QPs of a VFIO context connected to each other, their CQ bound to an EQ that
/// asks for `events`, an MR over the buffer; `None` (a skip) on an InfiniBand port.
pub(super) struct RawPair {
    pub(super) ctx: ContextHandle,
    pub(super) uar: DevxUar,
    msi: mlx5_dv::MsiVector,
    pub(super) eq: DevxEq,
    pub(super) buf: mlx5_dv::Buf,
    pub(super) umem: mlx5_dv::DevxUmem,
    cq: mlx5_dv::DevxObj,
    cqn: u32,
    pub(super) qps: [(mlx5_dv::DevxObj, u32); 2],
    pub(super) mr: mlx5_dv::Mr,
    /// Bytes of a CQE: 64, or 128 with `cqc.cqe_sz` 1 (then 32 of them fill the CQ's page).
    pub(super) cqe_size: usize,
}

fn raw_pair(b: &mut dyn Backend, env: &Env, events: u64) -> Check<RawPair> {
    raw_pair_cq(b, env, events, 64)
}

/// [`raw_pair`] with a CQ of `cqe_size`-byte entries.
pub(super) fn raw_pair_cq(b: &mut dyn Backend, env: &Env, events: u64, cqe_size: usize) -> Check<RawPair> {
    use mlx5_dv::prm::queues::create_cq as c;
    let ctx = vfio(b, env)?;
    let (uar, msi) = uar_and_vector(b, ctx)?;
    let eq = expect_ok("create_eq", b.devx_create_eq(ctx, &eq_input(uar.page_id, msi.vector as u64, events), 16))?;
    init_owner_bits(b, &eq)?;
    expect_ok("arm the EQ", b.devx_uar_write(&uar, uar_offset::EQ_ARM, &be32(eqn_of(&eq) << 24)))?;
    let roce = cmd(opcode::QUERY_ROCE_ADDRESS, 16, &[(prm::Field::new("vhca_port_num", 0x5c, 4), 1)]);
    let gid = expect_ok("QUERY_ROCE_ADDRESS 0", b.devx_general_cmd(ctx, &roce, 48))?[16..32].to_vec();
    if gid.iter().all(|x| *x == 0) {
        return Err(Verdict::skip("the port has no RoCE GID (InfiniBand): a LID path is not set up here"));
    }
    let pd = expect_ok("ibv_alloc_pd", b.alloc_pd(ctx))?;
    let pdn = expect_ok("mlx5dv_init_obj(PD)", b.devx_pd_number(pd))?;
    let buf = expect_ok("a buffer", b.alloc_buf(lay::LEN))?;
    let rw = mlx5_dv::AccessFlags::LOCAL_WRITE | mlx5_dv::AccessFlags::REMOTE_WRITE | mlx5_dv::AccessFlags::REMOTE_READ;
    let umem = expect_ok("umem_reg", b.devx_umem_reg(ctx, buf.addr, lay::LEN as u64, rw))?;
    // Every CQE INVALID (opcode 0xf) with owner bit 0, as libmlx5 leaves a new CQ; the
    // ownership byte is an entry's last.
    let mut cq_ring = vec![0u8; 64 * 64];
    cq_ring.iter_mut().skip(cqe_size - 1).step_by(cqe_size).for_each(|x| *x = 0xf0);
    let (log_size, cqe_sz) = if cqe_size == 128 { (5, 1) } else { (6, 0) };
    expect_ok("mark the CQEs invalid", b.write_buf(&buf, lay::CQ as usize, &cq_ring))?;
    let cq_in = cmd(
        opcode::CREATE_CQ,
        c::IN_SIZE,
        &[
            (c::LOG_CQ_SIZE, log_size),
            (c::CQE_SZ, cqe_sz),
            (c::UAR_PAGE, u64::from(uar.page_id)),
            (c::C_EQN, u64::from(eqn_of(&eq))),
            (c::CQ_UMEM_VALID, 1),
            (c::CQ_UMEM_ID, u64::from(umem.umem_id)),
            (c::CQ_UMEM_OFFSET, lay::CQ),
            (c::DBR_UMEM_VALID, 1),
            (c::DBR_UMEM_ID, u64::from(umem.umem_id)),
            (c::DB_RECORD_ADDR, lay::DBR),
        ],
    );
    let cq = expect_ok("obj_create(CREATE_CQ) bound to the EQ", b.devx_obj_create(ctx, &cq_in, c::SIZE))?;
    let cqn = c::CQN.get(&cq.out).unwrap_or(0) as u32;
    let s = RawSetup { uar, pdn, umem: umem.umem_id, cqn };
    let (qa, a) = raw_qp(b, ctx, &s, lay::SQ_A, lay::DBR + 0x40)?;
    let (qb, bn) = raw_qp(b, ctx, &s, lay::SQ_B, lay::DBR + 0x80)?;
    raw_connect(b, &qa, a, bn, &gid)?;
    raw_connect(b, &qb, bn, a, &gid)?;
    let mr = expect_ok("ibv_reg_mr", b.reg_mr(pd, buf.addr, lay::LEN as u64, rw))?;
    Ok(RawPair { ctx, uar, msi, eq, buf, umem, cq, cqn, qps: [(qa, a), (qb, bn)], mr, cqe_size })
}

/// A signaled 64-byte RDMA WRITE from QP A to the destination, through `rkey`, written into
/// the send queue and rung at UAR + 0x800; the bytes written.
pub(super) fn raw_write(b: &mut dyn Backend, p: &RawPair, rkey: u32) -> Check<Vec<u8>> {
    use mlx5_dv::prm::wqe::compose::{Payload, SendWqe, WqeBody};
    use mlx5_dv::prm::wqe::{CtrlSeg, DataSeg, RaddrSeg, ctrl};
    let data: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(7) ^ 0x5a).collect();
    expect_ok("the source bytes", b.write_buf(&p.buf, lay::SRC as usize, &data))?;
    let wqe = SendWqe {
        ctrl: CtrlSeg {
            opcode: mlx5_dv::prm::wqe::opcode::RDMA_WRITE,
            qpn: p.qps[0].1,
            ce: ctrl::CE_CQ_UPDATE,
            ..Default::default()
        },
        body: WqeBody::Rdma {
            raddr: RaddrSeg { raddr: p.buf.addr + lay::DST, rkey },
            payload: Payload::Gather(vec![DataSeg { byte_count: 64, lkey: p.mr.lkey, addr: p.buf.addr + lay::SRC }]),
        },
    };
    let bytes = wqe.encode().map_err(|e| Verdict::fail("encode the WQE", "bytes", e))?;
    expect_ok("the WQE into QP A's send queue", b.write_buf(&p.buf, lay::SQ_A as usize, &bytes))?;
    expect_ok("the send doorbell record", b.write_buf(&p.buf, (lay::DBR + 0x44) as usize, &be32(1)))?;
    expect_ok("ring the send doorbell (UAR + 0x800)", b.devx_uar_write(&p.uar, uar_offset::BF, &bytes[..8]))?;
    Ok(data)
}

pub(super) fn raw_teardown(b: &mut dyn Backend, p: RawPair) -> Check {
    for (o, _) in &p.qps {
        expect_ok("destroy a QP", b.devx_obj_destroy(o.handle))?;
    }
    expect_ok("destroy the CQ", b.devx_obj_destroy(p.cq.handle))?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&p.mr))?;
    expect_ok("umem_dereg", b.devx_umem_dereg(&p.umem))?;
    expect_ok("destroy_eq", b.devx_destroy_eq(&p.eq))?;
    expect_ok("free_msi_vector", b.devx_free_msi_vector(&p.msi))?;
    expect_ok("ibv_close_device", b.close_device(p.ctx))
}

/// The first entry of the raw pair's CQ (`cqe_size` bytes) once the device wrote it (its
/// opcode no longer INVALID), or a failure at the harness's deadline.
pub(super) fn wait_cqe(b: &mut dyn Backend, p: &RawPair) -> Check<Vec<u8>> {
    let deadline = crate::harness::deadline::wait_until();
    loop {
        let cqe = expect_ok("read the CQE", b.read_buf(&p.buf, lay::CQ as usize, p.cqe_size))?;
        if cqe.last().is_some_and(|op_own| op_own >> 4 != 0xf) {
            return Ok(cqe);
        }
        if std::time::Instant::now() >= deadline {
            return Err(Verdict::fail("a CQE", "written", "still INVALID at the deadline"));
        }
        std::thread::yield_now();
    }
}

/// The EQE at `ci` once software owns it, or a failure at the harness's deadline.
fn wait_eqe(b: &mut dyn Backend, eq: &DevxEq, ci: u32) -> Check<Vec<u8>> {
    let deadline = crate::harness::deadline::wait_until();
    loop {
        if let Some(e) = eqe_at(b, eq, ci)? {
            return Ok(e);
        }
        if std::time::Instant::now() >= deadline {
            return Err(Verdict::fail(format!("an EQE at ci {ci}"), "software-owned", "hardware-owned"));
        }
        std::thread::yield_now();
    }
}

fn be24_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) & 0xff_ffff
}

fn completion_eqe(b: &mut dyn Backend, env: &Env) -> Check {
    let p = raw_pair(b, env, 0)?;
    // Arm the CQ: sn 0, cmd NEXT, ci 0; then the CQN.
    let arm = [be32(0), be32(p.cqn)].concat();
    expect_ok("arm the CQ (UAR + 0x20)", b.devx_uar_write(&p.uar, uar_offset::CQ_DOORBELL, &arm))?;
    let data = raw_write(b, &p, p.mr.rkey)?;
    // A device works on its own time: wait for the CQE, as a program polls.
    let cqe = wait_cqe(b, &p)?;
    check_eq("the bytes arrived", expect_ok("read", b.read_buf(&p.buf, lay::DST as usize, 64))?, data)?;
    check_eq("a requester CQE (opcode 0), owner bit of pass 0", cqe[63], 0)?;
    let eqe = wait_eqe(b, &p.eq, 0)?;
    check_eq("the vector fired", b.devx_msi_vector_read(&p.msi).ok(), Some(1))?;
    check_eq("a completion EQE", eqe[e::eqe::TYPE], e::event::COMP)?;
    check_eq("its CQN (data byte 24)", be24_at(&eqe, e::eqe::COMP_CQN), p.cqn)?;
    check_eq("one EQE: the CQ is disarmed after it", eqe_at(b, &p.eq, 1)?, None)?;
    raw_teardown(b, p)
}

fn qp_error_eqe(b: &mut dyn Backend, env: &Env) -> Check {
    let p = raw_pair(b, env, 1 << e::event::WQ_ACCESS_ERROR)?;
    raw_write(b, &p, p.mr.rkey ^ 0xff)?;
    let cqe = wait_cqe(b, &p)?;
    check_eq("a requester error CQE (opcode 0xd)", cqe[63] >> 4, 0xd)?;
    let eqe = wait_eqe(b, &p.eq, 0)?;
    check_eq("the vector fired", b.devx_msi_vector_read(&p.msi).ok(), Some(1))?;
    check_eq("a WQ access error EQE", eqe[e::eqe::TYPE], e::event::WQ_ACCESS_ERROR)?;
    check_eq("the responder's QPN (data byte 24)", be24_at(&eqe, e::eqe::QPN), p.qps[1].1)?;
    check_eq("no completion EQE: the CQ was not armed", eqe_at(b, &p.eq, 1)?, None)?;
    raw_teardown(b, p)
}
