//! The calls that need no device: the simulated devices' sysfs files, fork support, and the
//! rate conversions.

use std::ffi::{CStr, c_char, c_int, c_void};

use crate::errno::minus_one;
use crate::state::with;

/// The content of `<dir>/<file>` where `dir` is a simulated device's `ibdev_path`.
fn sysfs_file(dir: &str, file: &str) -> Option<String> {
    let name = dir.strip_prefix("/sys/class/infiniband/")?;
    with(
        |_| None,
        |s| {
            let d = s.devices.iter().find(|d| d.name == name)?;
            let p = s.sim.profile();
            let g = d.guid.to_be_bytes();
            let guid = format!(
                "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}",
                g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
            );
            Some(match file {
                "board_id" => p.device.board_id.clone(),
                "fw_ver" => p.device.fw_ver.clone(),
                "hca_type" => format!("MT{}", p.device.vendor_part_id),
                "hw_rev" => "0x0".to_string(),
                "node_type" => "1: CA".to_string(),
                "node_guid" | "sys_image_guid" => guid,
                _ => return None,
            })
        },
    )
}

/// `ibv_read_sysfs_file`: the simulated devices' attribute files; -1 for anything else.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
        return minus_one(libc::EINVAL);
    }
    // SAFETY: the caller's NUL-terminated strings.
    let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
    let (Ok(dir), Ok(file)) = (dir.to_str(), file.to_str()) else { return minus_one(libc::ENOENT) };
    let Some(text) = sysfs_file(dir.trim_end_matches('/'), file) else { return minus_one(libc::ENOENT) };
    let n = text.len().min(size - 1);
    // SAFETY: the caller's buffer of `size` bytes; n + 1 <= size.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

/// `ibv_fork_init`: nothing to prepare; the simulator's memory is not pinned.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `ibv_is_fork_initialized`: IBV_FORK_UNNEEDED, as on a kernel with copy-on-fork.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}

/// `ibv_dontfork_range`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `ibv_dofork_range`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `enum ibv_rate` values with a multiple of 2.5 Gb/s.
const MULT: [(c_int, c_int); 9] = [(2, 1), (5, 2), (3, 4), (6, 8), (4, 12), (7, 16), (8, 24), (9, 32), (10, 48)];

/// `enum ibv_rate` values and their Mb/s.
const MBPS: [(c_int, c_int); 23] = [
    (2, 2500),
    (5, 5000),
    (3, 10000),
    (6, 20000),
    (4, 30000),
    (7, 40000),
    (8, 60000),
    (9, 80000),
    (10, 120000),
    (11, 14062),
    (12, 56250),
    (13, 112500),
    (14, 168750),
    (15, 25781),
    (16, 103125),
    (17, 206250),
    (18, 309375),
    (19, 28125),
    (20, 53125),
    (21, 425000),
    (22, 637500),
    (23, 850000),
    (24, 1275000),
];

/// `ibv_rate_to_mult`: -1 for a rate without a multiple.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    MULT.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

/// `mult_to_ibv_rate`: IBV_RATE_MAX (0) for an unknown multiple.
#[unsafe(no_mangle)]
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    MULT.iter().find(|r| r.1 == mult).map_or(0, |r| r.0)
}

/// `ibv_rate_to_mbps`: -1 for an unknown rate.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    MBPS.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

/// `mbps_to_ibv_rate`: IBV_RATE_MAX (0) for an unknown rate.
#[unsafe(no_mangle)]
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    MBPS.iter().find(|r| r.1 == mbps).map_or(0, |r| r.0)
}
