//! # mlx5-sim: a behavioural simulator of an mlx5 NIC
//!
//! [`Simulator`] implements the [`mlx5_dv::Backend`] families by delegating to layers that
//! each own their state, as in the real stack:
//!
//! 1. the **provider** ([`provider`]) does what libmlx5 does in user space — flag masks,
//!    rounding, capability parsing, command status to errno, the WR builders and setters,
//!    CQE handling and the `mkey_check` decoder — over handle-checked objects;
//! 2. the **kernel** ([`kernel`]) gates DEVX commands by uid, registers MRs, creates QPs and
//!    CQs and checks QP transitions, cleans up a closed context, and delivers device events
//!    to the context that owns their QP or CQ;
//! 3. each **device** ([`device`]) has firmware that executes PRM commands from byte
//!    mailboxes and owns the PD, mkey, PSV, QP and CQ tables, and an engine that reads the
//!    send and receive WQEs the provider wrote as PRM bytes into queues in host memory (after
//!    a doorbell) and executes them: translation, the per-mkey data pipeline (the signature
//!    stages of [`signature`]), the operations, and the completion writer, which writes
//!    64-byte CQEs into the CQ's ring for the provider to poll;
//! 4. the **host** ([`host`]) is memory behind one DMA interface: buffers the backend owns and
//!    memory an application registers ([`Simulator::register_memory`]);
//! 5. the **fabric** ([`fabric`]) addresses each device's port and delivers each request to
//!    the responder its RTR path names, by (GID or LID, QP number).
//!
//! What a device is — caps, kernel features, names — comes from a [`Profile`], a TOML file;
//! [`profile`] ships several. The simulator is deterministic: no clock, no randomness,
//! ordered maps only. With the `test-utils` feature, [`inspect`] gives tests read-only views
//! of device state.
//!
//! ```
//! use mlx5_dv::prelude::*;
//! use mlx5_dv::{MkeyInitAttr, MkeyInitFlags};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut sim = mlx5_sim::Simulator::with_profile("cx6dx")?;
//! let ctx = sim.open_device("mlx5_0", None)?;
//! let pd = sim.alloc_pd(ctx)?;
//! let attr = MkeyInitAttr { pd, create_flags: MkeyInitFlags::INDIRECT, max_entries: 3 };
//! let mkey = sim.create_mkey(&attr)?;
//! assert_eq!(mkey.max_entries, 4);
//! assert_eq!(mkey.lkey & 0xff, 0);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod crypto;
pub mod device;
pub mod fabric;
pub mod host;
#[cfg(feature = "test-utils")]
pub mod inspect;
pub mod kernel;
pub mod profile;
pub mod provider;
pub mod signature;
mod simulator;
pub mod small;

pub use profile::{DEFAULT_PROFILE, Profile, ProfileError, ShippedProfiles};
pub use simulator::Simulator;
