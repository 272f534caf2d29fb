//! The process-wide simulator and the C objects handed out over it.
//!
//! Each C object the shim returns is a boxed C struct, keyed here by its address, beside the
//! trait handle it stands for: a pointer a program passes back is looked up, never trusted,
//! so a stale or foreign pointer is EINVAL rather than a fault.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

use mlx5_dv::{Backend, Buf, Call, Layer, Reply, Wrapped};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};
use mlx5_trace::Recorder;

use crate::objects::{Channel, Context, Cq, Device, DvObjects, ExternalMemory, Mkey, Mr, Pd, Qp, Srq};

pub(crate) mod device_thread;

/// The simulator, and its recorder when `MLX5SIM_TRACE` names a trace file.
#[allow(clippy::large_enum_variant)] // the plain simulator is every call's path: kept inline
pub(crate) enum SimBackend {
    Plain(Simulator),
    Traced(Box<Wrapped<Recorder, Simulator>>, PathBuf),
}

impl Deref for SimBackend {
    type Target = dyn Backend;

    fn deref(&self) -> &Self::Target {
        match self {
            SimBackend::Plain(s) => s,
            SimBackend::Traced(w, _) => &**w,
        }
    }
}

impl DerefMut for SimBackend {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            SimBackend::Plain(s) => s,
            SimBackend::Traced(w, _) => &mut **w,
        }
    }
}

impl SimBackend {
    /// The simulator itself (a recorder records calls, not what the device thread does).
    pub(crate) fn simulator(&self) -> &Simulator {
        match self {
            SimBackend::Plain(s) => s,
            SimBackend::Traced(w, _) => &w.inner,
        }
    }

    /// As [`SimBackend::simulator`], mutably.
    pub(crate) fn simulator_mut(&mut self) -> &mut Simulator {
        match self {
            SimBackend::Plain(s) => s,
            SimBackend::Traced(w, _) => &mut w.inner,
        }
    }

    /// The profile the simulator imitates.
    pub(crate) fn profile(&self) -> &Profile {
        match self {
            SimBackend::Plain(s) => s.profile(),
            SimBackend::Traced(w, _) => w.inner.profile(),
        }
    }

    /// Map the program's bytes (`Simulator::register_memory`). A trace records it as the
    /// allocation of a buffer of that length, so a replay has a buffer where the program had
    /// its bytes (their contents are the program's and are not in the trace).
    ///
    /// # Safety
    ///
    /// As `Simulator::register_memory`.
    pub(crate) unsafe fn register_memory(&mut self, ptr: *mut u8, len: usize) -> mlx5_dv::Result<Buf> {
        match self {
            // SAFETY: the caller's contract.
            SimBackend::Plain(s) => unsafe { s.register_memory(ptr, len) },
            SimBackend::Traced(w, _) => {
                // SAFETY: the caller's contract.
                let r = unsafe { w.inner.register_memory(ptr, len) };
                w.layer.after(&Call::AllocBuf { len }, &mut Reply::AllocBuf(r.clone()));
                r
            }
        }
    }

    /// Write the trace, if one is recorded.
    fn write_trace(&self) {
        if let SimBackend::Traced(w, path) = self {
            let header = w.layer.header(&w.inner, None);
            if let Err(e) = std::fs::write(path, w.layer.trace(&header)) {
                eprintln!("mlx5sim: writing the trace {}: {e}", path.display());
            }
        }
    }
}

/// The simulator and every object a program holds.
pub struct Shim {
    pub(crate) sim: SimBackend,
    pub(crate) devices: Vec<Device>,
    pub(crate) contexts: BTreeMap<usize, Context>,
    pub(crate) channels: BTreeMap<usize, Channel>,
    pub(crate) pds: BTreeMap<usize, Pd>,
    pub(crate) mrs: BTreeMap<usize, Mr>,
    /// MRs imported from a shared context (`ibv_import_mr`), by the address of their `ibv_mr`.
    pub(crate) imported_mrs: BTreeMap<usize, Box<rdma_sys::ibv_mr>>,
    pub(crate) mkeys: BTreeMap<usize, Mkey>,
    pub(crate) cqs: BTreeMap<usize, Cq>,
    pub(crate) qps: BTreeMap<usize, Qp>,
    pub(crate) srqs: BTreeMap<usize, Srq>,
    pub(crate) xrcds: BTreeMap<usize, crate::objects::Xrcd>,
    pub(crate) ahs: BTreeMap<usize, Box<rdma_sys::ibv_ah>>,
    /// Each AH's address vector (`mlx5dv_init_obj`), by the AH's address.
    pub(crate) avs: BTreeMap<usize, Box<mlx5_hw::sys::mlx5dv::mlx5_wqe_av>>,
    pub(crate) memory: ExternalMemory,
    /// The crypto and DEVX objects (`crate::dv`).
    pub(crate) dv: DvObjects,
    /// What `ibv_poll_cq` polls into before converting to the caller's `ibv_wc`s, kept from
    /// call to call so that polling allocates nothing once warm.
    pub(crate) wc_scratch: Vec<mlx5_dv::Wc>,
    /// Thread and parent domains (`crate::domain`).
    pub(crate) domains: crate::objects::Domains,
}

