//! What a conformance case is, what it needs, and the checks cases are written with.

use std::fmt::Debug;

use mlx5_dv::{Backend, Caps, Result as DvResult, errno};

/// A conformance case: written once against `&mut dyn Backend`, run on every backend.
#[derive(Clone, Copy)]
pub struct Case {
    /// Dotted name, `family.what_it_checks`.
    pub name: &'static str,
    /// The §12 items it covers (empty for behaviour the checklist does not number).
    pub covers: &'static [u16],
    /// What the backend must have for the case to run; otherwise it is skipped with the reason.
    pub needs: &'static [Need],
    /// The body.
    pub run: fn(&mut dyn Backend, &Env) -> Result<(), Verdict>,
}

impl Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case").field("name", &self.name).field("covers", &self.covers).finish()
    }
}

/// A requirement a case declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// An mlx5 kernel device.
    Mlx5Device,
    /// A device of another provider (rxe, siw).
    OtherDevice,
    /// An mlx5 function bound to vfio-pci.
    VfioDevice,
    /// Non-zero signature caps.
    SigCaps,
    /// Zero signature caps.
    NoSigCaps,
    /// An AES-XTS single- or multi-block engine.
    CryptoEngine,
    /// No AES-XTS engine.
    NoCryptoEngine,
    /// Knowledge of whether the kernel supports mkey tag update.
    KnownUpdateTag,
    /// Knowledge of whether the kernel grants DEVX contexts.
    KnownDevx,
    /// A kernel that grants DEVX contexts.
    Devx,
    /// A kernel that grants no DEVX contexts.
    NoDevx,
    /// Simulator control: fault injection and the firmware command log.
    SimControl,
    /// A second mlx5 device.
    TwoDevices,
    /// Tag-matching SRQs (`tm_caps` with `IBV_TM_CAP_RC`) the backend can create.
    TagMatching,
    /// CRC32C block signatures.
    SigCrc32c,
    /// CRC64_XP10 block signatures.
    SigCrc64,
    /// 4048-byte signature blocks.
    SigBlock4048,
    /// A kernel with SQD→RTS (for SIG_PIPELINING).
    Sqd2Rts,
    /// An AES-XTS engine and DEK objects (assumed when the backend cannot read the object types).
    DekObjects,
    /// Wrapped-key crypto: CRYPTO and WRAPPED_CRYPTO_OPERATIONAL, the AES-XTS wrapped import
    /// method, and login objects (assumed when the backend cannot read the object types).
    WrappedCrypto,
    /// Plaintext-key crypto: an engine and the CRYPTO flag without a wrapped import method.
    PlaintextCrypto,
    /// No wrapped crypto mode: crypto login is EOPNOTSUPP.
    NoWrappedCrypto,
    /// The device's credential and import KEK are known: the simulator's published test values.
    TestSecrets,
}

/// What the harness learned about a backend before running cases on it.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// The first mlx5 kernel device.
    pub device: Option<String>,
    /// A second mlx5 kernel device, for client/server cases across two devices.
    pub peer_device: Option<String>,
    /// The first VFIO device.
    pub vfio_device: Option<String>,
    /// The first device of another provider.
    pub other_device: Option<String>,
    /// What the backend reports it can do; cases are gated on this alone.
    pub caps: Caps,
    /// Why the backend cannot run cases at all, if it cannot.
    pub unavailable: Option<String>,
}

impl Env {
    /// Learn a backend: its caps, and the devices it lists.
    pub fn probe(b: &mut dyn Backend) -> Env {
        let mut env = Env { caps: b.caps(), ..Env::default() };
        let devices = match b.device_list() {
            Ok(d) => d,
            Err(e) => {
                env.unavailable = Some(e.reason().to_string());
                return env;
            }
        };
        use mlx5_dv::DeviceKind::*;
        let first = |k| devices.iter().find(|d| d.kind == k).map(|d| d.name.clone());
        env.device = first(Mlx5);
        env.peer_device = devices.iter().filter(|d| d.kind == Mlx5).nth(1).map(|d| d.name.clone());
        env.vfio_device = first(Mlx5Vfio);
        env.other_device = first(Other);
        if env.device.is_none() {
            env.unavailable = Some("no mlx5 device found".into());
        }
        env
    }

