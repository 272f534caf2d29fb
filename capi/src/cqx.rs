//! Extended CQs: `ibv_create_cq_ex` (the context's `create_cq_ex`, which the header's inline
//! calls), `mlx5dv_create_cq`, and the `ibv_cq_ex` ops a program polls through
//! (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`, `ibv_wc_read_*`).
//!
//! The checks and their errno are libmlx5's `create_cq` (providers/mlx5/verbs.c) in its order;
//! the CQ itself is the one `ibv_create_cq` makes, so `ibv_poll_cq`, `ibv_req_notify_cq`,
//! completion channels, `ibv_destroy_cq` and `mlx5dv_init_obj` treat both alike. As in
//! `mlx5_cq_fill_pfns`, the read ops of the fields the program did not ask for in `wc_flags`
//! stay NULL. A poll takes the next completion the simulator's poll gives `ibv_poll_cq` into
//! the CQ's slot ([`CqC::cur`]), which each read returns a field of.
//!
//! With `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP` the CQ's good CQEs carry the device clock
//! (`mlx5_sim::Simulator::enable_cq_timestamps`, the kernel's
//! `IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION`), which `ibv_wc_read_completion_ts` returns.
//!
//! `_WALLCLOCK` too (libibverbs asks the kernel for timestamps for either); as on a device
//! without real-time timestamps, `ibv_wc_read_completion_wallclock_ns` converts the
//! timestamp with the clock-info page (`crate::clock`).
//!
//! `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN` goes to the kernel as `cqc.oi` (the firmware refuses
//! it, EINVAL, on a device without `cq_oi`); a CQE size of 128, from the vendor attributes or
//! `MLX5_CQE_SIZE`, makes a ring of 128-byte entries.

use std::ffi::c_int;
use std::ptr::{self, addr_of};

use mlx5_dv::{Wc, WcFlags};
use mlx5_hw::sys::mlx5dv::mlx5dv_cq_init_attr;
use rdma_sys::*;

use crate::errno::null;
use crate::objects::CqC;
use crate::state::{Shim, device_thread, key, with};

/// `enum ibv_create_cq_wc_flags`.
mod wc {
    pub(super) const BYTE_LEN: u64 = 1 << 0;
    pub(super) const IMM: u64 = 1 << 1;
    pub(super) const QP_NUM: u64 = 1 << 2;
    pub(super) const SRC_QP: u64 = 1 << 3;
    pub(super) const SLID: u64 = 1 << 4;
    pub(super) const SL: u64 = 1 << 5;
    pub(super) const DLID_PATH_BITS: u64 = 1 << 6;
    pub(super) const COMPLETION_TIMESTAMP: u64 = 1 << 7;
    pub(super) const CVLAN: u64 = 1 << 8;
    pub(super) const FLOW_TAG: u64 = 1 << 9;
    pub(super) const TM_INFO: u64 = 1 << 10;
    pub(super) const COMPLETION_TIMESTAMP_WALLCLOCK: u64 = 1 << 11;
    /// `IBV_WC_STANDARD_FLAGS`.
    pub(super) const STANDARD: u64 = BYTE_LEN | IMM | QP_NUM | SRC_QP | SLID | SL | DLID_PATH_BITS;
    /// libmlx5's `CREATE_CQ_SUPPORTED_WC_FLAGS` (libibverbs' `IBV_CREATE_CQ_SUP_WC_FLAGS` too).
    pub(super) const SUPPORTED: u64 =
        STANDARD | COMPLETION_TIMESTAMP | CVLAN | FLOW_TAG | TM_INFO | COMPLETION_TIMESTAMP_WALLCLOCK;
}

