//! The simulator behind the C ABI: the functions of libibverbs and libmlx5 (rdma-core 44 and
//! later), with the structs their headers' inline functions jump through filled in, over one
//! process-wide [`mlx5_sim::Simulator`].
//!
//! `make shim` links this library into `target/shim/libibverbs.so.1` and a thin
//! `target/shim/libmlx5.so.1` whose `mlx5dv_*` symbols jump here, and a thin
//! `target/shim/librdmacm.so.1` whose `rdma_*` symbols jump to [`cm`], each with the symbol
//! versions of the real libraries (`abi/`). A program runs on the simulated NIC with
//! `LD_LIBRARY_PATH=target/shim ./program`.
//!
//! The environment chooses the device: `MLX5SIM_PROFILE` (a shipped profile's name or a TOML
//! file; default `cx6dx`) and `MLX5SIM_DEVICES` (how many mlx5 devices, default the
//! profile's). Every call takes one lock, so threads are safe; calls the simulator does not
//! model fail as they fail on a device without the feature.

#![allow(clippy::missing_safety_doc)] // each C function's contract is its man page's

pub mod ah;
pub mod clock;
pub mod cm;
pub mod cqx;
pub mod device;
pub mod dm;
mod domain;
mod dr;
pub mod dv;
pub mod dv_crypto;
pub mod dv_devx;
pub mod dv_objects;
mod errno;
pub mod events;
mod flow;
mod flow_matcher;
pub mod import;
mod inline;
pub mod mcast;
mod memic_op;
pub mod misc;
pub mod mr;
pub mod mw;
pub mod names;
mod objects;
pub mod qpx;
pub mod queue;
pub mod rsocket;
mod sched;
pub mod srq;
mod state;
mod wq;
mod xrc;

pub use state::{Shim, shim};
