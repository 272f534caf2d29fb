//! Loading libmlx5 at run time, and the functions newer than rdma-core 44.

use std::ffi::{c_char, c_int};
use std::fmt;

use mlx5_dv::errno::EOPNOTSUPP;
use mlx5_dv::{Error, Op};
use rdma_sys::{ibv_context, ibv_mr, ibv_pd};

use crate::sys::mlx5dv::Mlx5DvLib;

/// Why the hw backend cannot run at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unavailable {}

/// `mlx5dv_reg_dmabuf_mr` (rdma-core 55).
pub type RegDmabufMrFn = unsafe extern "C" fn(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
    mlx5_access: c_int,
) -> *mut ibv_mr;
/// `mlx5dv_get_data_direct_sysfs_path` (rdma-core 55).
pub type GetDataDirectSysfsPathFn =
    unsafe extern "C" fn(context: *mut ibv_context, buf: *mut c_char, buf_len: usize) -> c_int;

/// `ibv_reg_dmabuf_mr` (libibverbs of rdma-core 34), which the linked bindings predate.
pub type IbvRegDmabufMrFn = unsafe extern "C" fn(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr;

/// A function looked up in libmlx5 at run time: present, or absent with the release that has it.
#[derive(Debug, Clone, Copy)]
pub struct OptionalFn<F> {
    name: &'static str,
    since: &'static str,
    f: Option<F>,
}

impl<F: Copy> OptionalFn<F> {
    /// A function of the committed bindings, which arrived in rdma-core `since`.
    pub(crate) fn bound(name: &'static str, since: &'static str, f: &Result<F, libloading::Error>) -> Self {
        OptionalFn { name, since, f: f.as_ref().ok().copied() }
    }

    /// The function, or EOPNOTSUPP naming the rdma-core release that added it.
    pub fn get(&self, op: Op, installed: &str) -> Result<F, Error> {
        self.f.ok_or_else(|| {
            Error::new(
                op,
                EOPNOTSUPP,
                format!(
                    "{} needs rdma-core {} or later; the installed libmlx5 is from rdma-core {installed}",
                    self.name, self.since
                ),
            )
        })
    }

    /// True if the installed libmlx5 has the function.
    pub fn is_present(&self) -> bool {
        self.f.is_some()
    }
}

/// The loaded libmlx5: every function of the committed bindings, and the newer optional ones.
pub struct Mlx5Lib {
    /// The functions of `mlx5dv.h` (rdma-core 44); each is `Err` if the library lacks it.
    pub dv: Mlx5DvLib,
    /// `mlx5dv_reg_dmabuf_mr`.
    pub reg_dmabuf_mr: OptionalFn<RegDmabufMrFn>,
    /// `mlx5dv_get_data_direct_sysfs_path`.
    pub get_data_direct_sysfs_path: OptionalFn<GetDataDirectSysfsPathFn>,
    /// `ibv_reg_dmabuf_mr`, from libibverbs.
    pub ibv_reg_dmabuf_mr: OptionalFn<IbvRegDmabufMrFn>,
    rdma_core_version: String,
    /// Keeps libibverbs' looked-up symbols valid.
    _verbs: Option<libloading::Library>,
}

impl fmt::Debug for Mlx5Lib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mlx5Lib").field("rdma_core_version", &self.rdma_core_version).finish_non_exhaustive()
    }
}

/// The library file name the provider is installed under.
pub const LIBMLX5: &str = "libmlx5.so.1";

impl Mlx5Lib {
    /// Load libmlx5 from the system's library path.
    pub fn load() -> Result<Self, Unavailable> {
        // SAFETY: loading libmlx5 runs its ELF constructors, which only register the provider.
        let lib = unsafe { libloading::Library::new(LIBMLX5) }
            .map_err(|e| Unavailable(format!("libmlx5 not installed ({LIBMLX5}: {e})")))?;
        // SAFETY: each symbol is looked up by name and typed as the rdma-core headers declare it.
        let (reg, path) = unsafe {
            (
                lib.get::<RegDmabufMrFn>(b"mlx5dv_reg_dmabuf_mr\0").ok().map(|s| *s),
                lib.get::<GetDataDirectSysfsPathFn>(b"mlx5dv_get_data_direct_sysfs_path\0").ok().map(|s| *s),
            )
        };
        // SAFETY: libibverbs is already linked; loading it again only takes a reference.
        let verbs = unsafe { libloading::Library::new("libibverbs.so.1") }.ok();
        // SAFETY: looked up by name and typed as verbs.h declares it.
        let ibv_reg =
            verbs.as_ref().and_then(|l| unsafe { l.get::<IbvRegDmabufMrFn>(b"ibv_reg_dmabuf_mr\0") }.ok().map(|s| *s));
        // SAFETY: as above; from_library keeps the library loaded for the struct's lifetime.
        let dv =
            unsafe { Mlx5DvLib::from_library(lib) }.map_err(|e| Unavailable(format!("cannot bind libmlx5: {e}")))?;
        Ok(Mlx5Lib {
            dv,
            reg_dmabuf_mr: OptionalFn { name: "mlx5dv_reg_dmabuf_mr", since: "55", f: reg },
            get_data_direct_sysfs_path: OptionalFn { name: "mlx5dv_get_data_direct_sysfs_path", since: "55", f: path },
            ibv_reg_dmabuf_mr: OptionalFn { name: "ibv_reg_dmabuf_mr", since: "34", f: ibv_reg },
            rdma_core_version: loaded_rdma_core_version().unwrap_or_else(|| "unknown".into()),
            _verbs: verbs,
        })
    }

    /// The rdma-core release of the loaded libmlx5 (`44.0`), read from its file name.
    pub fn rdma_core_version(&self) -> &str {
        &self.rdma_core_version
    }
}

/// Find the loaded `libmlx5.so.1.X.Y.Z` in this process's mappings; `Y.Z` is the rdma-core
/// release.
fn loaded_rdma_core_version() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let path = maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.contains("libmlx5.so."))?;
    let real = std::fs::canonicalize(path).ok()?;
    rdma_core_version_from_file_name(real.file_name()?.to_str()?)
}

/// `libmlx5.so.1.24.44.0` → `44.0`.
pub(crate) fn rdma_core_version_from_file_name(name: &str) -> Option<String> {
    let rest = name.strip_prefix("libmlx5.so.")?;
    let parts: Vec<&str> = rest.split('.').collect();
    match parts.as_slice() {
        [_, _, major, minor] => Some(format!("{major}.{minor}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_comes_from_the_file_name() {
        assert_eq!(rdma_core_version_from_file_name("libmlx5.so.1.24.44.0").as_deref(), Some("44.0"));
        assert_eq!(rdma_core_version_from_file_name("libmlx5.so.1.25.55.1").as_deref(), Some("55.1"));
        assert_eq!(rdma_core_version_from_file_name("libmlx5.so.1"), None);
        assert_eq!(rdma_core_version_from_file_name("libibverbs.so.1.14.44.0"), None);
    }
}