/// `IBV_CQ_INIT_ATTR_MASK_*`: libmlx5's `CREATE_CQ_SUPPORTED_COMP_MASK` is both.
const MASK_FLAGS: u32 = 1 << 0;
const MASK_PD: u32 = 1 << 1;
/// `IBV_CREATE_CQ_ATTR_*`: libmlx5's `CREATE_CQ_SUPPORTED_FLAGS` is both.
const ATTR_SINGLE_THREADED: u32 = 1 << 0;
const ATTR_IGNORE_OVERRUN: u32 = 1 << 1;
/// `MLX5DV_CQ_INIT_ATTR_MASK_*`: `MLX5_DV_CREATE_CQ_SUP_COMP_MASK` is the three.
const DV_MASK_COMPRESSED_CQE: u64 = 1 << 0;
const DV_MASK_FLAGS: u64 = 1 << 1;
const DV_MASK_CQE_SIZE: u64 = 1 << 2;
/// `MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD`; `_RESERVED` is the next bit.
const DV_FLAGS_CQE_PAD: u32 = 1 << 0;
const DV_FLAGS_RESERVED: u32 = 1 << 1;
/// `CQ_POLL_ERR` of libmlx5's `mlx5_parse_lazy_cqe`.
const CQ_POLL_ERR: c_int = -2;

/// libmlx5's `get_cqe_size`: the vendor attribute's `cqe_size` when its mask bit is set, else
/// `MLX5_CQE_SIZE` from the environment, else 64; anything but 64 or 128 is EINVAL.
pub(crate) fn cqe_size(dv: Option<&mlx5dv_cq_init_attr>) -> Result<u32, c_int> {
    let size = match dv {
        Some(a) if a.comp_mask & DV_MASK_CQE_SIZE != 0 => i64::from(a.cqe_size),
        _ => std::env::var_os("MLX5_CQE_SIZE").map_or(64, |v| atoi(&v)),
    };
    match size {
        64 | 128 => Ok(size as u32),
        _ => Err(libc::EINVAL),
    }
}

/// The vendor attributes a CQE size other than libmlx5's default stands for: `None` for 64.
pub(crate) fn wide(cqe_sz: u32) -> Option<mlx5_dv::DvCqAttr> {
    (cqe_sz != 64).then_some(mlx5_dv::DvCqAttr {
        comp_mask: DV_MASK_CQE_SIZE,
        cqe_size: cqe_sz as u16,
        ..mlx5_dv::DvCqAttr::default()
    })
}

/// C's `atoi` of an environment value (leading blanks, a sign, digits; anything else ends it).
fn atoi(v: &std::ffi::OsStr) -> i64 {
    let s = v.to_string_lossy();
    let s = s.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |n, d| n.saturating_mul(10).saturating_add(i64::from(d - b'0')));
    if neg { -n } else { n }
}

