//! mlx5_ib's packet pacing and VAR objects: `MLX5_IB_METHOD_PP_OBJ_ALLOC` over mlx5_core's
//! rate table (`mlx5_rl_add_rate_raw`: entries from index 1, shared entries refcounted by
//! context bytes and uid, dedicated ones never shared) and `MLX5_IB_METHOD_VAR_OBJ_ALLOC`
//! (the first free doorbell page, mapped at an mmap offset of the context).

use std::collections::BTreeMap;

use mlx5_dv::errno::{EINVAL, ENOSPC, EOPNOTSUPP, EPROTONOSUPPORT};
use mlx5_dv::prm::{self, opcode, pp, qos_cap as qc};
use mlx5_dv::{Error, Op, Result};

use super::{DevxUid, Kernel, cmd_error, internal, kernel_cmd};
use crate::device::Device;

/// `MLX5_IB_MMAP_OFFSET_START`: the first mmap command number of inserted entries.
const MMAP_OFFSET_START: u64 = 9;
/// The page size of mmap offsets.
const PAGE_SHIFT: u32 = 12;
/// A VAR's length: one doorbell page (`1 << log_doorbell_stride`, unverified 4 KiB).
const VAR_LENGTH: u32 = 4096;

/// One rate table entry as mlx5_core keeps it.
#[derive(Debug, Clone)]
struct RlEntry {
    ctx: [u8; pp::CONTEXT_SIZE],
    uid: u16,
    dedicated: bool,
    refcount: u32,
}

/// One VAR: its device, page and mmap page offset.
#[derive(Debug, Clone, Copy)]
struct VarObj {
    dev: usize,
    page: u32,
    pgoff: u64,
}

/// The rate tables and VAR pages of the devices, and each context's objects.
#[derive(Debug, Clone, Default)]
pub(super) struct KernelQos {
    /// Rate table entries by device, index `i` holding entry `i + 1`.
    tables: BTreeMap<usize, Vec<Option<RlEntry>>>,
    /// PP objects: (context, handle) -> (device, index).
    pps: BTreeMap<(u32, u32), (usize, u16)>,
    /// VAR objects: (context, handle).
    vars: BTreeMap<(u32, u32), VarObj>,
    next_handle: u32,
}

/// What the QoS page says about packet pacing: `None` without it.
struct PpCaps {
    min: u32,
    max: u32,
    size: u16,
}

fn query_pp_caps(dev: &mut Device, op: Op) -> Result<Option<PpCaps>> {
    use prm::query_hca_cap as q;
    let mut out = vec![0u8; q::CAPABILITY_BYTE + q::CAPABILITY_SIZE];
    let input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_GENERAL_CUR);
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "QUERY_HCA_CAP (general)"))?;
    if qc::QOS.get(&out[q::CAPABILITY_BYTE..]).map_err(|e| internal(op, e))? == 0 {
        return Ok(None);
    }
    let input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_QOS_CUR);
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "QUERY_HCA_CAP (QoS)"))?;
    let page = &out[q::CAPABILITY_BYTE..];
    let get = |f: prm::Field| f.get(page).map_err(|e| internal(op, e));
    if get(qc::PACKET_PACING)? == 0 || get(qc::PACKET_PACING_UID)? == 0 {
        return Ok(None);
    }
    Ok(Some(PpCaps {
        min: get(qc::PACKET_PACING_MIN_RATE)? as u32,
        max: get(qc::PACKET_PACING_MAX_RATE)? as u32,
        size: get(qc::PACKET_PACING_RATE_TABLE_SIZE)? as u16,
    }))
}

fn set_rate(dev: &mut Device, index: u16, uid: u16, ctx: Option<&[u8; pp::CONTEXT_SIZE]>, op: Op) -> Result<()> {
    let mut input = prm::new_input(pp::IN_SIZE, pp::SET_PP_RATE_LIMIT, 0, 0);
    let put = |input: &mut [u8]| -> std::result::Result<(), prm::FieldError> {
        prm::mbox_in::UID.set(input, u64::from(uid))?;
        pp::RATE_LIMIT_INDEX.set(input, u64::from(index))
    };
    put(&mut input).map_err(|e| internal(op, e))?;
    if let Some(c) = ctx {
        input[pp::CONTEXT_BYTE..pp::IN_SIZE].copy_from_slice(c);
    }
    let mut out = [0u8; 16];
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "SET_PP_RATE_LIMIT"))
}

