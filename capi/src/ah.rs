//! Address handles: `ibv_create_ah` checks the attributes as mlx5 does and keeps the address
//! vector libmlx5 builds, which a UD QP's sends copy into their WQEs; `ibv_init_ah_from_wc`
//! and `ibv_create_ah_from_wc` answer a received datagram.

use std::ffi::c_int;

use mlx5_dv::link_layer;
use rdma_sys::*;

use crate::errno::{minus_one, null};
use crate::state::{key, with};
use std::ptr;

/// `ibv_create_ah`: EINVAL for a port other than 1, a RoCE path without a GRH, or a source
/// GID index past the port's populated GID entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { *attr };
    with(null, |s| {
        let Ok(ctx) = s.pd(pd).map(|p| p.c.context) else { return null(libc::EINVAL) };
        let Ok(port) = s.port(ctx, a.port_num) else { return null(libc::EINVAL) };
        let roce = port.link_layer == link_layer::ETHERNET;
        let gids = s.gid_table(ctx, a.port_num).map_or(0, |t| t.len());
        if roce && (a.is_global == 0 || usize::from(a.grh.sgid_index) >= gids) {
            return null(libc::EINVAL);
        }
        let mut c = Box::new(ibv_ah { context: ctx, pd, handle: 0 });
        let p: *mut ibv_ah = &mut *c;
        c.handle = u32::try_from(s.ahs.len()).unwrap_or(u32::MAX);
        s.ahs.insert(key(p), c);
        s.avs.insert(key(p), Box::new(address_vector(&a, roce)));
        p
    })
}

/// `ibv_destroy_ah`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    with(
        |e| e,
        |s| {
            s.avs.remove(&key(ah));
            if s.ahs.remove(&key(ah)).is_some() { 0 } else { libc::EINVAL }
        },
    )
}

/// The address vector `mlx5_create_ah` builds (what `mlx5dv_init_obj` hands out): the path's
/// LID and service level, and with a GRH its GID, hop limit, traffic class and flow label
/// under the GRH flag (bit 30); on RoCE the MAC a link-local GID names (its EUI-64).
fn address_vector(a: &ibv_ah_attr, roce: bool) -> mlx5_hw::sys::mlx5dv::mlx5_wqe_av {
    // SAFETY: plain data; all-zero is valid.
    let mut av: mlx5_hw::sys::mlx5dv::mlx5_wqe_av = unsafe { std::mem::zeroed() };
    // On RoCE three bits of priority above bit 0; a completion's packet type (wc.sl 0xa)
    // copied by ibv_init_ah_from_wc must not reach the rate above them.
    av.stat_rate_sl = if roce { (a.sl & 0x7) << 1 } else { a.sl & 0xf };
    av.fl_mlid = a.src_path_bits & 0x7f;
    av.rlid = a.dlid.to_be();
    if a.is_global != 0 {
        // SAFETY: ibv_gid is 16 bytes either way.
        let gid = unsafe { a.grh.dgid.raw };
        av.grh_gid_fl = (1u32 << 30 | u32::from(a.grh.sgid_index) << 20 | a.grh.flow_label & 0xf_ffff).to_be();
        av.hop_limit = a.grh.hop_limit;
        av.tclass = a.grh.traffic_class;
        av.rgid = gid;
        if roce && gid[0] == 0xfe && gid[1] == 0x80 {
            av.rmac = [gid[8] ^ 2, gid[9], gid[10], gid[13], gid[14], gid[15]];
        }
    }
    av
}

impl crate::state::Shim {
    /// `wr.ud` of a WR on a UD QP as the simulator takes it: the attributes of the AH's
    /// address vector, the remote QP number and Q_Key; `None` for an AH the shim did not make.
    pub(crate) fn ud_dest(&self, ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32) -> Option<mlx5_dv::UdDest> {
        let av = self.avs.get(&key(ah))?;
        let fl = u32::from_be(av.grh_gid_fl);
        Some(mlx5_dv::UdDest {
            dlid: u16::from_be(av.rlid),
            is_global: fl & 1 << 30 != 0,
            dgid: mlx5_dv::Gid(av.rgid),
            sgid_index: (fl >> 20) as u8,
            hop_limit: av.hop_limit,
            remote_qpn,
            remote_qkey,
        })
    }
}

