//! On-demand paging behind the trait on devices whose profile turns ODP, or implicit ODP, off;
//! and ODP MRs of a closed context.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prelude::*;
use mlx5_dv::{AccessFlags as A, Sge, advise};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn errno<T>(r: mlx5_dv::Result<T>) -> Option<i32> {
    r.err().map(|e| e.errno())
}

fn sim_with(odp: &str) -> Result<Simulator, Box<dyn std::error::Error>> {
    let p = Profile::load(&format!("extends = \"cx6dx\"\n[odp]\n{odp}\n"), "odp-test")?;
    Ok(Simulator::new(p)?)
}

#[test]
fn without_odp_on_demand_and_advise_mr_are_eopnotsupp() -> TestResult {
    let mut sim = sim_with("general_caps = 0\nrc = 0\nud = 0")?;
    let odp = sim.caps().device.odp.ok_or("no odp caps")?;
    assert!(!odp.supported());
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let buf = sim.alloc_buf(4096)?;
    let lw = A::LOCAL_WRITE | A::ON_DEMAND;
    assert_eq!(errno(sim.reg_mr(pd, buf.addr, 4096, lw)), Some(EOPNOTSUPP));
    assert_eq!(errno(sim.reg_mr(pd, 0, u64::MAX, lw)), Some(EOPNOTSUPP), "implicit too");
    assert_eq!(errno(sim.reg_mr(pd, buf.addr, 4096, A::REMOTE_WRITE | A::ON_DEMAND)), Some(EINVAL), "EINVAL first");
    let mr = sim.reg_mr(pd, buf.addr, 4096, A::LOCAL_WRITE)?;
    let sge = [Sge { addr: buf.addr, length: 64, lkey: mr.lkey }];
    assert_eq!(errno(sim.advise_mr(pd, advise::PREFETCH, 0, &sge)), Some(EOPNOTSUPP));
    assert_eq!(errno(sim.advise_mr(pd, advise::PREFETCH, 0, &[])), Some(EINVAL), "the empty list comes first");
    Ok(())
}

#[test]
fn without_implicit_an_implicit_mr_is_einval_and_explicit_ones_work() -> TestResult {
    let mut sim = sim_with("general_caps = 1")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let lw = A::LOCAL_WRITE | A::ON_DEMAND;
    assert_eq!(errno(sim.reg_mr(pd, 0, u64::MAX, lw)), Some(EINVAL));
    let buf = sim.alloc_buf(4096)?;
    let mr = sim.reg_mr(pd, buf.addr, 4096, lw)?;
    let sge = [Sge { addr: buf.addr, length: 4096, lkey: mr.lkey }];
    sim.advise_mr(pd, advise::PREFETCH_WRITE, advise::FLAG_FLUSH, &sge)?;
    Ok(())
}

#[test]
fn closing_a_context_drops_its_odp_mrs_and_the_buffer_was_never_pinned() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let buf = sim.alloc_buf(4096)?;
    let mr = sim.reg_mr(pd, buf.addr, 4096, A::LOCAL_WRITE | A::ON_DEMAND)?;
    let implicit = sim.reg_mr(pd, 0, u64::MAX, A::LOCAL_WRITE | A::ON_DEMAND)?;
    assert_eq!((implicit.addr, implicit.length), (0, u64::MAX));
    let rereg = sim.rereg_mr(&mr, mlx5_dv::ReregFlags::CHANGE_ACCESS.bits(), None, 0, 0, A::LOCAL_WRITE);
    assert_eq!(errno(rereg), Some(EOPNOTSUPP), "rereg of an ODP MR is not simulated");
    sim.free_buf(&buf)?;
    sim.close_device(ctx)?;
    Ok(())
}
