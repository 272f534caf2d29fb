//! dma-buf MRs, DATA_DIRECT and the data-direct path: items 62–64, and the library release
//! that has `mlx5dv_reg_dmabuf_mr` (rdma-core 55).

use mlx5_dv::errno::{EINVAL, ENODEV, ENOSPC, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags as A, Backend, DmaBuf, DvQpCreateFlags, MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT as DATA_DIRECT,
    MkeyInitFlags, Mr, PdHandle, Result as DvResult, wc_opcode,
};

use super::fixture::{configure_list, contents, indirect_mkey, ok_cqe, pair, pattern, region, sge, write};
use super::open_pd;
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "dmabuf.mr_addr_is_offset", covers: &[62], needs: &[Need::Mlx5Device], run: addr_is_offset },
    Case { name: "dmabuf.rdma_write_through_iova", covers: &[62], needs: &[Need::Mlx5Device], run: traffic },
    Case {
        name: "dmabuf.klm_entry_of_indirect_mkey",
        covers: &[62],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: klm_entry,
    },
    Case { name: "dmabuf.kernel_checks", covers: &[63], needs: &[Need::Mlx5Device], run: kernel_checks },
    Case { name: "dmabuf.data_direct_path", covers: &[64], needs: &[Need::Mlx5Device], run: data_direct_path },
];

/// Access of the dma-buf MRs here.
const RW: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);
/// An iova with the same page offset as the offsets used here (0x10).
const IOVA: u64 = 0x7000_0010;
/// The offset into the dma-buf: page 1, byte 0x10.
const OFFSET: u64 = 0x1010;
/// A page-aligned iova, and the offset of page 1, for a data-direct MR.
const ALIGNED_IOVA: u64 = 0x7000_0000;
const ALIGNED: u64 = 0x1000;

/// The rdma-core major release of libmlx5, if the backend knows it.
fn release(env: &Env) -> Option<u32> {
    env.caps.library.rdma_core.as_deref()?.split('.').next()?.parse().ok()
}

/// True when libmlx5 has the rdma-core 55 functions; a skip when the release is unknown.
fn has_55(env: &Env) -> Check<bool> {
    release(env).map(|r| r >= 55).ok_or_else(|| Verdict::skip("the rdma-core release of libmlx5 is unknown"))
}

/// A call rdma-core 44 lacks: EOPNOTSUPP whose reason names release 55.
fn expect_needs_55<T: std::fmt::Debug>(what: &str, r: DvResult<T>) -> Check {
    let reason = r.as_ref().err().map(|e| e.reason().to_string()).unwrap_or_default();
    expect_errno(what, r, EOPNOTSUPP)?;
    check(&format!("{what}: the reason names rdma-core 55"), reason.contains("55"), "mentions 55", reason)
}

/// A 3-page dma-buf; a skip where the host has no exporter.
fn dmabuf(b: &mut dyn Backend) -> Check<DmaBuf> {
    match b.alloc_dmabuf(3 * 4096) {
        Err(e) if e.errno() == EOPNOTSUPP => Err(Verdict::skip(format!("no dma-buf exporter: {}", e.reason()))),
        r => expect_ok("export a dma-buf", r),
    }
}

/// `ibv_reg_dmabuf_mr` of 0x800 bytes at [`OFFSET`] from [`IOVA`].
fn reg(b: &mut dyn Backend, pd: PdHandle, d: &DmaBuf) -> Check<Mr> {
    expect_ok("ibv_reg_dmabuf_mr", b.reg_dmabuf_mr(pd, OFFSET, 0x800, IOVA, d.fd, RW))
}

fn addr_is_offset(b: &mut dyn Backend, env: &Env) -> Check {
    let (_ctx, pd) = open_pd(b, env)?;
    let d = dmabuf(b)?;
    let mr = reg(b, pd, &d)?;
    check_eq("ibv_reg_dmabuf_mr: (addr, length)", (mr.addr, mr.length), (OFFSET, 0x800))?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&mr))?;
    let r = b.dv_reg_dmabuf_mr(pd, OFFSET, 0x800, IOVA, d.fd, RW, 0);
    if !has_55(env)? {
        return expect_needs_55("mlx5dv_reg_dmabuf_mr on rdma-core < 55", r);
    }
    let mr = expect_ok("mlx5dv_reg_dmabuf_mr with mlx5_access 0", r)?;
    check_eq("mlx5dv_reg_dmabuf_mr: (addr, length)", (mr.addr, mr.length), (OFFSET, 0x800))?;
    check("an MR imports the dma-buf", b.free_dmabuf(&d).is_err(), "EBUSY", "freed")?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&mr))?;
    expect_ok("free the dma-buf", b.free_dmabuf(&d))
}

fn traffic(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let d = dmabuf(b)?;
    let mr = expect_ok("ibv_reg_dmabuf_mr", b.reg_dmabuf_mr(s.pd, OFFSET, 0x1800, IOVA, d.fd, RW))?;
    // 0x100 bytes written at iova + 0xf80 cross from page 1 into page 2 of the dma-buf.
    let data = pattern(0x100, 0x21);
    let (_src, smr) = region(b, a.pd, data.len(), &data, A::LOCAL_WRITE)?;
    let wr = write(0x61, mr.rkey, IOVA + 0xf80, vec![sge(&smr, 0, data.len() as u32)]);
    expect_ok("RDMA WRITE to the dma-buf MR", b.post_send(&a.qp, &[wr]))?;
    ok_cqe(b, &a.cq, 0x61, wc_opcode::RDMA_WRITE)?;
    let at = (OFFSET + 0xf80) as usize;
    let got = expect_ok("read the dma-buf", b.read_buf(&d.buf, at, data.len()))?;
    check_eq("bytes at offset + (address - iova) of the dma-buf", got, data)?;
    let before = expect_ok("read the dma-buf", b.read_buf(&d.buf, OFFSET as usize - 1, 1))?;
    check_eq("the byte before the MR is untouched", before, vec![0])
}

