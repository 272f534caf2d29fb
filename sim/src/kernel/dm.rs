//! Device memory as mlx5_ib keeps it: `handle_alloc_dm_memic` with `mlx5_cmd_alloc_memic`'s
//! page bitmap, `mlx5_cmd_dealloc_memic`, and `mlx5_ib_reg_dm_mr`'s MEMIC mkey.

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::prm::{self, opcode};
use mlx5_dv::{AccessFlags, Error, Op, Result};

use super::{Kernel, cmd_error, internal, kernel_cmd};
use crate::device::Device;
use crate::device::firmware::{memic_cap, memic_cmd};
use crate::host::{Host, PAGE};

/// `MLX5_MEMIC_BASE_SIZE`: allocations are whole multiples of 64 bytes.
const MEMIC_BASE_SIZE: u64 = 64;

/// `MLX5_MEMIC_BASE_ALIGN`: the device counts alignment in units of 2^6 bytes.
const MEMIC_BASE_ALIGN: u32 = 6;

/// `MLX5_IB_DM_MEMIC_ALLOWED_ACCESS`.
const MEMIC_ALLOWED_ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC)
    .union(AccessFlags::ZERO_BASED);

/// `MLX5_MKC_ACCESS_MODE_MEMIC`.
const ACCESS_MODE_MEMIC: u64 = 5;

/// The MEMIC facts the kernel reads from the DEVICE_MEMORY capability page.
struct MemicCaps {
    max_size: u64,
    start: u64,
    bar_size: u64,
    log_max_align: u32,
}

/// One MEMIC allocation: its MEMIC address (a BAR offset) and its rounded size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemicAlloc {
    /// The MEMIC address.
    pub addr: u64,
    /// Bytes allocated (the length rounded up to 64).
    pub size: u64,
}

fn query_memic_caps(dev: &mut Device, op: Op) -> Result<Option<MemicCaps>> {
    use prm::query_hca_cap as q;
    let input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, 0xf << 1 | 1);
    let mut out = vec![0u8; q::CAPABILITY_BYTE + q::CAPABILITY_SIZE];
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "QUERY_HCA_CAP (device memory)"))?;
    let page = &out[q::CAPABILITY_BYTE..];
    let get = |f: prm::Field| f.get(page).map_err(|e| internal(op, e));
    if get(memic_cap::MEMIC)? == 0 {
        return Ok(None);
    }
    Ok(Some(MemicCaps {
        max_size: get(memic_cap::MAX_MEMIC_SIZE)?,
        start: get(memic_cap::MEMIC_BAR_START_ADDR)?,
        bar_size: get(memic_cap::MEMIC_BAR_SIZE)?,
        log_max_align: get(memic_cap::LOG_MAX_MEMIC_ADDR_ALIGNMENT)? as u32,
    }))
}

impl Kernel {
    /// `ibv_device_attr_ex.max_dm_size` as mlx5_ib reports it: `max_memic_size` on a device
    /// with MEMIC, else 0.
    pub fn max_dm_size(dev: &mut Device, op: Op) -> Result<u64> {
        Ok(query_memic_caps(dev, op)?.map_or(0, |c| c.max_size))
    }

