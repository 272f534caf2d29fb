//! The [`Backend`] trait: every family of the API in one object-safe trait.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::api::context::Contexts;
use crate::api::crypto::Crypto;
use crate::api::devx::Devx;
use crate::api::memory::Memory;
use crate::api::mkey::Mkeys;
use crate::api::queue::Queues;
use crate::api::srq::Srqs;
use crate::api::steering::Steering;
use crate::caps::Caps;
use crate::sim_control::SimControl;

/// A description of a backend instance, for reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendInfo {
    /// `"sim"` or `"hw"`.
    pub backend: String,
    /// The simulator profile, if any.
    pub profile: Option<String>,
    /// Facts about the device and the software stack (name, firmware, versions), ordered.
    pub facts: BTreeMap<String, String>,
}

/// The mlx5dv API as one object-safe trait: the families as supertraits, plus what describes
/// the backend itself.
///
/// Every family method corresponds to a C call and returns what that call returns: the same
/// values, and on failure an [`crate::Error`] with the same errno. Handles are checked: a
/// handle that was destroyed, or that another backend instance issued, gives `EINVAL`; a PD
/// that still has mkeys gives `EBUSY` on `dealloc_pd`. No input makes a backend panic.
pub trait Backend: Contexts + Memory + Mkeys + Queues + Crypto + Devx + Srqs + Steering {
    /// Describe this backend for reports.
    fn info(&self) -> BackendInfo;

    /// What the device, kernel and libraries can do, as far as this backend knows.
    fn caps(&self) -> Caps;

    /// Simulator-only control, or `None` on hardware.
    fn sim_control(&mut self) -> Option<&mut dyn SimControl> {
        None
    }
}