fn klm_entry(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let d = dmabuf(b)?;
    let mr = reg(b, s.pd, &d)?;
    let (plain, pmr) = region(b, s.pd, 256, &[], A::LOCAL_WRITE)?;
    let mkey = indirect_mkey(b, s.pd, MkeyInitFlags::INDIRECT, 4)?;
    // Entry 0: 16 bytes of the plain MR; entry 1: 32 bytes of the dma-buf MR at iova + 0x20.
    let list = vec![sge(&pmr, 0, 16), mlx5_dv::Sge { addr: IOVA + 0x20, length: 32, lkey: mr.lkey }];
    configure_list(b, &s, &mkey, A::REMOTE_WRITE | A::LOCAL_WRITE, list)?;
    let data = pattern(48, 0x44);
    let (_src, smr) = region(b, a.pd, 48, &data, A::LOCAL_WRITE)?;
    let wr = write(0x62, mkey.rkey, 0, vec![sge(&smr, 0, 48)]);
    expect_ok("RDMA WRITE through the indirect mkey", b.post_send(&a.qp, &[wr]))?;
    ok_cqe(b, &a.cq, 0x62, wc_opcode::RDMA_WRITE)?;
    check_eq("the first 16 bytes in the plain MR", contents(b, &plain)?[..16].to_vec(), data[..16].to_vec())?;
    let got = expect_ok("read the dma-buf", b.read_buf(&d.buf, (OFFSET + 0x20) as usize, 32))?;
    check_eq("the next 32 bytes in the dma-buf", got, data[16..].to_vec())
}

fn kernel_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd) = open_pd(b, env)?;
    let d = dmabuf(b)?;
    let r = b.reg_dmabuf_mr(pd, OFFSET, 0x800, IOVA + 8, d.fd, RW);
    expect_errno("ibv_reg_dmabuf_mr: iova and offset at different page offsets", r, EINVAL)?;
    // uverbs takes LW|RR|RW|ATOMIC|RELAXED_ORDERING only: ON_DEMAND never reaches the driver.
    for (what, access) in
        [("ON_DEMAND", RW | A::ON_DEMAND), ("MW_BIND", RW | A::MW_BIND), ("ZERO_BASED", A::ZERO_BASED)]
    {
        let r = b.reg_dmabuf_mr(pd, OFFSET, 0x800, IOVA, d.fd, access);
        expect_errno(&format!("ibv_reg_dmabuf_mr with {what}"), r, EINVAL)?;
    }
    let r = b.reg_dmabuf_mr(pd, OFFSET, 0x800, IOVA, d.fd, A::REMOTE_WRITE);
    expect_errno("ibv_reg_dmabuf_mr: REMOTE_WRITE without LOCAL_WRITE", r, EINVAL)?;
    if !has_55(env)? {
        let r = b.dv_reg_dmabuf_mr(pd, OFFSET, 0x800, IOVA, d.fd, RW, DATA_DIRECT);
        return expect_needs_55("mlx5dv_reg_dmabuf_mr on rdma-core < 55", r);
    }
    let r = b.dv_reg_dmabuf_mr(pd, OFFSET, 0x800, IOVA + 8, d.fd, RW, 0);
    expect_errno("mlx5dv_reg_dmabuf_mr: different page offsets", r, EINVAL)?;
    let r = b.dv_reg_dmabuf_mr(pd, OFFSET, 0x800, IOVA, d.fd, RW, 1 << 1);
    expect_errno("mlx5dv_reg_dmabuf_mr: unknown mlx5_access bit", r, EINVAL)?;
    // A data-direct (KSM) MR needs a page-aligned iova before it needs the device.
    let r = b.dv_reg_dmabuf_mr(pd, OFFSET, 0x800, IOVA, d.fd, RW, DATA_DIRECT);
    expect_errno("DATA_DIRECT with an iova that is not page-aligned", r, EOPNOTSUPP)?;
    let direct = b.get_data_direct_sysfs_path(ctx, 4096);
    let r = b.dv_reg_dmabuf_mr(pd, ALIGNED, 0x800, ALIGNED_IOVA, d.fd, RW, DATA_DIRECT);
    match direct {
        Err(e) if e.errno() == ENODEV => expect_errno("DATA_DIRECT without a data-direct device", r, EINVAL),
        Ok(_) => {
            let mr = expect_ok("DATA_DIRECT with a data-direct device", r)?;
            check_eq("DATA_DIRECT MR: addr", mr.addr, ALIGNED)
        }
        Err(e) => Err(Verdict::fail("the data-direct path", "a path or ENODEV", e)),
    }
}

fn data_direct_path(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _pd) = open_pd(b, env)?;
    let r = b.get_data_direct_sysfs_path(ctx, 4096);
    if !has_55(env)? {
        return expect_needs_55("mlx5dv_get_data_direct_sysfs_path on rdma-core < 55", r);
    }
    match r {
        Err(e) if e.errno() == ENODEV => Ok(()),
        Ok(path) => {
            let bare = !path.starts_with("/sys/") && !path.starts_with("sys/") && !path.is_empty();
            check("the path has no /sys/ prefix", bare, "devices/…", &path)?;
            let short = b.get_data_direct_sysfs_path(ctx, 5);
            expect_errno("a 5-byte buffer", short, ENOSPC)
        }
        Err(e) => Err(Verdict::fail("mlx5dv_get_data_direct_sysfs_path", "a path or ENODEV", e)),
    }
}
