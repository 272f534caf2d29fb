//! # mlx5-hw: the real libmlx5 behind the `mlx5_dv::Backend` trait
//!
//! [`HwBackend`] implements the trait by calling rdma-core: `ibv_*` through `rdma-sys`
//! (linked), and every `mlx5dv_*` function through [`Mlx5Lib`], which loads `libmlx5.so.1` at
//! run time. A function the installed libmlx5 lacks is reported as EOPNOTSUPP naming the
//! rdma-core release that has it; a missing libmlx5 makes the backend unavailable, so the
//! conformance harness skips every case with that reason instead of failing.
//!
//! Handles are checked before any C call: a stale or foreign handle is EINVAL and a PD that
//! still has mkeys is EBUSY, exactly as on the simulator, so misuse never reaches libmlx5 as
//! undefined behaviour.
#![deny(missing_docs)]

mod backend;
mod buffers;
mod call;
pub mod capture;
mod crypto;
mod dc;
mod devx;
mod dm;
mod dmabuf;
mod dr_lib;
mod flow;
pub mod inline;
mod legacy;
mod lib_mlx5;
mod mr;
mod mw;
mod objects;
mod queues;
mod sq_bytes;
mod srq;
mod steering;
pub mod sys;
mod udmabuf;
mod wr_chain;

pub use backend::{HwBackend, HwConfig};
pub use lib_mlx5::{Mlx5Lib, OptionalFn, Unavailable};