    /// Why `need` is not met here, or `None` if it is.
    pub fn unmet(&self, need: Need) -> Option<String> {
        let has_engine = self.caps.device.has_crypto_engine();
        let sig = &self.caps.device.sig;
        let kernel = &self.caps.kernel;
        let (ok, why) = match need {
            Need::Mlx5Device => (self.device.is_some(), "no mlx5 device found"),
            Need::OtherDevice => (self.other_device.is_some(), "no non-mlx5 RDMA device on this host"),
            Need::VfioDevice => (self.vfio_device.is_some(), "no mlx5 function bound to vfio-pci"),
            Need::SigCaps => (sig.block_prot != 0, "the device has no signature offload"),
            Need::NoSigCaps => (sig.block_prot == 0, "the device has signature offload"),
            Need::CryptoEngine => (has_engine, "the device has no AES-XTS engine"),
            Need::NoCryptoEngine => (!has_engine, "the device has an AES-XTS engine"),
            Need::KnownUpdateTag => (
                kernel.mkey_update_tag.is_some(),
                "the backend cannot tell whether the kernel supports mkey tag update",
            ),
            Need::KnownDevx => (kernel.devx.is_some(), "the backend cannot tell whether the kernel grants DEVX"),
            Need::Devx => (kernel.devx == Some(true), devx_reason(kernel.devx)),
            Need::NoDevx => (kernel.devx == Some(false), devx_reason(kernel.devx)),
            Need::SimControl => (self.caps.sim_control, "needs simulator control (fault injection, command log)"),
            Need::TwoDevices => (self.peer_device.is_some(), "needs a second mlx5 device"),
            Need::TagMatching => (
                self.caps.device.tm.is_some_and(|t| t.flags & mlx5_dv::TM_CAP_RC != 0),
                "the backend has no tag-matching SRQs (tm_caps unknown or without IBV_TM_CAP_RC)",
            ),
            Need::SigCrc32c => (sig.crc_type & mlx5_dv::sig_cap::CRC32C != 0, "the device has no CRC32C signature"),
            Need::SigCrc64 => {
                (sig.crc_type & mlx5_dv::sig_cap::CRC64_XP10 != 0, "the device has no CRC64_XP10 signature")
            }
            Need::SigBlock4048 => {
                (sig.block_size & mlx5_dv::sig_cap::BLOCK_4048 != 0, "the device has no 4048-byte signature blocks")
            }
            Need::Sqd2Rts => (kernel.sqd2rts == Some(true), "the kernel has no SQD->RTS (or the backend cannot tell)"),
            Need::DekObjects => {
                (has_engine && self.has_obj_type(DEK), "the device has no AES-XTS engine or DEK object")
            }
            Need::WrappedCrypto => (self.wrapped_crypto(), "the device has no wrapped-key crypto mode"),
            Need::PlaintextCrypto => (
                has_engine && self.caps.device.crypto.flags & CRYPTO != 0 && !self.wrapped_import(),
                "the device has no plaintext-key crypto mode",
            ),
            Need::NoWrappedCrypto => (!self.wrapped_login(), "the device has a wrapped crypto mode"),
            Need::TestSecrets => (
                self.caps.sim_control,
                "needs the device's credential and import KEK (known only for the simulator's test values)",
            ),
        };
        (!ok).then(|| why.to_string())
    }

    /// The device has general object type `ty`, or the backend cannot tell.
    fn has_obj_type(&self, ty: u16) -> bool {
        self.caps.device.general_obj_types.is_none_or(|m| m & 1u64.checked_shl(u32::from(ty)).unwrap_or(0) != 0)
    }