impl Shim {
    /// libmlx5's `create_cq` with `MLX5_CQ_FLAGS_EXTENDED`, then libibverbs' `verbs_init_cq`.
    fn create_cq_ex(
        &mut self,
        ctx: *mut ibv_context,
        attr: &ibv_cq_init_attr_ex,
        dv: Option<&mlx5dv_cq_init_attr>,
    ) -> Result<*mut ibv_cq_ex, c_int> {
        // The VFIO provider sets neither create_cq_ex nor the DV create_cq: libibverbs' dummy
        // op and mlx5dv_create_cq answer EOPNOTSUPP.
        if self.context(ctx)?.device.is_none() {
            return Err(libc::EOPNOTSUPP);
        }
        if attr.cqe == 0 {
            return Err(libc::EINVAL);
        }
        if attr.comp_mask & !(MASK_FLAGS | MASK_PD) != 0 {
            return Err(libc::EINVAL);
        }
        if attr.comp_mask & MASK_FLAGS != 0 && attr.flags & !(ATTR_SINGLE_THREADED | ATTR_IGNORE_OVERRUN) != 0 {
            return Err(libc::EINVAL);
        }
        if attr.wc_flags & !wc::SUPPORTED != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if let Some(d) = dv
            && d.comp_mask & !(DV_MASK_COMPRESSED_CQE | DV_MASK_FLAGS | DV_MASK_CQE_SIZE) != 0
        {
            return Err(libc::EINVAL);
        }
        // libmlx5: the PD must be a parent domain.
        if attr.comp_mask & MASK_PD != 0 && !self.domains.is_parent(attr.parent_domain) {
            return Err(libc::EINVAL);
        }
        // align_queue_size(cqe + 1) past 2^24 (or wrapping) is EINVAL before the CQE size.
        if u64::from(attr.cqe) + 1 > 1 << 24 {
            return Err(libc::EINVAL);
        }
        let cqe_sz = cqe_size(dv)?;
        if let Some(d) = dv {
            // Compression in none of the formats the kernel's query offered (or with
            // max_num 0) is EINVAL, before the kernel sees the flags.
            if d.comp_mask & DV_MASK_COMPRESSED_CQE != 0 {
                let h = self.context(ctx)?.handle;
                let q = self.sim.query_device(h, mlx5_dv::MLX5DV_CONTEXT_MASK_CQE_COMPRESION).map_err(|e| e.errno())?;
                let caps = q.cqe_comp_caps;
                if caps.max_num == 0 || u32::from(d.cqe_comp_res_format) & caps.supported_format == 0 {
                    return Err(libc::EINVAL);
                }
            }
            if d.comp_mask & DV_MASK_FLAGS != 0 {
                if d.flags & !(DV_FLAGS_RESERVED - 1) != 0 {
                    return Err(libc::EINVAL);
                }
                // The device pads (MLX5_VENDOR_CAP_FLAGS_CQE_128B_PAD), 128-byte CQEs only.
                // Padding changes only how a device writes cache lines, nothing a program
                // reads: the simulated ring is the same with it.
                if d.flags & DV_FLAGS_CQE_PAD != 0 && cqe_sz != 128 {
                    return Err(libc::EINVAL);
                }
            }
        }
        // libibverbs hands IGNORE_OVERRUN to the kernel (IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN);
        // SINGLE_THREADED stays in libmlx5 (no lock, which the simulator never needs).
        let kernel_flags = if attr.comp_mask & MASK_FLAGS != 0 { attr.flags & ATTR_IGNORE_OVERRUN } else { 0 };
        // The vendor attributes go on with the CQE size chosen (the environment's included).
        let vendor = match dv {
            Some(d) => Some(mlx5_dv::DvCqAttr {
                comp_mask: d.comp_mask | DV_MASK_CQE_SIZE,
                cqe_comp_res_format: d.cqe_comp_res_format,
                flags: d.flags,
                cqe_size: cqe_sz as u16,
            }),
            None => wide(cqe_sz),
        };
        let ours = mlx5_dv::CqInitAttrEx {
            cqe: attr.cqe,
            comp_vector: attr.comp_vector,
            comp_mask: 0,
            flags: kernel_flags,
            dv: vendor,
        };
        let make = |s: &mut Self| s.make_cq(ctx, attr.cq_context, attr.channel, &ours);
        let p = if attr.comp_mask & MASK_PD != 0 {
            let p = self.with_domain_memory(attr.parent_domain, |s| make(s).map(|p| (p, key(p))))?;
            self.domains.add_cq(key(p), attr.parent_domain);
            p
        } else {
            make(self)?
        };
        if attr.wc_flags & (wc::COMPLETION_TIMESTAMP | wc::COMPLETION_TIMESTAMP_WALLCLOCK) != 0 {
            // libibverbs asks the kernel for IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION.
            let on = self.cqs.get(&key(p)).map(|c| c.cq).ok_or(libc::EINVAL);
            if let Err(e) = on.and_then(|cq| self.sim.simulator_mut().enable_cq_timestamps(&cq).map_err(|e| e.errno()))
            {
                self.destroy_cq(p.cast());
                return Err(e);
            }
        }
        // SAFETY: the CQ just made, owned by the shim's table.
        fill_pfns(unsafe { &mut *p }, attr.wc_flags);
        Ok(p.cast())
    }

    /// `ibv_start_poll` and `ibv_next_poll`: the next completion into the CQ's slot; ENOENT
    /// when there is none.
    fn poll_ex(&mut self, cq: *mut ibv_cq_ex) -> c_int {
        let Some(c) = self.cqs.get_mut(&key(cq)) else { return CQ_POLL_ERR };
        let mut one = [Wc::default()];
        match self.sim.poll_cq_into(&c.cq, &mut one) {
            Ok(0) => libc::ENOENT,
            Ok(_) => {
                let [w] = one;
                c.c.ex.status = w.status;
                c.c.ex.wr_id = w.wr_id;
                let failed = w.status != 0;
                c.c.cur = w;
                if failed {
                    self.collect_events();
                }
                0
            }
            Err(_) => {
                self.collect_events();
                CQ_POLL_ERR
            }
        }
    }
}