    /// `handle_alloc_dm_memic`: EOPNOTSUPP without MEMIC; the length rounded up to 64 bytes;
    /// then `mlx5_cmd_alloc_memic`: EINVAL for nothing or an alignment past the device's,
    /// ALLOC_MEMIC over the first free run of pages (the next run on EAGAIN), ENOMEM when no
    /// run is left. The device's MEMIC window is mapped into host memory at the first call.
    pub fn alloc_memic(
        &mut self,
        dev: &mut Device,
        dev_index: usize,
        host: &mut Host,
        (length, log_align): (u64, u32),
    ) -> Result<MemicAlloc> {
        let op = Op::AllocDm;
        let caps = query_memic_caps(dev, op)?.ok_or_else(|| Error::new(op, EOPNOTSUPP, "the device has no MEMIC"))?;
        let size = length.checked_next_multiple_of(MEMIC_BASE_SIZE).filter(|s| *s > 0 && *s <= u64::from(u32::MAX));
        let size = size.ok_or_else(|| Error::new(op, EINVAL, format!("MEMIC length {length}")))?;
        let align = log_align.saturating_sub(MEMIC_BASE_ALIGN);
        if align > caps.log_max_align {
            let why = format!("alignment 2^{log_align} past the device's 2^{}", caps.log_max_align + MEMIC_BASE_ALIGN);
            return Err(Error::new(op, EINVAL, why));
        }
        if dev.firmware().memic_window().is_none() {
            let len = usize::try_from(caps.bar_size).map_err(|e| internal(op, e))?;
            let addr = host.alloc(len).ok_or_else(|| Error::new(op, ENOMEM, "no host memory for the MEMIC window"))?;
            dev.set_memic_window(addr);
        }
        let total = caps.bar_size / PAGE;
        let pages = self.memic_pages.entry(dev_index).or_insert_with(|| vec![false; total as usize]);
        let need = size.div_ceil(PAGE);
        let mut input = prm::new_input(memic_cmd::IN_SIZE, memic_cmd::ALLOC_MEMIC, 0, 0);
        let mut first = 0u64;
        while first + need <= total {
            let run = first as usize..(first + need) as usize;
            if pages[run.clone()].iter().any(|p| *p) {
                first += 1;
                continue;
            }
            let fields = [
                (memic_cmd::RANGE_START_ADDR, caps.start + first * PAGE),
                (memic_cmd::RANGE_SIZE, need * PAGE),
                (memic_cmd::MEMIC_SIZE, size),
                (memic_cmd::LOG_MEMIC_ADDR_ALIGNMENT, u64::from(align)),
            ];
            for (f, v) in fields {
                f.set(&mut input, v).map_err(|e| internal(op, e))?;
            }
            let mut out = [0u8; memic_cmd::ALLOC_OUT_SIZE];
            match kernel_cmd(dev, &input, &mut out) {
                Ok(()) => {
                    pages[run].fill(true);
                    let addr = memic_cmd::OUT_MEMIC_START_ADDR.get(&out).map_err(|e| internal(op, e))?;
                    return Ok(MemicAlloc { addr, size });
                }
                Err(mlx5_dv::errno::EAGAIN) => first += 1,
                Err(e) => return Err(cmd_error(op, e, &out, "ALLOC_MEMIC")),
            }
        }
        Err(Error::new(op, ENOMEM, format!("no free run of {need} MEMIC page(s)")))
    }

    /// `mlx5_cmd_dealloc_memic`: DEALLOC_MEMIC, then the pages are free again.
    pub fn dealloc_memic(&mut self, dev: &mut Device, dev_index: usize, a: MemicAlloc) -> Result<()> {
        let op = Op::FreeDm;
        let mut input = prm::new_input(memic_cmd::IN_SIZE, memic_cmd::DEALLOC_MEMIC, 0, 0);
        memic_cmd::DEALLOC_START_ADDR.set(&mut input, a.addr).map_err(|e| internal(op, e))?;
        memic_cmd::DEALLOC_SIZE.set(&mut input, a.size).map_err(|e| internal(op, e))?;
        let mut out = [0u8; prm::mbox_out::SIZE];
        kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "DEALLOC_MEMIC"))?;
        let start = query_memic_caps(dev, op)?.map_or(0, |c| c.start);
        if let Some(pages) = self.memic_pages.get_mut(&dev_index) {
            let first = (a.addr.saturating_sub(start) / PAGE) as usize;
            let end = (first + a.size.div_ceil(PAGE) as usize).min(pages.len());
            pages.get_mut(first..end).into_iter().for_each(|r| r.fill(false));
        }
        Ok(())
    }

    /// `UVERBS_METHOD_DM_MR_REG` (after its flag checks, which the provider makes) and
    /// `mlx5_ib_reg_dm_mr`: the range inside the DM's `dm_len` bytes and MEMIC's access
    /// flags (both EINVAL), then CREATE_MKEY in the MEMIC access mode from the DM's address plus `offset`. The mkey index and key variant.
    #[allow(clippy::too_many_arguments)] // the uverbs method's attributes
    pub fn reg_dm_mr(
        &mut self,
        dev: &mut Device,
        dev_index: usize,
        pdn: u32,
        (dm, dm_len): (MemicAlloc, u64),
        (offset, length): (u64, u64),
        access: AccessFlags,
    ) -> Result<(u32, u8)> {
        let op = Op::RegDmMr;
        if offset > dm_len || length > dm_len || length > dm_len - offset {
            return Err(Error::new(op, EINVAL, format!("[{offset}, +{length}) is not inside the {dm_len}-byte DM")));
        }
        if !MEMIC_ALLOWED_ACCESS.contains(access) {
            return Err(Error::new(op, EINVAL, format!("access 0x{:x} on MEMIC", access.bits())));
        }
        use prm::mkc;
        let fields = [
            (mkc::ACCESS_MODE_1_0, ACCESS_MODE_MEMIC & 3),
            (mkc::ACCESS_MODE_4_2, ACCESS_MODE_MEMIC >> 2),
            (mkc::START_ADDR, dm.addr + offset),
            (mkc::LEN, length),
        ];
        // mkc_rights' key variant is replaced by the one create_plain_mkey takes.
        let rights = super::mkc_rights(access, pdn, 0);
        let all: Vec<_> = fields.into_iter().chain(rights).collect();
        self.create_plain_mkey(dev, dev_index, &all, (op, "CREATE_MKEY (MEMIC)"))
    }
}
