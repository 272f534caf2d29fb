//! DEVX behind the trait: random raw mailboxes never panic and always answer with a status;
//! EQ overrun; completion-error and QP-error EQEs; port events on kernel contexts.

use mlx5_dv::errno::{EINVAL, EREMOTEIO};
use mlx5_dv::prelude::*;
use mlx5_dv::prm::{self, eq as e, opcode, status};
use mlx5_dv::{MLX5DV_UAR_ALLOC_TYPE_NC, port_state, uar_offset};
use mlx5_sim::Simulator;
use proptest::prelude::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const OPCODES: [u16; 22] = [
    0x100, 0x200, 0x201, 0x202, 0x301, 0x302, 0x303, 0x304, 0x400, 0x500, 0x600, 0x601, 0x800, 0x801, 0x802, 0x803,
    0x80d, 0xa00, 0xa01, 0xa02, 0xa03, 0xa08,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Valid opcodes with random fields and lengths, on a VFIO context (every command reaches
    /// the firmware) and a DEVX kernel context.
    #[test]
    fn random_mailboxes_answer_with_a_status(
        op in proptest::sample::select(&OPCODES[..]),
        body in proptest::collection::vec(any::<u8>(), 0..400),
        out_len in 0usize..5000,
        vfio in any::<bool>(),
    ) {
        let mut sim = Simulator::with_profile("cx6dx").map_err(|e| TestCaseError::fail(e.to_string()))?;
        let ctx = if vfio { sim.open_ibv_device("0000:08:00.0") } else { sim.open_device("mlx5_0", Some(&mlx5_dv::ContextAttr::devx())) };
        let ctx = ctx.map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut input = body;
        if input.len() >= 2 {
            input[..2].copy_from_slice(&op.to_be_bytes());
        }
        match sim.devx_general_cmd(ctx, &input, out_len) {
            Ok(out) => {
                prop_assert_eq!(out.len(), out_len);
                prop_assert_eq!(out[0], status::OK);
            }
            Err(err) if err.errno() == EREMOTEIO => {
                let cmd = err.cmd_status();
                prop_assert!(cmd.is_some_and(|c| c.status != status::OK), "EREMOTEIO carries the status: {err}");
            }
            Err(err) => prop_assert_eq!(err.errno(), EINVAL, "{}", err),
        }
        prop_assert!(sim.close_device(ctx).is_ok());
    }
}

fn eq_input(uar: u32, intr: u64, log: u64, events: u64, oi: bool) -> Vec<u8> {
    use e::create_eq as c;
    let mut input = prm::new_input(c::IN_SIZE, opcode::CREATE_EQ, 0, 0);
    for (f, v) in [(c::LOG_EQ_SIZE, log), (c::UAR_PAGE, u64::from(uar)), (c::INTR, intr), (c::OI, u64::from(oi))] {
        let _ = f.set(&mut input, v);
    }
    let _ = c::EVENT_BITMASK_0.set(&mut input, events);
    input
}

#[test]
fn a_full_eq_without_oi_stops_and_reports_write_failure() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_ibv_device("0000:08:00.0")?;
    let uar = sim.devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC)?;
    let msi = sim.devx_alloc_msi_vector(ctx)?;
    // 64 entries, a 4 KiB ring.
    let eq = sim.devx_create_eq(ctx, &eq_input(uar.page_id, msi.vector as u64, 6, 1 << 9, false), 16)?;
    let eqn = e::create_eq::OUT_EQ_NUMBER.get(&eq.out)? as u32;
    assert_eq!(eq.ring.len, 4096);
    for i in 0..65 {
        let state = if i % 2 == 0 { port_state::DOWN } else { port_state::ACTIVE };
        sim.sim_control().ok_or("control")?.set_port_state("0000:08:00.0", 1, state)?;
    }
    let mut q = prm::new_input(16, opcode::QUERY_EQ, 0, 0);
    e::destroy_eq::EQ_NUMBER.set(&mut q, u64::from(eqn))?;
    let out = sim.devx_general_cmd(ctx, &q, e::query_eq::OUT_SIZE)?;
    assert_eq!(e::create_eq::STATUS.get(&out)?, 0xa, "EQ_WRITE_FAILURE");
    assert_eq!(e::create_eq::PRODUCER_COUNTER.get(&out)?, 64, "the 65th event was not written");
    // The consumer catching up does not revive it.
    sim.devx_uar_write(&uar, uar_offset::EQ_UPDATE, &(eqn << 24 | 64).to_be_bytes())?;
    sim.sim_control().ok_or("control")?.set_port_state("0000:08:00.0", 1, port_state::DOWN)?;
    let out = sim.devx_general_cmd(ctx, &q, e::query_eq::OUT_SIZE)?;
    assert_eq!(e::create_eq::PRODUCER_COUNTER.get(&out)?, 64);
    Ok(())
}

