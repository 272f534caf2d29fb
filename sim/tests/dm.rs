//! Device memory behind the trait on a device without MEMIC, and a context's DMs at close.

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::prelude::*;
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn errno<T>(r: mlx5_dv::Result<T>) -> Option<i32> {
    r.err().map(|e| e.errno())
}

#[test]
fn without_memic_libmlx5_says_einval_and_the_kernel_eopnotsupp() -> TestResult {
    let p = Profile::load("extends = \"cx6dx\"\n[device]\nmax_dm_size = 0\n", "no-memic")?;
    let mut sim = Simulator::new(p)?;
    assert_eq!(sim.caps().device.max_dm_size, Some(0));
    let ctx = sim.open_ibv_device("mlx5_0")?;
    assert_eq!(sim.max_dm_size(ctx)?, 0);
    assert_eq!(errno(sim.alloc_dm(ctx, 64, 0)), Some(EINVAL), "past max_dm_size 0: libmlx5");
    assert_eq!(errno(sim.alloc_dm(ctx, 0, 0)), Some(EOPNOTSUPP), "0 bytes reach the kernel");
    Ok(())
}

#[test]
fn closing_a_context_frees_its_memic() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let max = sim.caps().device.max_dm_size.ok_or("no max_dm_size")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let dm = sim.alloc_dm(ctx, max, 0)?;
    let _mr = sim.reg_dm_mr(pd, &dm, 0, 64, mlx5_dv::AccessFlags::ZERO_BASED)?;
    let other = sim.open_ibv_device("mlx5_0")?;
    assert_eq!(errno(sim.alloc_dm(other, 64, 0)), Some(ENOMEM), "MEMIC is the device's, shared by contexts");
    sim.close_device(ctx)?;
    let again = sim.alloc_dm(other, max, 0)?;
    assert_eq!(sim.memcpy_from_dm(&again, 0, 8)?, vec![0; 8], "fresh device memory reads as zeros");
    sim.free_dm(&again)?;
    Ok(())
}