    fn wrapped_import(&self) -> bool {
        self.caps.device.crypto.wrapped_import_method & mlx5_dv::crypto_cap::WRAPPED_IMPORT_AES_XTS != 0
    }

    /// Crypto login would pass the provider's cap checks.
    fn wrapped_login(&self) -> bool {
        let f = CRYPTO | mlx5_dv::crypto_cap::FLAG_WRAPPED_CRYPTO_OPERATIONAL;
        self.caps.device.crypto.flags & f == f && self.has_obj_type(LOGIN)
    }

    fn wrapped_crypto(&self) -> bool {
        self.wrapped_login() && self.wrapped_import() && self.caps.device.has_crypto_engine() && self.has_obj_type(DEK)
    }

    /// The mlx5 device name; cases that declare [`Need::Mlx5Device`] can rely on it.
    pub fn dev(&self) -> Result<&str, Verdict> {
        self.device.as_deref().ok_or_else(|| Verdict::skip("no mlx5 device found"))
    }
}

const CRYPTO: u32 = mlx5_dv::crypto_cap::FLAG_CRYPTO;
const DEK: u16 = mlx5_dv::prm::obj_type::DEK;
const LOGIN: u16 = mlx5_dv::prm::obj_type::CRYPTO_LOGIN;

fn devx_reason(devx: Option<bool>) -> &'static str {
    match devx {
        Some(true) => "the kernel grants DEVX contexts",
        Some(false) => "the kernel grants no DEVX context",
        None => "the backend cannot tell whether the kernel grants DEVX",
    }
}

/// Why a case did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A check failed.
    Fail {
        /// What was checked.
        what: String,
        /// What the spec says.
        expected: String,
        /// What the backend did.
        actual: String,
    },
    /// The case cannot run here.
    Skip(String),
}

impl Verdict {
    /// A failed check.
    pub fn fail(what: impl Into<String>, expected: impl Debug, actual: impl Debug) -> Self {
        Verdict::Fail { what: what.into(), expected: format!("{expected:?}"), actual: format!("{actual:?}") }
    }

    /// A skip with its reason.
    pub fn skip(reason: impl Into<String>) -> Self {
        Verdict::Skip(reason.into())
    }
}

/// The result type of case bodies.
pub type Check<T = ()> = Result<T, Verdict>;

fn describe_result<T: Debug>(r: &DvResult<T>) -> String {
    match r {
        Ok(v) => format!("Ok({v:?})"),
        Err(e) => format!("Err({}: {})", errno::display(e.errno()), e.reason()),
    }
}

/// Require `r` to fail with `errno`.
pub fn expect_errno<T: Debug>(what: &str, r: DvResult<T>, expected: i32) -> Check {
    match &r {
        Err(e) if e.errno() == expected => Ok(()),
        _ => Err(Verdict::Fail {
            what: what.into(),
            expected: format!("Err({})", errno::display(expected)),
            actual: describe_result(&r),
        }),
    }
}

/// Require `r` to succeed and return its value.
pub fn expect_ok<T: Debug>(what: &str, r: DvResult<T>) -> Check<T> {
    match r {
        Ok(v) => Ok(v),
        Err(e) => Err(Verdict::Fail {
            what: what.into(),
            expected: "Ok".into(),
            actual: format!("Err({}: {})", errno::display(e.errno()), e.reason()),
        }),
    }
}

/// Require `actual == expected`.
pub fn check_eq<T: Debug + PartialEq>(what: &str, actual: T, expected: T) -> Check {
    if actual == expected { Ok(()) } else { Err(Verdict::fail(what, expected, actual)) }
}

/// Require `cond`, describing what was expected and what was seen.
pub fn check(what: &str, cond: bool, expected: &str, actual: impl Debug) -> Check {
    if cond {
        Ok(())
    } else {
        Err(Verdict::Fail { what: what.into(), expected: expected.into(), actual: format!("{actual:?}") })
    }
}