#[test]
fn an_eq_with_oi_wraps_and_flips_the_owner_bit() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_ibv_device("0000:08:00.0")?;
    let uar = sim.devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC)?;
    let msi = sim.devx_alloc_msi_vector(ctx)?;
    let eq = sim.devx_create_eq(ctx, &eq_input(uar.page_id, msi.vector as u64, 6, 1 << 9, true), 16)?;
    for _ in 0..65 {
        sim.sim_control().ok_or("control")?.set_port_state("0000:08:00.0", 1, port_state::ACTIVE)?;
    }
    let first = sim.read_buf(&eq.ring, 0, 64)?;
    let second = sim.read_buf(&eq.ring, 64, 64)?;
    assert_eq!(first[e::eqe::OWNER], 1, "slot 0 rewritten by the 65th EQE, second pass");
    assert_eq!(second[e::eqe::OWNER], 0, "slot 1 still from the first pass");
    Ok(())
}

#[test]
fn port_changes_reach_kernel_contexts_and_queries() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    sim.sim_control().ok_or("control")?.set_port_state("mlx5_0", 1, port_state::DOWN)?;
    assert_eq!(sim.query_port(ctx, 1)?.state, port_state::DOWN);
    let ev = sim.get_async_event(ctx)?.ok_or("an event")?;
    assert_eq!(ev.event_type, mlx5_dv::event_type::PORT_ERR);
    sim.sim_control().ok_or("control")?.set_port_state("mlx5_0", 1, port_state::ACTIVE)?;
    assert_eq!(sim.get_async_event(ctx)?.map(|e| e.event_type), Some(mlx5_dv::event_type::PORT_ACTIVE));
    let bad = sim.sim_control().ok_or("control")?.set_port_state("mlx5_0", 2, port_state::DOWN);
    assert_eq!(bad.err().map(|e| e.errno()), Some(EINVAL));
    let bad = sim.sim_control().ok_or("control")?.set_port_state("mlx5_0", 1, 3);
    assert_eq!(bad.err().map(|e| e.errno()), Some(EINVAL));
    Ok(())
}

#[test]
fn closing_a_vfio_context_frees_its_eq_uar_and_vectors() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    for _ in 0..3 {
        let ctx = sim.open_ibv_device("0000:08:00.0")?;
        let uar = sim.devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC)?;
        let msi = sim.devx_alloc_msi_vector(ctx)?;
        assert_eq!(msi.vector, 1, "a reopened context starts from vector 1 again");
        sim.devx_create_eq(ctx, &eq_input(uar.page_id, 1, 8, 1 << 9, false), 16)?;
        sim.close_device(ctx)?;
    }
    Ok(())
}