/// The mmap offset mlx5_ib reports for an entry at page offset `pgoff`
/// (`mlx5_entry_to_mmap_offset`).
fn mmap_offset(pgoff: u64) -> u64 {
    let (cmd, index) = (pgoff >> 16, pgoff & 0xffff);
    ((index >> 8) << 16 | cmd << 8 | (index & 0xff)) << PAGE_SHIFT
}

impl Kernel {
    /// `MLX5_IB_METHOD_PP_OBJ_ALLOC`: EPROTONOSUPPORT when the device has no packet pacing
    /// with uids (the object is absent from the uapi); EINVAL for a context of 0 or more than
    /// 48 bytes (uverbs' attribute size) and for a context without a DEVX uid; then
    /// `mlx5_rl_add_rate_raw`: EINVAL for a rate of 0 or out of the device's range, the entry
    /// with the same bytes and uid (shared entries run under `MLX5_SHARED_RESOURCE_UID`), else
    /// the first free one set by SET_PP_RATE_LIMIT; ENOSPC when the table is full. Returns the
    /// object's handle and the entry's index.
    pub fn pp_alloc(
        &mut self,
        dev: &mut Device,
        dev_index: usize,
        (ctx, uid): (u32, DevxUid),
        pp_context: &[u8],
        dedicated: bool,
    ) -> Result<(u32, u16)> {
        let op = Op::PpAlloc;
        let Some(caps) = query_pp_caps(dev, op)? else {
            return Err(Error::new(op, EPROTONOSUPPORT, "the device has no packet pacing with uids"));
        };
        if pp_context.is_empty() || pp_context.len() > pp::CONTEXT_SIZE {
            return Err(Error::new(op, EINVAL, format!("a {}-byte pacing context (1 to 48)", pp_context.len())));
        }
        let DevxUid::Uid(devx) = uid else {
            return Err(Error::new(op, EINVAL, "the context has no DEVX uid"));
        };
        let mut raw = [0u8; pp::CONTEXT_SIZE];
        raw[..pp_context.len()].copy_from_slice(pp_context);
        let uid = if dedicated { devx } else { pp::SHARED_RESOURCE_UID };
        let size = usize::from(caps.size.saturating_sub(1));
        if size == 0 {
            return Err(Error::new(op, EOPNOTSUPP, "the rate table has no entry past the unlimited one"));
        }
        let rate = pp::RATE_LIMIT.get(&raw).map_err(|e| internal(op, e))? as u32;
        if rate == 0 || !(caps.min..=caps.max).contains(&rate) {
            return Err(Error::new(op, EINVAL, format!("rate {rate} kbps, not {} to {}", caps.min, caps.max)));
        }
        let table = self.qos.tables.entry(dev_index).or_insert_with(|| vec![None; size]);
        let slot = if dedicated {
            table.iter().position(Option::is_none)
        } else {
            let same =
                table.iter().position(|e| e.as_ref().is_some_and(|e| !e.dedicated && e.uid == uid && e.ctx == raw));
            same.or_else(|| table.iter().position(Option::is_none))
        };
        let Some(i) = slot else {
            return Err(Error::new(op, ENOSPC, format!("all {size} rate table entries are in use")));
        };
        let index = (i + 1) as u16;
        match &mut table[i] {
            Some(e) => e.refcount += 1,
            free => {
                set_rate(dev, index, uid, Some(&raw), op)?;
                *free = Some(RlEntry { ctx: raw, uid, dedicated, refcount: 1 });
            }
        }
        self.qos.next_handle += 1;
        let handle = self.qos.next_handle;
        self.qos.pps.insert((ctx, handle), (dev_index, index));
        Ok((handle, index))
    }