/// Set the ops of an extended CQ as `mlx5_cq_fill_pfns` does for `wc_flags`.
fn fill_pfns(c: &mut CqC, wc_flags: u64) {
    let e = &mut c.ex;
    e.start_poll = Some(start_poll);
    e.next_poll = Some(next_poll);
    e.end_poll = Some(end_poll);
    e.read_opcode = Some(read_opcode);
    e.read_vendor_err = Some(read_vendor_err);
    e.read_wc_flags = Some(read_wc_flags);
    let has = |f: u64| wc_flags & f != 0;
    if has(wc::BYTE_LEN) {
        e.read_byte_len = Some(read_byte_len);
    }
    if has(wc::IMM) {
        e.read_imm_data = Some(read_imm_data);
    }
    if has(wc::QP_NUM) {
        e.read_qp_num = Some(read_qp_num);
    }
    if has(wc::SRC_QP) {
        e.read_src_qp = Some(read_src_qp);
    }
    if has(wc::SLID) {
        e.read_slid = Some(read_slid);
    }
    if has(wc::SL) {
        e.read_sl = Some(read_sl);
    }
    if has(wc::DLID_PATH_BITS) {
        e.read_dlid_path_bits = Some(read_dlid_path_bits);
    }
    if has(wc::COMPLETION_TIMESTAMP) {
        e.read_completion_ts = Some(read_completion_ts);
    }
    // mlx5_cq_fill_pfns without real-time timestamps: the clock-info page converts.
    if has(wc::COMPLETION_TIMESTAMP_WALLCLOCK) {
        e.read_completion_wallclock_ns = Some(read_completion_wallclock_ns);
    }
    if has(wc::CVLAN) {
        e.read_cvlan = Some(read_cvlan);
    }
    if has(wc::FLOW_TAG) {
        e.read_flow_tag = Some(read_flow_tag);
    }
    if has(wc::TM_INFO) {
        e.read_tm_info = Some(read_tm_info);
    }
}

/// The completion the last poll took, read through the CQ's address as libmlx5 reads its
/// current CQE: the `ibv_cq_ex` a program polls is the head of the shim's [`CqC`].
///
/// # Safety
/// `cq` is an extended CQ the shim made (the only way to reach these ops).
unsafe fn cur(cq: *mut ibv_cq_ex) -> Wc {
    // SAFETY: per the contract, `cq` is the `ex` field at the head of a live `CqC`.
    unsafe { ptr::read(addr_of!((*cq.cast::<CqC>()).cur)) }
}

unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    // mlx5_start_poll reads attr->comp_mask first: no bit is defined.
    // SAFETY: the caller's attributes.
    if attr.is_null() || unsafe { (*attr).comp_mask } != 0 {
        return libc::EINVAL;
    }
    let r = with(|_| CQ_POLL_ERR, |s| s.poll_ex(cq));
    if r == libc::ENOENT {
        // As after an empty ibv_poll_cq: let the device run.
        device_thread::empty_poll();
    }
    r
}

unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    with(|_| CQ_POLL_ERR, |s| s.poll_ex(cq))
}

/// `mlx5_end_poll`: the consumer index is the simulator's, already moved by each poll.
unsafe extern "C" fn end_poll(_cq: *mut ibv_cq_ex) {}

unsafe extern "C" fn read_opcode(cq: *mut ibv_cq_ex) -> ibv_wc_opcode::Type {
    // SAFETY: see `cur`.
    unsafe { cur(cq) }.opcode
}

unsafe extern "C" fn read_vendor_err(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see `cur`.
    unsafe { cur(cq) }.vendor_err
}

unsafe extern "C" fn read_byte_len(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see `cur`.
    unsafe { cur(cq) }.byte_len
}

/// The immediate as `ibv_poll_cq` gives it (`__be32`), or the invalidated rkey with
/// `IBV_WC_WITH_INV`.
unsafe extern "C" fn read_imm_data(cq: *mut ibv_cq_ex) -> __be32 {
    // SAFETY: see `cur`.
    unsafe { cur(cq) }.imm_data
}