#[test]
fn raw_cqs_bind_to_the_kernels_completion_eqs() -> TestResult {
    use mlx5_dv::prm::queues::create_cq as c;
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_device("mlx5_0", Some(&mlx5_dv::ContextAttr::devx()))?;
    let eqn = sim.devx_query_eqn(ctx, 0)?;
    assert_eq!(sim.devx_query_eqn(ctx, 0)?, eqn, "the same EQ every time");
    assert_ne!(sim.devx_query_eqn(ctx, 1)?, eqn, "a vector of its own");
    // On a kernel context the ring and the doorbell record are in a umem (the kernel sets the
    // umem bits whatever the input says).
    let ring = sim.alloc_buf(4096)?;
    let umem = sim.devx_umem_reg(ctx, ring.addr, 4096, mlx5_dv::AccessFlags::LOCAL_WRITE)?;
    let mut input = prm::new_input(c::IN_SIZE, opcode::CREATE_CQ, 0, 0);
    c::LOG_CQ_SIZE.set(&mut input, 6)?;
    c::C_EQN.set(&mut input, u64::from(eqn))?;
    c::CQ_UMEM_ID.set(&mut input, u64::from(umem.umem_id))?;
    c::DBR_UMEM_ID.set(&mut input, u64::from(umem.umem_id))?;
    c::DB_RECORD_ADDR.set(&mut input, 4000)?;
    let cq = sim.devx_obj_create(ctx, &input, 16)?;
    assert!(c::CQN.get(&cq.out)? > 0);
    c::C_EQN.set(&mut input, 200)?;
    let bad = sim.devx_obj_create(ctx, &input, 16).map(|o| o.handle);
    let err = bad.err().ok_or("a CQ on no EQ")?;
    assert_eq!((err.errno(), err.cmd_status().map(|s| s.status)), (EREMOTEIO, Some(status::BAD_PARAM_ERR)));
    // A ring that does not fit its umem.
    c::C_EQN.set(&mut input, u64::from(eqn))?;
    c::CQ_UMEM_OFFSET.set(&mut input, 64)?;
    let err = sim.devx_obj_create(ctx, &input, 16).map(|o| o.handle).err().ok_or("64 CQEs past a 4 KiB umem")?;
    assert_eq!(err.errno(), EREMOTEIO);
    sim.devx_obj_destroy(cq.handle)?;
    sim.devx_umem_dereg(&umem)?;
    sim.close_device(ctx)?;
    Ok(())
}

#[test]
fn raw_srqs_are_made_queried_armed_and_destroyed() -> TestResult {
    use mlx5_dv::prm::queues::srq as s;
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_device("mlx5_0", Some(&mlx5_dv::ContextAttr::devx()))?;
    let pd = sim.alloc_pd(ctx)?;
    let pdn = sim.devx_pd_number(pd)?;
    let ring = sim.alloc_buf(8192)?;
    // 16 WQEs of 32 bytes at the buffer's start, the doorbell record in its second page.
    let mut input = prm::new_input(s::SIZE, s::CREATE_SRQ, 0, 0);
    input.extend_from_slice(&ring.addr.to_be_bytes());
    for (f, v) in
        [(s::LOG_SRQ_SIZE, 4), (s::LOG_RQ_STRIDE, 1), (s::PD, u64::from(pdn)), (s::DBR_ADDR, ring.addr + 4096)]
    {
        f.set(&mut input, v)?;
    }
    let srq = sim.devx_obj_create(ctx, &input, s::SMALL)?;
    let srqn = s::SRQN.get(&srq.out)?;
    assert!(srqn > 0);
    let mut query = prm::new_input(s::SMALL, s::QUERY_SRQ, 0, 0);
    s::SRQN.set(&mut query, srqn)?;
    let out = sim.devx_obj_query(srq.handle, &query, s::SIZE)?;
    assert_eq!((s::LOG_SRQ_SIZE.get(&out)?, s::PD.get(&out)?, s::LWM.get(&out)?), (4, u64::from(pdn), 0));
    let mut arm = prm::new_input(s::SMALL, s::ARM_RQ, 0, s::ARM_RQ_OP_MOD_SRQ);
    s::SRQN.set(&mut arm, srqn)?;
    s::ARM_LWM.set(&mut arm, 3)?;
    sim.devx_obj_modify(srq.handle, &arm, 16)?;
    let out = sim.devx_obj_query(srq.handle, &query, s::SIZE)?;
    assert_eq!(s::LWM.get(&out)?, 3);
    // A limit at the SRQ's size is a bad parameter; a PD that does not exist, no such object.
    s::ARM_LWM.set(&mut arm, 16)?;
    assert_eq!(sim.devx_obj_modify(srq.handle, &arm, 16).err().map(|e| e.errno()), Some(EREMOTEIO));
    s::PD.set(&mut input, 0xfff)?;
    assert_eq!(sim.devx_obj_create(ctx, &input, s::SMALL).err().map(|e| e.errno()), Some(EREMOTEIO));
    sim.devx_obj_destroy(srq.handle)?;
    sim.close_device(ctx)?;
    Ok(())
}
