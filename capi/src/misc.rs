//! The calls that need no device: the sysfs path and the simulated devices' sysfs files, fork
//! support, the rate conversions, and the ioctl helper providers link against.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

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

/// `IBV_SYSFS_PATH_MAX`: the longest `SYSFS_PATH` kept.
const SYSFS_PATH_MAX: usize = 256;

/// The sysfs root `ibv_get_sysfs_path` reports: `SYSFS_PATH` when the process is not set-uid
/// (its first 256 bytes, trailing slashes dropped), else `/sys`; read once, as libibverbs
/// keeps the first answer.
fn sysfs_root(env: Option<&[u8]>) -> CString {
    let Some(v) = env else { return c"/sys".to_owned() };
    let v = &v[..v.len().min(SYSFS_PATH_MAX)];
    let end = v.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    // An environment value holds no NUL; were it to, the path ends there as strndup's would.
    let v = &v[..end];
    let v = &v[..v.iter().position(|&b| b == 0).unwrap_or(v.len())];
    CString::new(v).unwrap_or_default()
}

/// `ibv_get_sysfs_path`: the directory libibverbs reads devices from (`sysfs.c`).
#[unsafe(no_mangle)]
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    static PATH: OnceLock<CString> = OnceLock::new();
    PATH.get_or_init(|| {
        // SAFETY: getuid and geteuid cannot fail.
        let same = unsafe { libc::getuid() == libc::geteuid() };
        let env = std::env::var_os("SYSFS_PATH").filter(|_| same);
        sysfs_root(env.as_ref().map(|v| std::os::unix::ffi::OsStrExt::as_bytes(v.as_os_str())))
    })
    .as_ptr()
}

/// `struct ib_uverbs_ioctl_hdr`: the header of an ioctl command's attributes.
#[repr(C)]
struct IoctlHdr {
    length: u16,
    object_id: u16,
    method_id: u16,
    num_attrs: u16,
    reserved1: u64,
    driver_id: u32,
    reserved2: u32,
}

/// `struct ibv_command_buffer` of libibverbs' `cmd_ioctl.h`, up to its attributes.
#[repr(C)]
struct CommandBuffer {
    next: *const CommandBuffer,
    /// `struct ib_uverbs_attr *`: the next free attribute of `hdr.attrs`.
    next_attr: *const u8,
    last_attr: *const u8,
    uhw: [u8; 4],
    flags: u8,
    hdr: IoctlHdr,
}

/// `sizeof(struct ib_uverbs_attr)`.
const UVERBS_ATTR_SIZE: usize = 16;

/// `__ioctl_final_num_attrs`: `num_attrs` plus the attributes of each linked buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __ioctl_final_num_attrs(num_attrs: c_uint, link: *const c_void) -> c_uint {
    let mut n = num_attrs;
    let mut link = link.cast::<CommandBuffer>();
    while !link.is_null() {
        // SAFETY: the caller's linked command buffers (libibverbs' contract).
        let b = unsafe { &*link };
        let attrs = (&raw const b.hdr).cast::<u8>().wrapping_add(size_of::<IoctlHdr>());
        let used = (b.next_attr as usize).saturating_sub(attrs as usize) / UVERBS_ATTR_SIZE;
        n = n.wrapping_add(c_uint::try_from(used).unwrap_or(c_uint::MAX));
        link = b.next;
    }
    n
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
const MULT: [(c_int, c_int); 15] = [
    (2, 1),
    (5, 2),
    (3, 4),
    (6, 8),
    (4, 12),
    (7, 16),
    (8, 24),
    (9, 32),
    (10, 48),
    (19, 11),
    (20, 20),
    (21, 160),
    (22, 240),
    (23, 320),
    (24, 480),
];

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sysfs_root_is_sysfs_path_without_trailing_slashes_or_sys() {
        assert_eq!(sysfs_root(None).as_bytes(), b"/sys");
        assert_eq!(sysfs_root(Some(b"/tmp/fake//")).as_bytes(), b"/tmp/fake");
        assert_eq!(sysfs_root(Some(b"/")).as_bytes(), b"");
        let long = [b'a'; 300];
        assert_eq!(sysfs_root(Some(&long)).as_bytes().len(), SYSFS_PATH_MAX);
    }

    #[test]
    fn the_final_attribute_count_adds_each_linked_buffers_attributes() {
        // An ibv_command_buffer is followed by room for its attributes.
        #[repr(C)]
        struct WithAttrs {
            b: CommandBuffer,
            attrs: [[u8; UVERBS_ATTR_SIZE]; 4],
        }
        // SAFETY: plain data.
        let mut second: WithAttrs = unsafe { std::mem::zeroed() };
        second.b.next_attr = second.attrs[3].as_ptr();
        // SAFETY: plain data.
        let mut first: WithAttrs = unsafe { std::mem::zeroed() };
        first.b.next = &second.b;
        first.b.next_attr = first.attrs[1].as_ptr();
        assert_eq!(size_of::<CommandBuffer>(), 56, "the attributes start at byte 56, as in C");
        // SAFETY: the two buffers above.
        assert_eq!(unsafe { __ioctl_final_num_attrs(2, (&raw const first.b).cast()) }, 2 + 1 + 3);
        // SAFETY: no buffer.
        assert_eq!(unsafe { __ioctl_final_num_attrs(7, std::ptr::null()) }, 7);
    }
}