/// `ibv_find_gid_index`: the first GID of the port equal to `gid` whose type is RoCE v2
/// (`v2`) or not; -1 (EINVAL) when none is.
fn find_gid_index(ctx: *mut ibv_context, port_num: u8, gid: &[u8; 16], v2: bool) -> c_int {
    let Ok(table) = with(Err, |s| s.gid_table(ctx, port_num)) else { return minus_one(libc::EINVAL) };
    let rocev2 = IBV_GID_TYPE_ROCE_V2;
    match table.iter().position(|(g, t)| g == gid && (*t == rocev2) == v2) {
        Some(i) => i as c_int,
        None => minus_one(libc::EINVAL),
    }
}

/// The IPv4-mapped IPv6 address of an IPv4 address in network order.
fn mapped(ipv4: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ipv4);
    g
}

/// `ibv_init_ah_from_wc` (libibverbs' verbs.c): the attributes that answer a completion's
/// sender. With `IBV_WC_GRH` the GRH area says how it came: an IPv6-format GRH (RoCE v1 with
/// next header 0x1b, v2 with UDP) or, when its version is not 6, an IPv4 header in its last
/// 20 bytes (RoCE v2); the source GID index is the port's GID the packet was sent to, of that
/// type. -1 with errno for a multicast destination, an unknown header or no such GID.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    context: *mut ibv_context,
    port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    if wc.is_null() || grh.is_null() || ah_attr.is_null() {
        return minus_one(libc::EINVAL);
    }
    // SAFETY: the caller's completion, its 40-byte GRH area and the attributes to fill.
    let (wc, g, out) = unsafe { (&*wc, std::slice::from_raw_parts(grh.cast::<u8>(), 40), &mut *ah_attr) };
    // SAFETY: plain data; all-zero is valid.
    *out = unsafe { std::mem::zeroed() };
    let word = u32::from_be_bytes([g[0], g[1], g[2], g[3]]);
    out.grh.flow_label = word & 0xf_ffff;
    out.dlid = wc.slid;
    out.sl = wc.sl;
    out.src_path_bits = wc.dlid_path_bits;
    out.port_num = port_num;
    if wc.wc_flags & mlx5_dv::WcFlags::GRH.bits() == 0 {
        return 0;
    }
    out.is_global = 1;
    let ip4 = &g[20..40];
    let v4_ok = ip4[0] & 0xf == 5 && internet_sum(ip4) == 0;
    let version = match word >> 28 {
        6 if !v4_ok => 6,
        6 => 4,
        _ if ip4[0] >> 4 == 4 => 4,
        _ => return minus_one(libc::EPROTONOSUPPORT),
    };
    if version == 4 {
        let (saddr, daddr) = ([ip4[12], ip4[13], ip4[14], ip4[15]], [ip4[16], ip4[17], ip4[18], ip4[19]]);
        if daddr[0] & 0xf0 == 0xe0 {
            return minus_one(libc::EINVAL);
        }
        let i = find_gid_index(context, port_num, &mapped(daddr), true);
        if i < 0 {
            return i;
        }
        out.grh.dgid.raw = mapped(saddr);
        out.grh.sgid_index = i as u8;
        out.grh.hop_limit = ip4[8];
        out.grh.traffic_class = ip4[1];
        return 0;
    }
    let (mut sgid, mut dgid) = ([0u8; 16], [0u8; 16]);
    sgid.copy_from_slice(&g[8..24]);
    dgid.copy_from_slice(&g[24..40]);
    if dgid[0] == 0xff {
        return minus_one(libc::EINVAL);
    }
    out.grh.dgid.raw = sgid;
    let v2 = match g[6] {
        17 => true,
        0x1b => false,
        _ => return minus_one(libc::EPROTONOSUPPORT),
    };
    let i = find_gid_index(context, port_num, &dgid, v2);
    if i < 0 {
        return i;
    }
    out.grh.sgid_index = i as u8;
    out.grh.hop_limit = g[7];
    out.grh.traffic_class = (word >> 20) as u8;
    0
}

/// The ones' complement sum of an IPv4 header with its checksum field: 0 when it holds.
fn internet_sum(h: &[u8]) -> u16 {
    let mut sum: u32 = h.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// `ibv_create_ah_from_wc`: [`ibv_init_ah_from_wc`], then `ibv_create_ah`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    let Ok(ctx) = with(Err, |s| s.pd(pd).map(|p| p.c.context)) else { return null(libc::EINVAL) };
    // SAFETY: plain data; all-zero is valid.
    let mut attr: ibv_ah_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the caller's completion and GRH; our own attributes.
    if unsafe { ibv_init_ah_from_wc(ctx, port_num, wc, grh, &mut attr) } != 0 {
        return ptr::null_mut();
    }
    // SAFETY: the PD and attributes just checked and filled.
    unsafe { ibv_create_ah(pd, &mut attr) }
}
