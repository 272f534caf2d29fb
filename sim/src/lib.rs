//! # mlx5-sim: a behavioural simulator of an mlx5 NIC
//!
//! [`Simulator`] implements [`mlx5_dv::Backend`] in the three layers of the real stack:
//!
//! 1. the **provider** ([`provider`]) does what libmlx5 does in user space — flag masks,
//!    rounding, capability parsing, mapping command status to errno, decoding `mkey_check`;
//! 2. the **kernel** gate ([`kernel`]) decides which commands a context may send through DEVX
//!    and turns a failed command into EREMOTEIO or a mapped errno;
//! 3. the **firmware** ([`firmware`]) executes PRM commands from byte mailboxes and answers
//!    with a status and a syndrome.
//!
//! What a device is — caps, kernel features, names — comes from a [`Profile`], a TOML file.
//! The simulator is deterministic: no clock, no randomness, ordered maps only.
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

pub mod engine;
pub mod fabric;
pub mod firmware;
pub mod kernel;
pub mod memory;
pub mod profile;
pub mod provider;
pub mod signature;
pub mod verbs;

pub use profile::{DEFAULT_PROFILE, Profile, ProfileError, ShippedProfiles};
pub use provider::Simulator;