    /// `MLX5_IB_METHOD_PP_OBJ_DESTROY`: EINVAL for a handle the context does not hold; the
    /// entry's last user clears it (SET_PP_RATE_LIMIT with a zero context).
    pub fn pp_free(&mut self, devices: &mut [Device], ctx: u32, handle: u32) -> Result<()> {
        let op = Op::PpFree;
        let (dev, index) = self
            .qos
            .pps
            .remove(&(ctx, handle))
            .ok_or_else(|| Error::new(op, EINVAL, "no such packet pacing object"))?;
        let Some(slot) = self.qos.tables.get_mut(&dev).and_then(|t| t.get_mut(usize::from(index) - 1)) else {
            return Err(Error::new(op, EINVAL, "no such rate table entry"));
        };
        if let Some(e) = slot {
            e.refcount -= 1;
            if e.refcount == 0 {
                let uid = e.uid;
                *slot = None;
                if let Some(d) = devices.get_mut(dev) {
                    set_rate(d, index, uid, None, op)?;
                }
            }
        }
        Ok(())
    }

    /// `MLX5_IB_METHOD_VAR_OBJ_ALLOC`: EPROTONOSUPPORT on a device without virtio emulation
    /// (no VAR object in the uapi), EOPNOTSUPP for the TLP flag (no TLP emulation manager
    /// here); then the first free doorbell page (ENOSPC when none is left) at the context's
    /// lowest free mmap page offset from `MLX5_IB_MMAP_OFFSET_START << 16`. Returns the
    /// handle, page, length and mmap offset.
    pub fn alloc_var(&mut self, dev: &Device, dev_index: usize, ctx: u32, tlp: bool) -> Result<(u32, u32, u32, u64)> {
        let op = Op::AllocVar;
        let pages = dev.firmware().var_doorbell_pages();
        if pages == 0 {
            return Err(Error::new(op, EPROTONOSUPPORT, "the device has no virtio emulation (VIRTIO_NET_Q)"));
        }
        if tlp {
            return Err(Error::new(op, EOPNOTSUPP, "the device is no TLP emulation manager"));
        }
        let used = |p: u32| self.qos.vars.values().any(|v| v.dev == dev_index && v.page == p);
        let Some(page) = (0..pages).find(|p| !used(*p)) else {
            return Err(Error::new(op, ENOSPC, "every VAR doorbell page is taken"));
        };
        let start = MMAP_OFFSET_START << 16;
        let taken = |o: u64| self.qos.vars.iter().any(|((c, _), v)| *c == ctx && v.pgoff == o);
        let pgoff = (start..).find(|o| !taken(*o)).unwrap_or(start);
        self.qos.next_handle += 1;
        let handle = self.qos.next_handle;
        self.qos.vars.insert((ctx, handle), VarObj { dev: dev_index, page, pgoff });
        Ok((handle, page, VAR_LENGTH, mmap_offset(pgoff)))
    }

    /// `MLX5_IB_METHOD_VAR_OBJ_DESTROY`: EINVAL for a handle the context does not hold.
    pub fn free_var(&mut self, ctx: u32, handle: u32) -> Result<()> {
        match self.qos.vars.remove(&(ctx, handle)) {
            Some(_) => Ok(()),
            None => Err(Error::new(Op::FreeVar, EINVAL, "no such VAR")),
        }
    }

    /// A closed context's PP and VAR objects go (uverbs' cleanup of its objects).
    pub fn close_qos_objects(&mut self, devices: &mut [Device], ctx: u32) {
        let pps: Vec<u32> = self.qos.pps.keys().filter(|(c, _)| *c == ctx).map(|(_, h)| *h).collect();
        for h in pps {
            let _ = self.pp_free(devices, ctx, h);
        }
        self.qos.vars.retain(|(c, _), _| *c != ctx);
    }

    /// Packet pacing entries in use on device `dev` (index, users).
    pub fn pp_entries(&self, dev: usize) -> Vec<(u16, u32)> {
        let Some(t) = self.qos.tables.get(&dev) else { return Vec::new() };
        t.iter().enumerate().filter_map(|(i, e)| e.as_ref().map(|e| ((i + 1) as u16, e.refcount))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::mmap_offset;

    #[test]
    fn mmap_offsets_as_mlx5_ib_reports_them() {
        assert_eq!(mmap_offset(9 << 16), 0x90_0000, "the first entry: command 9, index 0");
        assert_eq!(mmap_offset((9 << 16) + 1), 0x90_1000);
        assert_eq!(mmap_offset((9 << 16) + 0x100), 0x1090_0000, "index 256: its high byte at page bit 16");
    }
}
