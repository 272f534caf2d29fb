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
//! 5. the **fabric** ([`fabric`]) addresses each device's port and delivers each request
//!    packet ([`packet`]: BTH and extended headers as the IBTA lays them out) by (GID or LID,
//!    QP number) to the device its RTR path names. That device's responder checks and
//!    executes it against its own tables and memory only, and answers with an ACK, a NAK or
//!    a READ response, by which the requester completes its WQE.
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
pub mod packet;
pub mod profile;
pub mod provider;
pub mod signature;
mod simulator;
pub mod small;
mod wake;
pub mod wire;

pub use profile::{DEFAULT_PROFILE, Profile, ProfileError, ShippedProfiles};
pub use simulator::Simulator;
pub use wake::Wake;

/// Where a QP's queues are in host memory, laid out as libmlx5 lays them out: the receive
/// queue first, then the send queue of 64-byte basic blocks, and an 8-byte doorbell record
/// (receive counter, then send counter, big-endian). What `mlx5dv_init_obj` hands a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpMemory {
    /// The QP number, as WQE control segments carry it.
    pub qpn: u32,
    /// The doorbell record.
    pub dbrec: u64,
    /// The send queue (0 without one).
    pub sq_buf: u64,
    /// Its basic blocks (a power of two; 0 without a send queue).
    pub sq_wqe_cnt: u32,
    /// The receive queue (0 without one).
    pub rq_buf: u64,
    /// Its WQEs (a power of two; 0 without a receive queue).
    pub rq_wqe_cnt: u32,
    /// Bytes per receive WQE.
    pub rq_stride: u32,
}

/// Where an SRQ is in host memory, as `mlx5dv_init_obj` reports it (`struct mlx5dv_srq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqMemory {
    /// The WQEs.
    pub buf: u64,
    /// The doorbell record (the counter of WQEs posted, big-endian).
    pub dbrec: u64,
    /// Bytes per WQE.
    pub stride: u32,
    /// libmlx5's `head`: the WQE the next post takes.
    pub head: u32,
    /// libmlx5's `tail`: the list's last WQE.
    pub tail: u32,
    /// The SRQ number.
    pub srqn: u32,
}

/// Where a CQ's ring is in host memory: `cqe_cnt` entries of `cqe_size` bytes with the
/// ownership bit, and the doorbell record (consumer index, then the arm word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqMemory {
    /// The CQ number.
    pub cqn: u32,
    /// The ring.
    pub buf: u64,
    /// The doorbell record.
    pub dbrec: u64,
    /// Entries (a power of two).
    pub cqe_cnt: u32,
    /// Bytes per entry.
    pub cqe_size: u32,
}

/// A simulator moves to another thread (a device thread, a test's worker) with its devices,
/// and may be shared by reference between threads.
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Simulator>();
};
