//! dma-buf memory behind the trait: the export's lifetime, the kernel's fd and range checks,
//! contexts without dma-buf MRs, and the data-direct path.

use mlx5_dv::errno::{EBADF, EBUSY, EINVAL, ENODEV, ENOSPC, EOPNOTSUPP};
use mlx5_dv::prelude::*;
use mlx5_dv::{AccessFlags as A, MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT as DATA_DIRECT};
use mlx5_sim::Simulator;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn errno<T>(r: mlx5_dv::Result<T>) -> Option<i32> {
    r.err().map(|e| e.errno())
}

#[test]
fn the_export_lives_until_its_importers_are_gone() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let d = sim.alloc_dmabuf(100)?;
    assert_eq!(d.buf.len, 4096, "a dma-buf is whole pages");
    assert_eq!(errno(sim.free_buf(&d.buf)), Some(EBUSY), "the export holds its memory");
    let mr = sim.reg_dmabuf_mr(pd, 0, 4096, 0x10_0000, d.fd, A::LOCAL_WRITE)?;
    assert_eq!(errno(sim.free_dmabuf(&d)), Some(EBUSY));
    sim.dereg_mr(&mr)?;
    sim.free_dmabuf(&d)?;
    assert_eq!(errno(sim.free_dmabuf(&d)), Some(EBADF));
    assert_eq!(errno(sim.reg_dmabuf_mr(pd, 0, 4096, 0, d.fd, A::LOCAL_WRITE)), Some(EBADF));
    Ok(())
}

#[test]
fn the_kernel_checks_the_range_and_the_access() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let d = sim.alloc_dmabuf(8192)?;
    assert_eq!(errno(sim.reg_dmabuf_mr(pd, 4096, 4097, 0, d.fd, A::LOCAL_WRITE)), Some(EINVAL), "past the end");
    assert_eq!(errno(sim.reg_dmabuf_mr(pd, 0, 0, 0, d.fd, A::LOCAL_WRITE)), Some(EINVAL), "empty");
    assert_eq!(errno(sim.reg_dmabuf_mr(pd, u64::MAX, 2, u64::MAX, d.fd, A::LOCAL_WRITE)), Some(EINVAL), "wraps");
    assert_eq!(errno(sim.reg_dmabuf_mr(pd, 0, 64, 0, d.fd, A::REMOTE_WRITE)), Some(EINVAL), "no LOCAL_WRITE");
    // Page-offset mismatch comes before the access checks, as in uverbs.
    assert_eq!(errno(sim.dv_reg_dmabuf_mr(pd, 1, 64, 2, d.fd, A::LOCAL_WRITE, DATA_DIRECT)), Some(EINVAL));
    // A data-direct MR needs a page-aligned iova (EOPNOTSUPP), then the device (EINVAL).
    assert_eq!(errno(sim.dv_reg_dmabuf_mr(pd, 0x10, 64, 0x10, d.fd, A::LOCAL_WRITE, DATA_DIRECT)), Some(EOPNOTSUPP));
    assert_eq!(errno(sim.dv_reg_dmabuf_mr(pd, 0, 64, 0, d.fd, A::LOCAL_WRITE, DATA_DIRECT)), Some(EINVAL));
    Ok(())
}

#[test]
fn vfio_contexts_have_no_dmabuf_mrs_or_data_direct_path() -> TestResult {
    let mut sim = Simulator::with_profile("bf3")?;
    let vfio = sim.device_list()?.into_iter().find(|d| d.kind == mlx5_dv::DeviceKind::Mlx5Vfio).ok_or("no vfio")?;
    let ctx = sim.open_ibv_device(&vfio.name)?;
    let pd = sim.alloc_pd(ctx)?;
    let d = sim.alloc_dmabuf(4096)?;
    assert_eq!(errno(sim.dv_reg_dmabuf_mr(pd, 0, 64, 0, d.fd, A::LOCAL_WRITE, 0)), Some(EOPNOTSUPP));
    assert_eq!(errno(sim.get_data_direct_sysfs_path(ctx, 4096)), Some(EOPNOTSUPP));
    Ok(())
}

#[test]
fn the_data_direct_path_follows_the_profile() -> TestResult {
    let mut sim = Simulator::with_profile("bf3")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let path = sim.get_data_direct_sysfs_path(ctx, 4096)?;
    assert_eq!(path, "devices/pci0000:00/0000:00:01.1/0000:09:00.0");
    assert_eq!(errno(sim.get_data_direct_sysfs_path(ctx, path.len())), Some(ENOSPC), "no room for the NUL");
    assert_eq!(sim.get_data_direct_sysfs_path(ctx, path.len() + 1)?, path);
    let mut plain = Simulator::with_profile("cx6dx")?;
    let ctx = plain.open_ibv_device("mlx5_0")?;
    assert_eq!(errno(plain.get_data_direct_sysfs_path(ctx, 4096)), Some(ENODEV));
    let mut old = Simulator::with_profile("cx6dx-rdma-core-44")?;
    let ctx = old.open_ibv_device("mlx5_0")?;
    let e = old.get_data_direct_sysfs_path(ctx, 4096).err().ok_or("expected an error")?;
    assert_eq!(e.errno(), EOPNOTSUPP);
    assert!(e.reason().contains("rdma-core 55"), "{}", e.reason());
    Ok(())
}