unsafe extern "C" fn read_qp_num(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see `cur`.
    unsafe { cur(cq) }.qp_num
}

unsafe extern "C" fn read_src_qp(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see `cur`.
    unsafe { cur(cq) }.src_qp
}

/// `mlx5_cq_read_wc_flags`: WITH_IMM and WITH_INV come from a responder CQE's opcode only, so
/// a requester's completion of a SEND or WRITE with immediate (which `ibv_poll_cq` flags
/// WITH_IMM, as libmlx5's `handle_good_req` does) and an error CQE have neither.
unsafe extern "C" fn read_wc_flags(cq: *mut ibv_cq_ex) -> std::ffi::c_uint {
    // SAFETY: see `cur`.
    let w = unsafe { cur(cq) };
    let mut f = w.wc_flags;
    if w.status != 0 || w.opcode & ibv_wc_opcode::IBV_WC_RECV == 0 {
        f.remove(WcFlags::WITH_IMM | WcFlags::WITH_INV);
    }
    f.bits()
}

unsafe extern "C" fn read_slid(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see `cur`.
    u32::from(unsafe { cur(cq) }.slid)
}

unsafe extern "C" fn read_sl(cq: *mut ibv_cq_ex) -> u8 {
    // SAFETY: see `cur`.
    unsafe { cur(cq) }.sl
}

unsafe extern "C" fn read_dlid_path_bits(cq: *mut ibv_cq_ex) -> u8 {
    // SAFETY: see `cur`.
    unsafe { cur(cq) }.dlid_path_bits
}

/// `mlx5_cq_read_wc_completion_ts`: the CQE's `timestamp`, the device clock when it wrote
/// a good CQE (an error CQE carries none: 0).
unsafe extern "C" fn read_completion_ts(cq: *mut ibv_cq_ex) -> u64 {
    // SAFETY: see `cur`.
    unsafe { cur(cq) }.timestamp
}

/// `mlx5_cq_read_wc_completion_wallclock_ns`: the timestamp converted with the clock-info
/// page (`mlx5dv_ts_to_ns`), read now rather than at the poll as libmlx5 keeps it.
unsafe extern "C" fn read_completion_wallclock_ns(cq: *mut ibv_cq_ex) -> u64 {
    // SAFETY: see `cur`.
    let (ts, ctx) = unsafe { (cur(cq).timestamp, (*cq).context) };
    match with(Err, |s| s.clock_info(ctx)) {
        Ok(ci) => crate::clock::ts_to_ns(&ci, ts),
        Err(_) => 0,
    }
}

/// The CQE's `vlan_info`: VLAN stripping is not simulated, so no CQE
/// carries a stripped tag.
unsafe extern "C" fn read_cvlan(_cq: *mut ibv_cq_ex) -> u16 {
    0
}

/// The flow tag a steering rule's tag action gave a raw packet QP's receive (0: none).
unsafe extern "C" fn read_flow_tag(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: see `cur`.
    unsafe { cur(cq) }.flow_tag
}

/// The tag-matching header the CQE carries (`mlx5_cq_read_wc_tm_info`: its `tag` and
/// `app_ctx`, whatever completion it is).
unsafe extern "C" fn read_tm_info(cq: *mut ibv_cq_ex, tm_info: *mut ibv_wc_tm_info) {
    if !tm_info.is_null() {
        // SAFETY: see `cur`.
        let c = unsafe { cur(cq) };
        // SAFETY: the caller's struct.
        unsafe { tm_info.write(ibv_wc_tm_info { tag: c.tm_tag, priv_: c.tm_priv }) };
    }
}

/// `verbs_context.create_cq_ex`, which the header's `ibv_create_cq_ex` calls.
pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*attr };
    with(null, |s| s.create_cq_ex(context, a, None).unwrap_or_else(null))
}

