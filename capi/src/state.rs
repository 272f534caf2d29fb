//! The process-wide simulator and the C objects handed out over it.
//!
//! Each C object the shim returns is a boxed C struct, keyed here by its address, beside the
//! trait handle it stands for: a pointer a program passes back is looked up, never trusted,
//! so a stale or foreign pointer is EINVAL rather than a fault.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard, OnceLock};

use mlx5_sim::{Profile, ShippedProfiles, Simulator};

use crate::device::{Context, Device};
use crate::events::Channel;
use crate::mr::{ExternalMemory, Mkey, Mr, Pd};
use crate::queue::{Cq, Qp};

/// The simulator and every object a program holds.
pub struct Shim {
    pub(crate) sim: Simulator,
    pub(crate) devices: Vec<Device>,
    pub(crate) contexts: BTreeMap<usize, Context>,
    pub(crate) channels: BTreeMap<usize, Channel>,
    pub(crate) pds: BTreeMap<usize, Pd>,
    pub(crate) mrs: BTreeMap<usize, Mr>,
    pub(crate) mkeys: BTreeMap<usize, Mkey>,
    pub(crate) cqs: BTreeMap<usize, Cq>,
    pub(crate) qps: BTreeMap<usize, Qp>,
    pub(crate) ahs: BTreeMap<usize, Box<rdma_sys::ibv_ah>>,
    pub(crate) memory: ExternalMemory,
    /// The crypto and DEVX objects (`crate::dv`).
    pub(crate) dv: crate::dv::DvObjects,
}

/// The profile the environment asks for: `MLX5SIM_PROFILE` names a shipped profile or a TOML
/// file; `MLX5SIM_DEVICES` overrides its device count.
fn profile_from_env() -> Result<Profile, String> {
    let name = std::env::var("MLX5SIM_PROFILE").unwrap_or_else(|_| mlx5_sim::DEFAULT_PROFILE.to_string());
    let mut p = Profile::resolve(&name).map_err(|e| e.to_string())?;
    if let Ok(n) = std::env::var("MLX5SIM_DEVICES") {
        p.device.count = n.trim().parse().map_err(|_| format!("MLX5SIM_DEVICES={n}: not a count of 0 to 255"))?;
    }
    Ok(p)
}

impl Shim {
    fn new() -> Result<Shim, String> {
        let profile = profile_from_env()?;
        let sim = Simulator::new(profile).map_err(|e| e.to_string())?;
        let mut shim = Shim {
            sim,
            devices: Vec::new(),
            contexts: BTreeMap::new(),
            channels: BTreeMap::new(),
            pds: BTreeMap::new(),
            mrs: BTreeMap::new(),
            mkeys: BTreeMap::new(),
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            ahs: BTreeMap::new(),
            memory: ExternalMemory::default(),
            dv: Default::default(),
        };
        shim.devices = Device::enumerate(&mut shim.sim).map_err(|e| e.to_string())?;
        Ok(shim)
    }
}

static SHIM: OnceLock<Result<Mutex<Shim>, String>> = OnceLock::new();

/// The process-wide shim, locked; ENODEV (once explained on stderr) when the environment's
/// profile does not load.
pub fn shim() -> Result<MutexGuard<'static, Shim>, c_int> {
    let cell = SHIM.get_or_init(|| {
        Shim::new().map(Mutex::new).inspect_err(|e| eprintln!("mlx5sim: the simulated devices are unavailable: {e}"))
    });
    match cell {
        Ok(m) => Ok(m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())),
        Err(_) => Err(libc::ENODEV),
    }
}

/// Run `f` on the locked shim; `fail(errno)` if the shim is unavailable.
pub(crate) fn with<R>(fail: impl FnOnce(c_int) -> R, f: impl FnOnce(&mut Shim) -> R) -> R {
    match shim() {
        Ok(mut s) => f(&mut s),
        Err(e) => fail(e),
    }
}

/// The key of a C object: its address.
pub(crate) fn key<T>(p: *const T) -> usize {
    p as usize
}

// SAFETY: the raw pointers inside are addresses of boxes the shim owns and of the program's
// own objects; they are read and written only while the one lock is held.
unsafe impl Send for Shim {}