impl Shim {
    /// The devices run on their own thread (`MLX5SIM_MODE=free`, the default).
    pub(crate) fn free_running(&self) -> bool {
        self.sim.simulator().is_free_running()
    }

    /// One pass of the device thread: the devices run, then armed CQs fire their channels and
    /// asynchronous events reach their contexts. Whether anything moved.
    pub(crate) fn tick(&mut self) -> bool {
        let moved = self.sim.simulator_mut().tick();
        if moved {
            self.notify();
            self.collect_events();
        }
        moved
    }
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

/// This process's host number: `MLX5SIM_HOST` if set, else the process id, so that two
/// processes' devices have GUIDs, GIDs and first QP numbers of their own.
fn host_from_env() -> Result<u32, String> {
    match std::env::var("MLX5SIM_HOST") {
        Ok(v) => match v.trim().parse::<u32>() {
            Ok(n) if n <= 0xff_ffff => Ok(n),
            _ => Err(format!("MLX5SIM_HOST={v}: not a host number of 0 to 16777215")),
        },
        Err(_) => Ok(std::process::id() & 0xff_ffff),
    }
}

/// The first address of this process's ports on the network, or `None` to stay off it:
/// `MLX5SIM_NET=off` keeps the devices off the network; `MLX5SIM_ADDR` gives the first
/// address (an IPv4 address), else it comes from the host number (inside 127.0.0.0/8).
fn network_from_env(host: u32) -> Result<Option<std::net::Ipv4Addr>, String> {
    match std::env::var("MLX5SIM_NET").as_deref() {
        Ok("off") => return Ok(None),
        Ok("on") | Err(_) => {}
        Ok(other) => return Err(format!("MLX5SIM_NET={other}: not 'on' or 'off'")),
    }
    match std::env::var("MLX5SIM_ADDR") {
        Ok(v) => v.trim().parse().map(Some).map_err(|_| format!("MLX5SIM_ADDR={v}: not an IPv4 address")),
        Err(_) => Ok(Some(mlx5_sim::fabric::net::default_address(host))),
    }
}

/// Where the switch's multicast table is (docs/network.md, "Multicast"): `MLX5SIM_MCAST_DIR`,
/// else `mlx5sim-mcast-UID` in the temporary directory, which every process of the user sees.
fn multicast_dir_from_env() -> PathBuf {
    match std::env::var_os("MLX5SIM_MCAST_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        // SAFETY: getuid has no preconditions.
        _ => std::env::temp_dir().join(format!("mlx5sim-mcast-{}", unsafe { libc::getuid() })),
    }
}

/// The network fault rules `MLX5SIM_NET_FAULTS` gives (syntax:
/// [`mlx5_sim::fabric::faults::parse_rules`], docs/network.md), each with the device it is
/// for (`None`: every networked port); empty when it is unset.
fn net_faults_from_env() -> Result<Vec<mlx5_sim::fabric::faults::DeviceRule>, String> {
    match std::env::var("MLX5SIM_NET_FAULTS") {
        Ok(v) => mlx5_sim::fabric::faults::parse_rules(&v).map_err(|e| format!("MLX5SIM_NET_FAULTS: rule {e}")),
        Err(std::env::VarError::NotPresent) => Ok(Vec::new()),
        Err(std::env::VarError::NotUnicode(_)) => Err("MLX5SIM_NET_FAULTS: not UTF-8".into()),
    }
}

/// Put `MLX5SIM_NET_FAULTS`'s rules on the networked ports of `sim`.
fn add_net_faults(sim: &mut Simulator, rules: Vec<mlx5_sim::fabric::faults::DeviceRule>) -> Result<(), String> {
    let ports = sim.network_fds().len();
    if ports == 0 && !rules.is_empty() {
        return Err("MLX5SIM_NET_FAULTS acts on the network, and MLX5SIM_NET=off keeps the devices off it".into());
    }
    for (dev, rule) in rules {
        for d in dev.map_or(0..ports, |d| d..d + 1) {
            sim.add_network_fault(d, rule).map_err(|e| format!("MLX5SIM_NET_FAULTS: device {d}: {e}"))?;
        }
    }
    Ok(())
}

impl Shim {
    fn new() -> Result<Shim, String> {
        let profile = profile_from_env()?;
        let host = host_from_env()?;
        let mut sim = Simulator::with_host(profile, host).map_err(|e| e.to_string())?;
        if let Some(path) = std::env::var_os("MLX5SIM_PCAP") {
            let shown = PathBuf::from(&path).display().to_string();
            sim.capture_to(&path).map_err(|e| format!("MLX5SIM_PCAP={shown}: {e}"))?;
        }
        // A trace replays call by call, so it is recorded where the device runs inside the
        // calls: stepped, unless asked otherwise (which cannot be honoured).
        let tracing = std::env::var_os("MLX5SIM_TRACE").is_some();
        match (std::env::var("MLX5SIM_MODE").as_deref(), tracing) {
            (Ok("stepped"), _) | (Err(_), true) => {
                if std::env::var_os("MLX5SIM_NET_FAULTS").is_some() {
                    return Err("MLX5SIM_NET_FAULTS acts on the network, which a stepped device is not on".into());
                }
                sim.allocate_in_process();
            }
            (Ok("free"), true) => {
                return Err("MLX5SIM_TRACE records a stepped device: MLX5SIM_MODE=free cannot be traced".into());
            }
            (Ok("free"), false) | (Err(_), false) => {
                sim.free_running(mlx5_sim::Wake::new(device_thread::ring));
                let faults = net_faults_from_env()?;
                match network_from_env(host)? {
                    Some(first) => {
                        sim.connect_network(first)
                            .map_err(|e| format!("the network: {e} (MLX5SIM_ADDR gives another address)"))?;
                        add_net_faults(&mut sim, faults)?;
                        let dir = multicast_dir_from_env();
                        if let Err(e) = sim.use_multicast_table(&dir) {
                            eprintln!("mlx5sim: no multicast to other hosts: the table {}: {e}", dir.display());
                        }
                    }
                    None if !faults.is_empty() => {
                        return Err("MLX5SIM_NET_FAULTS acts on the network, which MLX5SIM_NET=off leaves".into());
                    }
                    None => {}
                }
            }
            (Ok(other), _) => return Err(format!("MLX5SIM_MODE={other}: not 'free' or 'stepped'")),
        }
        // SAFETY: registering fork handlers has no preconditions; Shim::new runs once.
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
        let sim = match std::env::var_os("MLX5SIM_TRACE") {
            Some(path) => {
                // SAFETY: registering an exit handler has no preconditions.
                unsafe { libc::atexit(write_trace_at_exit) };
                SimBackend::Traced(Box::new(Recorder::wrap(sim)), PathBuf::from(path))
            }
            None => SimBackend::Plain(sim),
        };
        let mut shim = Shim {
            sim,
            devices: Vec::new(),
            contexts: BTreeMap::new(),
            channels: BTreeMap::new(),
            pds: BTreeMap::new(),
            mrs: BTreeMap::new(),
            imported_mrs: BTreeMap::new(),
            mkeys: BTreeMap::new(),
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            ahs: BTreeMap::new(),
            avs: BTreeMap::new(),
            memory: ExternalMemory::default(),
            dv: Default::default(),
            wc_scratch: Vec::new(),
            srqs: BTreeMap::new(),
            xrcds: BTreeMap::new(),
            domains: Default::default(),
        };
        shim.devices = Device::enumerate(&mut *shim.sim).map_err(|e| e.to_string())?;
        Ok(shim)
    }
}

static SHIM: OnceLock<Result<Mutex<Shim>, String>> = OnceLock::new();

thread_local! {
    /// The shim's lock, held by a thread that is forking (see [`fork_prepare`]).
    static FORK_HOLD: std::cell::RefCell<Option<MutexGuard<'static, Shim>>> = const { std::cell::RefCell::new(None) };
}

/// Before `fork`: the forking thread takes the shim's lock, so that the child does not inherit
/// it held by the device thread, which the child does not have (it would wait for ever).
extern "C" fn fork_prepare() {
    if let Some(Ok(m)) = SHIM.get() {
        let g = m.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        FORK_HOLD.with(|h| *h.borrow_mut() = Some(g));
        device_thread::before_fork();
    }
}

/// This process is a child whose ports share their addresses with its siblings: a CM MAD
/// that comes to it may be for a sibling, so it answers none it has no ID for.
static SHARED_PORTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process's ports share their addresses with sibling processes.
pub(crate) fn shared_ports() -> bool {
    SHARED_PORTS.load(std::sync::atomic::Ordering::Acquire)
}

/// After `fork`, in the parent: the lock is free again.
extern "C" fn fork_parent() {
    device_thread::after_fork();
    FORK_HOLD.with(|h| drop(h.borrow_mut().take()));
}

/// After `fork`, in the child: the lock is free, and no device thread runs (the next
/// context the child opens starts one).
extern "C" fn fork_child() {
    device_thread::forked();
    device_thread::after_fork();
    FORK_HOLD.with(|h| {
        // A networked child shares its parent's addresses with its siblings (docs/network.md).
        if let Some(g) = h.borrow_mut().as_mut() {
            let host = std::process::id() & 0xff_ffff;
            match g.sim.simulator_mut().share_after_fork(host) {
                Ok(true) => SHARED_PORTS.store(true, std::sync::atomic::Ordering::Release),
                Ok(false) => {}
                Err(e) => eprintln!("mlx5sim: after fork, the ports' own sockets: {e}"),
            }
        }
        drop(h.borrow_mut().take());
    });
}

/// At exit: write the trace `MLX5SIM_TRACE` names.
extern "C" fn write_trace_at_exit() {
    if let Some(Ok(m)) = SHIM.get() {
        m.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).sim.write_trace();
    }
}

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

/// The shim's lock if it is free now; `None` if taken or the shim is unavailable.
pub(crate) fn try_shim() -> Option<MutexGuard<'static, Shim>> {
    match SHIM.get()? {
        Ok(m) => match m.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        },
        Err(_) => None,
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