/// `mlx5dv_create_cq`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_create_cq(
    context: *mut ibv_context,
    cq_attr: *mut ibv_cq_init_attr_ex,
    mlx5_cq_attr: *mut mlx5dv_cq_init_attr,
) -> *mut ibv_cq_ex {
    if cq_attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes; the vendor's may be NULL.
    let (a, d) = unsafe { (&*cq_attr, mlx5_cq_attr.as_ref()) };
    with(null, |s| s.create_cq_ex(context, a, d).unwrap_or_else(null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mlx5_cqe_size_is_read_as_atoi_reads_it() {
        let a = |s: &str| atoi(std::ffi::OsStr::new(s));
        assert_eq!(a("128"), 128);
        assert_eq!(a("  64abc"), 64);
        assert_eq!(a("+64"), 64);
        assert_eq!(a("-64"), -64);
        assert_eq!(a("x64"), 0);
        assert_eq!(a(""), 0);
        assert_eq!(a("99999999999999999999999"), i64::MAX);
    }

    #[test]
    fn the_vendor_cqe_size_wins_over_the_environment_and_only_64_and_128_pass() {
        let mut d = mlx5dv_cq_init_attr { comp_mask: DV_MASK_CQE_SIZE, cqe_size: 128, ..Default::default() };
        assert_eq!(cqe_size(Some(&d)), Ok(128));
        d.cqe_size = 64;
        assert_eq!(cqe_size(Some(&d)), Ok(64));
        d.cqe_size = 100;
        assert_eq!(cqe_size(Some(&d)), Err(libc::EINVAL));
        d.cqe_size = 0;
        assert_eq!(cqe_size(Some(&d)), Err(libc::EINVAL));
    }

    #[test]
    fn an_extended_cq_gets_the_read_ops_of_its_wc_flags_only() {
        // SAFETY: plain data.
        let mut c: Box<CqC> = Box::new(unsafe { std::mem::zeroed() });
        fill_pfns(&mut c, wc::BYTE_LEN | wc::SRC_QP);
        assert!(c.start_poll.is_some() && c.next_poll.is_some() && c.end_poll.is_some());
        assert!(c.read_opcode.is_some() && c.read_vendor_err.is_some() && c.read_wc_flags.is_some());
        assert!(c.read_byte_len.is_some() && c.read_src_qp.is_some());
        assert!(c.read_imm_data.is_none() && c.read_qp_num.is_none() && c.read_slid.is_none());
        assert!(c.read_completion_ts.is_none() && c.read_completion_wallclock_ns.is_none());
    }

    #[test]
    fn timestamp_flags_set_their_read_ops() {
        // SAFETY: plain data.
        let mut c: Box<CqC> = Box::new(unsafe { std::mem::zeroed() });
        fill_pfns(&mut c, wc::COMPLETION_TIMESTAMP);
        assert!(c.read_completion_ts.is_some() && c.read_completion_wallclock_ns.is_none());
        // SAFETY: plain data.
        let mut c: Box<CqC> = Box::new(unsafe { std::mem::zeroed() });
        fill_pfns(&mut c, wc::COMPLETION_TIMESTAMP_WALLCLOCK);
        assert!(c.read_completion_ts.is_none() && c.read_completion_wallclock_ns.is_some());
        c.cur = Wc { timestamp: 0x1234_5678_9abc, ..Wc::default() };
        let p: *mut ibv_cq_ex = &mut c.ex;
        // SAFETY: `p` heads a live CqC.
        assert_eq!(unsafe { read_completion_ts(p) }, 0x1234_5678_9abc);
    }

    #[test]
    fn a_requester_completion_reads_no_immediate_flag() {
        // SAFETY: plain data.
        let mut c: Box<CqC> = Box::new(unsafe { std::mem::zeroed() });
        c.cur = Wc { opcode: ibv_wc_opcode::IBV_WC_SEND, wc_flags: WcFlags::WITH_IMM, ..Wc::default() };
        let p: *mut ibv_cq_ex = &mut c.ex;
        // SAFETY: `p` heads a live CqC.
        assert_eq!(unsafe { read_wc_flags(p) }, 0);
        c.cur = Wc { opcode: ibv_wc_opcode::IBV_WC_RECV, wc_flags: WcFlags::WITH_IMM | WcFlags::GRH, ..Wc::default() };
        // SAFETY: as above.
        assert_eq!(unsafe { read_wc_flags(p) }, (WcFlags::WITH_IMM | WcFlags::GRH).bits());
    }
}
